//! The box's config file and startup checks (issue 4 item 6): a generated dev config loads and
//! passes; every kind of mistake is reported with its file and line, all at once; the machine
//! checks catch a core map that does not fit, ports in use and keys that are not private.

use std::path::PathBuf;
use vyrn_seq::boxcfg::{startup_checks, write_dev_config, BoxConfig, Profile};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vyrn-boxcfg-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

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
    let sc = c.seq_config();
    assert_eq!(sc.voters, 4);
    assert_ne!(sc.seq_key, [0; 32]);
    assert!(startup_checks(&c).is_empty(), "{:?}", startup_checks(&c));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn every_mistake_is_reported_with_its_line() {
    let d = tmp("bad");
    let p = write_dev_config(&d, 2, 2, port(1)).unwrap();
    let good = std::fs::read_to_string(&p).unwrap();
    let cases: Vec<(String, &str)> = vec![
        (good.replace("profile = dev", "profile = fast"), "profile"),
        (good.replace("lanes = 2", "lanes = two"), "does not parse"),
        (good.replace("voters = 4", "voters = 3"), "n ≥ 4"),
        (good.replace("[box]", "[box]\nturbo = 1"), "no key turbo"),
        (good.replace("book = 1", "book = 1\nbook = 2"), "twice"),
        (
            good.replacen(
                "key_file = keys/session-1.key",
                "key_file = keys/none.key",
                1,
            ),
            "key_file",
        ),
        (
            good.replacen("lane = 0", "lane = 9", 1),
            "lane = 9 is out of range",
        ),
        (good.replace("[session 10001]", "[session 1]"), "twice"),
        (good.replace("[box]", "[boxx]\n[box]"), "unknown section"),
        (
            good.replace("client_port", "client port"),
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
        good.replace("profile = dev", "profile = x")
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
