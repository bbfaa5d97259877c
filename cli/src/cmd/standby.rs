//! `vyrn standby`: the warm standby's finality listener (07 §6.8).
//!
//! Usage: `vyrn standby --home FILE [--key FILE] [--secs N] [--metrics IP:PORT] [--cores LIST]`.
//!
//! `--key` is the standby's secret identity seed (hex, 0600; default `keys/standby.key` beside
//! the home's file), whose public key must be `[standby] link_key`: every voter's vote and
//! certificate comes sealed under the link key agreed with it (the member envelope,
//! docs/security.md); a bare one or one whose seal fails is counted and dropped.
//!
//! Every voter sends its finalize vote, and later each `REP_FinalityCert`, to the sequencer's
//! *and the standby's* control port, so the standby learns finality at the same hop as the
//! sequencer (07 §6.8) — the state a promoted standby needs first. This process binds the home's
//! `[standby] ctrl_addr` and runs the same listener as the sequencer's cold certificate tile
//! (`vyrn_consensus::FinalityListener`: votes kept per proposal, batch-verified once Q distinct
//! voters signed, `final_height` only with Q valid signatures). Datagrams from any address but a
//! voter's `ctrl_addr` are counted and dropped unread; anything but a vote or a certificate is
//! counted and ignored. As on the box's control port: a finalize vote counts only from the
//! address of the voter it names, every vote and certificate is charged to the voter it came
//! from ([`FinalityListener::on_cert_from`], security review F16), and each voter is held to
//! [`CERT_PER_SEC`](vyrn_consensus::listener::CERT_PER_SEC) with a burst of
//! [`CERT_BURST`](vyrn_consensus::listener::CERT_BURST) (a token bucket per voter; the rest is
//! counted and dropped before any signature check).
//!
//! Not built: the rest of the warm standby of 07 §9 — its replay, TailReport and promotion.
//!
//! A line a second (final height and view, votes, bad signatures); `--metrics` serves
//! `vyrn_standby_*` in Prometheus text; at the end a summary line `standby: final height H`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{cores, Cores};
use vyrn_consensus::listener::CertTokens;
use vyrn_consensus::{FinalityListener, VoteOutcome, Voters};
use vyrn_home::HomeConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Port, RxBatch};
use vyrn_wire::msg::ctrl::CtrlMsg;
use vyrn_wire::msg::seal::{self, LinkKey, Opener, SealErr};

/// `vyrn standby`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The home's file (with a `[standby] ctrl_addr`).
    #[arg(long, value_name = "FILE")]
    pub home: PathBuf,
    /// Its secret identity seed (hex, 0600); default `keys/standby.key` beside the home file.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Run this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    pub secs: u64,
    /// Cores this process runs on (e.g. `1` or `0-3,6`).
    #[arg(long, value_name = "LIST", value_parser = cores)]
    pub cores: Option<Cores>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address; updated once a second.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics: Option<SocketAddr>,
}

/// What the standby counted.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// Finalize votes and certificates taken into the listener.
    taken: u64,
    /// From an address that is no voter's.
    unknown: u64,
    /// Neither a vote nor a certificate (or malformed).
    other: u64,
    /// Refused by the listener, with a failed signature, or a vote naming another voter than
    /// its sender.
    bad: u64,
    /// Over the sending voter's rate (`CERT_PER_SEC`, burst `CERT_BURST`): dropped unread.
    limited: u64,
    /// From a voter's address but bare (the member envelope is required).
    unsealed: u64,
    /// Sealed, but the tag does not verify, names another sender, or is a replay.
    bad_seal: u64,
}

/// Run the standby's listener; exit 0, or 2 when the start is refused.
pub fn run(o: Args) -> ExitCode {
    if !vyrn_tile::pin::pin_process("vyrn standby", o.cores.as_ref().map(|c| c.0.as_slice())) {
        return ExitCode::from(2);
    }
    let Some(home) = HomeConfig::load_for("vyrn standby", &o.home) else {
        return ExitCode::from(2);
    };
    match serve(&home, &o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vyrn standby: {e}");
            ExitCode::from(2)
        }
    }
}

fn render(l: &FinalityListener, c: &Counts, published: &vyrn_metrics::Published) -> String {
    let mut e = vyrn_metrics::Exposition::new();
    let lc = l.counters();
    e.gauge(
        "vyrn_standby_final_height",
        "the standby's final height: Q valid finalize votes for a proposal ending there (07 §6.8)",
        &[],
        l.final_height() as f64,
    );
    e.gauge(
        "vyrn_standby_final_view",
        "the view of that proposal",
        &[],
        l.final_view() as f64,
    );
    for (what, v) in [
        ("taken", c.taken),
        ("unknown_source", c.unknown),
        ("other", c.other),
        ("bad", c.bad),
        ("limited", c.limited),
        ("unsealed", c.unsealed),
        ("bad_seal", c.bad_seal),
    ] {
        e.counter(
            "vyrn_standby_messages_total",
            "control datagrams by what became of them",
            &[("what", what)],
            v,
        );
    }
    e.counter(
        "vyrn_standby_bad_signatures_total",
        "votes whose signature failed the batch check",
        &[],
        lc.bad_sigs,
    );
    e.counter(
        "vyrn_standby_finalized_total",
        "proposals that reached Q valid votes",
        &[],
        lc.finalized,
    );
    published.own(&mut e);
    e.render()
}

fn serve(home: &HomeConfig, o: &Args) -> Result<(), String> {
    let at = home
        .standby_ctrl
        .ok_or("the home's file has no [standby] section (its ctrl_addr)")?;
    let keys: Vec<[u8; 32]> = home
        .voters_members
        .iter()
        .map(|v| v.vote_key.to_bytes())
        .collect();
    if keys.is_empty() {
        return Err("the home's file names no voters".into());
    }
    let set = Voters::with_simplex_quorum(home.epoch, &keys)
        .map_err(|e| format!("the voters' keys do not form a voting set: {e:?}"))?;
    let quorum = set.quorum();
    let mut tokens = CertTokens::new(set.n());
    let mut listener = FinalityListener::new(set, 0);
    let voters: HashMap<SocketAddr, usize> = home
        .voters_members
        .iter()
        .map(|v| (v.ctrl_addr, v.index))
        .collect();
    // Each voter's messages come sealed under the link key agreed with it.
    let key_path = o.key.clone().unwrap_or_else(|| {
        o.home
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("keys/standby.key")
    });
    let seed = vyrn_home::read_seed(&key_path)
        .map_err(|e| format!("--key {}: {e}", key_path.display()))?;
    let me = ed25519_dalek::SigningKey::from_bytes(seed.expose());
    if Some(me.verifying_key()) != home.standby_key {
        return Err(format!(
            "--key {}: not the secret of [standby] link_key",
            key_path.display()
        ));
    }
    let mut opener = Opener::new(home.epoch);
    for v in &home.voters_members {
        let k = LinkKey::agree(&me, &v.vote_key)
            .ok_or_else(|| format!("voter {}'s vote_key gives no link key", v.index))?;
        opener.add(seal::from::voter(v.index), k);
    }
    drop(me);
    let mut c = UdpConfig::new(at).with_batch(64);
    c.recv_buffer = Some(4 << 20);
    let mut port = UdpPort::open(&c).map_err(|e| format!("control port {at}: {e}"))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(port.socket());
    println!(
        "standby: finality listener on {at} for {} voters (Q {quorum}); replay and promotion (07 §9) not built",
        keys.len()
    );
    let stop = vyrn_nic::wait::stop_on_signals();
    let published = vyrn_metrics::Published::default();
    let mut counts = Counts::default();
    if let Some(a) = o.metrics {
        let at =
            vyrn_metrics::serve(a, published.clone()).map_err(|e| format!("--metrics {a}: {e}"))?;
        println!("standby: metrics on http://{at}/metrics");
        published.set(render(&listener, &counts, &published));
    }
    let t0 = Instant::now();
    let mut next = 1u64;
    let mut rx = RxBatch::new(64, 2048);
    let watch = super::Watch::start("standby", "listener");
    while !stop.load(Ordering::Relaxed) && (o.secs == 0 || t0.elapsed().as_secs() < o.secs) {
        watch.beat();
        let n = port.recv_batch(&mut rx).unwrap_or(0);
        let now = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        for p in rx.iter() {
            let Some(v) = p.meta.src.and_then(|a| voters.get(&a).copied()) else {
                counts.unknown += 1;
                continue;
            };
            let body = match opener.open_from(seal::from::voter(v), p.data) {
                Ok(b) => b,
                Err(SealErr::NotSealed) => {
                    counts.unsealed += 1;
                    continue;
                }
                Err(_) => {
                    counts.bad_seal += 1;
                    continue;
                }
            };
            take(
                &mut listener,
                &mut tokens,
                &voters,
                &mut counts,
                (p.meta.src, body),
                now,
            );
        }
        if t0.elapsed().as_secs() >= next {
            println!(
                "[{next:>4}s] standby: final height {} (view {}), votes {}, bad {}, from unknown sources {}",
                listener.final_height(),
                listener.final_view(),
                counts.taken,
                counts.bad,
                counts.unknown
            );
            if o.metrics.is_some() {
                published.set(render(&listener, &counts, &published));
            }
            next += 1;
        }
        if n == 0 {
            vyrn_nic::wait::wait_readable(&[fd], 100_000_000);
        }
    }
    let lc = listener.counters();
    println!(
        "standby: final height {} (view {}), {} proposals finalized, {} votes taken, {} bad signatures, {} refused, {} from unknown sources, {} other messages, {} over the rate limit, {} unsealed, {} with a bad seal",
        listener.final_height(),
        listener.final_view(),
        lc.finalized,
        counts.taken,
        lc.bad_sigs,
        lc.refused,
        counts.unknown,
        counts.other,
        counts.limited,
        counts.unsealed,
        counts.bad_seal
    );
    Ok(())
}

/// One control message `(source, bytes)` (its seal opened) at `now` ns into the listener: from a voter's
/// address only, a vote only from the voter it names, within that voter's tokens, charged to
/// that voter (07 §6.8; the box's control port and certificate tile do the same).
fn take(
    listener: &mut FinalityListener,
    tokens: &mut CertTokens,
    voters: &HashMap<SocketAddr, usize>,
    counts: &mut Counts,
    (src, data): (Option<SocketAddr>, &[u8]),
    now: u64,
) {
    let Some(v) = src.and_then(|a| voters.get(&a).copied()) else {
        counts.unknown += 1;
        return;
    };
    let cert = match CtrlMsg::parse(data) {
        Ok(CtrlMsg::FinalityCert(c)) => *c,
        // 07 §6.8: one voter's finalize vote, from that voter's own address.
        Ok(CtrlMsg::FinalizeVote(fv)) if fv.index as usize == v => fv.as_cert(),
        Ok(CtrlMsg::FinalizeVote(_)) => {
            counts.bad += 1;
            return;
        }
        _ => {
            counts.other += 1;
            return;
        }
    };
    // 07 §6.8: a token bucket per voter, before any signature check (the box's `cert_token`).
    if !tokens.take(v, now) {
        counts.limited += 1;
        return;
    }
    let before = listener.counters().bad_sigs;
    match listener.on_cert_from(v, &cert) {
        VoteOutcome::Bad => counts.bad += 1,
        _ if listener.counters().bad_sigs > before => counts.bad += 1,
        _ => counts.taken += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_consensus::listener::{CERT_BURST, CERT_PER_SEC};
    use vyrn_wire::msg::consensus::{CertEntry, ProposalKind, RepFinalityCert, RepProposal};
    use vyrn_wire::msg::ctrl::FinalizeVote;

    const EPOCH: u32 = 2;

    fn seed(i: u8) -> [u8; 32] {
        [0x70 + i; 32]
    }

    fn setup() -> (FinalityListener, CertTokens, HashMap<SocketAddr, usize>) {
        let keys: Vec<[u8; 32]> = (0..4)
            .map(|i| {
                ed25519_dalek::SigningKey::from_bytes(&seed(i))
                    .verifying_key()
                    .to_bytes()
            })
            .collect();
        let set = Voters::with_simplex_quorum(EPOCH, &keys).unwrap();
        let voters = (0..4)
            .map(|i| (addr(i), i))
            .collect::<HashMap<SocketAddr, usize>>();
        (FinalityListener::new(set, 0), CertTokens::new(4), voters)
    }

    fn addr(i: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9000 + i as u16))
    }

    fn proposal(tag: u8) -> RepProposal {
        RepProposal {
            kind: ProposalKind::Headers,
            epoch: EPOCH,
            first_height: 1,
            last_height: 3,
            last_hash: [tag; 32],
            excl_root: [0; 32],
        }
    }

    /// A certificate as its control message (type byte first).
    fn cert_bytes(c: &RepFinalityCert) -> Vec<u8> {
        let mut b = vec![vyrn_wire::msg::ctrl::ty::FINALITY_CERT];
        c.encode(&mut b).unwrap();
        b
    }

    fn vote(l: &FinalityListener, i: u8, p: &RepProposal) -> FinalizeVote {
        let sig =
            vyrn_consensus::cert::sign_finalize(l.voters(), &seed(i), EPOCH, 2, 1, p).unwrap();
        FinalizeVote {
            epoch: EPOCH,
            view: 2,
            parent_view: 1,
            proposal: *p,
            index: i,
            sig,
        }
    }

    /// Security review F16: a voter past its burst is dropped before any check, at the box's
    /// rate (2000/s, burst 64); the other voters are not; a vote naming another voter than its
    /// sender is refused.
    #[test]
    fn each_voter_is_held_to_its_own_token_bucket() {
        let (mut l, mut t, voters) = setup();
        let mut c = Counts::default();
        let mut send = |l: &mut FinalityListener, c: &mut Counts, from: usize, b: &[u8], now| {
            take(l, &mut t, &voters, c, (Some(addr(from)), b), now)
        };
        // Voter 3 floods "certificates" naming voters 0, 1 and 2 (signatures no one's).
        let junk = |p: RepProposal, view: u64| RepFinalityCert {
            epoch: EPOCH,
            view,
            parent_view: view - 1,
            proposal: p,
            entries: (0..3u8)
                .map(|index| CertEntry {
                    index,
                    sig: [7; 64],
                })
                .collect(),
        };
        for k in 0..(CERT_BURST + 100) {
            send(
                &mut l,
                &mut c,
                3,
                &cert_bytes(&junk(proposal(k as u8), 2)),
                1_000,
            );
        }
        // The burst reached the listener (and failed its check), the rest was dropped unread.
        assert_eq!((c.bad, c.limited), (CERT_BURST, 100));
        assert_eq!(l.counters().bad_sigs, 3 * CERT_BURST);
        // A vote naming voter 0 sent from voter 1's address: refused.
        let p = proposal(0xee);
        let b = vote(&l, 0, &p).to_bytes().unwrap();
        send(&mut l, &mut c, 1, &b, 1_000);
        assert_eq!(c.bad, CERT_BURST + 1);
        // The honest voters, at the same instant, still finalize.
        for i in 0..3u8 {
            let b = vote(&l, i, &p).to_bytes().unwrap();
            send(&mut l, &mut c, i as usize, &b, 1_000);
        }
        assert_eq!((l.final_height(), c.taken), (3, 3));
        // Voter 3 gets one token back after 1/2000 s.
        let next = RepProposal {
            first_height: 4,
            last_height: 4,
            ..proposal(1)
        };
        let b = cert_bytes(&junk(next, 3));
        let per = 1_000_000_000 / CERT_PER_SEC;
        send(&mut l, &mut c, 3, &b, 1_000 + per);
        assert_eq!((c.bad, c.limited), (CERT_BURST + 2, 100));
        send(&mut l, &mut c, 3, &b, 1_000 + per);
        assert_eq!(c.limited, 101);
    }
}
