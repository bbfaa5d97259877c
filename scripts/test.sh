#!/usr/bin/env bash
# The project's test command (README "Run the tests"). Order: format and lints, unit and
# property tests, loom models, golden captures, a bounded fuzz run, a smoke run of the benches.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n=== %s ===\n' "$*"; }

step "format"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "tests"
cargo test --workspace

step "loom models (rings)"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p vyrn-rings --release --lib -- loom

if [ -x scripts/fuzz.sh ] && [ "${VYRN_SKIP_FUZZ:-0}" != 1 ]; then
  step "bounded fuzz"
  ./scripts/fuzz.sh "${VYRN_FUZZ_SECONDS:-20}"
fi

step "bench smoke (VYRN_BENCH_QUICK=1)"
VYRN_BENCH_QUICK=1 cargo bench -p vyrn-bench

echo
echo "all checks passed"
