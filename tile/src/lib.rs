//! The tile runtime (missing-chapters §4): a tile is a struct owning its state with a
//! non-blocking [`Task::poll`]; there is one implementation of every tile (the box's are in
//! `vyrn_seq::tiles`), and what differs is only who calls `poll`:
//!
//! * [`Runner`] — production: groups of tiles on threads, pinned with `core_affinity` where the
//!   core map names a core. Each thread waits as its [`Wait`] says: the hot path (RX, lanes, cut,
//!   BBO, stream cores, TX) spins on its pinned core and never yields; cold tiles (control,
//!   control RX, the order hasher and its signer, the certificate tile) block when idle —
//!   `ppoll` on the sockets they read, with a short timeout and 1 ns timer slack — and never
//!   run on a hot core ([`place`]). It watches its threads: a tile that panics takes
//!   the process down with a message naming the tile ([`OnPanic::Abort`]), never leaving a
//!   half-running box.
//! * [`Seeded`] — tests and the simulator: every tile on the calling thread, one `poll` at a
//!   time in an order drawn from a seed, so an interleaving is reproducible (T-REP-1).

pub mod pin;
pub mod topo;

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Instant;

thread_local! {
    /// The tiles of this runner thread and which one is in `poll` (for the panic message).
    static TILES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static CURRENT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The tile in `poll` on this thread, if this is a runner thread.
fn current_tile() -> Option<String> {
    let i = CURRENT.with(|c| c.get());
    TILES.with(|t| t.borrow().get(i).cloned())
}

/// A panic hook, installed once, that names the tile in `poll` before the default hook runs:
/// with `panic = "abort"` (release) the process ends inside the hook, so this line is what a
/// supervisor's log shows.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(tile) = current_tile() {
                eprintln!(
                    "vyrn: tile {tile} panicked: {info}; the box stops (no tile runs on alone)"
                );
            }
            prev(info);
        }));
    });
}

/// Where a tile belongs (07 §4.1): on the response path or beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileClass {
    /// On the path from a request to its answer (RX, lanes, cut, BBO, stream cores, TX): a
    /// pinned core that spins and never sleeps.
    Hot,
    /// Beside it (control and its notices, control RX, the order hasher and signer, the
    /// certificate tile): a thread that blocks when idle, never on a hot core.
    Cold,
}

/// A tile as a runner sees it. A tile is `'static` and [`Any`](std::any::Any), so whoever
/// built it takes it back typed when the runner stops ([`take`]).
pub trait Task: Send + std::any::Any {
    /// Its name (`lane0`, `cut`, `bbo`, `streamA`, …).
    fn name(&self) -> String;
    /// Hot (the response path) or cold; hot unless the tile says otherwise.
    fn class(&self) -> TileClass {
        TileClass::Hot
    }
    /// A descriptor whose readability is work for this tile (a socket it reads): a blocking
    /// thread wakes on it at once instead of at its timeout.
    fn wait_fd(&self) -> Option<RawFd> {
        None
    }
    /// Every descriptor whose readability is work for this tile (a tile reading several
    /// sockets); the default is [`Task::wait_fd`].
    fn wait_fds(&self, out: &mut Vec<RawFd>) {
        out.extend(self.wait_fd());
    }
    /// When this tile next has timed work (clock ns), if it knows: a blocking thread sleeps no
    /// later than the soonest `due` of its tiles (a data box's open frame, a heartbeat).
    fn due(&self) -> Option<u64> {
        None
    }
    /// Back-pressure so far: pushes that found the next tile's ring full and wait in this tile's
    /// overflow (cumulative; the runner publishes it with the poll counters).
    fn backpressure(&self) -> u64 {
        0
    }
    /// One non-blocking step at `now`; whether it did anything.
    fn poll(&mut self, now: u64) -> bool;
}

/// Take the tile of type `T` out of `tasks` (what [`Runner::stop`] gave back), if one is there.
pub fn take<T: Task>(tasks: &mut Vec<Box<dyn Task>>) -> Option<Box<T>> {
    let i = tasks
        .iter()
        .position(|t| (t.as_ref() as &dyn std::any::Any).is::<T>())?;
    let t: Box<dyn std::any::Any> = tasks.swap_remove(i);
    t.downcast::<T>().ok()
}

/// A tile with a hook run once a period between its polls, on its own thread (a role's line a
/// second and its metrics page: what they read is the tile's state, so the tile's thread renders
/// them).
pub struct Reported<T: Task> {
    /// The tile.
    pub tile: T,
    every_ns: u64,
    next: u64,
    #[allow(clippy::type_complexity)]
    hook: Box<dyn FnMut(&mut T, u64) + Send>,
}

impl<T: Task> Reported<T> {
    /// `tile`, with `hook(tile, now)` once every `every_ns` (the first a period after its first
    /// poll).
    pub fn new(tile: T, every_ns: u64, hook: impl FnMut(&mut T, u64) + Send + 'static) -> Self {
        Reported {
            tile,
            every_ns,
            next: 0,
            hook: Box::new(hook),
        }
    }
}

impl<T: Task> std::fmt::Debug for Reported<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Reported({}, every {} ns)",
            self.tile.name(),
            self.every_ns
        )
    }
}

impl<T: Task> Task for Reported<T> {
    fn name(&self) -> String {
        self.tile.name()
    }
    fn class(&self) -> TileClass {
        self.tile.class()
    }
    fn wait_fds(&self, out: &mut Vec<RawFd>) {
        self.tile.wait_fds(out)
    }
    fn backpressure(&self) -> u64 {
        self.tile.backpressure()
    }
    fn due(&self) -> Option<u64> {
        let d = self.tile.due();
        if self.next == 0 {
            return d;
        }
        Some(d.map_or(self.next, |d| d.min(self.next)))
    }
    fn poll(&mut self, now: u64) -> bool {
        let busy = self.tile.poll(now);
        if self.next == 0 {
            self.next = now + self.every_ns;
        } else if now >= self.next {
            (self.hook)(&mut self.tile, now);
            self.next = now + self.every_ns;
        }
        busy
    }
}

/// One tile's counters as its thread keeps them (one writer; read by anyone).
#[derive(Debug, Default)]
pub struct TileStats {
    /// Polls.
    pub polls: AtomicU64,
    /// Polls that did something.
    pub busy_polls: AtomicU64,
    /// Nanoseconds spent in polls that did something (its core's load: busy_ns / wall).
    pub busy_ns: AtomicU64,
    /// [`Task::backpressure`] as last published.
    pub backpressure: AtomicU64,
}

/// The box's clock: nanoseconds since the runner started (one base for every thread).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    t0: Instant,
    base: u64,
}

impl Clock {
    /// A clock starting now, at 0.
    pub fn new() -> Self {
        Self::from_ns(0)
    }
    /// A clock starting now, at `base` ns (the replica's and data box's clocks start at 1 ms:
    /// 0 means "never" in their timers).
    pub fn from_ns(base: u64) -> Self {
        Clock {
            t0: Instant::now(),
            base,
        }
    }
    /// Nanoseconds since the start (plus the base).
    #[inline]
    pub fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64 + self.base
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// How a runner thread passes a round in which no tile had work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Spin: poll again at once (a pinned hot core; it never sleeps nor yields).
    Spin,
    /// `sched_yield` (a thread sharing its core with others that must not sleep: the legacy
    /// round-robin map and the tests).
    Yield,
    /// Block in `ppoll` on the tiles' [`Task::wait_fd`]s for at most `timeout_ns`, with the
    /// thread's timer slack at 1 ns (a cold thread).
    Block {
        /// Longest sleep: the cold tiles' clocks (self-fence, notices, block close at the
        /// hasher) tick at least this often.
        timeout_ns: u64,
    },
    /// Spin for [`BACKOFF_SPINS`] idle rounds, then yield until [`BACKOFF_YIELDS`], then sleep
    /// [`BACKOFF_SLEEP_US`] at a time (a thread with no descriptor to wake it on a box whose
    /// cores it shares: the replica's replay thread and replay lanes on a dev box).
    Backoff,
    /// [`Wait::Block`], and once a descriptor woke it, sleep `gather_ns` more before the next
    /// round, so one wake-up takes a batch of traffic (the replica's front: its acks and votes
    /// leave at most `gather_ns` later).
    Gather {
        /// Longest sleep.
        timeout_ns: u64,
        /// Sleep after a wake-up.
        gather_ns: u64,
    },
}

impl std::fmt::Display for Wait {
    /// How the start lines say it (`vyrn seq`'s placement).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wait::Spin => write!(f, "spins"),
            Wait::Yield => write!(f, "yields when idle"),
            Wait::Block { timeout_ns } => {
                write!(f, "blocks when idle (≤ {} µs)", timeout_ns / 1000)
            }
            Wait::Backoff => write!(f, "backs off when idle"),
            Wait::Gather {
                timeout_ns,
                gather_ns,
            } => write!(
                f,
                "blocks when idle (≤ {} µs), gathers {} µs after a wake",
                timeout_ns / 1000,
                gather_ns / 1000
            ),
        }
    }
}

impl Wait {
    /// Whether a thread waiting so sleeps (then its timer slack is made fine).
    pub fn sleeps(&self) -> bool {
        matches!(
            self,
            Wait::Block { .. } | Wait::Backoff | Wait::Gather { .. }
        )
    }
}

/// [`Wait::Backoff`]: idle rounds spent spinning.
pub const BACKOFF_SPINS: u32 = 64;
/// [`Wait::Backoff`]: idle rounds before it sleeps (yielding from [`BACKOFF_SPINS`]).
pub const BACKOFF_YIELDS: u32 = 256;
/// [`Wait::Backoff`]'s sleep, µs: an idle replay thread wakes 5k times a second (20 µs slowed
/// the other roles' threads of a 2-core box).
pub const BACKOFF_SLEEP_US: u64 = 200;

/// The one idle policy of every tile thread: what a thread does after a round in which no tile
/// had work, as its [`Wait`] says. The runner's threads and the threads a role starts itself
/// (the replica's replay thread and lanes, [`run_loop`]) share it.
#[derive(Debug, Clone, Copy)]
pub struct Idler {
    wait: Wait,
    idle_rounds: u32,
}

impl Idler {
    /// An idler waiting as `wait` says.
    pub fn new(wait: Wait) -> Self {
        Idler {
            wait,
            idle_rounds: 0,
        }
    }

    /// A round did work.
    #[inline]
    pub fn busy(&mut self) {
        self.idle_rounds = 0;
    }

    /// A round did nothing: wait (`fds`: what wakes a blocking thread early).
    pub fn idle(&mut self, fds: &[RawFd]) {
        self.idle_for(fds, None)
    }

    /// [`Idler::idle`], a blocking wait no longer than `within_ns` (a tile's [`Task::due`]).
    pub fn idle_for(&mut self, fds: &[RawFd], within_ns: Option<u64>) {
        self.idle_rounds = self.idle_rounds.saturating_add(1);
        let cap = |t: u64| within_ns.map_or(t, |w| w.min(t));
        match self.wait {
            Wait::Spin => std::hint::spin_loop(),
            Wait::Yield => std::thread::yield_now(),
            Wait::Block { timeout_ns } => {
                let _ = vyrn_nic::wait::wait_readable(fds, cap(timeout_ns));
            }
            Wait::Gather {
                timeout_ns,
                gather_ns,
            } => {
                if vyrn_nic::wait::wait_readable(fds, cap(timeout_ns)) {
                    vyrn_nic::wait::wait_readable(&[], gather_ns);
                }
            }
            Wait::Backoff if self.idle_rounds < BACKOFF_SPINS => std::hint::spin_loop(),
            Wait::Backoff if self.idle_rounds < BACKOFF_YIELDS => std::thread::yield_now(),
            Wait::Backoff => std::thread::sleep(std::time::Duration::from_micros(BACKOFF_SLEEP_US)),
        }
    }
}

/// A thread's whole life as one tile (the threads a role starts itself: the replica's replay
/// thread and lanes): pinned to `core` if given ([`pin::pin_to`]), its timer slack fine when
/// it sleeps, `poll` until `stop`, idle as `wait` says ([`Idler`]).
pub fn run_loop(
    stop: &AtomicBool,
    core: Option<usize>,
    wait: Wait,
    mut poll: impl FnMut() -> bool,
) {
    if let Some(c) = core {
        let _ = pin::pin_to(&[c]);
    }
    if wait.sleeps() {
        fine_timer_slack();
    }
    let mut idler = Idler::new(wait);
    while !stop.load(Ordering::Acquire) {
        if poll() {
            idler.busy();
        } else {
            idler.idle(&[]);
        }
    }
}

/// How long an idle cold thread sleeps at most (µs): control's self-fence check, its notices
/// and the order hasher's pickup of a closed block wait at most this (a vyrn decision: a fifth of
/// REP_SELF_FENCE_US, and acks or certificates on the control socket wake it at once).
pub const COLD_WAIT_US: u64 = 50;

/// Tiles on one thread: pinned to `core` (if given), round-robin.
pub struct Group {
    /// Core to pin to. A group without one that does not spin is kept off every spinning
    /// group's core (its affinity is the process's mask less those cores).
    pub core: Option<usize>,
    /// How the thread waits when a round finds no work.
    pub wait: Wait,
    /// Its tiles.
    pub tasks: Vec<Box<dyn Task>>,
}

impl Group {
    /// A group of `tasks` on `core` that yields when idle if unpinned and spins if pinned (the
    /// round-robin map's rule).
    pub fn new(core: Option<usize>, tasks: Vec<Box<dyn Task>>) -> Self {
        let wait = if core.is_some() {
            Wait::Spin
        } else {
            Wait::Yield
        };
        Group { core, wait, tasks }
    }
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.tasks.iter().map(|t| t.name()).collect();
        write!(f, "Group(core {:?}, {:?}, {names:?})", self.core, self.wait)
    }
}

/// What the runner does when a tile panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnPanic {
    /// Print which tile panicked and why, then abort the process (production: a supervisor
    /// sees a non-zero exit, never a box with one tile dead and the others running).
    Abort,
    /// Stop every thread of the box and report the tile through [`Runner::panicked`] (tests).
    StopAll,
}

/// A running box: its threads, a stop flag, and per-tile counters.
#[derive(Debug)]
pub struct Runner {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Vec<Box<dyn Task>>>>,
    panicked: Arc<Mutex<Option<String>>>,
    /// Per tile (in group order): its name, its thread's core, and its counters.
    pub stats: Vec<(String, Option<usize>, Arc<TileStats>)>,
    /// Per thread: its tiles, its core and how it waits (the placement, for the start line).
    pub placement: Vec<(Vec<String>, Option<usize>, Wait)>,
    /// Cores actually pinned.
    pub pinned: Arc<AtomicU64>,
}

/// Seconds a tile may go without a poll before the watchdog calls it stalled. Every tile polls
/// at least once per its idle timeout (a blocking tile's `ppoll` wakes within it), so a tile
/// that has not polled for this long is stuck inside one poll: a loop that does not end, a
/// deadlock, a blocking call.
pub const WATCHDOG_STALL_S: u64 = 5;

/// The per-tile watchdog (security review: a stall is not a panic): called about once a second
/// with each tile's poll counter, it names the first tile whose counter has not moved for
/// [`WATCHDOG_STALL_S`]. The caller raises `REP_A_STALL` and aborts (a box that stopped making
/// progress must not keep its ports and look alive).
#[derive(Debug, Default)]
pub struct Watchdog {
    /// Per tile: the polls last seen and when they last moved (ns).
    seen: Vec<(u64, u64)>,
}

impl Watchdog {
    /// Check the tiles at `now_ns`: `Some((name, seconds stalled))` for the first stalled one.
    pub fn check<'a>(
        &mut self,
        now_ns: u64,
        tiles: impl Iterator<Item = (&'a str, u64)>,
    ) -> Option<(String, u64)> {
        let mut stalled = None;
        for (i, (name, polls)) in tiles.enumerate() {
            if self.seen.len() <= i {
                self.seen.push((polls, now_ns));
                continue;
            }
            let s = &mut self.seen[i];
            if polls != s.0 {
                *s = (polls, now_ns);
            } else if now_ns.saturating_sub(s.1) >= WATCHDOG_STALL_S * 1_000_000_000 {
                stalled.get_or_insert((name.to_string(), (now_ns - s.1) / 1_000_000_000));
            }
        }
        stalled
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

impl Runner {
    /// Start one thread per group (missing-chapters §4: one pinned thread per tile on `ref`,
    /// several tiles round-robin on a `dev` box); a tile that panics aborts the process.
    pub fn start(groups: Vec<Group>, clock: Clock) -> Runner {
        Self::start_with(groups, clock, OnPanic::Abort)
    }

    /// [`Runner::start`] with a chosen panic policy.
    pub fn start_with(groups: Vec<Group>, clock: Clock, on_panic: OnPanic) -> Runner {
        install_panic_hook();
        let stop = Arc::new(AtomicBool::new(false));
        let pinned = Arc::new(AtomicU64::new(0));
        let panicked: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let mut stats = Vec::new();
        let mut threads = Vec::new();
        let mut placement = Vec::new();
        // Cores that spin: no other thread of the box may run there.
        let hot: Vec<usize> = groups
            .iter()
            .filter(|g| g.wait == Wait::Spin)
            .filter_map(|g| g.core)
            .collect();
        if let Ok(mut h) = HOT_CORES.lock() {
            h.clone_from(&hot);
        }
        // Threads placed (pinned or not): the caller's view of `pinned` is then complete.
        let started = Arc::new(AtomicU64::new(0));
        let n_groups = groups.len() as u64;
        for g in groups {
            let st: Vec<Arc<TileStats>> = g
                .tasks
                .iter()
                .map(|t| {
                    let s = Arc::new(TileStats::default());
                    stats.push((t.name(), g.core, s.clone()));
                    s
                })
                .collect();
            let names: Vec<String> = g.tasks.iter().map(|t| t.name()).collect();
            placement.push((names.clone(), g.core, g.wait));
            let wait = g.wait;
            let hot = hot.clone();
            let started = started.clone();
            let stop = stop.clone();
            let pinned = pinned.clone();
            let panicked = panicked.clone();
            let core = g.core;
            let tasks = g.tasks;
            let name = names.first().cloned().unwrap_or_default();
            let th = std::thread::Builder::new()
                .name(format!("vyrn-{name}"))
                .spawn(move || {
                    if let Some(c) = core {
                        if pin::pin_to(&[c]) {
                            pinned.fetch_add(1, Ordering::Relaxed);
                        }
                    } else if wait != Wait::Spin && !hot.is_empty() {
                        keep_off(&hot);
                    }
                    if wait.sleeps() {
                        fine_timer_slack();
                    }
                    started.fetch_add(1, Ordering::Release);
                    // Which tile is in `poll` now, for the panic messages.
                    let current = AtomicU64::new(0);
                    TILES.with(|t| *t.borrow_mut() = names.clone());
                    let mut tasks = tasks;
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        spin(&mut tasks, &st, &stop, wait, clock, &current)
                    }));
                    if let Err(p) = r {
                        let tile = names
                            .get(current.load(Ordering::Relaxed) as usize)
                            .cloned()
                            .unwrap_or_default();
                        let msg = format!("tile {tile} panicked: {}", panic_text(p.as_ref()));
                        match on_panic {
                            OnPanic::Abort => {
                                eprintln!("vyrn: {msg}; aborting the box (no tile runs on alone)");
                                std::process::abort();
                            }
                            OnPanic::StopAll => {
                                if let Ok(mut g) = panicked.lock() {
                                    g.get_or_insert(msg);
                                }
                                stop.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                    tasks
                })
                .expect("spawn a tile thread");
            threads.push(th);
        }
        let t0 = Instant::now();
        while started.load(Ordering::Acquire) < n_groups && t0.elapsed().as_secs() < 2 {
            std::thread::yield_now();
        }
        Runner {
            stop,
            threads,
            panicked,
            stats,
            placement,
            pinned,
        }
    }

    /// The first tile that panicked, with its message (only under [`OnPanic::StopAll`]).
    pub fn panicked(&self) -> Option<String> {
        self.panicked.lock().ok().and_then(|g| g.clone())
    }

    /// Whether every thread is still running.
    pub fn alive(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && self.threads.iter().all(|t| !t.is_finished())
    }

    /// Stop every thread and take the tiles back (those of a thread that panicked are lost).
    pub fn stop(self) -> Vec<Box<dyn Task>> {
        self.stop.store(true, Ordering::Relaxed);
        let mut out = Vec::new();
        for t in self.threads {
            if let Ok(v) = t.join() {
                out.extend(v);
            }
        }
        out
    }
}

/// A role's process life on its runner (the replica, a data box, the standby): return when
/// `until` says so or a thread of the runner ended, checking every tile's poll counter once a
/// second ([`Watchdog`]): a tile stuck inside one poll for [`WATCHDOG_STALL_S`] raises
/// `REP_A_STALL` and aborts the process — a stalled role must not look alive (its supervisor
/// restarts it).
pub fn supervise(runner: &Runner, role: &str, mut until: impl FnMut() -> bool) {
    let t0 = Instant::now();
    let mut dog = Watchdog::default();
    let mut next_check = 1u64;
    while runner.alive() && !until() {
        std::thread::sleep(std::time::Duration::from_millis(5));
        let secs = t0.elapsed().as_secs();
        if secs < next_check {
            continue;
        }
        next_check = secs + 1;
        let now = t0.elapsed().as_nanos() as u64;
        let polls = runner
            .stats
            .iter()
            .map(|(n, _, s)| (n.as_str(), s.polls.load(Ordering::Relaxed)));
        if let Some((t, secs)) = dog.check(now, polls) {
            eprintln!("alarm=REP_A_STALL role={role} tile={t}: no poll for {secs} s; aborting");
            std::process::abort();
        }
    }
}

/// The cores the running box spins on (set by [`Runner::start`]): other threads of the
/// process keep off them ([`side_thread`]).
static HOT_CORES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// For a thread of the process that is no tile (the voter doubles, a load generator in the
/// same process): keep off the box's spinning cores and take 1 ns timer slack, so its blocking
/// waits ([`wait_readable`]) are short and it never preempts the hot path.
pub fn side_thread() {
    let hot = HOT_CORES.lock().map(|h| h.clone()).unwrap_or_default();
    if !hot.is_empty() {
        keep_off(&hot);
    }
    fine_timer_slack();
}

/// Block until one of `fds` is readable or `timeout_ns` passed (a side thread's idle wait).
pub fn wait_readable(fds: &[RawFd], timeout_ns: u64) {
    let _ = vyrn_nic::wait::wait_readable(fds, timeout_ns);
}

/// This thread's affinity: the process's CPUs less `hot` (a cold thread never runs where a hot
/// one spins). Best effort: a mask left empty, or a refused call, leaves the affinity as it was.
fn keep_off(hot: &[usize]) {
    // SAFETY: cpu_set_t is plain bytes; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: set is a live cpu_set_t of `size` bytes; 0 names this thread.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return;
    }
    let mut left = 0;
    for c in 0..(size * 8) {
        // SAFETY: c < CPU_SETSIZE (size * 8 bits), inside the set.
        if unsafe { libc::CPU_ISSET(c, &set) } {
            if hot.contains(&c) {
                // SAFETY: as above.
                unsafe { libc::CPU_CLR(c, &mut set) };
            } else {
                left += 1;
            }
        }
    }
    if left > 0 {
        // SAFETY: set is a live, initialised cpu_set_t of `size` bytes; 0 names this thread.
        unsafe { libc::sched_setaffinity(0, size, &set) };
    }
}

fn fine_timer_slack() {
    let _ = vyrn_nic::wait::fine_timer_slack();
}

/// A thread's loop: poll each tile in turn until `stop`; counters published every 1024 rounds.
fn spin(
    tasks: &mut [Box<dyn Task>],
    st: &[Arc<TileStats>],
    stop: &AtomicBool,
    wait: Wait,
    clock: Clock,
    current: &AtomicU64,
) {
    let mut fds: Vec<RawFd> = Vec::new();
    for t in tasks.iter() {
        t.wait_fds(&mut fds);
    }
    let mut local: Vec<(u64, u64, u64)> = vec![(0, 0, 0); tasks.len()];
    let mut round = 0u64;
    let mut idler = Idler::new(wait);
    let publish = |local: &[(u64, u64, u64)], tasks: &[Box<dyn Task>]| {
        for ((c, s), t) in local.iter().zip(st).zip(tasks) {
            s.polls.store(c.0, Ordering::Relaxed);
            s.busy_polls.store(c.1, Ordering::Relaxed);
            s.busy_ns.store(c.2, Ordering::Relaxed);
            s.backpressure.store(t.backpressure(), Ordering::Relaxed);
        }
    };
    while !stop.load(Ordering::Relaxed) {
        let mut t0 = clock.now();
        let mut any = false;
        for (i, t) in tasks.iter_mut().enumerate() {
            current.store(i as u64, Ordering::Relaxed);
            CURRENT.with(|c| c.set(i));
            let busy = t.poll(t0);
            let t1 = clock.now();
            let c = &mut local[i];
            c.0 += 1;
            if busy {
                c.1 += 1;
                c.2 += t1 - t0;
                any = true;
            }
            t0 = t1;
        }
        round += 1;
        if round % 1024 == 0 {
            publish(&local, tasks);
        }
        if any {
            idler.busy();
        } else {
            let mut within = None;
            if wait.sleeps() {
                // About to sleep: the counters are current while it does.
                publish(&local, tasks);
                let now = clock.now();
                within = tasks
                    .iter()
                    .filter_map(|t| t.due())
                    .min()
                    .map(|d| d.saturating_sub(now));
            }
            idler.idle_for(&fds, within);
        }
    }
    publish(&local, tasks);
}

/// The hot/cold placement (missing-chapters §0 `dev`/`consumer`): every hot tile on
/// spinning threads pinned to `hot` (one thread per core, tiles dealt in pipeline order — RX
/// first, then lanes, cut, BBO, stream cores, TX — so one round carries a request from the
/// socket to its answer), every cold tile on blocking threads: one per core of `cold`, or one
/// kept off the hot cores when `cold` is empty. Without hot cores the hot thread is unpinned and
/// yields when idle (a box that shares every core).
pub fn place(tasks: Vec<Box<dyn Task>>, hot: &[usize], cold: &[usize]) -> Vec<Group> {
    let (mut hot_t, cold_t): (Vec<_>, Vec<_>) =
        tasks.into_iter().partition(|t| t.class() == TileClass::Hot);
    // RX first: a packet received in a round is answered in the same or the next round.
    hot_t.sort_by_key(|t| t.name() != "rx");
    let mut out = Vec::new();
    let nh = hot.len().max(1);
    let mut hg: Vec<Group> = (0..nh)
        .map(|i| Group {
            core: hot.get(i).copied(),
            wait: if hot.is_empty() {
                Wait::Yield
            } else {
                Wait::Spin
            },
            tasks: Vec::new(),
        })
        .collect();
    // Contiguous slices keep the pipeline order on each hot thread.
    let per = hot_t.len().div_ceil(nh).max(1);
    for (i, t) in hot_t.into_iter().enumerate() {
        hg[(i / per).min(nh - 1)].tasks.push(t);
    }
    out.extend(hg.into_iter().filter(|g| !g.tasks.is_empty()));
    let nc = cold.len().max(1);
    let mut cg: Vec<Group> = (0..nc)
        .map(|i| Group {
            core: cold.get(i).copied(),
            wait: Wait::Block {
                timeout_ns: COLD_WAIT_US * 1000,
            },
            tasks: Vec::new(),
        })
        .collect();
    for (i, t) in cold_t.into_iter().enumerate() {
        cg[i % nc].tasks.push(t);
    }
    out.extend(cg.into_iter().filter(|g| !g.tasks.is_empty()));
    out
}

/// Map tiles to threads: `ref` — one pinned thread per tile on `cores` (one core each, in tile
/// order; a hot tile spins, a cold one blocks when idle); otherwise `threads` threads, tiles
/// dealt round-robin, pinned to `cores` if given (the legacy map, kept for comparison).
pub fn groups(
    mut tasks: Vec<Box<dyn Task>>,
    cores: &[usize],
    one_per_tile: bool,
    threads: usize,
) -> Vec<Group> {
    if one_per_tile {
        return tasks
            .drain(..)
            .enumerate()
            .map(|(i, t)| {
                let mut g = Group::new(cores.get(i).copied(), Vec::new());
                if t.class() == TileClass::Cold {
                    g.wait = Wait::Block {
                        timeout_ns: COLD_WAIT_US * 1000,
                    };
                }
                g.tasks.push(t);
                g
            })
            .collect();
    }
    let k = threads.max(1);
    let mut gs: Vec<Group> = (0..k)
        .map(|i| Group::new(cores.get(i).copied(), Vec::new()))
        .collect();
    for (i, t) in tasks.drain(..).enumerate() {
        gs[i % k].tasks.push(t);
    }
    gs
}

/// The seeded deterministic scheduler: every tile on the calling thread, polled one at a time
/// in an order a seed draws (SplitMix64), so any interleaving a test finds is reproducible
/// from its seed. The tiles are the production tiles; only the caller of `poll` differs.
pub struct Seeded {
    /// The tiles, in build order.
    pub tasks: Vec<Box<dyn Task>>,
    state: u64,
}

impl std::fmt::Debug for Seeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.tasks.iter().map(|t| t.name()).collect();
        write!(f, "Seeded{names:?}")
    }
}

impl Seeded {
    /// A scheduler over `tasks`, drawing from `seed`.
    pub fn new(tasks: Vec<Box<dyn Task>>, seed: u64) -> Self {
        Seeded { tasks, state: seed }
    }

    /// The next draw below `n` (SplitMix64; `n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }

    /// Poll tile `i` at `now`.
    pub fn poll(&mut self, i: usize, now: u64) -> bool {
        self.tasks[i].poll(now)
    }

    /// Poll one tile drawn from the seed; which one, and whether it did anything.
    pub fn step(&mut self, now: u64) -> (usize, bool) {
        let i = self.below(self.tasks.len() as u64) as usize;
        (i, self.tasks[i].poll(now))
    }

    /// Round-robin every tile until a round does nothing (at most `max_rounds`).
    pub fn settle(&mut self, now: u64, max_rounds: usize) {
        for _ in 0..max_rounds {
            let mut busy = false;
            for t in &mut self.tasks {
                busy |= t.poll(now);
            }
            if !busy {
                break;
            }
        }
    }

    /// The index of the tile named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.name() == name)
    }
}

#[cfg(test)]
mod idle_tests {
    use super::*;

    /// `Backoff` sleeps only once its spins and yields are spent; a round with work starts it
    /// over. (A sleep lasts at least what it asks: the bound below cannot flake.)
    #[test]
    fn backoff_sleeps_only_after_spinning_and_yielding_and_work_resets_it() {
        let mut i = Idler::new(Wait::Backoff);
        for _ in 0..BACKOFF_YIELDS - 1 {
            i.idle(&[]);
        }
        assert_eq!(i.idle_rounds, BACKOFF_YIELDS - 1);
        let t = Instant::now();
        i.idle(&[]);
        assert!(t.elapsed() >= std::time::Duration::from_micros(BACKOFF_SLEEP_US));
        i.busy();
        assert_eq!(i.idle_rounds, 0);
    }

    /// `run_loop` polls until stopped and hands each poll's answer to its idler.
    #[test]
    fn run_loop_polls_until_stopped() {
        let stop = AtomicBool::new(false);
        let mut n = 0u32;
        run_loop(&stop, None, Wait::Backoff, || {
            n += 1;
            if n == 1000 {
                stop.store(true, Ordering::Release);
            }
            n % 3 == 0
        });
        assert_eq!(n, 1000);
    }
}

#[cfg(test)]
mod watchdog_tests {
    use super::{Watchdog, WATCHDOG_STALL_S};

    #[test]
    fn a_tile_that_stops_polling_is_named_after_the_stall_time() {
        let mut w = Watchdog::default();
        let s = 1_000_000_000;
        assert_eq!(w.check(0, [("a", 1), ("b", 1)].into_iter()), None);
        for t in 1..WATCHDOG_STALL_S {
            assert_eq!(w.check(t * s, [("a", 1 + t), ("b", 1)].into_iter()), None);
        }
        assert_eq!(
            w.check(WATCHDOG_STALL_S * s, [("a", 99), ("b", 1)].into_iter()),
            Some(("b".to_string(), WATCHDOG_STALL_S))
        );
        // It moved again: nothing stalled.
        assert_eq!(w.check(7 * s, [("a", 100), ("b", 2)].into_iter()), None);
    }
}

#[cfg(test)]
mod task_tests {
    use super::*;

    /// A tile counting its polls, due `every_ns` after its last poll when given.
    struct Counter {
        polls: Arc<AtomicU64>,
        every_ns: Option<u64>,
        last: u64,
    }

    impl Task for Counter {
        fn name(&self) -> String {
            "counter".into()
        }
        fn class(&self) -> TileClass {
            TileClass::Cold
        }
        fn due(&self) -> Option<u64> {
            self.every_ns.map(|e| self.last + e)
        }
        fn poll(&mut self, now: u64) -> bool {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.last = now;
            false
        }
    }

    struct Other;
    impl Task for Other {
        fn name(&self) -> String {
            "other".into()
        }
        fn poll(&mut self, _now: u64) -> bool {
            false
        }
    }

    fn counter(every_ns: Option<u64>) -> (Counter, Arc<AtomicU64>) {
        let polls = Arc::new(AtomicU64::new(0));
        let c = Counter {
            polls: polls.clone(),
            every_ns,
            last: 0,
        };
        (c, polls)
    }

    /// The runner hands tiles back untyped; `take` finds the one of the asked type.
    #[test]
    fn take_gives_back_the_tile_of_its_type() {
        let (c, _) = counter(Some(7));
        let mut tiles: Vec<Box<dyn Task>> = vec![Box::new(Other), Box::new(c), Box::new(Other)];
        let c = take::<Counter>(&mut tiles).expect("the counter");
        assert_eq!(c.every_ns, Some(7));
        assert_eq!(tiles.len(), 2);
        assert!(take::<Counter>(&mut tiles).is_none());
    }

    /// The hook runs once a period, between polls, with the tile; not before a period passed.
    #[test]
    fn reported_runs_its_hook_once_a_period() {
        let (c, polls) = counter(None);
        let seen = Arc::new(AtomicU64::new(0));
        let s = seen.clone();
        let mut r = Reported::new(c, 1000, move |c: &mut Counter, _| {
            s.store(c.polls.load(Ordering::Relaxed), Ordering::Relaxed);
        });
        for now in (10..3010).step_by(10) {
            r.poll(now);
        }
        // First poll at 10: hooks at 1010 (101 polls), 2010 (201 polls); 3010 not reached.
        assert_eq!(seen.load(Ordering::Relaxed), 201);
        assert_eq!(polls.load(Ordering::Relaxed), 300);
        assert_eq!(r.due(), Some(3010));
    }

    /// A blocking thread sleeps no longer than its tiles' `due`: with a 1 s timeout, a tile due
    /// every millisecond is polled many times in 200 ms; one with no `due` about once.
    #[test]
    fn a_due_tile_wakes_a_blocking_thread_before_its_timeout() {
        let run = |every: Option<u64>| {
            let (c, polls) = counter(every);
            let r = Runner::start_with(
                vec![Group {
                    core: None,
                    wait: Wait::Block {
                        timeout_ns: 1_000_000_000,
                    },
                    tasks: vec![Box::new(c)],
                }],
                Clock::new(),
                OnPanic::StopAll,
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
            let n = polls.load(Ordering::Relaxed);
            r.stop();
            n
        };
        let due = run(Some(1_000_000));
        let none = run(None);
        assert!(due >= 20, "polled {due} times in 200 ms");
        assert!(none <= 3, "polled {none} times in 200 ms");
    }

    /// A tile's back-pressure count reaches the runner's counters.
    #[test]
    fn backpressure_is_published_with_the_poll_counters() {
        struct Pushy(u64);
        impl Task for Pushy {
            fn name(&self) -> String {
                "pushy".into()
            }
            fn backpressure(&self) -> u64 {
                self.0
            }
            fn poll(&mut self, _now: u64) -> bool {
                self.0 += 1;
                false
            }
        }
        let r = Runner::start_with(
            vec![Group {
                core: None,
                wait: Wait::Block {
                    timeout_ns: 100_000,
                },
                tasks: vec![Box::new(Pushy(0))],
            }],
            Clock::new(),
            OnPanic::StopAll,
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
        let s = r.stats[0].2.clone();
        let _ = r.stop();
        let bp = s.backpressure.load(Ordering::Relaxed);
        assert!(bp > 0 && bp == s.polls.load(Ordering::Relaxed), "{bp}");
    }

    /// `Gather` sleeps its gather time after a descriptor woke it, so a burst is taken in one
    /// round; without a wake it sleeps only its timeout.
    #[test]
    fn gather_sleeps_after_a_wake_up_only() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
        let mut i = Idler::new(Wait::Gather {
            timeout_ns: 1_000_000,
            gather_ns: 30_000_000,
        });
        let t = Instant::now();
        i.idle(&[fd]);
        let quiet = t.elapsed();
        sock.send_to(b"x", sock.local_addr().unwrap()).unwrap();
        let t = Instant::now();
        i.idle(&[fd]);
        let woke = t.elapsed();
        assert!(woke >= std::time::Duration::from_millis(30), "{woke:?}");
        assert!(quiet < std::time::Duration::from_millis(30), "{quiet:?}");
    }
}
