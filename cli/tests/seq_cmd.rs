//! `vyrn config` and `vyrn seq` as an operator runs them: a dev home's config written with
//! private key files, checked, the example printed and loadable, and the start refused — exit
//! 2, with what is wrong — when the voters are not where they belong or an argument is bad.

use std::process::Command;

fn exe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vyrn"))
}

fn temp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("vyrn-bin-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn gen_dev_config_writes_private_keys_and_a_config_that_loads() {
    let dir = temp("gen");
    let out = exe()
        .args(["config", "init", "--box-only"])
        .arg(&dir)
        .args(["--lanes", "2", "--sessions-per-lane", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let conf = written(&out);
    let cfg = vyrn_home::BoxConfig::load(&conf).expect("the written config loads");
    assert_eq!(cfg.engine.layout.n_lanes, 2);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut keys = 0;
        for e in std::fs::read_dir(dir.join("keys")).unwrap() {
            let m = e.unwrap().metadata().unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o600);
            keys += 1;
        }
        assert!(keys >= 5, "the seq key and a key per session");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_box_outside_dev_without_voters_does_not_start() {
    let dir = temp("novoters");
    let out = exe()
        .args(["config", "init", "--box-only"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let conf = written(&out);
    let text = std::fs::read_to_string(&conf).unwrap();
    // A consumer box (its self-fence window within the non-dev bound), no [voter] sections.
    let text: String = text
        .replace("profile = \"dev\"", "profile = \"consumer\"")
        .lines()
        .filter(|l| !l.starts_with("self_fence_us") && !l.starts_with("hb_us"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(text.contains("profile = \"consumer\""), "{text}");
    std::fs::write(&conf, text).unwrap();
    let out = exe().args(["seq", "--config"]).arg(&conf).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[voter"), "{err}");
    // The voter doubles are test support, never an option of the product's command.
    let out = exe()
        .args(["seq", "--config"])
        .arg(&conf)
        .arg("--voter-doubles")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The path `vyrn config init` reports it wrote.
fn written(out: &std::process::Output) -> std::path::PathBuf {
    let s = String::from_utf8_lossy(&out.stdout);
    let p = s
        .strip_prefix("wrote ")
        .and_then(|r| r.split(" (keys").next())
        .unwrap_or_else(|| panic!("no path in {s:?}"));
    p.into()
}

#[test]
fn a_dev_home_checks_and_every_role_refuses_a_bad_argument_with_exit_2() {
    let dir = temp("home");
    let out = exe()
        .args(["config", "init", "--lanes", "2", "--sessions-per-lane", "2"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let conf = written(&out);
    assert_eq!(conf.extension().and_then(|e| e.to_str()), Some("toml"));
    assert!(dir.join("membership.bin").exists());
    for home_only in [false, true] {
        let mut c = exe();
        c.args(["config", "check"]).arg(&conf);
        if home_only {
            c.arg("--home-only");
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));
    }
    // A broken file: every problem with its line, exit 1.
    let bad = dir.join("bad.toml");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(&bad, text.replacen("lanes = 2", "lanes = \"two\"", 1)).unwrap();
    let out = exe().args(["config", "check"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .position(|l| l.starts_with("lanes = 2"))
        .unwrap()
        + 1;
    assert!(err.contains(&format!("bad.toml:{line}:")), "{err}");
    // Bad arguments: named, exit 2, for every role.
    for args in [
        vec!["seq", "--config"],
        vec!["replica", "--index", "0", "--key", "k", "--home"],
        vec!["data", "--index", "x", "--home"],
        vec!["load", "--rate", "fast", "--home"],
        vec![
            "replica", "--index", "0", "--key", "k", "--ack-us", "1", "--home",
        ],
        vec!["data", "--index", "0", "--hb-us", "0", "--home"],
    ] {
        let mut c = exe();
        c.args(&args);
        if args.last() != Some(&"--config") || args.len() > 2 {
            c.arg(&conf);
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
    // The roles' config errors: a missing file is named.
    let out = exe()
        .args(["data", "--index", "0", "--home"])
        .arg(dir.join("absent.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("absent.toml"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `vyrn config example` prints a file that, with its key files written, loads as the box and
/// as every other role reads it.
#[test]
fn the_printed_example_loads() {
    let dir = temp("example");
    std::fs::create_dir_all(dir.join("keys")).unwrap();
    let out = exe().args(["config", "example"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for s in [
        "[box]",
        "[voter.0]",
        "[databox.0]",
        "[account.",
        "[session.",
    ] {
        assert!(text.contains(s), "{s}");
    }
    let h = loads_with_fresh_keys(&dir, &text, 2);
    assert_eq!(
        (h.voters, h.databoxes.len(), h.engine.sessions.len()),
        (4, 1, 2)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `text` written into `dir` with fresh key files for its box and `sessions` sessions (`seq_pub`
/// rewritten to the fresh seed's, the membership file left out: it is optional); it must load
/// as the box and as every other role reads it.
fn loads_with_fresh_keys(
    dir: &std::path::Path,
    text: &str,
    sessions: u32,
) -> vyrn_home::HomeConfig {
    std::fs::create_dir_all(dir.join("keys")).unwrap();
    let seed = [7u8; 32];
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    vyrn_home::write_secret_file(
        &dir.join("keys/seq.key"),
        format!("{}\n", hex(&seed)).as_bytes(),
    )
    .unwrap();
    for s in 1..=sessions {
        vyrn_home::write_secret_file(
            &dir.join(format!("keys/session-{s}.key")),
            format!("{}\n", hex(&[s as u8; 32])).as_bytes(),
        )
        .unwrap();
    }
    let public = hex(ed25519_dalek::SigningKey::from_bytes(&seed)
        .verifying_key()
        .as_bytes());
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("membership ="))
        .map(|l| {
            if l.starts_with("seq_pub =") {
                format!("seq_pub = \"{public}\"\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let conf = dir.join("home.toml");
    std::fs::write(&conf, &text).unwrap();
    let b = vyrn_home::BoxConfig::load(&conf);
    assert!(b.is_ok(), "{:?}", b.err());
    let h = vyrn_home::HomeConfig::load(&conf);
    assert!(h.is_ok(), "{:?}", h.err());
    h.unwrap()
}

/// deploy/ref-home.toml, the operator's REF starting point, stays a valid home: `profile =
/// "ref"`, one core per tile (`ref_tiles` of it is its core map's length), 1 ms blocks.
#[test]
fn the_deploy_ref_home_loads_and_maps_one_core_per_tile() {
    let dir = temp("refhome");
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/ref-home.toml"),
    )
    .unwrap();
    let h = loads_with_fresh_keys(&dir, &text, 2);
    assert_eq!(h.profile, vyrn_home::Profile::Ref);
    assert_eq!((h.voters, h.databoxes.len()), (4, 2));
    assert_eq!(h.block_ns, 1_000_000);
    let b = vyrn_home::BoxConfig::load(&dir.join("home.toml")).unwrap();
    assert_eq!(vyrn_home::ref_tiles(&b), b.core_map.len());
    let _ = std::fs::remove_dir_all(&dir);
}
