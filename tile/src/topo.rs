//! The machine's topology for placing pinned tiles (missing-chapters §5: "hwlocality (libhwloc)
//! where present, core_affinity otherwise"): which logical CPUs share a physical core (SMT
//! siblings), an L3 cache, a NUMA node.
//!
//! With the `hwloc` feature, [`Topology::detect`] asks libhwloc (hwlocality); without it, or
//! where hwloc fails, every CPU of the process's mask is its own core on one L3 and one node —
//! what `core_affinity` alone can tell.
//!
//! [`Topology::place_order`] is the REF profile's rule for a core map: one CPU per physical core
//! (a spinning tile's SMT sibling would take its cycles: siblings are left idle, never given to
//! another tile), the NUMA node holding the most such cores first (a tile's rings and its
//! neighbours' stay in one node's memory), and within it the cores of one L3 together (the
//! gate words and rings the tiles share stay in one cache).

/// One logical CPU (a PU in hwloc's words) where the topology places it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    /// Its OS index (what `sched_setaffinity` and `core_affinity` take).
    pub os: usize,
    /// The physical core it belongs to (SMT siblings share it).
    pub core: usize,
    /// The L3 cache it sits under.
    pub l3: usize,
    /// Its NUMA node.
    pub numa: usize,
}

/// Where the topology came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// libhwloc, through hwlocality.
    Hwloc,
    /// None known: every CPU its own core, one L3, one node.
    Flat,
}

/// The machine's CPUs as the topology sees them.
#[derive(Debug, Clone)]
pub struct Topology {
    cpus: Vec<Cpu>,
    /// Where it came from.
    pub source: Source,
}

/// A placement order over a mask of CPUs ([`Topology::place_order`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceOrder {
    /// One CPU per physical core, in the order tiles should take them.
    pub cores: Vec<usize>,
    /// The other CPUs of those cores (SMT siblings): no tile is pinned there.
    pub siblings: Vec<usize>,
}

impl Topology {
    /// The topology of `cpus` as given (tests, and a caller that knows better).
    pub fn from_cpus(cpus: Vec<Cpu>) -> Topology {
        Topology {
            cpus,
            source: Source::Hwloc,
        }
    }

    /// Every CPU of `os` its own core, on one L3 and one node.
    pub fn flat(os: &[usize]) -> Topology {
        Topology {
            cpus: os
                .iter()
                .map(|&os| Cpu {
                    os,
                    core: os,
                    l3: 0,
                    numa: 0,
                })
                .collect(),
            source: Source::Flat,
        }
    }

    /// This machine's topology: libhwloc's with the `hwloc` feature, else (or where it fails)
    /// flat over the CPUs `core_affinity` reports.
    pub fn detect() -> Topology {
        #[cfg(feature = "hwloc")]
        if let Some(t) = hwloc::detect() {
            return t;
        }
        let os: Vec<usize> = core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect();
        Topology::flat(&os)
    }

    /// Its CPUs.
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }

    /// Where CPU `os` sits; a CPU the topology does not know is its own core.
    fn cpu(&self, os: usize) -> Cpu {
        self.cpus
            .iter()
            .find(|c| c.os == os)
            .copied()
            .unwrap_or(Cpu {
                os,
                core: usize::MAX - os,
                l3: usize::MAX,
                numa: usize::MAX,
            })
    }

    /// `mask`'s CPUs in the order pinned tiles take them: one per physical core (its lowest
    /// OS index), the NUMA nodes with the most such cores first, within a node its L3 groups
    /// largest first, then by OS index. The other CPUs of each chosen core are `siblings`.
    pub fn place_order(&self, mask: &[usize]) -> PlaceOrder {
        let mut cpus: Vec<Cpu> = mask.iter().map(|&c| self.cpu(c)).collect();
        cpus.sort_unstable_by_key(|c| c.os);
        cpus.dedup_by_key(|c| c.os);
        let mut firsts: Vec<Cpu> = Vec::new();
        let mut siblings = Vec::new();
        for c in cpus {
            if firsts.iter().any(|f| f.core == c.core) {
                siblings.push(c.os);
            } else {
                firsts.push(c);
            }
        }
        let count = |f: &dyn Fn(&Cpu) -> bool| firsts.iter().filter(|c| f(c)).count();
        let node_size: Vec<usize> = firsts
            .iter()
            .map(|c| count(&|x: &Cpu| x.numa == c.numa))
            .collect();
        let l3_size: Vec<usize> = firsts
            .iter()
            .map(|c| count(&|x: &Cpu| x.numa == c.numa && x.l3 == c.l3))
            .collect();
        let mut keyed: Vec<(usize, usize, usize, usize, usize, usize)> = firsts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                (
                    usize::MAX - node_size[i],
                    c.numa,
                    usize::MAX - l3_size[i],
                    c.l3,
                    c.os,
                    i,
                )
            })
            .collect();
        keyed.sort_unstable();
        PlaceOrder {
            cores: keyed.iter().map(|k| firsts[k.5].os).collect(),
            siblings,
        }
    }

    /// CPUs of `map` that share a physical core with another of `map` (the REF profile pins one
    /// tile per core: two tiles on SMT siblings halve each other), as pairs.
    pub fn shared_cores(&self, map: &[usize]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (i, &a) in map.iter().enumerate() {
            for &b in &map[i + 1..] {
                if a != b && self.cpu(a).core == self.cpu(b).core {
                    out.push((a, b));
                }
            }
        }
        out
    }

    /// The NUMA nodes `map` spans (more than one: a tile's rings cross the interconnect).
    pub fn numa_nodes(&self, map: &[usize]) -> Vec<usize> {
        let mut n: Vec<usize> = map
            .iter()
            .map(|&c| self.cpu(c).numa)
            .filter(|&n| n != usize::MAX)
            .collect();
        n.sort_unstable();
        n.dedup();
        n
    }
}

#[cfg(feature = "hwloc")]
mod hwloc {
    use super::{Cpu, Source, Topology};
    use hwlocality::object::types::ObjectType;

    /// libhwloc's view: each PU with its Core, L3 and NUMA node (`None` where hwloc fails).
    pub(super) fn detect() -> Option<Topology> {
        let topo = hwlocality::Topology::new().ok()?;
        let mut cpus = Vec::new();
        for pu in topo.objects_with_type(ObjectType::PU) {
            let os = pu.os_index()?;
            let core = pu
                .first_ancestor_with_type(ObjectType::Core)
                .map_or(usize::MAX - os, |c| c.logical_index());
            let l3 = pu
                .first_ancestor_with_type(ObjectType::L3Cache)
                .map_or(0, |c| c.logical_index());
            let numa = pu
                .nodeset()
                .and_then(|n| n.first_set())
                .map_or(0, usize::from);
            cpus.push(Cpu { os, core, l3, numa });
        }
        (!cpus.is_empty()).then_some(Topology {
            cpus,
            source: Source::Hwloc,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two NUMA nodes of 8 cores with SMT pairs (CPU c and c + 32 share a core), two L3s of 4
    /// cores per node: a small REF-like box.
    fn smt_box() -> Topology {
        let mut cpus = Vec::new();
        for core in 0..16 {
            for os in [core, core + 32] {
                cpus.push(Cpu {
                    os,
                    core,
                    l3: core / 4,
                    numa: core / 8,
                });
            }
        }
        Topology::from_cpus(cpus)
    }

    #[test]
    fn smt_siblings_are_never_both_placed() {
        let t = smt_box();
        let mask: Vec<usize> = (0..16).chain(32..48).collect();
        let p = t.place_order(&mask);
        assert_eq!(p.cores.len(), 16, "one CPU per physical core");
        assert_eq!(p.siblings.len(), 16);
        assert!(t.shared_cores(&p.cores).is_empty());
        assert!(p.siblings.iter().all(|s| (32..48).contains(s)));
    }

    #[test]
    fn the_node_with_most_cores_comes_first_and_an_l3_stays_together() {
        let t = smt_box();
        // Node 0 keeps cores 5..8 only; node 1 all eight.
        let mask: Vec<usize> = (5..16).collect();
        let p = t.place_order(&mask);
        assert_eq!(t.numa_nodes(&p.cores[..8]), vec![1], "node 1 first: {p:?}");
        assert_eq!(&p.cores[..4], &[8, 9, 10, 11], "one L3 together");
        assert_eq!(&p.cores[8..], &[5, 6, 7]);
    }

    #[test]
    fn a_flat_machine_keeps_the_mask_in_order() {
        let t = Topology::flat(&[0, 1, 2, 3]);
        let p = t.place_order(&[3, 1, 2, 1, 0]);
        assert_eq!(p.cores, vec![0, 1, 2, 3]);
        assert!(p.siblings.is_empty());
        assert!(t.shared_cores(&[0, 1]).is_empty());
        assert_eq!(t.numa_nodes(&[0, 3]), vec![0]);
    }

    #[test]
    fn a_core_map_on_siblings_is_named() {
        let t = smt_box();
        assert_eq!(t.shared_cores(&[2, 3, 34]), vec![(2, 34)]);
        assert_eq!(t.numa_nodes(&[1, 9]), vec![0, 1]);
    }

    /// This machine, whatever it is: every CPU the process may use is placed exactly once.
    #[test]
    fn this_machine_places_every_core_once() {
        let t = Topology::detect();
        let mask: Vec<usize> = core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect();
        let p = t.place_order(&mask);
        let mut all: Vec<usize> = p.cores.iter().chain(&p.siblings).copied().collect();
        all.sort_unstable();
        let mut want = mask.clone();
        want.sort_unstable();
        want.dedup();
        assert_eq!(all, want, "{:?}: {p:?}", t.source);
        assert!(!p.cores.is_empty());
        #[cfg(feature = "hwloc")]
        assert_eq!(t.source, Source::Hwloc, "libhwloc answered");
    }
}
