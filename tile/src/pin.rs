//! Pinning, the one way every thread of every role is placed on cores: the runner's tile
//! threads, a role's own threads (replay, its lanes, the journal writer, the consensus
//! engine's) and a process's `--cores`. Plain `sched_setaffinity` over a set of cores
//! (`core_affinity` takes one core only, and a process's `--cores` names several).

/// Pin the calling thread (and every thread it starts afterwards) to the set `cores`: how a role
/// that shares a host with a sequencer box stays off the box's spinning hot core. False when the set is empty, names a core past
/// `CPU_SETSIZE`, or the kernel refuses it (a core outside the process's cgroup).
pub fn pin_to(cores: &[usize]) -> bool {
    if cores.is_empty() || cores.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return false;
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores {
        // SAFETY: `c` < CPU_SETSIZE (checked above), `set` is a live cpu_set_t.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` is a live cpu_set_t of the size passed.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// A process's `--cores` option (or a thread's core list): [`pin_to`] when given, with a message
/// on stderr naming `tool` when the kernel refuses the set. True when there was nothing to do
/// or it worked.
pub fn pin_process(tool: &str, cores: Option<&[usize]>) -> bool {
    match cores {
        Some(c) if !pin_to(c) => {
            eprintln!("{tool}: --cores {c:?}: the kernel refused that set");
            false
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_the_kernel_cannot_take_is_refused() {
        assert!(!pin_to(&[]));
        assert!(!pin_to(&[libc::CPU_SETSIZE as usize]));
        assert!(pin_process("t", None));
    }

    /// Pinned to the first CPU this process may use, the thread runs there.
    #[test]
    fn a_pinned_thread_runs_on_its_core() {
        let first = core_affinity::get_core_ids()
            .and_then(|v| v.first().map(|c| c.id))
            .expect("a CPU");
        std::thread::spawn(move || {
            assert!(pin_to(&[first]));
            // SAFETY: sched_getcpu takes no arguments.
            let on = unsafe { libc::sched_getcpu() };
            assert_eq!(on, first as i32);
        })
        .join()
        .unwrap();
    }
}
