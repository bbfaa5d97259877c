#!/usr/bin/env bash
# The README's main command. Until the whole home exists (data box and replicas on their ports),
# it runs: (1) the sequencer box (`vyrn-seq`: the hot path spinning on one pinned core, the cold
# tiles blocking on the other, from the dev config) with the light voter responder on the
# replication paths, driven over loopback UDP by the load generator as its own process
# (`vyrn-load`: a ping run, then the open-loop mix), each printing a line per second and a summary;
# (2) the
# order-stream path end to end on loopback: a seeded REF stream on two lossy paths, NACK
# repair, the replica decoder, header verification (vyrn-paths); (3) the capture tool.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install the Rust toolchain (stable >= 1.85)" >&2
  exit 2
fi
cargo build --release -q -p vyrn-wire -p vyrn-bench --bins
cargo build --release -q -p vyrn-seq --features testkit --bins
bin=target/release

# A dev home's config and fresh keys (0600), written once; edit target/dev-home/box.conf to change it.
conf=${VYRN_CONFIG:-target/dev-home/box.conf}
if [ ! -f "$conf" ]; then
  "$bin/vyrn-seq" --gen-dev-config "$(dirname "$conf")" --lanes 4 --sessions-per-lane 8
fi
secs=${VYRN_SECS:-5}
ping_secs=${VYRN_PING_SECS:-2}
seq_log=$(mktemp --suffix=.seq.log)
echo "== sequencer box (vyrn-seq, threaded, voter doubles) + load generator (vyrn-load) =="
# The box runs a little longer than the load so the last answers, durable and final arrive.
"$bin/vyrn-seq" --config "$conf" --voter-doubles --secs $((secs + ping_secs + 4)) >"$seq_log" 2>&1 &
seq_pid=$!
sleep 1
client_port=$(sed -n 's/^client_port *= *\([0-9]*\).*/\1/p' "$conf")
# The load generator stays off the box's hot core (core_map's first entry): on the cold one.
cold=$(sed -n 's/^core_map *= *[0-9]*, *\([0-9]*\).*/\1/p' "$conf")
pin=()
[ -n "$cold" ] && pin=(--core "$cold")
# As root, the generator runs at a raised priority so its wake-ups on that shared core are not
# queued behind the box's cold tiles and voters (it measures the box, not its own scheduling):
# nice -5 for the ping run, -2 under the open-loop mix (32 busy sessions at -5 would take the
# core from the finality path; docs/benchmarks.md).
nice=() nice_open=()
[ "$(id -u)" = 0 ] && nice=(--nice -5) nice_open=(--nice -2)
load_rc=0
echo "-- load generator (vyrn-load) in ping mode: one request in flight, request -> answer round trips --"
"$bin/vyrn-load" --config "$conf" --seq "127.0.0.1:$client_port" --secs "$ping_secs" --ping "${pin[@]}" "${nice[@]}" \
  || load_rc=$?
echo "-- load generator (vyrn-load), open loop, copy 1 to 127.0.0.1:$client_port --"
"$bin/vyrn-load" --config "$conf" --seq "127.0.0.1:$client_port" --secs "$secs" \
  --rate "${VYRN_LOAD_RATE:-10000}" --seed "${VYRN_SEED:-1}" "${pin[@]}" "${nice_open[@]}" || load_rc=$?
seq_rc=0
wait "$seq_pid" || seq_rc=$?
echo "-- the box's own lines (vyrn-seq) --"
cat "$seq_log"
rm -f "$seq_log"
if [ "$load_rc" != 0 ] || [ "$seq_rc" != 0 ]; then
  echo "vyrn-load exited $load_rc, vyrn-seq exited $seq_rc" >&2
  exit 1
fi

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
