//! The product `vyrn` holds no test or lab behaviour: every test-only flag is an unknown
//! argument to it. Built without the `lab` feature this test runs its own binary; built with it
//! (`scripts/test.sh` builds the tests with `--features lab`), it runs the product binary that
//! `scripts/test.sh` built first without the feature and named in `VYRN_PRODUCT_BIN`.

use std::path::PathBuf;
use std::process::Command;

/// Each test-only flag, with the subcommand that would take it in a `lab` build.
const TEST_ONLY: &[&[&str]] = &[
    &["replica", "--interim-voter"],
    &["replica", "--lab-cut-path", "A@1"],
    &["replica", "--lab-wrong-root"],
    &["replica", "--lab-isolate-seq"],
    &["standby", "--lab-isolate-seq"],
    &["load", "--misbehave"],
    &["load", "--rounds-per-s", "5"],
    &["up", "--cut-path", "B@2"],
    &["up", "--attack", "1"],
    &["up", "--misbehave"],
    &["up", "--isolate-seq", "9@3000"],
];

fn product() -> PathBuf {
    if cfg!(feature = "lab") {
        PathBuf::from(std::env::var_os("VYRN_PRODUCT_BIN").expect(
            "a lab build of the tests needs VYRN_PRODUCT_BIN: the `vyrn` built without the lab feature (scripts/test.sh builds it)",
        ))
    } else {
        PathBuf::from(env!("CARGO_BIN_EXE_vyrn"))
    }
}

#[test]
fn the_product_binary_refuses_every_test_only_flag() {
    let bin = product();
    for args in TEST_ONLY {
        let out = Command::new(&bin).args(*args).output().expect("run vyrn");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "vyrn {args:?}: a usage error expected, got {:?}: {err}",
            out.status
        );
        assert!(
            err.contains("unexpected argument"),
            "vyrn {args:?}: refused as an unknown argument, not for another reason: {err}"
        );
    }
}

/// A flag every build knows is not refused as unknown (the check above can fail).
#[test]
fn the_product_binary_knows_its_own_flags() {
    let out = Command::new(product())
        .args(["replica", "--help"])
        .output()
        .expect("run vyrn");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--journal"), "{help}");
    assert!(!help.contains("--interim-voter"), "{help}");
}

/// The simulator (`vyrn sim`, the planted bugs it carries) is a lab tool: the product binary
/// does not know the subcommand.
#[test]
fn the_product_binary_has_no_simulator() {
    let out = Command::new(product())
        .args(["sim", "--seed", "1"])
        .output()
        .expect("run vyrn");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unrecognized subcommand"), "{err}");
}
