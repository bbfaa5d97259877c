//! The Simplex engine of one voter for one (home, epoch) (07 §6.3): its configuration, shared by
//! the deterministic simulator and the real process.
//!
//! Timeouts derive from Δ (REP_DELTA_MS = 1 ms on a metro; a dev home on one shared host sets
//! its own): leader timeout `t_l = 2Δ`, advance (certification) timeout `t_a = 3Δ`, nullify
//! rebroadcast every 10Δ, and the skip policy for an inactive leader enabled (a leader silent
//! for 20Δ while a quorum is active is skipped at once). The elector is plain round-robin. Each
//! engine has its own journal partition, unique per (home, epoch, voter).

use std::num::NonZeroUsize;
use std::time::Duration;

use commonware_consensus::simplex::{
    self, elector::RoundRobin, ForwardPolicy, SkipBudget, SkipPolicy,
};
use commonware_consensus::types::{Epoch, ViewDelta};
use commonware_cryptography::Sha256;
use commonware_p2p::Blocker;
use commonware_parallel::Sequential;
use commonware_runtime::buffer::paged::CacheRef;
use commonware_utils::{NZUsize, NZU16};

use crate::{App, Digest, Finalization, PublicKey, Scheme};

/// Channel ids of the three Simplex networks (every voter uses the same).
pub const CHANNEL_VOTES: u64 = 0;
/// Certificates.
pub const CHANNEL_CERTS: u64 = 1;
/// The resolver (certificate fetches).
pub const CHANNEL_RESOLVER: u64 = 2;

/// What one voter's engine needs beyond its scheme and app.
#[derive(Debug, Clone)]
pub struct EngineParams {
    /// The epoch (one engine per epoch).
    pub epoch: u32,
    /// Δ, the one-way hop bound the timeouts derive from.
    pub delta: Duration,
    /// The engine's journal partition: unique per (home, epoch, voter).
    pub partition: String,
    /// The genesis payload ([`crate::genesis_digest`]).
    pub genesis: Digest,
    /// Start from a finalization held in the cert journal instead of genesis (a restart).
    pub floor: Option<Finalization>,
}

impl EngineParams {
    /// The journal partition of voter `index` of `home` in `epoch`.
    pub fn partition_for(home: &str, epoch: u32, index: u8) -> String {
        format!("vyrn-simplex-{home}-e{epoch}-v{index}")
    }
}

/// The Simplex configuration of 07 §6.3 for one voter (the elector is round-robin in every
/// home; tests script leaders with another, [`config_with`]).
pub type SimplexConfig<B, L = RoundRobin<Sha256>> =
    simplex::Config<Scheme, L, B, Digest, App, App, App, Sequential>;

/// Build the configuration of one voter's engine.
pub fn config<B: Blocker<PublicKey = PublicKey>>(
    scheme: Scheme,
    blocker: B,
    app: App,
    p: &EngineParams,
) -> SimplexConfig<B> {
    config_with(scheme, blocker, app, p, RoundRobin::<Sha256>::default())
}

/// [`config`] with another leader elector: the simulator's Twins campaigns script each view's
/// leader (commonware's `mocks::twins::Elector`) and fall back to round-robin after.
pub fn config_with<B, L>(
    scheme: Scheme,
    blocker: B,
    app: App,
    p: &EngineParams,
    elector: L,
) -> SimplexConfig<B, L>
where
    B: Blocker<PublicKey = PublicKey>,
    L: simplex::elector::Config<Scheme>,
{
    let d = p.delta.max(Duration::from_micros(100));
    let floor = match &p.floor {
        Some(f) => simplex::Floor::Finalized(f.clone()),
        None => simplex::Floor::Genesis(p.genesis),
    };
    simplex::Config {
        scheme,
        elector,
        blocker,
        automaton: app.clone(),
        relay: app.clone(),
        reporter: app,
        track_historical_votes: false,
        strategy: Sequential,
        partition: p.partition.clone(),
        mailbox_size: NZUsize!(1024),
        epoch: Epoch::new(p.epoch as u64),
        floor,
        replay_buffer: NZUsize!(1 << 20),
        write_buffer: NZUsize!(1 << 16),
        page_cache: CacheRef::new(NZU16!(4096), NZUsize!(64)),
        leader_timeout: 2 * d,
        certification_timeout: 3 * d,
        timeout_retry: 10 * d,
        view_retention: ViewDelta::new(256),
        skip: SkipPolicy::Enabled {
            timeout: 20 * d,
            budget: SkipBudget::Participants,
        },
        fetch_timeout: commonware_utils::NonZeroDuration::new(
            (50 * d).max(Duration::from_millis(20)),
        )
        .unwrap_or_else(|| unreachable!("a positive duration")),
        fetch_retry_delay: 10 * d,
        forward: ForwardPolicy::Disabled,
    }
}

/// The largest message any of the three networks carries for `n` voters.
pub fn max_message_size(n: u32) -> u32 {
    commonware_p2p::max_message_size(&[simplex::max_payload_size::<Scheme, Digest>(n)])
}

/// A mailbox size for the networks.
pub const NET_MAILBOX: NonZeroUsize = NZUsize!(1024);
