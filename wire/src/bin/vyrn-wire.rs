//! `vyrn-wire`: write seeded order-stream corpora and decode captures to JSON lines.
//!
//! ```text
//! vyrn-wire corpus --seed N --frames M --out FILE [--n-lanes N] [--streams 1|2] [--pool A-B]
//! vyrn-wire decode FILE [--n-lanes N] [--streams 1|2] [--pool A-B] [--all]
//! vyrn-wire check FILE [--key HEX] [--n-lanes N] [--streams 1|2] [--pool A-B]
//! ```
//! `check` decodes a capture and prints an operator summary: record counts, blocks, every
//! HEADER's order_root against the decoded one, seq_sig under `--key`, the header chain, and
//! decode throughput.
//! A capture file is a sequence of records `u32 LE length ‖ frame bytes`. `decode` prints one
//! JSON object per line (docs/wire.md lists the fields) and at most one `error` line, after
//! which it stops; exit status 0 when the capture decoded cleanly, 1 after a `REP_E_*` error,
//! 2 for bad arguments or an unreadable capture.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use vyrn_wire::corpus::{generate, read_capture, CorpusConfig};
use vyrn_wire::decoder::Awaiting;
use vyrn_wire::*;

const USAGE: &str = "usage:
  vyrn-wire corpus --seed N --frames M --out FILE [--n-lanes N] [--streams 1|2] [--pool A-B]
  vyrn-wire decode FILE [--n-lanes N] [--streams 1|2] [--pool A-B] [--all]
  vyrn-wire check FILE [--key HEX] [--n-lanes N] [--streams 1|2] [--pool A-B]

Defaults are REF's: 49 lanes, two substreams, pooled lanes 42-48 (none when --n-lanes is not 49),
MAX_SESSIONS_PER_LANE 4096.";

struct Args {
    verb: String,
    file: Option<String>,
    seed: u64,
    frames: usize,
    out: Option<String>,
    layout: Layout,
    all: bool,
    key: Option<[u8; 32]>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let verb = it.next().ok_or("missing verb")?;
    let mut a = Args {
        verb,
        file: None,
        seed: 1,
        frames: 1000,
        out: None,
        layout: Layout::reference(),
        all: false,
        key: None,
    };
    let mut n_lanes: Option<u8> = None;
    let mut streams: Option<u8> = None;
    let mut pool: Option<u64> = None;
    while let Some(x) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match x.as_str() {
            "--seed" => a.seed = val("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--frames" => {
                a.frames = val("--frames")?
                    .parse()
                    .map_err(|e| format!("--frames: {e}"))?
            }
            "--out" => a.out = Some(val("--out")?),
            "--n-lanes" => {
                n_lanes = Some(
                    val("--n-lanes")?
                        .parse()
                        .map_err(|e| format!("--n-lanes: {e}"))?,
                )
            }
            "--streams" => {
                streams = Some(
                    val("--streams")?
                        .parse()
                        .map_err(|e| format!("--streams: {e}"))?,
                )
            }
            "--pool" => {
                let v = val("--pool")?;
                let (lo, hi) = v.split_once('-').ok_or("--pool wants A-B")?;
                let lo: u32 = lo.parse().map_err(|e| format!("--pool: {e}"))?;
                let hi: u32 = hi.parse().map_err(|e| format!("--pool: {e}"))?;
                if lo > hi || hi > 63 {
                    return Err("--pool: A-B with A <= B <= 63".into());
                }
                pool = Some((lo..=hi).fold(0u64, |m, l| m | 1 << l));
            }
            "--all" => a.all = true,
            "--key" => {
                let v = val("--key")?;
                let b: Result<Vec<u8>, _> = (0..v.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(v.get(i..i + 2).unwrap_or("zz"), 16))
                    .collect();
                a.key = Some(
                    b.ok()
                        .and_then(|b| b.try_into().ok())
                        .ok_or("--key wants 64 hex digits")?,
                );
            }
            "-h" | "--help" => return Err(String::new()),
            f if !f.starts_with("--") && a.file.is_none() => a.file = Some(f.to_string()),
            f => return Err(format!("unknown argument {f}")),
        }
    }
    let n = n_lanes.unwrap_or(49);
    a.layout = Layout {
        n_lanes: n,
        n_streams: streams.unwrap_or(2),
        pool_mask: pool.unwrap_or(if n == 49 {
            Layout::reference().pool_mask
        } else {
            0
        }),
    };
    a.layout.validate()?;
    Ok(a)
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

fn list(v: &[u64]) -> String {
    let mut s = String::from("[");
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

struct Json<W: Write> {
    w: W,
    all: bool,
    io: Option<io::Error>,
}

impl<W: Write> Json<W> {
    fn line(&mut self, s: std::fmt::Arguments<'_>) {
        if self.io.is_none() {
            if let Err(e) = self.w.write_fmt(s).and_then(|_| self.w.write_all(b"\n")) {
                self.io = Some(e);
            }
        }
    }
}

impl<W: Write> Sink for Json<W> {
    fn pkt(&mut self, at: Pos, r: &PacketRecord) {
        self.line(format_args!(
            r#"{{"type":"pkt","stream":{},"frame_seq":{},"lane":{},"count":{},"flags":{},"session":{},"pkt_seq":{},"rx_ts":{},"first_lane_seq":{},"fills_applied":{}}}"#,
            at.stream, at.frame_seq, r.lane, r.count, r.flags, r.session, r.pkt_seq, r.rx_ts, r.first_lane_seq, r.fills_applied
        ));
    }
    fn take(&mut self, at: Pos, t: &AcctTake) {
        self.line(format_args!(
            r#"{{"type":"take","stream":{},"frame_seq":{},"lane":{},"account":{},"ver":{}}}"#,
            at.stream, at.frame_seq, t.lane, t.account, t.ver
        ));
    }
    fn bind(&mut self, at: Pos, b: &SessionBind) {
        self.line(format_args!(
            r#"{{"type":"bind","stream":{},"frame_seq":{},"lane":{},"slot":{},"session":{},"next_pkt_seq":{}}}"#,
            at.stream, at.frame_seq, b.lane, b.slot, b.session, b.next_pkt_seq
        ));
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        self.line(format_args!(
            r#"{{"type":"step","step":{},"kind":"{}","src_lane":{},"src_lane_seq":{},"cut":{},"payload":"{}"}}"#,
            s.step,
            s.kind.name(),
            s.src_lane,
            s.src_lane_seq,
            list(cut),
            hex(payload)
        ));
    }
    fn mark(&mut self, at: Pos, m: &BlockMark, lane_bounds: &[u64]) {
        self.line(format_args!(
            r#"{{"type":"mark","stream":{},"height":{},"last_step":{},"lane_bounds":{}}}"#,
            at.stream,
            m.height,
            m.last_step,
            list(lane_bounds)
        ));
    }
    fn block(&mut self, b: &BlockRoots) {
        self.line(format_args!(
            r#"{{"type":"block","height":{},"order_root":"{}","order_root_a":"{}","order_root_b":"{}"}}"#,
            b.height,
            hex(&b.order_root),
            hex(&b.order_root_a),
            hex(&b.order_root_b)
        ));
    }
    fn hash(&mut self, at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {
        if self.all {
            self.line(format_args!(
                r#"{{"type":"hash","stream":{},"frame_seq":{},"lane":{},"session":{},"pkt_seq":{},"first_lane_seq":{},"pkt_hash":"{:016x}"}}"#,
                at.stream, at.frame_seq, lane, rec.session, rec.pkt_seq, rec.first_lane_seq, pkt_hash
            ));
        }
    }
    fn header(&mut self, at: Pos, h: &BlockHeader) {
        if self.all {
            self.line(format_args!(
                r#"{{"type":"header","frame_seq":{},"height":{},"first_step":{},"last_step":{},"order_root":"{}","data_root":"{}","header_hash":"{}"}}"#,
                at.frame_seq,
                h.height,
                h.first_step,
                h.last_step,
                hex(&h.order_root),
                hex(&h.data_root),
                hex(&h.header_hash())
            ));
        }
    }
    fn heartbeat(&mut self, at: Pos, hb: &Heartbeat) {
        if self.all {
            self.line(format_args!(
                r#"{{"type":"heartbeat","stream":{},"frame_seq":{},"last_step":{},"last_height":{},"ptp_now":{}}}"#,
                at.stream, at.frame_seq, hb.last_step, hb.last_height, hb.ptp_now
            ));
        }
    }
}

fn corpus(a: &Args) -> Result<ExitCode, String> {
    let out = a.out.as_ref().ok_or("corpus needs --out FILE")?;
    let mut cfg = CorpusConfig::reference(a.seed, a.frames);
    cfg.layout = a.layout;
    let c = generate(&cfg);
    std::fs::write(out, c.capture()).map_err(|e| format!("{out}: {e}"))?;
    let s = c.stats;
    eprintln!(
        "wrote {out}: {} frames, {} packets ({} shed, {} advance, {} takes, {} binds), {} steps ({} spanning), {} blocks; seq key {}",
        s.frames,
        s.pkts,
        s.shed,
        s.advances,
        s.takes,
        s.binds,
        s.steps,
        s.spanning,
        s.blocks,
        hex(&c.seq_pubkey)
    );
    Ok(ExitCode::SUCCESS)
}

fn decode(a: &Args) -> Result<ExitCode, String> {
    let path = a.file.as_ref().ok_or("decode needs FILE")?;
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let frames = read_capture(&bytes)
        .map_err(|off| format!("{path}: capture record at byte {off} runs past the end"))?;
    let mut dec = DecState::new(a.layout)?;
    let stdout = io::stdout();
    let mut sink = Json {
        w: BufWriter::new(stdout.lock()),
        all: a.all,
        io: None,
    };
    let mut code = ExitCode::SUCCESS;
    for f in frames {
        if let Err(e) = dec.on_frame(f, 0, &mut sink) {
            sink.line(format_args!(
                r#"{{"type":"error","code":"{}","stream":{},"frame_seq":{},"epoch":{},"tenure":{},"detail":"{}"}}"#,
                e.code.code(),
                e.stream,
                e.frame_seq,
                e.epoch,
                e.tenure,
                e.detail
            ));
            code = ExitCode::from(1);
            break;
        }
    }
    let _ = sink.w.flush();
    if let Some(e) = sink.io {
        if e.kind() != io::ErrorKind::BrokenPipe {
            return Err(format!("stdout: {e}"));
        }
    }
    Ok(code)
}

#[derive(Default)]
struct Check {
    pkts: u64,
    advances: u64,
    shed: u64,
    takes: u64,
    binds: u64,
    steps: u64,
    spanning: u64,
    hashes: u64,
    heartbeats: u64,
    blocks: std::collections::HashMap<u64, BlockRoots>,
    headers: Vec<BlockHeader>,
}

impl Sink for Check {
    fn pkt(&mut self, _: Pos, r: &PacketRecord) {
        if r.is_advance() {
            self.advances += 1;
        } else {
            self.pkts += 1;
        }
        self.shed += r.is_shed() as u64;
    }
    fn take(&mut self, _: Pos, _: &AcctTake) {
        self.takes += 1;
    }
    fn bind(&mut self, _: Pos, _: &SessionBind) {
        self.binds += 1;
    }
    fn step(&mut self, s: &Step, _: &[u64], _: &[u8]) {
        self.steps += 1;
        self.spanning += s.spans as u64;
    }
    fn block(&mut self, b: &BlockRoots) {
        self.blocks.insert(b.height, *b);
    }
    fn hash(&mut self, _: Pos, _: u8, _: &Awaiting, _: u64) {
        self.hashes += 1;
    }
    fn header(&mut self, _: Pos, h: &BlockHeader) {
        self.headers.push(*h);
    }
    fn heartbeat(&mut self, _: Pos, _: &Heartbeat) {
        self.heartbeats += 1;
    }
}

fn check(a: &Args) -> Result<ExitCode, String> {
    let path = a.file.as_ref().ok_or("check needs FILE")?;
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let frames = read_capture(&bytes)
        .map_err(|off| format!("{path}: capture record at byte {off} runs past the end"))?;
    let mut dec = DecState::new(a.layout)?;
    let mut c = Check::default();
    let t = std::time::Instant::now();
    let mut err = None;
    for f in &frames {
        if let Err(e) = dec.on_frame(f, 0, &mut c) {
            err = Some(e);
            break;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let key = a
        .key
        .and_then(|k| ed25519_dalek::VerifyingKey::from_bytes(&k).ok());
    let (mut root_ok, mut root_bad, mut root_pending, mut sig_ok, mut sig_bad, mut chain_bad) =
        (0, 0, 0, 0, 0, 0);
    let mut prev: Option<BlockHeader> = None;
    for h in &c.headers {
        match c.blocks.get(&h.height) {
            Some(b) if b.order_root == h.order_root => root_ok += 1,
            Some(_) => root_bad += 1,
            None => root_pending += 1,
        }
        if let Some(k) = &key {
            if h.verify(k) {
                sig_ok += 1;
            } else {
                sig_bad += 1;
            }
        }
        if let Some(p) = prev {
            if h.prev != p.header_hash()
                || h.first_step != p.last_step + 1
                || h.height != p.height + 1
            {
                chain_bad += 1;
            }
        }
        prev = Some(*h);
    }
    let recs = c.pkts + c.advances + c.takes + c.steps;
    let l = a.layout;
    println!(
        "capture      {path}: {} frames, {} bytes",
        frames.len(),
        bytes.len()
    );
    println!(
        "layout       {} lanes, {} substream(s), pool mask {:#x}",
        l.n_lanes, l.n_streams, l.pool_mask
    );
    println!(
        "records      {} packets ({} shed), {} advance, {} takes, {} binds, {} steps ({} spanning), {} hashes, {} heartbeats",
        c.pkts, c.shed, c.advances, c.takes, c.binds, c.steps, c.spanning, c.hashes, c.heartbeats
    );
    println!(
        "blocks       {} decoded; headers {}: order_root ok {root_ok}, mismatch {root_bad}, block not yet complete {root_pending}; chain breaks {chain_bad}",
        c.blocks.len(),
        c.headers.len()
    );
    match key {
        Some(_) => println!("seq_sig      ok {sig_ok}, bad {sig_bad}"),
        None => println!("seq_sig      not checked (no --key)"),
    }
    println!(
        "decode       {:.3} s, {:.1} M records/s, {:.1} ns/record (one thread, counting sink; includes first-touch of the slot tables)",
        secs,
        recs as f64 / secs / 1e6,
        secs * 1e9 / recs.max(1) as f64
    );
    let d = dec.counters();
    println!(
        "counters     frames {} dup_frames {} errors {:?}",
        d.frames, d.dup_frames, d.errors
    );
    match err {
        Some(e) => {
            println!("RESULT       FAULT {e}");
            Ok(ExitCode::from(1))
        }
        None if root_bad + sig_bad + chain_bad > 0 => {
            println!("RESULT       FAULT header check failed");
            Ok(ExitCode::from(1))
        }
        None => {
            println!("RESULT       OK");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    let r = parse_args().and_then(|a| match a.verb.as_str() {
        "corpus" => corpus(&a),
        "decode" => decode(&a),
        "check" => check(&a),
        v => Err(format!("unknown verb {v}")),
    });
    match r {
        Ok(c) => c,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("vyrn-wire: {e}");
            }
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
