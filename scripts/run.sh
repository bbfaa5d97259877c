#!/usr/bin/env bash
# The README's main command: (1) `vyrn up` — a whole home on loopback as separate processes of
# the one `vyrn` command: four voting replicas with their Simplex engines, one data box, the
# sequencer box and the load generator, from a generated dev home (TOML, fresh 0600 keys, the
# certified membership), with a live view once a second and, at the end, a report (Markdown and
# SVG plots) in target/vyrn-up/run-*/; it exits non-zero unless the home kept its promises;
# (2) the replication-path lab (`vyrn paths`); (3) the capture tool (`vyrn-wire`).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install the Rust toolchain (stable >= 1.85)" >&2
  exit 2
fi
cargo build --release -q -p vyrn -p vyrn-wire --bins
vyrn=target/release/vyrn
bin=target/release

# Knobs: VYRN_SECS (10 s of load), VYRN_LOAD_RATE (5,000 msgs/s: with four Simplex engines on
# two cores, 10,000 started data-tier fetch storms in two of three runs, docs/benchmarks.md),
# VYRN_SEED, VYRN_CONFIG (an existing home file instead of the generated one), VYRN_JOURNAL_LAST=1
# (journal on the last replica only; by default every voter journals), VYRN_KILL_SEQ=S (a failover: the box is
# SIGKILLed S s into the load, the standby promoted, the clients trade on; S >= 8 for a warm
# standby and VYRN_SECS >= S + 4, e.g. VYRN_SECS=14 VYRN_KILL_SEQ=9).
up=(--duration "${VYRN_SECS:-10}" --rate "${VYRN_LOAD_RATE:-5000}" --seed "${VYRN_SEED:-1}")
[ -n "${VYRN_CONFIG:-}" ] && up+=(--home "$VYRN_CONFIG")
[ "${VYRN_JOURNAL_LAST:-0}" = 1 ] && up+=(--journal-last)
[ -n "${VYRN_KILL_SEQ:-}" ] && up+=(--kill-seq "$VYRN_KILL_SEQ")
echo "== vyrn up: a home on loopback — 4 replicas, a data box, the sequencer, the load generator =="
"$vyrn" up "${up[@]}"

echo
echo "== order stream on two lossy loopback paths (vyrn paths) =="
"$vyrn" paths --seed "${VYRN_SEED:-1}" --frames "${VYRN_FRAMES:-200000}" --rate "${VYRN_RATE:-50000}" "$@"

echo
echo "== capture round trip (vyrn-wire corpus + check) =="
cap=$(mktemp --suffix=.cap)
trap 'rm -f "$cap"' EXIT
# (No `tee /dev/stderr`: with stderr redirected to a file, tee would truncate it.)
out=$("$bin/vyrn-wire" corpus --seed "${VYRN_SEED:-1}" --frames 20000 --out "$cap" 2>&1)
echo "$out"
key=$(printf '%s\n' "$out" | sed -n 's/.*seq key \([0-9a-f]*\).*/\1/p')
"$bin/vyrn-wire" check "$cap" --key "$key"
