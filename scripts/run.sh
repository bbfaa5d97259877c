#!/usr/bin/env bash
# The README's main command: (1) a whole home on loopback as separate processes of the one
# `vyrn` command — four voting replicas (`vyrn replica`), one data box (`vyrn data`), the
# sequencer box (`vyrn seq`), all from one generated home file (TOML) — driven by the load
# generator (`vyrn load`: a ping run, then the open-loop mix) sending copy 1 to the sequencer
# and copy 2 to the data box; each prints a line a second and a summary; (2) the order-stream
# path on two lossy paths with NACK repair (`vyrn paths`); (3) the capture tool.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install the Rust toolchain (stable >= 1.85)" >&2
  exit 2
fi
cargo build --release -q -p vyrn -p vyrn-wire --bins
vyrn=target/release/vyrn
bin=target/release

# A dev home's file and fresh keys (0600), written once (`vyrn config init`); edit
# target/vyrn-home/home.toml to change it (`vyrn config check` says what is wrong, and where).
# The sequencer reads it with its seed; the replicas, the data box and the clients read it
# without (`seq_pub` instead). A generated home from before the TOML format is written again.
conf=${VYRN_CONFIG:-target/vyrn-home/home.toml}
dir=$(dirname "$conf")
if [ -z "${VYRN_CONFIG:-}" ] && [ -f "$dir/box.conf" ] && [ ! -f "$conf" ]; then
  rm -rf "$dir" # the generated dev home only; a VYRN_CONFIG file is never touched
fi
if [ ! -f "$conf" ]; then
  "$vyrn" config init "$dir" --lanes 4 --sessions-per-lane 8
fi
secs=${VYRN_SECS:-5}
ping_secs=${VYRN_PING_SECS:-2}
run_secs=$((secs + ping_secs + 4))
logs=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$logs"; }
trap cleanup EXIT
# The load generator stays off the box's hot core (core_map's first entry, where the response
# path spins): on the cold one.
cold=$(sed -n 's/^core_map *= *\[ *[0-9]*, *\([0-9]*\).*/\1/p' "$conf")
pin=() roles_pin=()
[ -n "$cold" ] && pin=(--core "$cold")
# VYRN_PIN_ROLES=1 pins the replicas and the data box to the cold core too; by default the OS
# places them (on 2 cores, pinning all of them to one overloaded it at 10k msgs/s and the box
# fenced; docs/benchmarks.md).
[ -n "$cold" ] && [ "${VYRN_PIN_ROLES:-0}" = 1 ] && roles_pin=(--cores "$cold")
echo "== a home on loopback: 4 replicas (vyrn replica), data box (vyrn data), sequencer (vyrn seq), load (vyrn load) =="
# The replicas and the data box start first: they join the paths before the first frame.
# Every role serves Prometheus metrics while it runs (docs/sre.md): the box on 127.0.0.1:47490,
# the data box on :47491, replica i on :4749(2+i) — `curl -s 127.0.0.1:47490/metrics`.
for i in 0 1 2 3; do
  # Replica 3 journals every block it votes for on two drive directories (fresh each run: the
  # box's heights start at 1 again), with the portable backend. Measured on this 2-core dev
  # box (docs/benchmarks.md): with io_uring + O_DIRECT, or with all four replicas journaling,
  # the box self-fenced under the open loop. VYRN_JOURNAL_ALL=1 journals on all four,
  # VYRN_JOURNAL_BACKEND=auto|uring|std picks the backend.
  journal=()
  if [ "$i" = 3 ] || [ "${VYRN_JOURNAL_ALL:-0}" = 1 ]; then
    journal=(--journal "$logs/journal-$i-0,$logs/journal-$i-1" --journal-backend "${VYRN_JOURNAL_BACKEND:-std}")
    # Its writer thread stays off the box's hot core.
    [ -n "$cold" ] && journal+=(--journal-cores "$cold")
  fi
  # Each replica's Simplex engine keeps its journal in a fresh directory (a dev home's heights
  # start at 1 each run).
  "$vyrn" replica --home "$conf" --index "$i" --key "$dir/keys/voter-$i.key" --secs $((run_secs + 4)) \
    --consensus-dir "$logs/consensus-$i" --metrics "127.0.0.1:$((47492 + i))" \
    "${journal[@]}" "${roles_pin[@]}" >"$logs/replica-$i.log" 2>&1 &
  pids+=($!)
done
"$vyrn" data --home "$conf" --index 0 --secs $((run_secs + 4)) --metrics 127.0.0.1:47491 "${roles_pin[@]}" >"$logs/data-0.log" 2>&1 &
pids+=($!)
# The replicas' Simplex engines dial each other (authenticated p2p) before the first block.
sleep 3
# The box runs a little longer than the load so the last answers, durable and final arrive.
"$vyrn" seq --config "$conf" --secs "$run_secs" --metrics 127.0.0.1:47490 >"$logs/seq.log" 2>&1 &
seq_pid=$!
sleep 1
# As root, the generator runs at a raised priority so its wake-ups on that shared core are not
# queued behind the replicas and the box's cold tiles (it measures the home, not its own
# scheduling): nice -5 for the ping run, -2 under the open-loop mix (docs/benchmarks.md).
nice=() nice_open=()
[ "$(id -u)" = 0 ] && nice=(--nice -5) nice_open=(--nice -2)
load_rc=0
echo "-- load generator (vyrn load) in ping mode: one request in flight, request -> answer round trips --"
"$vyrn" load --home "$conf" --secs "$ping_secs" --ping "${pin[@]}" "${nice[@]}" \
  || load_rc=$?
# 5,000 msgs/s by default: with four Simplex engines more on the two cores, 10,000 started
# fetch storms at the data box in two of three runs (docs/benchmarks.md); VYRN_LOAD_RATE sets it.
echo "-- load generator (vyrn load), open loop on the other 31 sessions: copy 1 to the sequencer, copy 2 to the data box --"
"$vyrn" load --home "$conf" --secs "$secs" --skip 1 \
  --rate "${VYRN_LOAD_RATE:-5000}" --seed "${VYRN_SEED:-1}" "${pin[@]}" "${nice_open[@]}" || load_rc=$?
seq_rc=0
wait "$seq_pid" || seq_rc=$?
rep_rc=0
for p in "${pids[@]}"; do wait "$p" || rep_rc=$?; done
pids=()
echo "-- the sequencer box's own lines (vyrn seq) --"
cat "$logs/seq.log"
echo "-- the data box (vyrn data): its last line and summary --"
grep -v '^\[' "$logs/data-0.log" || true
grep '^\[' "$logs/data-0.log" | tail -1 || true
echo "-- the replicas (vyrn replica): alarms and summaries; equal replay digests = the same responses --"
for i in 0 1 2 3; do
  grep -v '^\[' "$logs/replica-$i.log" | grep -v 'failover suspicion' || true
  n=$(grep -c 'failover suspicion' "$logs/replica-$i.log" || true)
  [ "$n" != 0 ] && echo "replica $i: $n failover-suspicion lines (07 §9.1; expected once the box stops at the end)"
done
digests=$(grep -h 'replay digest' "$logs"/replica-*.log | awk '{print $5}' | sort -u | wc -l)
if [ "$load_rc" != 0 ] || [ "$seq_rc" != 0 ] || [ "$rep_rc" != 0 ]; then
  echo "vyrn load exited $load_rc, vyrn seq exited $seq_rc, a replica or the data box exited $rep_rc" >&2
  exit 1
fi
if [ "$digests" != 1 ]; then
  echo "the replicas' replay digests differ ($digests distinct)" >&2
  exit 1
fi

echo
echo "== order stream on two lossy loopback paths (vyrn paths) =="
"$vyrn" paths --seed "${VYRN_SEED:-1}" --frames "${VYRN_FRAMES:-200000}" --rate "${VYRN_RATE:-50000}" "$@"

echo
echo "== capture round trip (vyrn-wire corpus + check) =="
cap=$(mktemp --suffix=.cap)
trap 'rm -f "$cap"; rm -rf "$logs"' EXIT
# (No `tee /dev/stderr`: with stderr redirected to a file, tee would truncate it.)
out=$("$bin/vyrn-wire" corpus --seed "${VYRN_SEED:-1}" --frames 20000 --out "$cap" 2>&1)
echo "$out"
key=$(printf '%s\n' "$out" | sed -n 's/.*seq key \([0-9a-f]*\).*/\1/p')
"$bin/vyrn-wire" check "$cap" --key "$key"
