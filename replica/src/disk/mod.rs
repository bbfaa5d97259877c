//! What the replica keeps (07 §7.5, §8): the block journal with its cert journal, indexes and
//! recovery ([`journal`]), the order journal of raw frames ([`order_journal`]), block records
//! (07 §8.2, [`record`]), snapshots ([`snapshots`]) and the in-memory frame store that serves
//! peers' repair requests ([`frame_store`]). Each format is read and written here only.

pub mod frame_store;
pub mod journal;
pub mod order_journal;
pub mod record;
pub mod snapshots;
