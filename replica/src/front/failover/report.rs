//! This replica's TailReport (07 §9.3), built from its order RX.

use ed25519_dalek::SigningKey;
use vyrn_wire::msg::ctrl::TailReport;

/// `direct` bytes sent per substream at most (16,384 frames): the report rides in one sealed
/// `Silence` datagram within a replica's 9,216-byte receive slot (two bitmaps, 64 `extra`
/// ranges each and the envelope: under 6.5 KB). Frames past it get no bit, read as 0 (not
/// claimed direct).
pub const DIRECT_BYTES_SENT: usize = 2048;

use crate::front::order_rx::OrderRx;

/// What the order RX does not know of a TailReport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportInput {
    /// Epoch.
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// This replica's voter index (the standby: its sequencer index).
    pub reporter: u8,
    /// `H_i`: the highest height whose header this replica holds with a valid `seq_sig`,
    /// together with every ORDER frame through its BlockMark.
    pub h_i: u64,
    /// Per substream, the frame_seq of `BlockMark(H_i)` (0 before the first block): `direct`
    /// starts above it.
    pub marks: [u64; 2],
    /// Replay lag, µs.
    pub replay_lag_us: u32,
    /// `promotable` (07 §9.5; a voter never is).
    pub promotable: bool,
}

/// The TailReport of `rx`'s tail with `inp`, signed by `key` (a voter's vote key, the
/// standby's `seq_key`). `direct`, per substream, covers `(mark, F_i]` then the `extra` frames
/// in order, LSB first: 1 where a sequencer path brought the frame, 0 where a repair did or the
/// frame is older than the loop's per-path window (the weaker claim); at most
/// [`DIRECT_BYTES_SENT`] bytes each. `t_last_rx` is the order RX's clock (07 names PTP time).
pub fn tail_report(rx: &OrderRx, inp: &ReportInput, key: &SigningKey) -> TailReport {
    let mut f_i = [0u64; 2];
    let mut extra: [Vec<_>; 2] = Default::default();
    let mut direct: [Vec<u8>; 2] = Default::default();
    for st in 0..2u8 {
        let s = st as usize;
        let (f, x) = rx.holdings(st);
        let from = inp.marks[s].saturating_add(1);
        let frames = (from..=f).chain(x.iter().flat_map(|r| r.a..=r.b));
        let mut bits: Vec<u8> = Vec::new();
        for (i, k) in frames.enumerate() {
            if i / 8 >= DIRECT_BYTES_SENT {
                break;
            }
            if i % 8 == 0 {
                bits.push(0);
            }
            if rx.direct(st, k) == Some(true) {
                *bits.last_mut().expect("pushed above") |= 1 << (i % 8);
            }
        }
        f_i[s] = f;
        extra[s] = x;
        direct[s] = bits;
    }
    let mut r = TailReport {
        epoch: inp.epoch,
        tenure: inp.tenure,
        reporter: inp.reporter,
        h_i: inp.h_i,
        f_i,
        extra,
        direct,
        t_last_rx: rx.last_rx().unwrap_or(0),
        replay_lag_us: inp.replay_lag_us,
        promotable: inp.promotable,
        sig: [0; 64],
    };
    r.sign(key);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_wire::msg::ctrl::{FrameRange, Silence, SilenceReason, TAIL_EXTRA_MAX};

    /// The largest report this replica sends — 64 `extra` ranges and a full `direct` bitmap on
    /// both substreams — fits one sealed datagram in a replica's 9,216-byte receive slot.
    #[test]
    fn the_largest_silence_fits_one_receive_slot() {
        let ranges: Vec<FrameRange> = (0..TAIL_EXTRA_MAX as u64)
            .map(|i| FrameRange {
                a: 10 + 3 * i,
                b: 11 + 3 * i,
            })
            .collect();
        let mut r = TailReport {
            epoch: u32::MAX,
            tenure: 255,
            reporter: 3,
            h_i: u64::MAX,
            f_i: [8, 8],
            extra: [ranges.clone(), ranges],
            direct: [vec![0xFF; DIRECT_BYTES_SENT], vec![0xFF; DIRECT_BYTES_SENT]],
            t_last_rx: u64::MAX,
            replay_lag_us: u32::MAX,
            promotable: true,
            sig: [0; 64],
        };
        r.sign(&SigningKey::from_bytes(&[1; 32]));
        let m = Silence {
            epoch: u32::MAX,
            tenure: 255,
            seq: 0,
            reason: SilenceReason::Silence,
            report: r,
        };
        let mut b = Vec::new();
        vyrn_wire::msg::ctrl::CtrlMsg::Silence(Box::new(m))
            .encode(&mut b)
            .unwrap();
        // The member envelope adds its header and tag.
        let sealed = b.len() + vyrn_wire::msg::seal::SEAL_OVERHEAD;
        assert!(sealed <= 9216, "{sealed} bytes");
    }
}
