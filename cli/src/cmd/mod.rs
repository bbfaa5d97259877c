//! One module per `vyrn` subcommand: the roles (`seq`, `data`, `replica`, `load`), the lab
//! (`paths`), the operator's tools (`tools`) and the whole home (`up`).

#[cfg(feature = "lab")]
pub mod attack;
pub mod data;
pub mod lab;
pub mod load;
pub mod paths;
pub mod replica;
pub mod seq;
pub mod standby;
pub mod tools;
pub mod up;

/// A core list as `--cores` takes it (`1`, `0-3,6`).
#[derive(Debug, Clone)]
pub struct Cores(pub Vec<usize>);

/// Parse a `--cores` list.
pub fn cores(s: &str) -> Result<Cores, String> {
    vyrn_nic::wait::parse_cores(s).map(Cores)
}

/// The watchdog of a role's loop (the box's tiles have theirs in `vyrn seq`):
/// the loop counts its rounds in [`Watch::beat`]; a thread checks once a second and, when the
/// count has not moved for [`vyrn_seq::runner::WATCHDOG_STALL_S`] seconds, raises `REP_A_STALL`
/// and aborts the process — a stalled replica, data box or standby must not look alive (its
/// supervisor restarts it). Dropping the `Watch` (the loop ended) stops the check.
pub struct Watch {
    beats: std::sync::Arc<std::sync::atomic::AtomicU64>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watch {
    /// Watch the loop `tile` of `role`.
    pub fn start(role: &'static str, tile: &'static str) -> Watch {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let beats = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (b, d) = (beats.clone(), done.clone());
        let t0 = std::time::Instant::now();
        let _ = std::thread::Builder::new()
            .name(format!("{role}-watchdog"))
            .spawn(move || {
                let mut w = vyrn_seq::runner::Watchdog::default();
                while !d.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                    if d.load(Ordering::Relaxed) {
                        break;
                    }
                    let now = t0.elapsed().as_nanos() as u64;
                    let polls = [(tile, b.load(Ordering::Relaxed))];
                    if let Some((t, secs)) = w.check(now, polls.into_iter()) {
                        eprintln!(
                            "alarm=REP_A_STALL role={role} tile={t}: no round for {secs} s; aborting"
                        );
                        std::process::abort();
                    }
                }
            });
        Watch { beats, done }
    }

    /// One round of the loop.
    #[inline]
    pub fn beat(&self) {
        self.beats
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
