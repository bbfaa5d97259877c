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
# Metro delay: `DELAY=250us deploy/lab/netns.sh up` puts `tc netem` on the box's path legs
# (one-way delay on A and B). Kernels without the netem qdisc (sch_netem) say so and go on
# without delay.
#
# Usage: deploy/lab/netns.sh up | down | status | cut A|B | heal A|B      (as root)
set -euo pipefail

HUB=vyrn-hub
BOX=vyrn-box
VOTERS=(vyrn-r0 vyrn-r1 vyrn-r2 vyrn-r3)
DATA=(vyrn-d0 vyrn-d1)
DELAY="${DELAY:-}"

die() { echo "netns.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (ip netns)"
command -v ip >/dev/null || die "needs iproute2 (apt-get install iproute2)"

# leg NS NAME NET HOST: a veth from namespace NS (its end named NAME, address 10.77.NET.HOST/24)
# to the hub's bridge of network NET.
leg() {
    local ns=$1 name=$2 net=$3 host=$4
    local peer="h${net}-${ns#vyrn-}"
    ip link add "$name" netns "$ns" type veth peer name "$peer" netns "$HUB"
    ip -n "$ns" addr add "10.77.${net}.${host}/24" dev "$name"
    ip -n "$ns" link set "$name" up
    ip -n "$HUB" link set "$peer" master "br${net}" up
}

up() {
    if ip netns list | grep -qw "$HUB"; then
        echo "netns.sh: the lab is up already (deploy/lab/netns.sh down first to rebuild it)"
        return 0
    fi
    ip netns add "$HUB"
    ip -n "$HUB" link set lo up
    for net in 0 1 2; do
        ip -n "$HUB" link add "br${net}" type bridge
        # Flood multicast to every leg: no IGMP querier runs on a lab network.
        ip -n "$HUB" link set "br${net}" type bridge mcast_snooping 0
        ip -n "$HUB" link set "br${net}" up
    done
    for ns in "$BOX" "${VOTERS[@]}" "${DATA[@]}"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
    leg "$BOX" f 0 1
    leg "$BOX" pa 1 1
    leg "$BOX" pb 2 1
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
    if [ -n "$DELAY" ]; then
        for p in pa pb; do
            if ! ip netns exec "$BOX" tc qdisc add dev "$p" root netem delay "$DELAY" 2>/dev/null; then
                echo "netns.sh: no netem qdisc in this kernel: the paths run without the ${DELAY} delay"
                break
            fi
        done
    fi
    echo "netns.sh: lab up: $BOX, ${VOTERS[*]}, ${DATA[*]} on F 10.77.0.0/24, A 10.77.1.0/24, B 10.77.2.0/24"
}

down() {
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
