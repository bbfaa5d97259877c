//! The per-block verdict a vote needs (07 §6.4, INV-REP-4, items 1–3 and 5): what the Simplex
//! `verify` of the consensus issue calls.
//!
//! A block `h` is **ready** when this replica holds its header with a valid `seq_sig` under the
//! tenure's `seq_key`, its `prev` is the previous header's hash and its steps follow the previous
//! block's (`first_step(h) = last_step(h − 1) + 1`); the decoder passed `BlockMark(h)` on both
//! substreams with no error and its `order_root(h)` equals the header's; and every PacketRecord
//! of the block is resolved with its own `data_root(h)` equal to the header's ([`PayloadView`]).
//! It is **pending** while something is missing, and **refused** at once on a contradiction: a
//! bad signature, a broken chain, a step gap, a root that differs, a decoder fault at or before
//! the block. [`Verdicts::verify`] turns a proposal's range into `true`, `false` or pending, and
//! `false` once it has been pending REP_VERIFY_WAIT_MS.

use std::collections::BTreeMap;

use vyrn_wire::consts::REP_VERIFY_WAIT_MS;
use vyrn_wire::decoder::BlockRoots;
use vyrn_wire::header::{BlockHeader, Hash};

use crate::front::data::{BlockPayloads, DataOut, DataSide, RootCheck};
use crate::front::decode::Fault;

/// How far past the newest signed header an unsigned one is kept (it stands for its height's
/// `BadSig` refusal): further ahead it is dropped, so forged headers cannot fill the table or
/// move anything's idea of the newest height (security review F2).
pub const UNSIGNED_AHEAD_MAX: u64 = 64;
/// What the data side knows of a block's payloads (07 §5.4–§5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payloads {
    /// Records still unresolved, or a mismatch being settled (§5.6): the vote waits.
    Pending {
        /// Records not yet resolved.
        unresolved: u64,
    },
    /// Every record resolved and every mismatch settled: the replica's own `data_root(h)`.
    Root(Hash),
}

/// The data side as the verdict reads it.
pub trait PayloadView {
    /// Block `height`'s payloads.
    fn payloads(&self, height: u64) -> Payloads;
}

/// Why a block is not ready yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    /// Its header has not arrived.
    Header,
    /// The previous header (for `prev` and the step chain) has not arrived.
    PrevHeader,
    /// The decoder has not passed `BlockMark(h)` on both substreams.
    Order,
    /// Payloads unresolved or a mismatch unsettled.
    Payloads {
        /// Records not yet resolved.
        unresolved: u64,
    },
    /// A seal block: its seal certificate is checked by the failover path (§9.4), not here.
    Seal,
}

/// Why a block can never be voted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `seq_sig` does not verify under the tenure's key.
    SeqSig,
    /// `prev` is not the previous header's hash.
    Prev,
    /// `first_step` does not follow the previous block's `last_step`.
    StepGap {
        /// What it should be.
        want: u64,
        /// What the header says.
        got: u64,
    },
    /// The decoder's `order_root(h)` differs from the header's.
    OrderRoot,
    /// The replica's own `data_root(h)` differs from the header's (after settling, §5.6).
    DataRoot,
    /// A decoder fault at or before this block (07 §3.12).
    Decoder(Fault),
    /// Two different headers for one height (equivocation evidence, §10.1).
    Conflict,
    /// The header names another epoch.
    Epoch,
}

/// One block's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Items 1–3 and 5 of §6.4 hold.
    Ready,
    /// Something is missing.
    Pending(Pending),
    /// A contradiction.
    Refused(Refusal),
}

/// What `verify` answers for a proposal's range (07 §6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyOutcome {
    /// Every block of the range is ready and `header_hash(last)` is the proposal's.
    True,
    /// Not yet (the caller asks again).
    Pending(u64, Pending),
    /// False: a contradiction at a height, or pending past REP_VERIFY_WAIT_MS.
    False(u64, Option<Refusal>),
}

/// Where the tenure's chain starts: the hash and last step before its first block (the default:
/// the home's start, height 0, 32 zero bytes, step 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Anchor {
    /// The height before the tenure's first block.
    pub height: u64,
    /// That block's header hash (32 zero bytes at the home's start).
    pub header_hash: Hash,
    /// Its last step (0 at the home's start).
    pub last_step: u64,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerdictCounters {
    /// Headers taken.
    pub headers: u64,
    /// Headers whose `seq_sig` did not verify.
    pub bad_sig: u64,
    /// Second, different headers for a height.
    pub conflicts: u64,
    /// Verifies answered true, false.
    pub verified: u64,
    /// Verifies answered false.
    pub refused: u64,
}

/// The headers, roots and fault one replica holds for a tenure, and the verdicts over them.
#[derive(Debug)]
pub struct Verdicts {
    seq_key: ed25519_dalek::VerifyingKey,
    epoch: u32,
    anchor: Anchor,
    /// Headers with their `seq_sig` check.
    headers: BTreeMap<u64, (BlockHeader, bool)>,
    conflicts: BTreeMap<u64, ()>,
    /// `SeqEquivocation` evidence found and not yet taken (07 §10.1), at most
    /// [`EVIDENCE_KEPT`].
    evidence: Vec<vyrn_wire::msg::ctrl::SeqEquivocation>,
    roots: BTreeMap<u64, BlockRoots>,
    fault: Option<Fault>,
    /// Pending since, per proposal range `(first, last)`.
    since: BTreeMap<(u64, u64), u64>,
    counters: VerdictCounters,
    /// The first block refused for what only the sequencer could have caused — a header its
    /// `seq_sig` vouches for that does not chain, skips steps, or names another `order_root`
    /// than its frames decode to — not yet taken (07 §9.1: a suspicion).
    signed_contradiction: Option<(u64, Refusal)>,
}

/// Equivocation evidence held for the node at most (one is enough to depose the tenure).
pub const EVIDENCE_KEPT: usize = 4;

impl Verdicts {
    /// Take the first block refused since the last call for a contradiction the sequencer's own
    /// signature vouches for (`Prev`, `StepGap`, `OrderRoot`): 07 §9.1 makes it a suspicion.
    /// Not `SeqSig` (anyone can send a bad signature) nor `DataRoot` (a client's two copies can
    /// cause it, §5.6).
    pub fn take_contradiction(&mut self) -> Option<(u64, Refusal)> {
        self.signed_contradiction.take()
    }

    /// Take the `SeqEquivocation` evidence found since the last call (07 §10.1).
    pub fn take_evidence(&mut self) -> Vec<vyrn_wire::msg::ctrl::SeqEquivocation> {
        std::mem::take(&mut self.evidence)
    }

    /// Verdicts for the tenure whose sequencer signs with `seq_key`, of `epoch`, chained on
    /// `anchor`.
    pub fn new(seq_key: ed25519_dalek::VerifyingKey, epoch: u32, anchor: Anchor) -> Self {
        Verdicts {
            seq_key,
            epoch,
            anchor,
            headers: BTreeMap::new(),
            conflicts: BTreeMap::new(),
            evidence: Vec::new(),
            roots: BTreeMap::new(),
            fault: None,
            since: BTreeMap::new(),
            counters: VerdictCounters::default(),
            signed_contradiction: None,
        }
    }

    /// Counters.
    pub fn counters(&self) -> VerdictCounters {
        self.counters
    }

    /// A header off a HEADER frame (its signature checked once, here). True when this
    /// replica now holds it as the height's signed header (new, or replacing an unsigned one);
    /// only such a header goes on to the voter's ledger.
    ///
    /// `seq_sig` is checked before a header can do anything (security review F2): an unsigned
    /// header never makes a conflict (07 §10.1 needs two headers the sequencer signed), never
    /// displaces a signed one, and is kept at all only at a height no further than
    /// [`UNSIGNED_AHEAD_MAX`] past the newest signed header (where it stands for the height's
    /// `BadSig` refusal).
    pub fn on_header(&mut self, h: &BlockHeader) -> bool {
        self.on_header_checked(h, None)
    }

    /// [`Verdicts::on_header`] with the signature's check already made (`Some(ok)`), as a hold
    /// made it ([`crate::front::quarantine`]).
    pub fn on_header_checked(&mut self, h: &BlockHeader, sig_ok: Option<bool>) -> bool {
        self.counters.headers += 1;
        let held = self.headers.get(&h.height).copied();
        if held.is_some_and(|(old, _)| old == *h) {
            return false;
        }
        let ok = sig_ok.unwrap_or_else(|| h.verify(&self.seq_key));
        if !ok {
            self.counters.bad_sig += 1;
        }
        match held {
            // Two different headers the sequencer signed for one height: equivocation.
            Some((old, true)) if ok => {
                self.counters.conflicts += 1;
                self.conflicts.insert(h.height, ());
                // Self-verifying evidence (07 §10.1): both signed, one (epoch, height).
                if self.evidence.len() < EVIDENCE_KEPT && h.epoch == old.epoch {
                    self.evidence.push(vyrn_wire::msg::ctrl::SeqEquivocation {
                        epoch: old.epoch,
                        height: h.height,
                        header_a: old,
                        header_b: *h,
                    });
                }
                false
            }
            Some((_, true)) => false,
            // The signed header replaces an unsigned one (a forgery that came first).
            Some((_, false)) if ok => {
                self.headers.insert(h.height, (*h, true));
                true
            }
            Some((_, false)) => false,
            None if ok => {
                self.headers.insert(h.height, (*h, true));
                true
            }
            None => {
                let top = self
                    .headers
                    .iter()
                    .rev()
                    .find(|(_, (_, ok))| *ok)
                    .map_or(self.anchor.height, |(&k, _)| k);
                if h.height <= top.saturating_add(UNSIGNED_AHEAD_MAX) {
                    self.headers.insert(h.height, (*h, false));
                }
                false
            }
        }
    }

    /// The `order_root` of the header for `height` whose `seq_sig` checked (of this epoch, not a
    /// seal), if this replica holds one.
    pub fn signed_order_root(&self, height: u64) -> Option<Hash> {
        self.headers
            .get(&height)
            .filter(|(h, ok)| *ok && h.epoch == self.epoch && !h.is_seal())
            .map(|(h, _)| h.order_root)
    }

    /// A block the decoder completed, with its roots.
    pub fn on_block(&mut self, b: &BlockRoots) {
        self.roots.insert(b.height, *b);
    }

    /// The decoder's fault.
    pub fn on_fault(&mut self, f: &Fault) {
        self.fault.get_or_insert(*f);
    }

    /// Forget everything at or below `height` (final, journaled).
    pub fn forget_through(&mut self, height: u64) {
        if let Some((h, _)) = self.headers.get(&height) {
            self.anchor = Anchor {
                height,
                header_hash: h.header_hash(),
                last_step: h.last_step,
            };
        }
        self.headers = self.headers.split_off(&(height + 1));
        self.roots = self.roots.split_off(&(height + 1));
        self.conflicts = self.conflicts.split_off(&(height + 1));
        self.since.retain(|k, _| k.1 > height);
    }

    /// Block `height`'s verdict (07 §6.4 items 1–3 and 5).
    pub fn verdict(&self, height: u64, payloads: &impl PayloadView) -> Verdict {
        if let Some(f) = self.fault.filter(|f| f.height <= height) {
            return Verdict::Refused(Refusal::Decoder(f));
        }
        if self.conflicts.contains_key(&height) {
            return Verdict::Refused(Refusal::Conflict);
        }
        let Some(&(h, sig_ok)) = self.headers.get(&height) else {
            return Verdict::Pending(Pending::Header);
        };
        if h.epoch != self.epoch {
            return Verdict::Refused(Refusal::Epoch);
        }
        if h.is_seal() {
            return Verdict::Pending(Pending::Seal);
        }
        if !sig_ok {
            return Verdict::Refused(Refusal::SeqSig);
        }
        // Item 1: `prev` chains and the steps are contiguous.
        let (prev_hash, prev_last) = if height == self.anchor.height + 1 {
            (self.anchor.header_hash, self.anchor.last_step)
        } else {
            match self.headers.get(&(height - 1)) {
                Some((p, _)) => (p.header_hash(), p.last_step),
                None => return Verdict::Pending(Pending::PrevHeader),
            }
        };
        if h.prev != prev_hash {
            return Verdict::Refused(Refusal::Prev);
        }
        if h.first_step != prev_last + 1 {
            return Verdict::Refused(Refusal::StepGap {
                want: prev_last + 1,
                got: h.first_step,
            });
        }
        // Item 2: every ORDER frame through BlockMark(h), decoded with no error, same root.
        let Some(r) = self.roots.get(&height) else {
            return Verdict::Pending(Pending::Order);
        };
        if r.order_root != h.order_root {
            return Verdict::Refused(Refusal::OrderRoot);
        }
        // Item 3: every record resolved, mismatches settled, the replica's own data_root.
        match payloads.payloads(height) {
            Payloads::Pending { unresolved } => Verdict::Pending(Pending::Payloads { unresolved }),
            Payloads::Root(d) if d == h.data_root => Verdict::Ready,
            Payloads::Root(_) => Verdict::Refused(Refusal::DataRoot),
        }
    }

    /// `verify` for a proposal of heights `first ..= last` whose last header hash is
    /// `last_hash`, asked at `now` (07 §6.4: pending while incomplete, false at once on a
    /// contradiction, false after REP_VERIFY_WAIT_MS pending).
    pub fn verify(
        &mut self,
        first: u64,
        last: u64,
        last_hash: &Hash,
        now: u64,
        payloads: &impl PayloadView,
    ) -> VerifyOutcome {
        if first == 0 || last < first {
            return VerifyOutcome::False(first, None);
        }
        let mut pending = None;
        for h in first..=last {
            match self.verdict(h, payloads) {
                Verdict::Ready => {}
                Verdict::Refused(r) => {
                    self.counters.refused += 1;
                    self.since.remove(&(first, last));
                    if matches!(
                        r,
                        Refusal::Prev | Refusal::StepGap { .. } | Refusal::OrderRoot
                    ) {
                        self.signed_contradiction.get_or_insert((h, r));
                    }
                    return VerifyOutcome::False(h, Some(r));
                }
                Verdict::Pending(p) => {
                    pending.get_or_insert((h, p));
                }
            }
        }
        if let Some((h, p)) = pending {
            let t0 = *self.since.entry((first, last)).or_insert(now);
            if now.saturating_sub(t0) > REP_VERIFY_WAIT_MS * 1_000_000 {
                self.counters.refused += 1;
                self.since.remove(&(first, last));
                return VerifyOutcome::False(h, None);
            }
            return VerifyOutcome::Pending(h, p);
        }
        self.since.remove(&(first, last));
        match self.headers.get(&last) {
            Some((hdr, _)) if hdr.header_hash() == *last_hash => {
                self.counters.verified += 1;
                VerifyOutcome::True
            }
            _ => {
                self.counters.refused += 1;
                VerifyOutcome::False(last, Some(Refusal::Prev))
            }
        }
    }
}

/// The data side answers the verdict directly: a block is `Root` once every record is resolved
/// (its own `data_root`), else pending. ([`Verdicts::verify_with`] also runs the §5.6 row 2
/// HashList comparison before it calls a differing root a contradiction.)
impl PayloadView for DataSide {
    fn payloads(&self, height: u64) -> Payloads {
        match (self.block_payloads(height), self.data_root(height)) {
            (BlockPayloads::Ready, Some(r)) => Payloads::Root(r.data_root),
            (
                BlockPayloads::Pending {
                    missing,
                    unhashed,
                    mismatch,
                },
                _,
            ) => Payloads::Pending {
                unresolved: (missing + unhashed + mismatch) as u64,
            },
            _ => Payloads::Pending { unresolved: 0 },
        }
    }
}

/// Payload answers gathered for one `verify` (see [`Verdicts::verify_with`]).
struct Checked(BTreeMap<u64, Payloads>);

impl PayloadView for Checked {
    fn payloads(&self, height: u64) -> Payloads {
        self.0
            .get(&height)
            .copied()
            .unwrap_or(Payloads::Pending { unresolved: 0 })
    }
}

impl Verdicts {
    /// [`Verdicts::verify`] over the data side, with 07 §5.6 row 2: for each held header of the
    /// range the data side checks its own `data_root` against the header's
    /// (`DataSide::check_data_root`, which asks the order hasher for the block's HashList when
    /// they differ and compares it entry by entry): `Match` is the header's root, `Pending`
    /// keeps the vote waiting, `Contradiction` is a root that differs (the vote is false).
    pub fn verify_with(
        &mut self,
        first: u64,
        last: u64,
        last_hash: &Hash,
        now: u64,
        data: &mut DataSide,
        out: &mut impl DataOut,
    ) -> VerifyOutcome {
        let mut m = BTreeMap::new();
        for h in first..=last.min(first.saturating_add(REP_RANGE_MAX)) {
            let Some((hdr, _)) = self.headers.get(&h) else {
                continue;
            };
            let root = hdr.data_root;
            let p = match data.check_data_root(h, &root, out) {
                RootCheck::Match => Payloads::Root(root),
                RootCheck::Pending => match data.payloads(h) {
                    Payloads::Pending { unresolved } => Payloads::Pending { unresolved },
                    // Resolved, but the HashList comparison is still running.
                    Payloads::Root(_) => Payloads::Pending { unresolved: 0 },
                },
                RootCheck::Contradiction => {
                    let mut other = root;
                    other[0] ^= 0xFF;
                    Payloads::Root(other)
                }
            };
            m.insert(h, p);
        }
        self.verify(first, last, last_hash, now, &Checked(m))
    }
}

/// Heights one `verify_with` checks at most (a proposal holds at most
/// REP_MAX_HDRS_PER_PROPOSAL headers; this bounds the work of a bogus range).
const REP_RANGE_MAX: u64 = 4096;
