#!/usr/bin/env bash
# The netns lab (issue 14 item 4): a home's boxes as separate network namespaces on one machine,
# joined by three separate networks, as on a real home (07 §1, §3.1):
#
#   F  10.77.0.0/24  facility: control, consensus p2p, clients, data boxes
#   A  10.77.1.0/24  replication path A (ORDER frames, multicast 239.255.75.1)
#   B  10.77.2.0/24  replication path B (multicast 239.255.75.2)
#
#   namespace   F            A            B
#   vyrn-box    10.77.0.1    10.77.1.1    10.77.2.1     the sequencer box
#   vyrn-rI     10.77.0.1I   10.77.1.1I   10.77.2.1I    voter I (0..3)
#   vyrn-dD     10.77.0.2D                              data box D (0..1)
#   (this one)  10.77.0.254                             vyrn up, the load generator
#
# Each network is a bridge in the namespace vyrn-hub; every box has one veth leg per network
# it is on. The addresses are `HomeAddrs::netns_lab()` (seq/src/boxcfg.rs): `vyrn up --netns`
# writes a home with them and starts every role in its namespace.
#
# Metro delay: `DELAY_US=250 deploy/lab/netns.sh up` delays both replication paths by 250 µs
# one way, box -> voters and back: with `tc netem` on the box's path legs where the kernel has
# the netem qdisc (sch_netem); where it has not, each path network is split in two — the box's
# half (bridge brNs) and the voters' half (brN) — joined by `vyrn lab-delay`, an L2 delay line
# in the hub (its binary: $VYRN, default `vyrn` on PATH, else target/release/vyrn). `down` stops
# the delay lines; each prints the hold time it measured into $STATE/delay-N.log.
#
# Usage: deploy/lab/netns.sh up | down | status | cut A|B | heal A|B      (as root)
set -euo pipefail

HUB=vyrn-hub
BOX=vyrn-box
VOTERS=(vyrn-r0 vyrn-r1 vyrn-r2 vyrn-r3)
DATA=(vyrn-d0 vyrn-d1)
DELAY_US="${DELAY_US:-}"
STATE=/run/vyrn-lab

die() { echo "netns.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (ip netns)"
command -v ip >/dev/null || die "needs iproute2 (apt-get install iproute2)"

# leg NS NAME NET HOST [BRIDGE]: a veth from namespace NS (its end named NAME, address
# 10.77.NET.HOST/24) to the hub's bridge BRIDGE (default brNET, network NET's).
leg() {
    local ns=$1 name=$2 net=$3 host=$4 br=${5:-br$3}
    local peer="h${net}-${ns#vyrn-}"
    ip link add "$name" netns "$ns" type veth peer name "$peer" netns "$HUB"
    ip -n "$ns" addr add "10.77.${net}.${host}/24" dev "$name"
    ip -n "$ns" link set "$name" up
    ip -n "$HUB" link set "$peer" master "$br" up
}

bridge() {
    ip -n "$HUB" link add "$1" type bridge
    # Flood multicast to every leg: no IGMP querier runs on a lab network.
    ip -n "$HUB" link set "$1" type bridge mcast_snooping 0
    ip -n "$HUB" link set "$1" up
}

# Does this kernel have the netem qdisc?
netem_ok() {
    ip netns exec "$HUB" tc qdisc add dev lo root netem delay 1ms 2>/dev/null || return 1
    ip netns exec "$HUB" tc qdisc del dev lo root 2>/dev/null || true
}

vyrn_bin() {
    if [ -n "${VYRN:-}" ]; then echo "$VYRN"
    elif command -v vyrn >/dev/null; then command -v vyrn
    else echo "$(cd "$(dirname "$0")/../.." && pwd)/target/release/vyrn"
    fi
}

up() {
    if ip netns list | grep -qw "$HUB"; then
        echo "netns.sh: the lab is up already (deploy/lab/netns.sh down first to rebuild it)"
        return 0
    fi
    ip netns add "$HUB"
    ip -n "$HUB" link set lo up
    mkdir -p "$STATE"
    rm -f "$STATE"/delay-*.pid "$STATE"/delay-*.log "$STATE"/paths
    for net in 0 1 2; do
        bridge "br${net}"
    done
    local how="no added delay"
    local relay=0
    if [ -n "$DELAY_US" ]; then
        [[ "$DELAY_US" =~ ^[0-9]+$ ]] || die "DELAY_US=$DELAY_US: a whole number of µs"
        if netem_ok; then
            how="${DELAY_US} µs one way (tc netem on the box's path legs)"
        else
            relay=1
            how="${DELAY_US} µs one way (vyrn lab-delay: this kernel has no netem qdisc)"
            bridge br1s
            bridge br2s
        fi
    fi
    for ns in "$BOX" "${VOTERS[@]}" "${DATA[@]}"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
    leg "$BOX" f 0 1
    if [ "$relay" = 1 ]; then
        leg "$BOX" pa 1 1 br1s
        leg "$BOX" pb 2 1 br2s
    else
        leg "$BOX" pa 1 1
        leg "$BOX" pb 2 1
    fi
    local i=0
    for ns in "${VOTERS[@]}"; do
        leg "$ns" f 0 $((10 + i))
        leg "$ns" pa 1 $((10 + i))
        leg "$ns" pb 2 $((10 + i))
        i=$((i + 1))
    done
    local d=0
    for ns in "${DATA[@]}"; do
        leg "$ns" f 0 $((20 + d))
        d=$((d + 1))
    done
    # This namespace's own leg on F: vyrn up, its metrics scrapes and the load generator.
    ip link add vyrn-lab type veth peer name h0-lab netns "$HUB"
    ip addr add 10.77.0.254/24 dev vyrn-lab
    ip link set vyrn-lab up
    ip -n "$HUB" link set h0-lab master br0 up
    if [ -n "$DELAY_US" ] && [ "$relay" = 0 ]; then
        for p in pa pb; do
            ip netns exec "$BOX" tc qdisc add dev "$p" root netem delay "${DELAY_US}us"
        done
    fi
    if [ "$relay" = 1 ]; then
        local bin
        bin=$(vyrn_bin)
        [ -x "$bin" ] || die "DELAY_US needs the vyrn binary for its delay lines: $bin is not there (cargo build --release -p vyrn, or set VYRN)"
        for net in 1 2; do
            # The delay line's two ends: one veth into each half of the path's network.
            ip -n "$HUB" link add "x${net}s" type veth peer name "y${net}s"
            ip -n "$HUB" link add "x${net}v" type veth peer name "y${net}v"
            ip -n "$HUB" link set "y${net}s" master "br${net}s" up
            ip -n "$HUB" link set "y${net}v" master "br${net}" up
            ip -n "$HUB" link set "x${net}s" up
            ip -n "$HUB" link set "x${net}v" up
            ip netns exec "$HUB" "$bin" lab-delay --a "x${net}s" --b "x${net}v" --delay-us "$DELAY_US" \
                >"$STATE/delay-${net}.log" 2>&1 &
            echo $! >"$STATE/delay-${net}.pid"
        done
        sleep 0.2
        for net in 1 2; do
            kill -0 "$(cat "$STATE/delay-${net}.pid")" 2>/dev/null \
                || die "the delay line of network $net did not start: $(cat "$STATE/delay-${net}.log")"
        done
    fi
    echo "paths: $how" >"$STATE/paths"
    echo "netns.sh: lab up: $BOX, ${VOTERS[*]}, ${DATA[*]} on F 10.77.0.0/24, A 10.77.1.0/24, B 10.77.2.0/24; paths: $how"
}

down() {
    for pidf in "$STATE"/delay-*.pid; do
        [ -e "$pidf" ] || continue
        local pid
        pid=$(cat "$pidf")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$pidf"
        grep -h "lab-delay" "${pidf%.pid}.log" 2>/dev/null || true
    done
    rm -f "$STATE/paths"
    ip link del vyrn-lab 2>/dev/null || true
    for ns in "$BOX" "${VOTERS[@]}" "${DATA[@]}" "$HUB"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    echo "netns.sh: lab down"
}

status() {
    ip netns list | grep -w "$HUB" >/dev/null || { echo "netns.sh: the lab is down"; exit 1; }
    for net in 0 1 2; do
        ip -n "$HUB" -br link show "br${net}"
    done
    ip -br addr show vyrn-lab
    cat "$STATE/paths" 2>/dev/null || true
}

# cut/heal: take a whole replication path's network down (its bridge) and back: 07 §14 "path
# down" as the wire sees it, not a knob inside a process.
path_br() {
    case "${1:-}" in
        A|a) echo br1 ;;
        B|b) echo br2 ;;
        *) die "path A or B" ;;
    esac
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    cut) ip -n "$HUB" link set "$(path_br "${2:-}")" down; echo "netns.sh: path ${2} cut" ;;
    heal) ip -n "$HUB" link set "$(path_br "${2:-}")" up; echo "netns.sh: path ${2} healed" ;;
    *) die "usage: $0 up | down | status | cut A|B | heal A|B" ;;
esac
