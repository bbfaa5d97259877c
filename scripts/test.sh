#!/usr/bin/env bash
# The project's test command (README "Run the tests"). Order: format and lints, unit and
# property tests, loom models, golden captures, a bounded fuzz run, a smoke run of the benches.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n=== %s ===\n' "$*"; }

disk() { df -h . | awk 'NR == 2 {print "disk: " $4 " free of " $2}'; }
disk

step "format"
cargo fmt --all -- --check

# The tests and the lab faults of `vyrn up` need `vyrn`'s `lab` feature, and `hwloc` (libhwloc's
# topology for the REF core map, `vyrn_tile::topo`) is built and tested too; the product build
# (no feature) is linted and built too, and its refusal of every test-only flag is a test
# (cli/tests/product_flags.rs).
step "clippy (the product build, then everything with the lab feature)"
cargo clippy -p vyrn -p vyrn-replica -p vyrn-tile --all-targets -- -D warnings
cargo clippy -p vyrn-client --lib -- -D warnings   # the client library as a client links it: no loadgen
cargo clippy --workspace --all-targets --features vyrn/lab,vyrn/hwloc -- -D warnings

step "docs (rustdoc warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q

step "tests"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The product binary (no lab feature), kept aside: the lab build of the tests overwrites it.
tdir=${CARGO_TARGET_DIR:-target}
cargo build -q -p vyrn
mkdir -p "$tdir/product"
cp "$tdir/debug/vyrn" "$tdir/product/vyrn"
VYRN_PRODUCT_BIN="$(cd "$tdir" && pwd)/product/vyrn" cargo test --workspace --features vyrn/lab,vyrn/hwloc 2>&1 | tee "$log"

step "loom models (rings)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p vyrn-rings --release --lib -- loom 2>&1 | tee -a "$log"

if [ -x scripts/fuzz.sh ] && [ "${VYRN_SKIP_FUZZ:-0}" != 1 ]; then
  step "bounded fuzz"
  disk
  ./scripts/fuzz.sh "${VYRN_FUZZ_SECONDS:-20}"
fi

disk
step "bench smoke (VYRN_BENCH_QUICK=1, test profile)"
# The smoke proves every bench builds and runs; it reuses the test build (`--profile test`)
# instead of a second, thin-LTO release build of the whole workspace (CI took 48 minutes at
# stop 18). Figures in docs/ come from `cargo bench` (release) only.
VYRN_BENCH_QUICK=1 cargo bench -p vyrn-bench --profile test

read -r passed failed < <(awk '/^test result:/ {p += $4; f += $6} END {print p + 0, f + 0}' "$log")
echo
echo "all checks passed (format, clippy, tests, loom, fuzz, bench smoke)"
echo "tests: ${passed} passed, ${failed} failed"
