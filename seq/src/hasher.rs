//! The order hasher (07 §4.6): full hashes from the lanes, closed block halves from the stream
//! cores; when a block's every full hash is in, its data roots, the header, `seq_sig` by the
//! sliced signer; each block's full-hash lists kept REP_SEQ_HASHLIST_MS for HashListReq.

use crate::mem::HasherMem;
use crate::shm::{HashLists, SeqConfig};
use std::collections::VecDeque;

/// Signer slices the order hasher runs per poll: each is a few tens of ns (`signer.rs`), so a
/// poll signs for about 2 µs at most; a signature is 768 slices.
const SIGN_SLICES_PER_POLL: usize = 64;

/// The order hasher (07 §4.6): full hashes from the lanes, closed block halves from the stream
/// cores; when a block's every full hash is in, its data roots, the header, `seq_sig`.
#[derive(Debug)]
pub(crate) struct OrderHasher {
    fulls: std::collections::HashMap<(u8, u64), [u8; 32]>,
    prev: [u8; 32],
    key: ed25519_dalek::SigningKey,
    signer: crate::signer::SlicedSigner,
    /// Headers with roots, waiting for (or in) the sliced signer, in height order.
    unsigned: VecDeque<vyrn_wire::header::BlockHeader>,
    epoch: u32,
    book: u16,
    n_streams: u8,
    /// Each block's full-hash list per substream in O-order (the leaves of `data_root_H`),
    /// kept REP_SEQ_HASHLIST_MS for HashListReq (07 §4.6, §5.6): (height, made at, lists).
    lists: VecDeque<(u64, u64, HashLists)>,
}

impl OrderHasher {
    /// The hasher of a box at the start of a tenure whose chain goes on from `prev`, signing
    /// with `signer` (built for `cfg.seq_key`: its tables take ~3 ms, so a warm standby builds
    /// them at start, 07 §9.5). The key is expanded once, never written.
    pub(crate) fn with_signer(
        cfg: &SeqConfig,
        prev: [u8; 32],
        signer: crate::signer::SlicedSigner,
    ) -> Self {
        OrderHasher {
            fulls: std::collections::HashMap::new(),
            prev,
            key: ed25519_dalek::SigningKey::from_bytes(&cfg.seq_key),
            signer,
            unsigned: VecDeque::new(),
            epoch: cfg.epoch,
            book: cfg.engine.book,
            n_streams: cfg.engine.layout.n_streams,
            lists: VecDeque::new(),
        }
    }

    /// Block `height`'s full-hash lists, while kept (REP_SEQ_HASHLIST_MS).
    pub(crate) fn hash_list(&self, height: u64) -> Option<&HashLists> {
        self.lists
            .iter()
            .find(|(h, _, _)| *h == height)
            .map(|(_, _, l)| l)
    }

    /// The sequencer's verifying key.
    pub(crate) fn public(&self) -> ed25519_dalek::VerifyingKey {
        self.key.verifying_key()
    }

    pub(crate) fn poll(&mut self, now: u64, sh: &mut impl HasherMem) -> bool {
        let mut busy = false;
        let keep = vyrn_wire::consts::REP_SEQ_HASHLIST_MS * 1_000_000;
        while self
            .lists
            .front()
            .is_some_and(|l| now.saturating_sub(l.1) > keep)
        {
            self.lists.pop_front();
        }
        while let Some((l, f, h)) = sh.hash32_pop() {
            self.fulls.insert((l, f), h);
            busy = true;
        }
        loop {
            let n = self.n_streams as usize;
            let ready = (0..n).all(|h| {
                sh.closed_peek(h)
                    .is_some_and(|c| c.recs.iter().all(|k| self.fulls.contains_key(k)))
            });
            if !ready {
                break;
            }
            let mut roots = [vyrn_wire::header::empty_root(); 2];
            let mut droots = [vyrn_wire::header::empty_root(); 2];
            let mut first = None;
            let mut lists: HashLists = Default::default();
            for h in 0..n {
                let c = sh.closed_pop(h).expect("checked");
                let mut d = vyrn_wire::header::DataRootHasher::default();
                for k in &c.recs {
                    if let Some(full) = self.fulls.remove(k) {
                        d.push(&full);
                        lists[h].push(full);
                    }
                }
                roots[h] = c.order_root;
                droots[h] = d.finish();
                first.get_or_insert((c.height, c.first_step, c.last_step));
            }
            let (height, first_step, last_step) = first.expect("one stream");
            self.lists.push_back((height, now, lists));
            let hdr = vyrn_wire::header::BlockHeader {
                height,
                epoch: self.epoch,
                book: self.book,
                first_step,
                last_step,
                prev: self.prev,
                order_root: vyrn_wire::header::order_root(&roots[0], &roots[1]),
                data_root: vyrn_wire::header::data_root(&droots[0], &droots[1]),
                seq_sig: [0; 64],
            };
            // header_hash covers bytes 0..126, not seq_sig: the chain does not wait for it.
            self.prev = hdr.header_hash();
            self.unsigned.push_back(hdr);
            busy = true;
        }
        // seq_sig by the sliced signer (07 §6.2): a bounded number of slices per poll, so the
        // tile never holds its thread for a whole signature.
        for _ in 0..SIGN_SLICES_PER_POLL {
            let Some(h) = self.unsigned.front() else {
                break;
            };
            if !self.signer.busy() && !self.signer.start(&h.sig_message()) {
                break;
            }
            busy = true;
            if let Some(sig) = self.signer.step() {
                let mut h = self.unsigned.pop_front().expect("front");
                h.seq_sig = sig;
                self.signer.reset();
                sh.header_push(h);
            }
        }
        busy
    }
}
