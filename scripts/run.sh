#!/usr/bin/env bash
# The README's main command. Until the whole home exists (data box and replicas on their ports),
# it runs: (1) the sequencer box's tiles on one thread driven by the client library's open-loop
# load generator over loopback UDP, frames on two multicast paths to four voter doubles, with
# per-second progress and latency percentiles (vyrn-home --udp); (2) the
# order-stream path end to end on loopback: a seeded REF stream on two lossy paths, NACK
# repair, the replica decoder, header verification (vyrn-paths); (3) the capture tool.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install the Rust toolchain (stable >= 1.85)" >&2
  exit 2
fi
cargo build --release -q -p vyrn-wire -p vyrn-bench --bins
bin=target/release

echo "== sequencer box + load generator (vyrn-home) =="
# A dev home's config and fresh keys (0600), written once; edit target/dev-home/box.conf to change it.
conf=${VYRN_CONFIG:-target/dev-home/box.conf}
if [ ! -f "$conf" ]; then
  "$bin/vyrn-home" --gen-dev-config "$(dirname "$conf")" --lanes 4 --sessions-per-lane 8
fi
"$bin/vyrn-home" --config "$conf" --udp --secs "${VYRN_SECS:-5}" --rate "${VYRN_LOAD_RATE:-10000}" --seed "${VYRN_SEED:-1}"

echo
echo "== order stream on two lossy loopback paths (vyrn-paths) =="
"$bin/vyrn-paths" --seed "${VYRN_SEED:-1}" --frames "${VYRN_FRAMES:-200000}" --rate "${VYRN_RATE:-50000}" "$@"

echo
echo "== capture round trip (vyrn-wire corpus + check) =="
cap=$(mktemp --suffix=.cap)
trap 'rm -f "$cap"' EXIT
# (No `tee /dev/stderr`: with stderr redirected to a file, tee would truncate it.)
out=$("$bin/vyrn-wire" corpus --seed "${VYRN_SEED:-1}" --frames 20000 --out "$cap" 2>&1)
echo "$out"
key=$(printf '%s\n' "$out" | sed -n 's/.*seq key \([0-9a-f]*\).*/\1/p')
"$bin/vyrn-wire" check "$cap" --key "$key"
