#!/usr/bin/env bash
# Bounded fuzz run of every decoder target (shared/guides/fuzzing.md): cargo-fuzz on the
# stable toolchain with RUSTC_BOOTSTRAP=1. Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]
# Seeds come from fuzz/corpus/<target>/ (checked in); crashes land in
# fuzz/artifacts/<target>/ and fail the run.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-20}
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version 0.13.2 >/dev/null
fi
export RUSTC_BOOTSTRAP=1
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^vyrn-fuzz$')
for t in $targets; do
  mkdir -p "corpus/$t"
  echo "--- fuzz $t for ${secs}s"
  log=$(mktemp)
  # Fuzz a scratch copy so the checked-in seed corpus stays small; regressions/ holds every
  # input that ever crashed a target and is replayed first.
  work=$(mktemp -d)
  cp -r "corpus/$t/." "$work/"
  [ -d "regressions/$t" ] && cp -r "regressions/$t/." "$work/"
  if ! cargo fuzz run "$t" "$work" -- -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $t failed (crash or build error): see fuzz/artifacts/$t;" \
      "copy the input to fuzz/regressions/$t/ with a test before fixing it" >&2
    exit 1
  fi
  grep -E '^(#[0-9]+ +(INITED|DONE)|Done)' "$log" || tail -n 3 "$log"
  rm -rf "$log" "$work"
done
echo "fuzz: all targets ran ${secs}s with no crash"
