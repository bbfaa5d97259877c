//! Messages outside the order stream: data frames, consensus payloads and certificates, the
//! block journal record, control messages and client packets.
