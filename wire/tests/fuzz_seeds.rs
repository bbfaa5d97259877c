//! Seed corpora of the message fuzz targets: valid inputs, so libFuzzer starts inside the
//! formats. Each seed must parse; `VYRN_BLESS=1` regenerates them from the encoders.

use std::path::PathBuf;
use vyrn_wire::msg::client::{Msg, MsgType, Record, Request, RequestPacket, Response, Side};
use vyrn_wire::msg::consensus::{ProposalKind, RepProposal};
use vyrn_wire::msg::ctrl::{CtrlMsg, Nack, RepAck};
use vyrn_wire::msg::data::{DataFrame, DataFrameBuilder, DataKind};

/// The key the fuzz targets use (`fuzz/fuzz_targets/client_packet.rs`).
const KEY: [u8; 16] = *b"fuzz-key-0123456";

fn request(pkt_seq: u32, resend: bool, n: usize) -> Vec<u8> {
    let msgs = (0..n)
        .map(|i| Msg {
            kind: if i % 3 == 2 {
                MsgType::Cancel
            } else {
                MsgType::NewGtc
            },
            side: if i % 2 == 0 { Side::Buy } else { Side::Sell },
            tick: if i % 3 == 2 { 0 } else { 1000 + i as i32 },
            qty: if i % 3 == 2 { 0 } else { 10 },
            client_tag: 7 + i as u32,
        })
        .collect();
    RequestPacket {
        book: 1,
        resend,
        session: 42,
        pkt_seq,
        msgs,
    }
    .to_bytes(&KEY)
    .unwrap()
}

fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut v = Vec::new();
    v.push(("client_packet", "request-1", request(1, false, 1)));
    v.push(("client_packet", "request-10-resend", request(9, true, 10)));
    let mut resp = Vec::new();
    Response {
        session: 42,
        echo_pkt_seq: 1,
        resp_seq: 1,
        resend: false,
        records: vec![Record::Ack {
            msg_index: 0,
            client_tag: 7,
        }],
    }
    .encode(&KEY, &mut resp)
    .unwrap();
    v.push(("client_packet", "response-ack", resp));
    let mut b = DataFrameBuilder::new(DataKind::Data, 1, 1, 1, 0);
    b.push(&request(1, false, 3)).unwrap();
    b.push(&request(2, false, 10)).unwrap();
    v.push(("data_frame", "data-2", b.as_bytes().to_vec()));
    let hb = DataFrameBuilder::new(DataKind::DataHb, 1, 1, 2, 0);
    v.push(("data_frame", "data-hb", hb.as_bytes().to_vec()));
    let ack = RepAck {
        epoch: 1,
        tenure: 0,
        contiguous_frame_seq: [10, 12],
        path_mask: 3,
    };
    v.push(("ctrl", "rep-ack", ack.to_bytes().unwrap()));
    let nack = Nack {
        epoch: 1,
        tenure: 0,
        stream: 1,
        from_seq: 5,
        to_seq: 9,
    };
    v.push(("ctrl", "nack", nack.to_bytes().unwrap()));
    let p = RepProposal {
        kind: ProposalKind::Headers,
        epoch: 1,
        first_height: 10,
        last_height: 12,
        last_hash: [3; 32],
        excl_root: [0; 32],
    };
    v.push(("ctrl", "proposal", p.to_bytes().to_vec()));
    v
}

fn dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

#[test]
fn seeds_are_valid_and_checked_in() {
    let bless = std::env::var_os("VYRN_BLESS").is_some();
    for (target, name, bytes) in seeds() {
        match target {
            "client_packet" if name.starts_with("request") => {
                Request::parse_verified(&bytes, &KEY).unwrap();
            }
            "client_packet" => {
                Response::parse(&bytes, &KEY).unwrap();
            }
            "data_frame" => {
                DataFrame::parse(&bytes).unwrap();
            }
            "ctrl" if name == "proposal" => {
                RepProposal::parse(&bytes).unwrap();
            }
            _ => {
                CtrlMsg::parse(&bytes).unwrap();
            }
        }
        let path = dir(target).join(name);
        if bless {
            std::fs::create_dir_all(dir(target)).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        } else {
            let on_disk = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (VYRN_BLESS=1)", path.display()));
            assert_eq!(on_disk, bytes, "{}", path.display());
        }
    }
}
