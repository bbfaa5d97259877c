//! Session configuration: identity, keys, addresses and every bound the session keeps.

use std::net::SocketAddr;

use vyrn_wire::consts::REP_CLIENT_RETAIN_MS;
use vyrn_wire::msg::client::SipKey;

/// Nanoseconds in a millisecond.
pub const NS_PER_MS: u64 = 1_000_000;

/// One exchange session's configuration (v1: from the home's config file, missing-chapters §2).
///
/// Times are nanoseconds on the caller's clock: the session never reads a clock, every call
/// takes `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// The book every packet names.
    pub book: u16,
    /// The session.
    pub session: u32,
    /// `K_seq`: tags request packets (`tag_seq`).
    pub k_seq: SipKey,
    /// `K_out`: verifies response packets (`tag_out`).
    pub k_out: SipKey,
    /// The active sequencer's client address (copy 1, 07 §2.1).
    pub seq_addr: SocketAddr,
    /// Every data box's `REP_UDP_DATA` address, by data box index in facility order
    /// (07 §5.7: `DataRedirect.to` is an index into this table).
    pub data_boxes: Vec<SocketAddr>,
    /// Index of this session's data home in `data_boxes` (copy 2, 07 §5.1).
    pub data_home: u8,
    /// How long a sent packet stays retained, ≥ `REP_CLIENT_RETAIN_MS` (07 §5.7).
    pub retain_ns: u64,
    /// Most packets retained at once. Sending one more while the oldest is younger than
    /// `retain_ns` is refused ([`crate::SubmitError::RetentionFull`]) rather than break the
    /// retention promise. Size it as the peak packet rate × `retain_ns`.
    pub retain_max: usize,
    /// Most orders tracked at once (live orders plus done ones awaiting their facts).
    pub orders_max: usize,
    /// Resend copy 1 of a packet with an unanswered message this long after its last send, at
    /// least: the timeout is `max(resend_after_ns, srtt + 4·rttvar)` of the answers' round
    /// trip (RFC 6298, Karn's rule), doubled each time a resent packet times out again, up to
    /// `resend_after_ns << resend_backoff_max` — a sequencer that answers late is not flooded
    /// with duplicates, each of which it must log and answer (07 §9.5).
    pub resend_after_ns: u64,
    /// The most doublings of the resend timeout (0: `resend_after_ns` is also the longest).
    pub resend_backoff_max: u8,
    /// The most copy-1 resends out at once (sent, neither answered nor timed out); the rest
    /// wait and go, lowest `pkt_seq` first, as answers come back. A new sequencer asked for
    /// every unanswered packet at once gets them a window at a time, not as one burst larger
    /// than its socket's receive buffer (07 §9.5).
    pub resend_window: u32,
    /// Never resend one packet more often than this (a burst of `BAD_SEQ` rejects names the
    /// same `detail` many times).
    pub resend_gap_ns: u64,
    /// A `resp_seq` hole older than this triggers a resend of the retained packets that can
    /// still have responses coming (unanswered messages or live orders).
    pub gap_resend_ns: u64,
    /// A `resp_seq` hole older than this is given up: reported as lost and skipped.
    pub gap_giveup_ns: u64,
    /// Most fills waiting for their durable or final fact.
    pub pending_facts_max: usize,
}

impl SessionConfig {
    /// A configuration with the defaults below for every bound.
    ///
    /// Defaults: retention `REP_CLIENT_RETAIN_MS` (100 ms), 8192 packets (82k packets/s),
    /// 65 536 orders, resend after 5 ms (or the measured round trip, backed off up to 80 ms), at most every 1 ms per packet, 64 resends out at once, gap resend at 5 ms and
    /// give-up at 200 ms (twice the retention: nothing retained can answer after that), 1 Mi
    /// pending facts.
    pub fn new(
        book: u16,
        session: u32,
        k_seq: SipKey,
        k_out: SipKey,
        seq_addr: SocketAddr,
        data_boxes: Vec<SocketAddr>,
        data_home: u8,
    ) -> Self {
        SessionConfig {
            book,
            session,
            k_seq,
            k_out,
            seq_addr,
            data_boxes,
            data_home,
            retain_ns: REP_CLIENT_RETAIN_MS * NS_PER_MS,
            retain_max: 8192,
            orders_max: 65_536,
            resend_after_ns: 5 * NS_PER_MS,
            resend_backoff_max: 4,
            resend_window: 64,
            resend_gap_ns: NS_PER_MS,
            gap_resend_ns: 5 * NS_PER_MS,
            gap_giveup_ns: 2 * REP_CLIENT_RETAIN_MS * NS_PER_MS,
            pending_facts_max: 1 << 20,
        }
    }

    /// Check every rule; the session refuses a configuration that breaks one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.retain_ns < REP_CLIENT_RETAIN_MS * NS_PER_MS {
            return Err(ConfigError(
                "retain_ns below REP_CLIENT_RETAIN_MS (07 §5.7)",
            ));
        }
        if self.retain_max == 0 || self.retain_max > 1 << 24 {
            return Err(ConfigError("retain_max must be in 1..=2^24"));
        }
        if self.orders_max == 0 || self.pending_facts_max == 0 {
            return Err(ConfigError("orders_max and pending_facts_max must be >= 1"));
        }
        if self.data_boxes.is_empty() || self.data_home as usize >= self.data_boxes.len() {
            return Err(ConfigError("data_home must index data_boxes"));
        }
        if self.resend_window == 0 {
            return Err(ConfigError("resend_window must be >= 1"));
        }
        if self.resend_backoff_max > 16 {
            return Err(ConfigError("resend_backoff_max must be <= 16"));
        }
        if self.resend_after_ns == 0 || self.gap_resend_ns == 0 {
            return Err(ConfigError("resend_after_ns and gap_resend_ns must be > 0"));
        }
        if self.gap_giveup_ns <= self.gap_resend_ns {
            return Err(ConfigError("gap_giveup_ns must exceed gap_resend_ns"));
        }
        Ok(())
    }
}

/// A configuration rule that does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigError(pub &'static str);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for ConfigError {}
