//! Lab fault injection on a port's receive side (feature `lab`; never in the product build):
//! [`RxCut`] drops every datagram read from a given time on, as a cut link would (07 §14
//! "path down", "data box down" from a replica's view). `vyrn up`'s lab faults set it on the
//! processes they start; the real lab (`deploy/lab/netns.sh`) cuts the network itself instead.

/// A receive-side cut: from `from_ns` on, every datagram read is dropped and counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RxCut {
    from_ns: Option<u64>,
    /// Datagrams dropped so far.
    pub dropped: u64,
}

impl RxCut {
    /// Cut from `from_ns` on (the caller's clock).
    pub fn cut_from(&mut self, from_ns: u64) {
        self.from_ns = Some(from_ns);
    }

    /// Whether the `n` datagrams just read at `now` are dropped (counted if they are).
    #[inline]
    pub fn drops(&mut self, now: u64, n: usize) -> bool {
        let cut = self.from_ns.is_some_and(|t| now >= t);
        if cut {
            self.dropped += n as u64;
        }
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_drops_from_its_time_on_and_counts() {
        let mut c = RxCut::default();
        assert!(!c.drops(5, 3), "no cut set");
        c.cut_from(10);
        assert!(!c.drops(9, 2));
        assert!(c.drops(10, 2));
        assert!(c.drops(11, 1));
        assert_eq!(c.dropped, 3);
    }
}
