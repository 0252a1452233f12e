#!/usr/bin/env bash
# Pretend hosts on one Linux machine: network namespaces joined by a bridge, for trying (and testing) a
# multi-host gridgnn run over a real network interface. Needs root (or CAP_NET_ADMIN) and iproute2.
#
#   scripts/netns_hosts.sh up PREFIX N      create hosts PREFIX-h0 .. PREFIX-h(N-1); host k has interface
#                                           eth0 with address 10.200.0.(k+1)/24 (and loopback); a switch
#                                           namespace PREFIX-sw holds the bridge that joins them
#   scripts/netns_hosts.sh down PREFIX      kill every process inside them and delete them (idempotent)
#   scripts/netns_hosts.sh cut PREFIX K     take host K's interface down (a host lost from the network)
#
# Every address lives inside the namespaces: nothing is routed to or from the machine's own network.
# Example (two hosts, 4 workers each, Cora on a 2x2x2 3D grid):
#
#   scripts/netns_hosts.sh up demo 2
#   for k in 0 1; do
#     ip netns exec demo-h$k torchrun --nnodes 2 --node-rank $k --nproc-per-node 4 --rdzv-backend c10d \
#       --rdzv-endpoint 10.200.0.1:29400 -m gridgnn train --dataset cora --algo 3d --interface eth0 &
#   done; wait
#   scripts/netns_hosts.sh down demo
set -euo pipefail

SUBNET=10.200.0

usage() {
  echo "usage: $0 up PREFIX N | down PREFIX | cut PREFIX K" >&2
  exit 2
}

up() {
  local prefix=$1 n=$2 k
  [[ $n =~ ^[0-9]+$ ]] && (( n >= 1 && n <= 250 )) || { echo "$0: N must be 1..250, got '$n'" >&2; exit 2; }
  ip netns add "$prefix-sw"
  ip -n "$prefix-sw" link add br0 type bridge
  ip -n "$prefix-sw" link set br0 up
  for ((k = 0; k < n; k++)); do
    ip netns add "$prefix-h$k"
    ip -n "$prefix-h$k" link set lo up
    # the pair is created straight inside the two namespaces: no name ever appears in the machine's own
    ip link add eth0 netns "$prefix-h$k" type veth peer name "p$k" netns "$prefix-sw"
    ip -n "$prefix-sw" link set "p$k" master br0 up
    ip -n "$prefix-h$k" addr add "$SUBNET.$((k + 1))/24" dev eth0
    ip -n "$prefix-h$k" link set eth0 up
  done
}

down() {
  local prefix=$1 ns pid
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}-(h[0-9]+|sw)$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null || true
    done
    ip netns delete "$ns" 2>/dev/null || true
  done
}

cut() {
  ip -n "$1-h$2" link set eth0 down
}

[[ $# -ge 2 ]] || usage
[[ $2 =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$ ]] || { echo "$0: bad PREFIX '$2'" >&2; exit 2; }
case $1 in
  up) [[ $# -eq 3 ]] || usage; up "$2" "$3" ;;
  down) [[ $# -eq 2 ]] || usage; down "$2" ;;
  cut) [[ $# -eq 3 ]] || usage; cut "$2" "$3" ;;
  *) usage ;;
esac
