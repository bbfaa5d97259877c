//! The member envelope (`msg::seal`): property tests. Any body, sender and
//! number seal and open to the same body; every single-bit change is refused; an envelope opens
//! once; numbers delivered out of order within the window open once each.

use proptest::prelude::*;
use vyrn_wire::msg::seal::{seal_into, LinkKey, Opener, SealErr, REPLAY_WINDOW};

fn sealed(key: &LinkKey, epoch: u32, from: u8, seq: u64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    assert!(seal_into(&mut out, key, epoch, from, seq, |o| {
        o.extend_from_slice(body);
        true
    }));
    out
}

proptest! {
    #[test]
    fn seal_and_open_round_trip_and_any_flipped_bit_is_refused(
        k in any::<[u8; 32]>(),
        epoch in any::<u32>(),
        from in any::<u8>(),
        seq in 1u64..u64::MAX,
        body in proptest::collection::vec(any::<u8>(), 0..300),
        bit in any::<usize>(),
    ) {
        let key = LinkKey::from_bytes(k);
        let m = sealed(&key, epoch, from, seq, &body);
        let mut o = Opener::new(epoch);
        o.add(from, key.clone());
        prop_assert_eq!(o.open(&m), Ok((from, &body[..])));
        prop_assert_eq!(o.open(&m), Err(SealErr::Replayed));
        let mut x = m.clone();
        let b = bit % (x.len() * 8);
        x[b / 8] ^= 1 << (b % 8);
        let mut o = Opener::new(epoch);
        o.add(from, key.clone());
        o.add(from ^ 0xFF, key);
        prop_assert!(o.open(&x).is_err());
    }

    #[test]
    fn reordered_numbers_within_the_window_open_once_each(
        mut order in Just((0..64u64).collect::<Vec<u64>>()).prop_shuffle(),
        base in 1u64..1 << 60,
    ) {
        let key = LinkKey::from_bytes([9; 32]);
        let mut o = Opener::new(3);
        o.add(1, key.clone());
        order.push(order[0]);
        let mut opened = 0;
        for &d in &order {
            if o.open(&sealed(&key, 3, 1, base + d, b"x")).is_ok() {
                opened += 1;
            }
        }
        prop_assert_eq!(opened, 64);
        prop_assert!(o.open(&sealed(&key, 3, 1, base + 63 + REPLAY_WINDOW, b"x")).is_ok());
        let old = sealed(&key, 3, 1, base + 63, b"x");
        prop_assert_eq!(o.open(&old), Err(SealErr::Replayed));
    }
}
