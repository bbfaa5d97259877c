//! `vyrn-seq` as an operator runs it: a dev home's config written with private key files, and
//! the start refused — exit 2, with what is wrong — when the voters are not where they belong.

use std::process::Command;

fn exe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vyrn-seq"))
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
        .args(["--gen-dev-config"])
        .arg(&dir)
        .args(["--lanes", "2", "--sessions-per-lane", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let conf = dir.join("box.conf");
    let cfg = vyrn_seq::boxcfg::BoxConfig::load(&conf).expect("the written config loads");
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
    assert!(exe()
        .arg("--gen-dev-config")
        .arg(&dir)
        .output()
        .unwrap()
        .status
        .success());
    let conf = dir.join("box.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    // A consumer box (its self-fence window within the non-dev bound), no [voter] sections.
    let text: String = text
        .replace("profile = dev", "profile = consumer")
        .lines()
        .filter(|l| !l.starts_with("self_fence_us") && !l.starts_with("hb_us"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(text.contains("profile = consumer"), "{text}");
    std::fs::write(&conf, text).unwrap();
    let out = exe().arg("--config").arg(&conf).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[voter"), "{err}");
    // --voter-doubles outside dev is refused too (whatever the build).
    let out = exe()
        .arg("--config")
        .arg(&conf)
        .arg("--voter-doubles")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
