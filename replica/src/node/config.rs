//! What a replica process is: its home, which voter it is, its key, its budgets.

use super::*;

#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The home's file, as every role reads it.
    pub home: HomeConfig,
    /// This voter's index in the membership; the standby's replica ([`NodeConfig::standby`])
    /// takes the slot after the voters, `voters`.
    pub index: usize,
    /// This voter's vote key (its secret; its public half is the membership's `vote_key`); the
    /// standby's identity (`[standby] link_key`) for the standby's replica.
    pub vote_key: SigningKey,
    /// The warm standby's non-voting replica (07 §9.5): the home's `[standby] replica_addr`
    /// and `data_addr`, sealed `from::STANDBY`, every block checked and none voted.
    pub standby: bool,
    /// The core's budgets ([`Budgets::dev`] on a dev home, 07's figures elsewhere).
    pub budgets: Budgets,
    /// The block journal's drive directories (07 §8.2); `None`: no journal.
    pub journal: Option<Vec<std::path::PathBuf>>,
    /// The journal's backend (io_uring + O_DIRECT where it works, else portable, by default).
    pub journal_backend: crate::disk::journal::BackendChoice,
    /// The writer syncs at most this often while blocks are queued (0: 5 ms, 07 §8.2).
    pub journal_sync_ns: u64,
    /// The block journal's segment size in bytes, each preallocated (0: 256 MiB).
    pub journal_segment_bytes: u64,
    /// Cores the journal writer thread is restricted to (off a sequencer's hot core when the
    /// home shares a host); `None`: the process's own set.
    pub journal_cores: Option<Vec<usize>>,
    /// The Simplex voter (07 §6.3); `None`: the interim voter (in-process tests only).
    pub simplex: Option<crate::vote::SimplexCfg>,
    /// Replay on its own tile (07 §7.2's replay cores, [`crate::replay::tile`]): polled in turn
    /// with the core until [`Node::start_replay_thread`] moves it to its own thread. False:
    /// replay inline, every stage on the node's thread (a shared 2-core box).
    pub replay_tile: bool,
    /// With `replay_tile`: the replay engine split too (07 §7.2), the tile the replay BBO core
    /// and the lanes on this many threads of their own ([`crate::replay::split`]); 0: the tile
    /// runs the lanes itself.
    pub replay_lanes: usize,
    /// Cores to pin the replay lane threads to (one each, in order; they then spin when idle).
    pub replay_lane_cores: Vec<usize>,
    /// 07 §7.5: take a REP_Snapshot every this many blocks (this voter's offset is its index ×
    /// this / voters; a multiple of voters × REP_ROOT_BLOCKS), written to the first journal
    /// drive's `snapshots/`. 0: none. Needs a journal and state roots.
    pub snapshot_blocks: u64,
}

impl NodeConfig {
    /// Voter `index` of `home` (or, with `standby` set after, the standby's replica) under
    /// `vote_key`: the profile's budgets ([`Budgets::of`]), no journal, no snapshots, the interim
    /// voter (`simplex` unset), replay inline.
    pub fn new(home: HomeConfig, index: usize, vote_key: SigningKey) -> Self {
        NodeConfig {
            budgets: Budgets::of(home.profile),
            home,
            index,
            vote_key,
            standby: false,
            journal: None,
            journal_backend: Default::default(),
            journal_sync_ns: 0,
            journal_segment_bytes: 0,
            journal_cores: None,
            simplex: None,
            replay_tile: false,
            replay_lanes: 0,
            replay_lane_cores: Vec::new(),
            snapshot_blocks: 0,
        }
    }
}
