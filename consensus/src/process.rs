//! A voter's Simplex engine in a real process (07 §7.2 core 4): commonware's tokio runtime on its
//! own thread, authenticated p2p (`lookup`: the voters' addresses are static, from the home's
//! file) between the voters, the engine's journal in a storage directory.
//!
//! The replica's tile keeps running on its own thread and answers the engine through the
//! [`crate::Desk`]; the two share nothing else. [`VoterThread::stop`] ends the runtime cleanly
//! (its journal is synced, so a restart resumes from it: the reporter then sees recent
//! activity again, which the desk takes idempotently).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use commonware_cryptography::{ChaCha20Poly1305, Signer as _};
use commonware_p2p::authenticated::lookup;
use commonware_p2p::{Address, AddressableManager as _};
use commonware_runtime::{Clock as _, Quota, Runner as _, Spawner as _, Supervisor as _};
use commonware_stream::cups::{self, Cups};
use commonware_stream::sake::{self, Sake};
use commonware_utils::ordered::Map;
use commonware_utils::{TryCollect as _, NZU32};

use crate::engine::{self, EngineParams, CHANNEL_CERTS, CHANNEL_RESOLVER, CHANNEL_VOTES};
use crate::voters::Voters;
use crate::{App, PrivateKey, P2P_NAMESPACE};

/// One voter process's consensus settings.
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// The voting set.
    pub voters: Voters,
    /// This voter's membership index.
    pub me: u8,
    /// Its key (the seed of `keys/voter-N.key`).
    pub key: PrivateKey,
    /// Every voter's p2p address, membership order.
    pub p2p: Vec<SocketAddr>,
    /// Where the engine's journal lives.
    pub storage: PathBuf,
    /// The engine's parameters.
    pub params: EngineParams,
    /// Tokio worker threads (1 on a dev box sharing two cores).
    pub worker_threads: usize,
    /// Messages per second per peer per channel (caps the view rate: about two per view).
    pub quota_per_s: u32,
    /// State roots (07 §7.4): the aggregation engine beside Simplex, on the same p2p network
    /// (channel [`crate::roots::CHANNEL_ROOTS`]); `None` runs Simplex alone.
    pub roots: Option<RootsSetup>,
}

/// The aggregation engine's settings in a process.
#[derive(Debug, Clone)]
pub struct RootsSetup {
    /// The desk's side of the engine.
    pub app: crate::roots::RootsApp,
    /// Ack rebroadcast period.
    pub rebroadcast: Duration,
    /// The engine's journal partition (unique per home, epoch, voter).
    pub partition: String,
}

/// The consensus thread's figures.
#[derive(Debug, Default)]
pub struct ProcessStats {
    /// 1 once the engine started.
    pub started: AtomicU64,
    /// 1 if the runtime ended with an error.
    pub failed: AtomicU64,
}

/// A running consensus thread.
#[derive(Debug)]
pub struct VoterThread {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
    /// Its figures.
    pub stats: Arc<ProcessStats>,
}

impl VoterThread {
    /// Stop the engine and wait for the runtime to end (at most about a second).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for VoterThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Start voter `cfg.me`'s engine with `app` on a new thread. `before` runs first on that thread
/// (pin it off the hot cores); the runtime's workers inherit its affinity.
pub fn spawn(
    cfg: ProcessConfig,
    app: App,
    before: impl FnOnce() + Send + 'static,
) -> std::io::Result<VoterThread> {
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(ProcessStats::default());
    let (s2, st2) = (stop.clone(), stats.clone());
    let handle = std::thread::Builder::new()
        .name(format!("voter-{}", cfg.me))
        .spawn(move || {
            before();
            run(cfg, app, s2, st2)
        })?;
    Ok(VoterThread {
        stop,
        handle: Some(handle),
        stats,
    })
}

fn run(cfg: ProcessConfig, app: App, stop: Arc<AtomicBool>, stats: Arc<ProcessStats>) {
    let n = cfg.voters.n();
    let me_addr = cfg.p2p[cfg.me as usize];
    let peers: Map<crate::PublicKey, Address> = match (0..n as u8)
        .filter_map(|i| {
            let k = cfg.voters.key(i)?.clone();
            let a = *cfg.p2p.get(i as usize)?;
            Some((k, Address::from(a)))
        })
        .try_collect()
    {
        Ok(m) => m,
        Err(_) => {
            stats.failed.store(1, Ordering::Relaxed);
            return;
        }
    };
    let signer = cfg.key.clone();
    let handshake = Cups::<_, ChaCha20Poly1305>::new(
        Sake {
            signer: signer.clone(),
            synchrony_bound: Duration::from_secs(5),
            max_handshake_age: Duration::from_secs(10),
            version: sake::Version::V1,
        },
        cups::Version::V1,
    );
    let mut p2p_cfg = lookup::Config::local(
        handshake,
        P2P_NAMESPACE,
        me_addr,
        commonware_p2p::authenticated::peer_set_limit(peers.keys().iter(), &signer.public_key()),
        engine::max_message_size(n as u32).max(crate::roots::max_message_size()),
        engine::NET_MAILBOX,
    );
    // Loopback peers restart often in tests: redial quickly.
    p2p_cfg.dial_frequency = Duration::from_millis(100);
    p2p_cfg.peer_connection_cooldown = Duration::from_millis(200);
    let rt = commonware_runtime::tokio::Config::new()
        .with_worker_threads(cfg.worker_threads.max(1))
        .with_storage_directory(cfg.storage.clone());
    let quota = Quota::per_second(
        NZU32!(1).max(std::num::NonZeroU32::new(cfg.quota_per_s).unwrap_or(NZU32!(4096))),
    );
    commonware_runtime::tokio::Runner::new(rt).start(|context| async move {
        let (mut network, mut oracle) = lookup::Network::new(context.child("network"), p2p_cfg);
        let _ = oracle.track(cfg.params.epoch as u64, peers);
        let votes = network.register(CHANNEL_VOTES, quota);
        let certs = network.register(CHANNEL_CERTS, quota);
        let resolver = network.register(CHANNEL_RESOLVER, quota);
        let roots_net = cfg
            .roots
            .as_ref()
            .map(|_| network.register(crate::roots::CHANNEL_ROOTS, quota));
        network.start();
        let Some(scheme) = cfg.voters.signer(cfg.key.clone()) else {
            stats.failed.store(1, Ordering::Relaxed);
            return;
        };
        let ecfg = engine::config(scheme, oracle.clone(), app, &cfg.params);
        commonware_consensus::simplex::Engine::new(context.child("engine"), ecfg)
            .start(votes, certs, resolver);
        if let (Some(r), Some((tx, rx))) = (cfg.roots.clone(), roots_net) {
            let Some(rs) = crate::roots::root_signer(&cfg.voters, cfg.key.clone()) else {
                stats.failed.store(1, Ordering::Relaxed);
                return;
            };
            let rx = r.app.tap(rx);
            let rcfg = crate::roots::config(
                rs,
                oracle.clone(),
                r.app,
                cfg.params.epoch,
                r.partition,
                r.rebroadcast,
            );
            commonware_consensus::aggregation::Engine::new(context.child("roots"), rcfg)
                .start((tx, rx));
        }
        stats.started.store(1, Ordering::Relaxed);
        while !stop.load(Ordering::Acquire) {
            context.sleep(Duration::from_millis(20)).await;
        }
        let _ = context.stop(0, Some(Duration::from_secs(1))).await;
    });
}
