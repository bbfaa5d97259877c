//! The redirects a data box relays to its clients: `DataRedirect` (0x10, 07 §5.7) and
//! `SeqChange` (0x11, 07 §9.5).

use super::{ty, Body, Malformed, Reader};
use crate::msg::consensus::NEXT_SEQ_NONE;
use crate::msg::{finish, put_u32, put_u64, Addr18};

/// `DataRedirect` (07 §5.7), replica → data box: tell `session` to resend copy 2 from
/// `resend_from` to data box `to` instead of `from`. The data box relays it to the client as the
/// `DataRedirect` response record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DataRedirect {
    /// The failed data home `d`.
    pub from: u8,
    /// The backup data home `d'`; differs from `from`.
    pub to: u8,
    /// SessionId.
    pub session: u32,
    /// Lowest pkt_seq of the session that no replica has resolved.
    pub resend_from: u32,
}

impl Body for DataRedirect {
    fn check(&self) -> Result<(), Malformed> {
        if self.from == self.to {
            return Err(Malformed::BadValue);
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        out.push(self.from);
        out.push(self.to);
        put_u32(out, self.session);
        put_u32(out, self.resend_from);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(DataRedirect {
            from: r.u8()?,
            to: r.u8()?,
            session: r.u32_le()?,
            resend_from: r.u32_le()?,
        })
    }
}
ctrl_codec!(DataRedirect, ty::DATA_REDIRECT);

/// `SeqChange` (07 §9.5), to data boxes, which relay it to every session as the `SeqChange`
/// response record, with a `TenureEnd` record from the seal's height and last step.
/// `new_seq` = 0xFF means none; `addr` is then all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqChange {
    /// Epoch.
    pub epoch: u32,
    /// The new sequencer's tenure.
    pub tenure: u8,
    /// Sequencer index of the new sequencer, or 0xFF (none: the book stays halted).
    pub new_seq: u8,
    /// Its client address.
    pub addr: Addr18,
    /// The final seal's block height: the tenure before `tenure` ended there (07 §9.4).
    pub seal_height: u64,
    /// The seal block's last step: that tenure's responses at later steps were reverted
    /// (07 §9.6).
    pub seal_last_step: u64,
}

impl Body for SeqChange {
    fn check(&self) -> Result<(), Malformed> {
        if self.new_seq == NEXT_SEQ_NONE && self.addr != [0u8; 18] {
            return Err(Malformed::Reserved);
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        out.push(self.tenure);
        out.push(self.new_seq);
        out.extend_from_slice(&self.addr);
        put_u64(out, self.seal_height);
        put_u64(out, self.seal_last_step);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(SeqChange {
            epoch: r.u32_le()?,
            tenure: r.u8()?,
            new_seq: r.u8()?,
            addr: r.array()?,
            seal_height: r.u64_le()?,
            seal_last_step: r.u64_le()?,
        })
    }
}
ctrl_codec!(SeqChange, ty::SEQ_CHANGE);
