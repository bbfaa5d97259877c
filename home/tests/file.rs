//! The box's config file and startup checks: a generated dev config loads and
//! passes; every kind of mistake is reported with its file and line, all at once; the machine
//! checks catch a core map that does not fit, ports in use and keys that are not private.

mod common;

use common::{line_of, tmp};
use ed25519_dalek::{SigningKey, VerifyingKey};
use std::path::{Path, PathBuf};
use vyrn_home::{
    bind_addrs, read_seed, ref_tiles, startup_checks, write_dev_config, write_dev_home_at,
    write_ref_home, BoxConfig, CfgError, HomeAddrs, HomeConfig, Profile,
};

fn port(k: u16) -> u16 {
    40_000 + (std::process::id() % 10_000) as u16 + k * 50
}

#[test]
fn generated_dev_config_loads_and_passes_the_checks() {
    let d = tmp("ok");
    let p = write_dev_config(&d, 3, 4, port(0)).unwrap();
    let c = BoxConfig::load(&p).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(c.profile, Profile::Dev);
    assert_eq!(c.engine.sessions.len(), 12);
    assert_eq!(c.engine.accounts.len(), 6);
    assert_eq!(c.engine.layout.n_lanes, 3);
    assert_eq!(c.voters, 4);
    assert_ne!(*c.seq_key.expose(), [0; 32]);
    assert!(startup_checks(&c).is_empty(), "{:?}", startup_checks(&c));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn every_mistake_is_reported_with_its_line() {
    let d = tmp("bad");
    let p = write_dev_config(&d, 2, 2, port(1)).unwrap();
    let good = std::fs::read_to_string(&p).unwrap();
    let cases: Vec<(String, &str)> = vec![
        (
            good.replace("profile = \"dev\"", "profile = \"fast\""),
            "profile",
        ),
        (
            good.replace("lanes = 2", "lanes = \"two\""),
            "does not parse",
        ),
        (good.replace("voters = 4", "voters = 3"), "n ≥ 4"),
        (good.replace("[box]", "[box]\nturbo = 1"), "no key turbo"),
        // TOML sets a key once: a second is a syntax error, which says so.
        (good.replace("book = 1", "book = 1\nbook = 2"), "twice"),
        (
            good.replacen(
                "key_file = \"keys/session-1.key\"",
                "key_file = \"keys/none.key\"",
                1,
            ),
            "key_file",
        ),
        (
            good.replacen("lane = 0", "lane = 9", 1),
            "lane = 9 is out of range",
        ),
        (good.replace("[session.10001]", "[session.1]"), "twice"),
        (good.replace("[box]", "[boxx]\n[box]"), "unknown section"),
        (
            good.replace("client_port", "client-port"),
            "needs client_port",
        ),
        (format!("orphan = 1\n{good}"), "before any [section]"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let f = d.join(format!("case{i}.conf"));
        std::fs::write(&f, text).unwrap();
        let errs = BoxConfig::load(&f).expect_err(want);
        let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert!(
            all.iter().any(|e| e.contains(want)),
            "case {i}: wanted {want:?} in {all:?}"
        );
        assert!(
            all.iter().all(|e| e.contains(&f.display().to_string())),
            "{all:?}"
        );
    }
    // Several mistakes at once are all reported.
    let f = d.join("many.conf");
    std::fs::write(
        &f,
        good.replace("profile = \"dev\"", "profile = \"x\"")
            .replace("voters = 4", "voters = 1"),
    )
    .unwrap();
    assert!(BoxConfig::load(&f).unwrap_err().len() >= 2);
    // A bad key file.
    std::fs::write(d.join("keys/seq.key"), "not hex\n").unwrap();
    let errs = BoxConfig::load(&p).unwrap_err();
    assert!(
        errs.iter().any(|e| e.what.contains("hex digits")),
        "{errs:?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn startup_checks_catch_the_machine_problems() {
    let d = tmp("machine");
    let p = write_dev_config(&d, 2, 2, port(2)).unwrap();
    let mut c = BoxConfig::load(&p).unwrap();
    // A core the machine does not have.
    c.core_map = vec![0, 4096];
    // A port in use (on the address the box binds).
    let _held = std::net::UdpSocket::bind(("127.0.0.1", c.ctrl_port)).unwrap();
    // A key readable by others.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&c.seq_key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = startup_checks(&c);
    assert!(out.iter().any(|e| e.contains("core 4096")), "{out:?}");
    assert!(out.iter().any(|e| e.contains("is not free")), "{out:?}");
    #[cfg(unix)]
    assert!(out.iter().any(|e| e.contains("0600")), "{out:?}");
    // ref pins one tile per core.
    c.profile = Profile::Ref;
    c.core_map = vec![0];
    assert!(startup_checks(&c)
        .iter()
        .any(|e| e.contains("one tile per core")));
    let _ = std::fs::remove_dir_all(&d);
}

/// Load `text` as `d/name.conf`; it must fail with an error containing `want` on the line of
/// the first line containing `at`, naming the file.
fn rejects(d: &Path, name: &str, text: &str, want: &str, at: &str) -> Vec<CfgError> {
    let f = d.join(format!("{name}.conf"));
    std::fs::write(&f, text).unwrap();
    let errs = match BoxConfig::load(&f) {
        Ok(_) => panic!("{name}: loaded, wanted {want:?}"),
        Err(e) => e,
    };
    let line = line_of(text, at);
    assert!(
        errs.iter()
            .any(|e| e.what.contains(want) && e.line == line && e.file == f),
        "{name}: wanted {want:?} at line {line} of {}: {errs:#?}",
        f.display()
    );
    errs
}

/// `[box]` with `key = old` set to `new` (the key must be there).
fn set(good: &str, key: &str, new: &str) -> String {
    let mut out = String::new();
    let mut done = false;
    for l in good.lines() {
        if !done && l.split('=').next().map(str::trim) == Some(key) {
            out.push_str(&format!("{key} = {new}\n"));
            done = true;
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    assert!(done, "no {key} in the config");
    out
}

#[test]
fn every_number_is_range_checked_at_its_line() {
    let d = tmp("ranges");
    let p = write_dev_config(&d, 2, 2, port(3)).unwrap();
    let good = std::fs::read_to_string(&p).unwrap();
    // (A ref box keeps its heartbeat within REP_ACK_LIVE_US: the dev override goes.)
    let refp = good
        .replace("profile = \"dev\"", "profile = \"ref\"")
        .replace("hb_us = 1000", "hb_us = 50");
    // (text, wanted, a string on the line the error must name)
    let cases: Vec<(String, &str, &str)> = vec![
        // ref: lane l listens on client_port + l; 8 lanes from 65530 run to 65537.
        (
            set(&set(&refp, "lanes", "8"), "client_port", "65530"),
            "65537 > 65535",
            "client_port",
        ),
        // ...and the last lane port may not be the control port.
        (
            set(
                &set(&set(&refp, "lanes", "8"), "client_port", "40000"),
                "ctrl_port",
                "40007",
            ),
            "also a client port",
            "ctrl_port",
        ),
        (set(&good, "ctrl_port", "70000"), "0..=65535", "ctrl_port"),
        (
            set(&good, "client_port", "-1"),
            "does not parse",
            "client_port",
        ),
        (set(&good, "voters", "65"), "u64 bit mask", "voters"),
        (set(&good, "voters", "0"), "n ≥ 4", "voters"),
        (
            set(&good, "block_ns", "0"),
            "100000..=1000000000",
            "block_ns",
        ),
        (set(&good, "block_ns", "99999"), "REP_SEAL_US", "block_ns"),
        (
            set(&good, "block_ns", "1000000001"),
            "out of range",
            "block_ns",
        ),
        (set(&good, "lanes", "65"), "N_LANES_MAX", "lanes"),
        (set(&good, "lanes", "0"), "out of range 2..=64", "lanes"),
        (set(&good, "lanes", "1"), "two", "lanes"),
        (set(&good, "lanes", "300"), "out of range", "lanes"),
        (
            set(&good, "rtx_ring_bytes", "0"),
            "u32 offsets",
            "rtx_ring_bytes",
        ),
        (
            set(&good, "rtx_ring_bytes", "8589934592"),
            "out of range",
            "rtx_ring_bytes",
        ),
        (
            set(&good, "hot_ring_bytes", "100"),
            "out of range",
            "hot_ring_bytes",
        ),
        (
            set(&good, "self_fence_us", "0"),
            "two ack periods",
            "self_fence_us",
        ),
        (
            set(&good, "self_fence_us", "99999999"),
            "out of range",
            "self_fence_us",
        ),
        // Above FAILOVER_SILENCE_MS only on dev.
        (
            set(&refp, "self_fence_us", "50000"),
            "only on profile dev",
            "self_fence_us",
        ),
        // The heartbeat budget: 10 µs..10 ms, above REP_ACK_LIVE_US only on dev.
        (set(&good, "hb_us", "5"), "10 µs to 10 ms", "hb_us"),
        (set(&good, "hb_us", "20000"), "out of range", "hb_us"),
        (set(&refp, "hb_us", "1000"), "only on profile dev", "hb_us"),
        (set(&good, "core_map", "[0, 0]"), "twice", "core_map"),
        (set(&good, "core_map", "[0, 5000]"), "0..=1023", "core_map"),
        (set(&good, "core_map", "[0, -1]"), "a core id", "core_map"),
        (set(&good, "core_map", "\"0,x\""), "a core id", "core_map"),
        // TOML integers: another radix or underscores are the same number; past u64 (and
        // TOML's i64) they do not parse; negative ones neither.
        (set(&good, "book", "0x10000"), "u16", "book"),
        (set(&good, "book", "-5"), "does not parse", "book"),
        (
            set(&good, "hot_ring_bytes", "1_000"),
            "hot_ring_bytes = 1000 is out of range",
            "hot_ring_bytes",
        ),
        (
            set(&good, "epoch", "99999999999999999999"),
            "does not parse",
            "epoch",
        ),
        (
            set(&good, "rtx_ring_bytes", "18446744073709551616"),
            "does not parse",
            "rtx_ring_bytes",
        ),
        (
            good.replace("[box]", "[box]\nmax_orders = 0"),
            "out of range",
            "max_orders",
        ),
        (
            good.replace("[box]", "[box]\nlane_deadline_ns = 0"),
            "shed every packet",
            "lane_deadline_ns",
        ),
        (
            good.replace("[box]", "[box]\nbbo_deadline_ns = 99999999999"),
            "out of range",
            "bbo_deadline_ns",
        ),
        (set(&good, "book", "65536"), "u16", "book"),
        (set(&good, "epoch", "4294967296"), "u32", "epoch"),
        // Sessions and accounts.
        (
            good.replace("[session.1]", "[session.0]"),
            "[session.0]: session 0 is reserved",
            "[session.0]",
        ),
        (
            good.replace("[session.1]", "[session.x]"),
            "a number",
            "[session.x]",
        ),
        // Two tables of one session: TOML refuses the same key; the same number written
        // another way is caught after parsing.
        (
            good.replace("[session.10001]", "[session.1]    # again"),
            "[session.1] twice",
            "# again",
        ),
        (
            good.replace("[session.10001]", "[session.\"01\"]"),
            "[session.1] twice (first at line",
            "[session.\"01\"]",
        ),
        (
            good.replacen("slot = 0", "slot = 4096", 1),
            "MAX_SESSIONS_PER_LANE",
            "slot = 4096",
        ),
        (
            good.replacen("slot = 1", "slot = 0", 1),
            "is taken",
            "[session.2]",
        ),
        (good.replacen("tx = 0", "tx = 3", 1), "TX cores", "tx = 3"),
        (
            good.replacen("account = 1000000", "account = 7", 1),
            "no [account.7]",
            "account = 7",
        ),
        (
            good.replacen("[account.1010000]", "[account.1000000]    # again", 1),
            "[account.1000000] twice",
            "# again",
        ),
        (
            good.replacen("max_open_orders = 65536", "max_open_orders = 65537", 1),
            "65536 working orders",
            "max_open_orders = 65537",
        ),
        (
            good.replacen("max_order_qty = 1000", "max_order_qty = 0", 1),
            "refuse every New",
            "max_order_qty = 0",
        ),
        (
            good.replacen("max_exposure = 1000000000", "max_exposure = 0", 1),
            "refuse every New",
            "max_exposure = 0",
        ),
        (
            good.replacen("[account.1000000]", "[account.-1]", 1),
            "a number",
            "[account.-1]",
        ),
        // The account of sessions 10001/10002 moved to lane 0's account: two lanes.
        (
            good.replace("account = 1010000", "account = 1000000"),
            "one writer",
            "lane = 1",
        ),
    ];
    for (i, (text, want, at)) in cases.iter().enumerate() {
        rejects(&d, &format!("case{i}"), text, want, at);
    }
    // The ref config itself (client ports 40000.., 2 lanes) is fine.
    let f = d.join("ref.conf");
    std::fs::write(&f, set(&refp, "self_fence_us", "2000")).unwrap();
    let c = BoxConfig::load(&f).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.profile, Profile::Ref);
    let _ = std::fs::remove_dir_all(&d);
}

/// The file is TOML: a syntax error is one error at the line the parser names (with its
/// message); a value of a kind no key takes is an error naming the key, the kind it needs and
/// its line; a table or key outside the known ones is an error at its line.
#[test]
fn toml_syntax_errors_and_wrong_kinds_name_the_file_and_line() {
    let d = tmp("toml");
    let p = write_dev_config(&d, 2, 2, port(10)).unwrap();
    let good = std::fs::read_to_string(&p).unwrap();
    let box_key = |line: &str| good.replace("[box]\n", &format!("[box]\n{line}\n"));
    // (text, wanted, a string on the line the error must name)
    let cases: Vec<(String, &str, &str)> = vec![
        // Syntax: a bare word where a string goes, a header left open, two values, a string
        // left open at the end of the file.
        (
            good.replace("profile = \"dev\"", "profile = dev"),
            "not TOML: ",
            "profile = dev",
        ),
        (
            good.replacen("[session.1]", "[session.1", 1),
            "not TOML: ",
            "[session.1",
        ),
        (box_key("lanes = 2 3"), "not TOML: ", "lanes = 2 3"),
        (format!("{good}tx = \"open"), "not TOML: ", "tx = \"open"),
        // Kinds.
        (
            set(&good, "book", "1.5"),
            "book: expected a whole number, found a float",
            "book",
        ),
        (
            set(&good, "epoch", "1979-05-27"),
            "epoch: expected a whole number, found a date-time",
            "epoch",
        ),
        (
            set(&good, "voters", "true"),
            "voters = \"true\" does not parse",
            "voters",
        ),
        (
            set(&good, "lanes", "{ n = 2 }"),
            "lanes: expected a whole number, found a table",
            "lanes",
        ),
        (
            set(&good, "core_map", "\"x\""),
            "core_map entry \"x\": a core id",
            "core_map",
        ),
        (
            set(&good, "core_map", "[[1], 0]"),
            "core_map: expected an array of core ids, such as [1, 0], found an array holding an array",
            "core_map",
        ),
        (
            set(&good, "core_map", "[1, \"0\"]"),
            "found an array holding a string",
            "core_map",
        ),
        (
            set(&good, "seq_key_file", "7"),
            "seq_key_file: ",
            "seq_key_file",
        ),
        (
            set(&good, "profile", "[\"dev\"]"),
            "profile: expected a string (\"ref\", \"consumer\" or \"dev\"), found an array holding a string",
            "profile",
        ),
        (
            good.replacen("[session.1]", "[session.1]\nkey_file = 1.0", 1)
                .replacen("key_file = \"keys/session-1.key\"\n", "", 1),
            "key_file: expected a string (a file's path), found a float",
            "key_file = 1.0",
        ),
        // Tables and keys where none belongs.
        (
            format!("{good}\n[box.extra]\nx = 1\n"),
            "[box] has no key extra",
            "[box.extra]",
        ),
        (
            format!("{good}\n[voters]\nx = 1\n"),
            "unknown section [voters]",
            "[voters]",
        ),
        (
            format!("{good}\n[voter]\n0 = 5\n"),
            "[voter] 0: expected a table [voter.0], found an integer",
            "0 = 5",
        ),
        (
            format!("turbo = true\n{good}"),
            "turbo: a key before any [section] (a boolean)",
            "turbo = true",
        ),
        (
            good.replace("[session.2]", "[[session.2]]"),
            "[session] 2: expected a table [session.2], found an array",
            "[[session.2]]",
        ),
    ];
    for (i, (text, want, at)) in cases.iter().enumerate() {
        rejects(&d, &format!("toml{i}"), text, want, at);
    }
    // [voter.0] ctrl_addr = 5: the address check names it.
    let voters: String = (0..4u8)
        .map(|i| {
            let addr = if i == 0 {
                "5".to_string()
            } else {
                format!("\"127.0.0.1:{}\"", 47_600 + i as u16)
            };
            format!(
                "\n[voter.{i}]\nctrl_addr = {addr}\nvote_key = \"{}\"\n",
                hex(vk(i + 1).as_bytes())
            )
        })
        .collect();
    rejects(
        &d,
        "voter-kind",
        &format!("{good}{voters}"),
        "ctrl_addr = \"5\": expected IP:PORT",
        "ctrl_addr = 5",
    );
    // Only the syntax error: nothing is checked past it.
    let f = d.join("one.conf");
    std::fs::write(
        &f,
        box_key("lanes = 2 3").replace("voters = 4", "voters = 1"),
    )
    .unwrap();
    assert_eq!(BoxConfig::load(&f).unwrap_err().len(), 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[cfg(unix)]
#[test]
fn key_files_are_created_private_and_atomically() {
    use std::os::unix::fs::PermissionsExt;
    let d = tmp("keys");
    // A link planted where a key will go: the key must replace the link, not write through it.
    std::fs::create_dir_all(d.join("keys")).unwrap();
    let outside = d.join("outside.txt");
    std::fs::write(&outside, "public\n").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(&outside, d.join("keys/seq.key")).unwrap();
    let p = write_dev_config(&d, 2, 2, port(4)).unwrap();
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "public\n");
    let mut n = 0;
    for e in std::fs::read_dir(d.join("keys")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            name.ends_with(".key") && !name.starts_with('.'),
            "left over: {name}"
        );
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        assert!(m.file_type().is_file(), "{name} is not a plain file");
        assert_eq!(m.permissions().mode() & 0o777, 0o600, "{name}");
        n += 1;
    }
    assert_eq!(n, 1 + 4);
    // Written again over the same folder: still only the keys, still 0600, and it loads.
    write_dev_config(&d, 2, 2, port(4)).unwrap();
    assert_eq!(std::fs::read_dir(d.join("keys")).unwrap().count(), 5);
    BoxConfig::load(&p).unwrap_or_else(|e| panic!("{e:#?}"));
    // Every role reads its keys through `read_key`: a key others can read is refused by all
    // of them, the sequencer, the data box and the replicas alike (security review F14).
    let session_key = d.join("keys/session-2.key");
    vyrn_home::read_seed(&session_key).unwrap();
    std::fs::set_permissions(&session_key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let Err(e) = vyrn_home::read_seed(&session_key) else {
        panic!("a 0640 key was read");
    };
    assert!(e.contains("mode 640") && e.contains("0600"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn debug_output_holds_no_secret() {
    let d = tmp("debug");
    let p = write_dev_config(&d, 2, 2, port(5)).unwrap();
    let c = BoxConfig::load(&p).unwrap();
    let dbg = format!("{c:?} {:#?}", c);
    let seed = read_seed(&d.join("keys/seq.key")).unwrap();
    let session = read_seed(&d.join("keys/session-1.key")).unwrap();
    for secret in [seed.expose(), session.expose()] {
        assert!(!dbg.contains(&hex(secret)), "hex of a secret in Debug");
        assert!(!dbg.contains(&hex(&secret[..16])), "hex of K_seq in Debug");
        assert!(!dbg.contains(&hex(&secret[16..])), "hex of K_out in Debug");
        // The derive(Debug) form of a byte array, too.
        assert!(!dbg.contains(
            &format!("{:?}", &secret[..8])
                .trim_end_matches(']')
                .to_string()
        ));
    }
    assert!(dbg.contains("Seed32(<redacted>)"));
    assert_eq!(c.seq_key.expose(), seed.expose());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn startup_checks_bind_exactly_the_box_addresses() {
    let d = tmp("bind");
    let p = write_dev_config(&d, 2, 2, port(6)).unwrap();
    let mut c = BoxConfig::load(&p).unwrap();
    // dev: one client port for all lanes, so client_port + 1 is not the box's.
    let _other = std::net::UdpSocket::bind(("127.0.0.1", c.client_port + 1)).unwrap();
    assert!(startup_checks(&c).is_empty(), "{:?}", startup_checks(&c));
    // ref: lane 1 listens on client_port + 1.
    c.profile = Profile::Ref;
    c.core_map = core_affinity::get_core_ids()
        .unwrap()
        .iter()
        .map(|x| x.id)
        .collect();
    let out = startup_checks(&c);
    let busy = format!("127.0.0.1:{} is not free", c.client_port + 1);
    assert!(out.iter().any(|e| e.contains(&busy)), "{out:?}");
    // The addresses are 127.0.0.1's: a client port held there is caught.
    c.profile = Profile::Dev;
    let _held = std::net::UdpSocket::bind(("127.0.0.1", c.client_port)).unwrap();
    let out = startup_checks(&c);
    assert!(
        out.iter()
            .any(|e| e.contains(&format!("127.0.0.1:{}", c.client_port))),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn core_check_uses_the_affinity_mask() {
    let d = tmp("cores");
    let p = write_dev_config(&d, 2, 2, port(7)).unwrap();
    let mut c = BoxConfig::load(&p).unwrap();
    let mask: Vec<usize> = core_affinity::get_core_ids()
        .unwrap()
        .iter()
        .map(|x| x.id)
        .collect();
    c.core_map = vec![mask[0]];
    assert!(startup_checks(&c).is_empty(), "{:?}", startup_checks(&c));
    // A thread pinned to the mask's last CPU may run only there: its first CPU is outside its
    // mask although the machine has it (a count of CPUs would say `0..1`, which holds it when
    // the mask's first CPU is 0).
    if mask.len() >= 2 {
        let (first, last) = (mask[0], mask[mask.len() - 1]);
        let c2 = c.clone();
        let out = std::thread::spawn(move || {
            assert!(core_affinity::set_for_current(core_affinity::CoreId {
                id: last
            }));
            let mut c2 = c2;
            c2.core_map = vec![first];
            let out = startup_checks(&c2);
            c2.core_map = vec![last];
            (out, startup_checks(&c2))
        })
        .join()
        .unwrap();
        assert!(
            out.0.iter().any(|e| e.contains(&format!("core {first}"))),
            "{:?}",
            out.0
        );
        assert!(out.1.is_empty(), "{:?}", out.1);
    }
    let _ = std::fs::remove_dir_all(&d);
}

fn vk(i: u8) -> VerifyingKey {
    SigningKey::from_bytes(&[i; 32]).verifying_key()
}

fn voters_text(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "\n[voter.{i}]\nctrl_addr = \"127.0.0.1:{}\"\nvote_key = \"{}\"\n",
                47_500 + i,
                hex(vk(i as u8 + 1).as_bytes())
            )
        })
        .collect()
}

#[test]
fn voter_sections_make_the_membership() {
    let d = tmp("voters");
    let p = write_dev_config(&d, 2, 2, port(8)).unwrap();
    let good = std::fs::read_to_string(&p).unwrap();
    // None: allowed (dev voter doubles).
    assert!(BoxConfig::load(&p).unwrap().voters_members.is_empty());
    // Four, in any order.
    let mut sections: Vec<String> = voters_text(4)
        .split("\n[")
        .filter(|s| !s.trim().is_empty())
        .map(|s| format!("\n[{s}"))
        .collect();
    sections.reverse();
    let f = d.join("four.conf");
    std::fs::write(&f, format!("{good}{}", sections.concat())).unwrap();
    let c = BoxConfig::load(&f).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.voters_members.len(), 4);
    for (i, m) in c.voters_members.iter().enumerate() {
        assert_eq!(m.index, i);
        assert_eq!(m.vote_key, vk(i as u8 + 1));
        assert_eq!(
            m.ctrl_addr,
            format!("127.0.0.1:{}", 47_500 + i).parse().unwrap()
        );
    }
    assert_ne!(c.seq_public(), vk(1));

    let ok = format!("{good}{}", voters_text(4));
    let seq_pub = hex(c.seq_public().as_bytes());
    let k1 = hex(vk(1).as_bytes());
    let k2 = hex(vk(2).as_bytes());
    // An invalid point and a small-order one.
    let bad_point = (0u8..=255)
        .map(|b| {
            let mut x = [0u8; 32];
            x[0] = b;
            x[1] = 0x80;
            x
        })
        .find(|x| VerifyingKey::from_bytes(x).is_err())
        .expect("some y is not on the curve");
    let mut identity = [0u8; 32];
    identity[0] = 1;
    // (text, wanted, anchor, the error's line relative to the anchor's)
    let on_key1 = "127.0.0.1:47501"; // voter 1's ctrl_addr; its vote_key is the next line
    let cases: Vec<(String, &str, &str, isize)> = vec![
        (
            ok.replace("[voter.3]", "[voter.2]"),
            "[voter.2] twice",
            "127.0.0.1:47503",
            -1,
        ),
        (
            ok.replace("[voter.3]", "[voter.\"02\"]"),
            "[voter.2] twice (first at line",
            "127.0.0.1:47503",
            -1,
        ),
        (ok.replace(&k2, &k1), "also the vote_key", on_key1, 1),
        (
            ok.replace(&k2, &seq_pub),
            "sequencer's own public key",
            on_key1,
            1,
        ),
        (
            format!("{good}{}", voters_text(3)),
            "3 [voter] sections (missing: [3])",
            "voters = 4",
            0,
        ),
        (
            format!("{good}{}", voters_text(5)),
            "indices are 0..=3",
            "[voter.4]",
            0,
        ),
        (ok.replace(&k2, "abc"), "64 hex digits", on_key1, 1),
        (
            ok.replace(&k2, &"zz".repeat(32)),
            "64 hex digits",
            on_key1,
            1,
        ),
        (
            ok.replace(&k2, &hex(&bad_point)),
            "not a valid Ed25519 point",
            on_key1,
            1,
        ),
        (ok.replace(&k2, &hex(&identity)), "small-order", on_key1, 1),
        (ok.replace(on_key1, "127.0.0.1"), "IP:PORT", "[voter.1]", 1),
        (
            ok.replace(on_key1, "localhost:1"),
            "IP:PORT",
            "localhost:1",
            0,
        ),
        (
            ok.replace(on_key1, "0.0.0.0:9"),
            "real address",
            "0.0.0.0:9",
            0,
        ),
        (
            ok.replace(on_key1, "127.0.0.1:0"),
            "nonzero port",
            "127.0.0.1:0",
            0,
        ),
        (
            ok.replace(on_key1, "127.0.0.1:47500"),
            "also the ctrl_addr",
            "[voter.1]",
            1,
        ),
        (
            ok.replace("[voter.1]", "[voter.x]"),
            "the index is a number",
            "[voter.x]",
            0,
        ),
        (
            ok.replace("[voter.1]", "[voter.1]\nweight = 2"),
            "[voter.1] has no key weight",
            "weight = 2",
            0,
        ),
        (
            ok.replacen(&format!("ctrl_addr = \"{on_key1}\"\n"), "", 1),
            "[voter.1] needs ctrl_addr",
            "[voter.1]",
            0,
        ),
        // A number where the address goes.
        (
            ok.replace(&format!("\"{on_key1}\""), "5"),
            "expected IP:PORT",
            "[voter.1]",
            1,
        ),
    ];
    for (i, (text, want, at, off)) in cases.iter().enumerate() {
        let f = d.join(format!("v{i}.conf"));
        std::fs::write(&f, text).unwrap();
        let errs = BoxConfig::load(&f).expect_err(want);
        let line = (line_of(text, at) as isize + off) as usize;
        assert!(
            errs.iter()
                .any(|e| e.what.contains(want) && e.file == f && e.line == line),
            "v{i}: wanted {want:?} at line {line}: {errs:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    /// `s` as a TOML basic string.
    fn quoted(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// TOML values that probe the checks: numbers at and past every bound (and past TOML's
    /// i64), other radixes, strings of junk, hex and addresses, arrays, and the kinds no key
    /// takes; and some raw text, which is mostly not TOML.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("\"\"".to_string()),
            Just("0".to_string()),
            Just("-1".to_string()),
            Just("65535".to_string()),
            Just("65536".to_string()),
            Just("9223372036854775807".to_string()),
            Just("18446744073709551615".to_string()),
            Just("18446744073709551616".to_string()),
            Just("-9223372036854775808".to_string()),
            Just("0xffff_ffff".to_string()),
            Just("0o777".to_string()),
            Just("0b1".to_string()),
            Just("\"127.0.0.1:0\"".to_string()),
            Just("\"[::1]:7401\"".to_string()),
            Just("[0, 0, 99999]".to_string()),
            Just("[]".to_string()),
            Just("[-1, 1]".to_string()),
            Just("[[1], \"x\"]".to_string()),
            Just("\"ref\"".to_string()),
            Just("\"consumer\"".to_string()),
            Just("true".to_string()),
            Just("1.5".to_string()),
            Just("nan".to_string()),
            Just("1979-05-27T07:32:00Z".to_string()),
            Just("{ a = 1 }".to_string()),
            "-?[0-9]{1,25}",
            "[0-9a-f]{60,68}".prop_map(|s| quoted(&s)),
            "[ -~]{0,20}".prop_map(|s| quoted(&s)),
            "\\PC{0,8}".prop_map(|s| quoted(&s)),
            "[ -~]{0,20}",
        ]
    }

    /// A table header: a known kind (or not) with a random id, bare or quoted.
    fn header() -> impl Strategy<Value = String> {
        (
            proptest::sample::select(vec!["box", "account", "session", "voter", "databox", "x"]),
            prop_oneof![
                "[0-9]{1,12}",
                "-?[0-9a-z_]{1,6}",
                "\\PC{0,6}".prop_map(|s| quoted(&s)),
            ],
        )
            .prop_map(|(k, id)| {
                if k == "box" {
                    "[box]".to_string()
                } else {
                    format!("[{k}.{id}]")
                }
            })
    }

    /// The keys of the good file's lines, and some that a `[voter.N]` takes.
    fn keys(good: &[String]) -> Vec<String> {
        good.iter()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().to_string()))
            .filter(|k| !k.starts_with('#'))
            .chain(["vote_key", "ctrl_addr", "voters"].map(String::from))
            .collect()
    }

    /// A line: one of the good config's lines, a key with a random value, a table header, or
    /// junk.
    fn line(good: Vec<String>) -> impl Strategy<Value = String> {
        let keys = keys(&good);
        prop_oneof![
            4 => proptest::sample::select(good),
            4 => (proptest::sample::select(keys), value()).prop_map(|(k, v)| format!("{k} = {v}")),
            2 => header(),
            1 => "[ -~]{0,30}",
        ]
    }

    /// Load `text` both ways (the sequencer's and every other role's): errors, never a panic,
    /// each naming the file and a line of the text.
    fn check(text: &str) -> Result<(), TestCaseError> {
        let f = dir().join("random.conf");
        match BoxConfig::from_text(&f, text) {
            Ok(c) => {
                let _ = format!("{c:?}");
            }
            Err(errs) => {
                prop_assert!(!errs.is_empty());
                prop_assert!(errs.iter().all(|e| e.file == f));
                let n = text.lines().count();
                prop_assert!(errs.iter().all(|e| e.line <= n), "{errs:?}");
            }
        }
        if let Err(errs) = vyrn_home::HomeConfig::from_text(&f, text) {
            prop_assert!(!errs.is_empty());
            let n = text.lines().count();
            prop_assert!(errs.iter().all(|e| e.file == f && e.line <= n), "{errs:?}");
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Lines of the good file in random order, with random lines mixed in: mostly not
        /// TOML, or TOML with duplicates.
        #[test]
        fn random_config_text_never_panics(
            picks in proptest::collection::vec(any::<proptest::sample::Index>(), 0..60),
            lines in proptest::collection::vec(line(good_lines()), 0..60),
        ) {
            let good = good_lines();
            let mut text = String::new();
            for (i, l) in lines.iter().enumerate() {
                if let Some(p) = picks.get(i) {
                    text.push_str(&good[p.index(good.len())]);
                    text.push('\n');
                }
                text.push_str(l);
                text.push('\n');
            }
            check(&text)?;
        }

        /// The good home file (voters, a data box, sessions) with a few values changed, a few
        /// lines replaced and a few added: mostly valid TOML, so the checks behind the parser
        /// see every kind of value.
        #[test]
        fn random_values_in_a_good_file_never_panic(
            edits in proptest::collection::vec(
                (any::<proptest::sample::Index>(), 0..3u8, value(), line(good_lines())),
                1..6,
            ),
        ) {
            let mut lines = good_lines();
            for (at, how, v, l) in &edits {
                let i = at.index(lines.len());
                match how {
                    0 => {
                        if let Some((k, _)) = lines[i].split_once('=') {
                            if !k.trim_start().starts_with('#') {
                                lines[i] = format!("{} = {v}", k.trim());
                            }
                        }
                    }
                    1 => lines[i] = l.clone(),
                    _ => lines.insert(i, l.clone()),
                }
            }
            check(&(lines.join("\n") + "\n"))?;
        }
    }

    /// A dev home's folder (its keys and membership record), written once.
    fn dir() -> PathBuf {
        static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        DIR.get_or_init(|| {
            let d = tmp("prop");
            vyrn_home::write_dev_home(&d, 2, 2, 46_000 + (std::process::id() % 500) as u16)
                .unwrap();
            d
        })
        .clone()
    }

    fn good_lines() -> Vec<String> {
        std::fs::read_to_string(dir().join("home.toml"))
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }
}

/// 07 §13.1: a dev home's file names its `REP_Membership`; every role loads it at start, checks
/// every rule of §13.1 and its certificate, and refuses one that does not match the file.
#[test]
fn the_home_membership_is_loaded_checked_and_matched_against_the_file() {
    use vyrn_home::{write_dev_home, HomeConfig};
    let d = tmp("membership");
    let p = write_dev_home(&d, 2, 2, 47_000 + (std::process::id() % 500) as u16 * 10).unwrap();
    let home = HomeConfig::load(&p).unwrap_or_else(|e| panic!("{e:#?}"));
    let m = home
        .membership
        .as_ref()
        .expect("the dev home names its membership");
    assert_eq!(m.voters.len(), 4);
    for (a, b) in m.voters.iter().zip(&home.voters_members) {
        assert_eq!(a.vote_key, b.vote_key.to_bytes());
    }
    assert_eq!(m.seq_order[0].seq_key, home.seq_pub.to_bytes());
    let boxc = BoxConfig::load(&p).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(boxc.membership.as_ref(), Some(m));
    // The consensus crate builds the voting set from it.
    let good = std::fs::read(d.join("membership.bin")).unwrap();
    let refused = |bytes: &[u8], what: &str| {
        std::fs::write(d.join("membership.bin"), bytes).unwrap();
        let e = HomeConfig::load(&p).expect_err(what);
        assert!(
            e.iter()
                .any(|x| x.what.contains("membership") && x.what.contains(what)),
            "{what}: {e:?}"
        );
    };
    // A certificate signature flipped.
    let mut b = good.clone();
    let n = b.len();
    b[n - 10] ^= 1;
    refused(&b, "certificate");
    // Cut short.
    refused(&good[..good.len() / 2], "does not parse");
    // A record whose voter 2 is another key (re-certified, so only the match catches it).
    let mut other = m.clone();
    let k = SigningKey::from_bytes(&[77; 32]);
    other.voters[2].vote_key = k.verifying_key().to_bytes();
    let keys: Vec<SigningKey> = (0..4)
        .map(|i| {
            if i == 2 {
                k.clone()
            } else {
                let s = read_seed(&d.join(format!("keys/voter-{i}.key"))).unwrap();
                SigningKey::from_bytes(s.expose())
            }
        })
        .collect();
    other.cert = keys
        .iter()
        .enumerate()
        .map(|(i, k)| other.sign_entry(i as u8, k))
        .collect();
    refused(&other.to_bytes().unwrap(), "vote_key differs");
    // One client holding Q voters (CLIENT_SPLIT), re-certified.
    let mut split = m.clone();
    for v in &mut split.voters {
        v.client = vyrn_wire::msg::ctrl::Client::Rust;
    }
    split.cert = keys[..]
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(i, _)| {
            let s = read_seed(&d.join(format!("keys/voter-{i}.key"))).unwrap();
            split.sign_entry(i as u8, &SigningKey::from_bytes(s.expose()))
        })
        .collect();
    refused(&split.to_bytes().unwrap(), "§13.1");
    // Missing file.
    std::fs::remove_file(d.join("membership.bin")).unwrap();
    let e = HomeConfig::load(&p).expect_err("missing");
    assert!(e.iter().any(|x| x.what.contains("cannot read")), "{e:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A dev home with two data boxes (07 §5.1, §5.7): both in the file and in its membership,
/// sessions homed alternately, every session bound to the load generator's address
/// (`client_addr`, where a backup box relays DataRedirect); a malformed `client_addr` is named
/// with its line; three boxes do not fit a dev home's ports.
#[test]
fn a_two_data_box_home_binds_its_sessions_and_a_bad_client_addr_is_named() {
    use vyrn_home::{write_dev_home_with, HomeConfig, DEV_LOAD_CLIENT};
    let d = tmp("two-data");
    let base = 45_000 + (std::process::id() % 500) as u16 * 10;
    let p = write_dev_home_with(&d, 2, 2, base, 2).unwrap();
    let home = HomeConfig::load(&p).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(home.databoxes.len(), 2);
    assert_eq!(home.membership.as_ref().unwrap().data_boxes.len(), 2);
    assert_ne!(home.databoxes[0].client_addr, home.databoxes[1].client_addr);
    let want = std::net::SocketAddr::from(([127, 0, 0, 1], base + DEV_LOAD_CLIENT));
    assert_eq!(home.session_addrs.len(), home.engine.sessions.len());
    assert!(home.session_addrs.values().all(|&a| a == want));
    let homes: Vec<u8> = home
        .engine
        .sessions
        .iter()
        .map(|s| home.data_home(s.session))
        .collect();
    assert!(homes.contains(&0) && homes.contains(&1), "{homes:?}");
    let text = std::fs::read_to_string(&p).unwrap();
    let bad = text.replacen(
        &format!("\"127.0.0.1:{}\"", base + DEV_LOAD_CLIENT),
        "\"nowhere\"",
        1,
    );
    std::fs::write(&p, &bad).unwrap();
    let errs = HomeConfig::load(&p).expect_err("a bad client_addr");
    let line = bad.lines().position(|l| l.contains("\"nowhere\"")).unwrap() + 1;
    assert!(
        errs.iter().any(|e| e
            .what
            .contains("client_addr = \"nowhere\": expected IP:PORT")
            && e.line == line),
        "{errs:#?}"
    );
    assert!(write_dev_home_with(&tmp("three-data"), 2, 2, base, 3).is_err());
    let _ = std::fs::remove_dir_all(&d);
}

/// `[box] ip`, `path_a_ip`, `path_b_ip` and a voter's `path_a_ip`, `path_b_ip` (the netns lab
/// and real homes: roles on separate hosts, the two paths on separate networks, 07 §3.1): the
/// defaults are loopback / the voter's ctrl_addr IP; what is set is read; an address that is not
/// one interface's own unicast IPv4 is refused at its line; a voter with an IPv6 ctrl_addr must
/// name its path interfaces; the box binds exactly its `ip`.
#[test]
fn box_and_voter_addresses_are_read_defaulted_and_checked() {
    let d = tmp("addrs");
    let p = write_dev_config(&d, 2, 2, port(9)).unwrap();
    let good = format!("{}{}", std::fs::read_to_string(&p).unwrap(), voters_text(4));
    let f = d.join("defaults.conf");
    std::fs::write(&f, &good).unwrap();
    let c = BoxConfig::load(&f).unwrap_or_else(|e| panic!("{e:#?}"));
    let lo = std::net::Ipv4Addr::LOCALHOST;
    assert_eq!((c.ip, c.path_ips), (lo, [lo, lo]));
    assert!(c.voters_members.iter().all(|v| v.path_ips == [lo, lo]));
    assert!(bind_addrs(&c).iter().all(|a| a.ip() == lo));

    let set_box = good.replacen(
        "[box]\n",
        "[box]\nip = \"10.77.0.1\"\npath_a_ip = \"10.77.1.1\"\npath_b_ip = \"10.77.2.1\"\n",
        1,
    );
    let set_all = set_box.replacen(
        "[voter.2]\n",
        "[voter.2]\npath_a_ip = \"10.77.1.12\"\npath_b_ip = \"10.77.2.12\"\n",
        1,
    );
    let f = d.join("set.conf");
    std::fs::write(&f, &set_all).unwrap();
    let c = BoxConfig::load(&f).unwrap_or_else(|e| panic!("{e:#?}"));
    let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap();
    assert_eq!(c.ip, ip("10.77.0.1"));
    assert_eq!(c.path_ips, [ip("10.77.1.1"), ip("10.77.2.1")]);
    assert_eq!(
        c.voters_members[2].path_ips,
        [ip("10.77.1.12"), ip("10.77.2.12")]
    );
    assert_eq!(c.voters_members[1].path_ips, [lo, lo]);
    assert!(bind_addrs(&c).iter().all(|a| a.ip() == ip("10.77.0.1")));
    let h = HomeConfig::from_text(&f, &set_all).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(h.box_ip, ip("10.77.0.1"));

    for (name, bad, want) in [
        (
            "ip_text",
            "ip = \"box-1\"",
            "ip = \"box-1\": expected an IPv4 address",
        ),
        ("ip_v6", "ip = \"::1\"", "expected an IPv4 address"),
        (
            "ip_any",
            "ip = \"0.0.0.0\"",
            "needs one interface's own unicast IPv4 address",
        ),
        (
            "path_mc",
            "path_a_ip = \"239.255.75.1\"",
            "path_a_ip = 239.255.75.1: needs one interface's own",
        ),
        (
            "path_num",
            "path_b_ip = 7",
            "path_b_ip = \"7\": expected an IPv4 address",
        ),
    ] {
        let text = good.replacen("[box]\n", &format!("[box]\n{bad}\n"), 1);
        rejects(&d, name, &text, want, bad);
    }
    let v6 = good.replacen(
        "ctrl_addr = \"127.0.0.1:47502\"",
        "ctrl_addr = \"[::1]:47502\"",
        1,
    );
    rejects(
        &d,
        "voter_v6",
        &v6,
        "ctrl_addr is IPv6, so path_a_ip and path_b_ip are needed",
        "[voter.2]",
    );
    let v6_named = v6.replacen(
        "[voter.2]\n",
        "[voter.2]\npath_a_ip = \"127.0.0.1\"\npath_b_ip = \"127.0.0.1\"\n",
        1,
    );
    let f = d.join("v6_named.conf");
    std::fs::write(&f, &v6_named).unwrap();
    assert!(BoxConfig::load(&f).is_ok());
    let _ = std::fs::remove_dir_all(&d);
}

/// The netns lab's generated home (`vyrn up --netns`) loads, and names every role at its lab
/// address: the box on F, A and B; voter i at `.10 + i` on each; the data box at `.20`.
#[test]
fn the_netns_lab_home_is_written_with_the_lab_addresses() {
    let d = tmp("labhome");
    let p = write_dev_home_at(&d, 4, 2, 47_000, 1, &HomeAddrs::netns_lab()).unwrap();
    let c = BoxConfig::load(&p).unwrap_or_else(|e| panic!("{e:#?}"));
    let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap();
    assert_eq!(c.ip, ip("10.77.0.1"));
    assert_eq!(c.path_ips, [ip("10.77.1.1"), ip("10.77.2.1")]);
    for v in &c.voters_members {
        let h = 10 + v.index as u8;
        assert_eq!(
            v.ctrl_addr.ip(),
            std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 77, 0, h))
        );
        assert_eq!(
            v.path_ips,
            [
                std::net::Ipv4Addr::new(10, 77, 1, h),
                std::net::Ipv4Addr::new(10, 77, 2, h)
            ]
        );
    }
    assert_eq!(
        c.databoxes[0].client_addr.ip(),
        std::net::IpAddr::V4(ip("10.77.0.20"))
    );
    // The membership record names the same addresses (07 §13.1): the box's client address.
    let m = c.membership.expect("membership");
    assert_eq!(
        m.seq_order[0].client_addr,
        vyrn_wire::msg::addr_from_socket("10.77.0.1:47000".parse().unwrap())
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `vyrn up --profile ref`'s home: profile `ref`, one core per tile from the given map, 1 ms
/// blocks, 07's heartbeat and rings, lane `l` bound at `client_port + l`; a map too short for
/// the box's tiles is refused before anything is written.
#[test]
fn a_ref_home_pins_one_core_per_tile_and_binds_a_port_per_lane() {
    let d = tmp("refhome");
    let cores: Vec<usize> = (2..20).collect();
    let p = write_ref_home(&d, 8, 2, 47_100, 1, &HomeAddrs::loopback(), &cores).unwrap();
    let c = BoxConfig::load(&p).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.profile, Profile::Ref);
    assert_eq!(c.core_map, cores);
    assert_eq!(ref_tiles(&c), 18);
    assert_eq!(c.block_ns, 1_000_000);
    assert_eq!(c.hb_us, None);
    assert_eq!(c.engine.layout.n_lanes, 8);
    assert_eq!(c.engine.layout.n_streams, 2);
    let binds = bind_addrs(&c);
    assert_eq!(binds.len(), 9, "{binds:?}");
    for (l, a) in binds[..8].iter().enumerate() {
        assert_eq!(a.port(), 47_100 + l as u16);
    }
    assert_eq!(binds[8].port(), c.ctrl_port);
    assert!(HomeConfig::load(&p).is_ok());
    let short = write_ref_home(
        &d.join("short"),
        8,
        2,
        47_100,
        1,
        &HomeAddrs::loopback(),
        &cores[..17],
    );
    let e = short.unwrap_err().to_string();
    assert!(e.contains("pins 18 tiles, one core each; 17 given"), "{e}");
    assert!(!d.join("short").join("home.toml").exists());
    let _ = std::fs::remove_dir_all(&d);
}

/// `[standby] ctrl_addr` (07 §6.8: voters send the standby their finalize votes too): read when
/// set, absent otherwise; a section without it, with a bad address or with an unknown key is
/// refused at its line.
#[test]
fn the_standby_section_is_read_and_checked() {
    let d = tmp("standby");
    let p = write_dev_config(&d, 2, 2, port(10)).unwrap();
    let good = std::fs::read_to_string(&p).unwrap();
    assert_eq!(BoxConfig::load(&p).unwrap().standby_ctrl, None);
    let f = d.join("with.conf");
    std::fs::write(
        &f,
        format!("{good}\n[standby]\nctrl_addr = \"127.0.0.1:47009\"\nlink_key = \"4be6cdc244f1397b642ef9f7949bde046dfe36cf28297d6d982208cd0dcc7a90\"\n"),
    )
    .unwrap();
    assert_eq!(
        BoxConfig::load(&f).unwrap().standby_ctrl,
        Some("127.0.0.1:47009".parse().unwrap())
    );
    rejects(
        &d,
        "standby_none",
        &format!("{good}\n[standby]\n"),
        "[standby] needs ctrl_addr",
        "[standby]",
    );
    rejects(
        &d,
        "standby_zero",
        &format!("{good}\n[standby]\nctrl_addr = \"127.0.0.1:0\"\n"),
        "needs a real address and a nonzero port",
        "ctrl_addr = \"127.0.0.1:0\"",
    );
    rejects(
        &d,
        "standby_key",
        &format!("{good}\n[standby]\nctrl_addr = \"127.0.0.1:47009\"\nlink_key = \"4be6cdc244f1397b642ef9f7949bde046dfe36cf28297d6d982208cd0dcc7a90\"\nport = 3\n"),
        "port",
        "port = 3",
    );
    // A generated home has one, on the box's address.
    let h = d.join("home");
    let hp = vyrn_home::write_dev_home(&h, 2, 2, 47_000).unwrap();
    assert_eq!(
        BoxConfig::load(&hp).unwrap().standby_ctrl,
        Some("127.0.0.1:47009".parse().unwrap())
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// 07 §8.3: `[voter.N] retain_blocks` and `retain_gib` (the block journal's ring per drive) are
/// read, default to none, and a zero or a word is refused at its line.
#[test]
fn the_journal_retention_is_read_from_the_voter_sections() {
    let d = tmp("retain");
    let hp = vyrn_home::write_dev_home(&d.join("home"), 2, 2, 47_260).unwrap();
    let good = std::fs::read_to_string(&hp).unwrap();
    let h = HomeConfig::load(&hp).unwrap();
    assert_eq!(
        (
            h.voters_members[0].retain_blocks,
            h.voters_members[0].retain_gib
        ),
        (None, None)
    );
    let with = good.replacen(
        "\n[voter.1]",
        "\n[voter.1]\nretain_blocks = 43200000\nretain_gib = 61440",
        1,
    );
    let f = d.join("home/with.toml");
    std::fs::write(&f, &with).unwrap();
    let h = HomeConfig::load(&f).unwrap();
    assert_eq!(
        (
            h.voters_members[1].retain_blocks,
            h.voters_members[1].retain_gib
        ),
        (Some(43_200_000), Some(61_440))
    );
    assert_eq!(h.voters_members[0].retain_blocks, None);
    for bad_line in ["retain_blocks = 0", "retain_gib = 2000000"] {
        let bad = good.replacen("\n[voter.0]", &format!("\n[voter.0]\n{bad_line}"), 1);
        let f = d.join("home/bad.toml");
        std::fs::write(&f, &bad).unwrap();
        let errs = HomeConfig::load(&f).unwrap_err();
        let key = bad_line.split(' ').next().unwrap();
        assert!(
            errs.iter()
                .any(|e| e.what.contains(key) && e.line == line_of(&bad, bad_line)),
            "{bad_line}: {errs:#?}"
        );
    }
}

/// Security review F11: `[voter.N] held_mib` is read (1..=4096) and refused
/// outside that range at its line; a data box's `link_key` is required and must be a valid
/// point of large order.
#[test]
fn held_mib_and_link_keys_are_read_and_checked() {
    let d = tmp("heldmib");
    let hp = vyrn_home::write_dev_home(&d.join("home"), 2, 2, 47_200).unwrap();
    let good = std::fs::read_to_string(&hp).unwrap();
    assert_eq!(
        HomeConfig::load(&hp).unwrap().voters_members[0].held_mib,
        None
    );
    let with = good.replacen("\n[voter.0]", "\n[voter.0]\nheld_mib = 16", 1);
    let f = d.join("home/with.toml");
    std::fs::write(&f, &with).unwrap();
    let h = HomeConfig::load(&f).unwrap();
    assert_eq!(h.voters_members[0].held_mib, Some(16));
    assert_eq!(h.voters_members[1].held_mib, None);
    let bad = good.replacen("\n[voter.0]", "\n[voter.0]\nheld_mib = 0", 1);
    let f = d.join("home/bad.toml");
    std::fs::write(&f, &bad).unwrap();
    let errs = HomeConfig::load(&f).unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.what.contains("held_mib") && e.line == line_of(&bad, "held_mib = 0")),
        "{errs:#?}"
    );
    // A data box without its link_key, and one with a point that is not on the curve.
    let at = good.find("[databox.0]").unwrap();
    let line = good[at..]
        .lines()
        .find(|l| l.starts_with("link_key"))
        .unwrap();
    let none = good.replacen(&format!("{line}\n"), "", 1);
    let f = d.join("home/nokey.toml");
    std::fs::write(&f, &none).unwrap();
    let errs = HomeConfig::load(&f).unwrap_err();
    assert!(
        errs.iter().any(|e| e.what.contains("link_key")),
        "{errs:#?}"
    );
    // The identity point: small order, so every link key agreed with it would be known.
    let weak = format!("01{}", "00".repeat(31));
    let off = good.replacen(line, &format!("link_key = \"{weak}\""), 1);
    let f = d.join("home/weak.toml");
    std::fs::write(&f, &off).unwrap();
    let errs = HomeConfig::load(&f).unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.what.contains("link_key is a small-order")),
        "{errs:#?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
