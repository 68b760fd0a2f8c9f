#!/usr/bin/env bash
# Runs the failover suite: real raftbusd processes under a seeded nemesis
# (kills, pauses, whole-cluster crashes, and network partitions when run as
# root with ip and iptables), SDK workloads through the faults, and the
# history checker. Prints the report.
#
#   scripts/failover.sh [duration] [seed] [nodes]    e.g. scripts/failover.sh 10m 42 5
#
# The history is kept in .run/failover/history.jsonl for a failed run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
duration=${1:-2m}
seed=${2:-$(date +%s%N)}
nodes=${3:-3}
mkdir -p "$root/.run/failover"
export RAFTBUS_FAILOVER_DURATION=$duration RAFTBUS_FAILOVER_SEED=$seed RAFTBUS_FAILOVER_NODES=$nodes
export RAFTBUS_FAILOVER_HISTORY=$root/.run/failover/history.jsonl
cd "$root"
exec go test -count=1 -v -run '^TestFailover$' -timeout 0 ./test/failover
