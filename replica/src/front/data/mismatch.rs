//! Mismatches (07 §5.6): a `data_root` that differs with matching 8-byte hashes asks for the
//! block's `HashList` and compares it entry by entry.

use super::*;

#[derive(Debug, Default)]
pub(super) struct ListAsm {
    pub(super) header_root: Hash,
    /// Per substream: the parts, each `None` until it came.
    pub(super) parts: [Vec<Option<Vec<Hash>>>; 2],
    pub(super) compared: bool,
    pub(super) bad: bool,
}

impl DataSide {
    /// The vote check of block `height`'s payloads against its header's `data_root` (07 §6.4
    /// item 3). On a differing root it asks the order hasher for the block's HashList once
    /// (07 §5.6 row 2), compares it entry by entry as it comes ([`Self::on_hash_list`]) and
    /// fetches the sequencer's copy of every differing packet; it answers `Pending` until then.
    pub fn check_data_root(
        &mut self,
        height: u64,
        header_root: &Hash,
        out: &mut impl DataOut,
    ) -> RootCheck {
        if self.root_ok.get(&height) == Some(header_root) {
            return RootCheck::Match;
        }
        if let Some(l) = self.lists.get(&height) {
            if l.bad || l.header_root != *header_root {
                return RootCheck::Contradiction;
            }
        }
        let Some(root) = self.data_root(height) else {
            return RootCheck::Pending;
        };
        if root.data_root == *header_root {
            self.root_ok.insert(height, root.data_root);
            return RootCheck::Match;
        }
        match self.lists.get(&height) {
            // Every entry agreed with the list, and the list with the header: yet the root
            // differs. Nothing to fetch: a contradiction.
            Some(l) if l.compared => RootCheck::Contradiction,
            Some(_) => RootCheck::Pending,
            None => {
                self.lists.insert(
                    height,
                    ListAsm {
                        header_root: *header_root,
                        ..ListAsm::default()
                    },
                );
                self.c.hash_list_reqs += 1;
                out.hash_list_req(&HashListReq { height });
                RootCheck::Pending
            }
        }
    }

    /// One `HashList` part (07 §5.6 row 2), for a height [`Self::check_data_root`] asked for.
    /// When every part of every substream is in, the list is checked against the header and
    /// compared entry by entry; each differing record waits for the sequencer's copy.
    pub fn on_hash_list(
        &mut self,
        l: &HashList,
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<(), PktRefused> {
        let r = self.hash_list(l, now, out);
        match r {
            Ok(()) => self.c.hash_list_parts += 1,
            Err(_) => self.c.hash_list_refused += 1,
        }
        r
    }

    pub(super) fn hash_list(
        &mut self,
        l: &HashList,
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<(), PktRefused> {
        let s = l.stream as usize;
        if s >= self.cfg.n_streams as usize {
            return Err(PktRefused::Unsolicited);
        }
        let Some((a, z)) = self.subs[s].range(l.height) else {
            return Err(PktRefused::Unsolicited);
        };
        let n = (a..z)
            .filter(|&rid| self.subs[s].get(rid).is_some_and(|r| !r.advance))
            .count();
        let Some(asm) = self.lists.get_mut(&l.height) else {
            return Err(PktRefused::Unsolicited);
        };
        if asm.compared || asm.bad {
            return Err(PktRefused::Duplicate);
        }
        // The shape `HashList::split` gives a list of our length; any other is a contradiction.
        let parts = n.div_ceil(HASH_LIST_PART_MAX).max(1);
        let part = l.part as usize;
        let want = n
            .saturating_sub(part * HASH_LIST_PART_MAX)
            .min(HASH_LIST_PART_MAX);
        if l.parts as usize != parts
            || part >= parts
            || l.first as usize != part * HASH_LIST_PART_MAX
            || l.hashes.len() != want
        {
            asm.bad = true;
            self.c.hash_list_bad += 1;
            out.alarm(DataAlarm::HashListBad { height: l.height });
            return Ok(());
        }
        if asm.parts[s].is_empty() {
            asm.parts[s] = vec![None; parts];
        }
        if asm.parts[s][part].is_some() {
            return Err(PktRefused::Duplicate);
        }
        asm.parts[s][part] = Some(l.hashes.clone());
        let ns = self.cfg.n_streams as usize;
        let complete = asm.parts[..ns]
            .iter()
            .all(|p| !p.is_empty() && p.iter().all(Option::is_some));
        if complete {
            self.compare_list(l.height, now, out);
        }
        Ok(())
    }

    pub(super) fn compare_list(&mut self, height: u64, now: u64, out: &mut impl DataOut) {
        let ns = self.cfg.n_streams as usize;
        let Some(ranges) = self.ranges(height) else {
            return;
        };
        let Some(asm) = self.lists.get_mut(&height) else {
            return;
        };
        asm.compared = true;
        let lists: Vec<Vec<Hash>> = asm.parts[..ns]
            .iter()
            .map(|p| p.iter().flatten().flatten().copied().collect())
            .collect();
        let mut halves = [empty_root(); 2];
        for (s, list) in lists.iter().enumerate() {
            let mut d = DataRootHasher::default();
            list.iter().for_each(|h| d.push(h));
            halves[s] = d.finish();
        }
        if data_root(&halves[0], &halves[1]) != asm.header_root {
            asm.bad = true;
            self.c.hash_list_bad += 1;
            out.alarm(DataAlarm::HashListBad { height });
            return;
        }
        let mut differ = Vec::new();
        for (s, list) in lists.iter().enumerate() {
            let (a, z) = ranges[s];
            let mut i = 0;
            for rid in a..z {
                let Some(r) = self.subs[s].get_mut(rid) else {
                    continue;
                };
                if r.advance {
                    continue;
                }
                let Some(&e) = list.get(i) else { break };
                i += 1;
                r.expect = Some(Box::new(e));
                if r.full != Some(e) {
                    differ.push((s as u8, rid));
                }
            }
        }
        for (s, rid) in differ {
            self.c.root_mismatch_entries += 1;
            if let Some(r) = self.subs[s as usize].get_mut(rid) {
                r.state = RecState::Mismatch;
                r.stage = r.stage.max(2);
            }
            self.fire(s, rid, now, out);
        }
    }
}
