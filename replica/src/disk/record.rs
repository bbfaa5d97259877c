//! A verified block as a journal record (07 §8.2 `REP_BlockRecord`), built from what the replica
//! decoded and joined: the header, the block's ORDER section bytes, its PacketRecords'
//! `pkt_hash`es and packets in O-order.
//!
//! **Decision (07 §8.2 leaves the layout of the order section open with two substreams):** the
//! record's order bytes are `len_A u32 LE ‖ A ‖ B`, where A and B are exactly the ORDER section
//! bytes each substream's `order_root_H(h)` hashes (07 §6.1). So a record read back can be
//! checked against its own header — `order_root(BLAKE3(A), BLAKE3(B)) == header.order_root` —
//! with nothing else ([`order_root_of`]); a consumer box's single substream has B empty.

use vyrn_wire::header::{order_root, BlockHeader, Hash};
use vyrn_wire::msg::journal::RepBlockRecord;

/// The order section of a record: `len_A u32 LE ‖ A ‖ B`.
pub fn order_section(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    let la = u32::try_from(a.len()).ok()?;
    let mut v = Vec::with_capacity(4 + a.len() + b.len());
    v.extend_from_slice(&la.to_le_bytes());
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    Some(v)
}

/// The two substreams' bytes of an order section; `None` if `len_A` runs past the end.
pub fn split_order(order: &[u8]) -> Option<(&[u8], &[u8])> {
    let la = u32::from_le_bytes(order.get(..4)?.try_into().ok()?) as usize;
    let rest = order.get(4..)?;
    Some((rest.get(..la)?, rest.get(la..)?))
}

/// `order_root` of an order section (07 §6.1); `None` if the section does not split.
pub fn order_root_of(order: &[u8]) -> Option<Hash> {
    let (a, b) = split_order(order)?;
    Some(order_root(
        blake3::hash(a).as_bytes(),
        blake3::hash(b).as_bytes(),
    ))
}

/// Whether a record's order bytes are its header's (`order_root` recomputed).
pub fn order_matches(r: &RepBlockRecord) -> bool {
    order_root_of(&r.order) == Some(r.header.order_root)
}

/// A normal block's record: the header, the substreams' ORDER bytes, and the packets in O-order
/// given as `(pkt_hash, packet)` by `packets` (the data side's `block_packets`).
pub fn block_record(
    tenure: u8,
    header: BlockHeader,
    a: &[u8],
    b: &[u8],
    unavail: Vec<vyrn_wire::msg::PktKey>,
    packets: impl FnOnce(&mut dyn FnMut(u64, &[u8])) -> bool,
) -> Option<RepBlockRecord> {
    let mut pkt_hashes = Vec::new();
    let mut data = Vec::new();
    let ok = packets(&mut |h, p| {
        pkt_hashes.push(h);
        data.extend_from_slice(p);
    });
    ok.then_some(())?;
    Some(RepBlockRecord {
        tenure,
        header,
        order: order_section(a, b)?,
        pkt_hashes,
        data,
        unavail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_section_splits_back_and_its_root_is_the_substreams_pair_root() {
        let (a, b) = (b"substream A bytes".as_slice(), b"B".as_slice());
        let o = order_section(a, b).unwrap();
        assert_eq!(split_order(&o), Some((a, b)));
        let want = order_root(blake3::hash(a).as_bytes(), blake3::hash(b).as_bytes());
        assert_eq!(order_root_of(&o), Some(want));
        // Moving one byte across the split changes the root: the split is part of what is
        // checked, not just the bytes.
        let moved = order_section(&a[..a.len() - 1], b"sB").unwrap();
        assert_ne!(order_root_of(&moved), Some(want));
        // A length past the end, or no length at all, does not split.
        let mut bad = o.clone();
        bad[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(split_order(&bad), None);
        assert_eq!(split_order(&o[..3]), None);
        assert_eq!(order_root_of(&[]), None);
    }

    #[test]
    fn a_record_is_built_only_when_every_packet_is_there() {
        let h = BlockHeader {
            height: 1,
            epoch: 1,
            book: 1,
            first_step: 1,
            last_step: 0,
            prev: [0; 32],
            order_root: order_root(blake3::hash(b"a").as_bytes(), blake3::hash(b"").as_bytes()),
            data_root: [0; 32],
            seq_sig: [1; 64],
        };
        let r = block_record(0, h, b"a", b"", vec![], |f| {
            f(7, &[1, 2, 3]);
            true
        })
        .unwrap();
        assert!(order_matches(&r));
        assert_eq!(r.pkt_hashes, vec![7]);
        assert_eq!(r.data, vec![1, 2, 3]);
        assert!(block_record(0, h, b"a", b"", vec![], |_| false).is_none());
        let other = block_record(0, h, b"x", b"", vec![], |_| true).unwrap();
        assert!(!order_matches(&other));
    }
}
