#!/usr/bin/env bash
# The failover soak: real raftbusd processes under the harshest seeded
# nemesis (kills, SIGTERM stops, pauses, whole-cluster crashes, two of five
# nodes down, a node restarted with its clock 11 minutes ahead, a failed
# disk under a node (as root with mkfs.ext4 and loop devices), and, when
# run as root with ip, iptables and tc: isolated nodes and leaders, bridge
# and majorities-ring partitions, lossy and congested links), faults held
# up to three lock durations, every workload feature (see
# test/failover), entity and rule changes throughout, and the history
# checker. Prints the report: operations, faults by kind, acknowledged,
# lost, duplicated (and whether the entities' semantics allow it), the
# worst unavailability per kind of fault, and every violation.
#
#   scripts/failover.sh [duration] [seed] [nodes]    e.g. scripts/failover.sh 30m 42 5
#
# Nodes default to 5. The history is kept in .run/failover/history.jsonl
# and the output in .run/failover/report.txt.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
duration=${1:-30m}
seed=${2:-$(date +%s%N)}
nodes=${3:-5}
mkdir -p "$root/.run/failover"
export RAFTBUS_FAILOVER_SOAK=1 RAFTBUS_FAILOVER_DURATION=$duration RAFTBUS_FAILOVER_SEED=$seed RAFTBUS_FAILOVER_NODES=$nodes
export RAFTBUS_FAILOVER_HISTORY=$root/.run/failover/history.jsonl
cd "$root"
go test -count=1 -v -run '^TestFailover$' -timeout 0 ./test/failover 2>&1 | tee "$root/.run/failover/report.txt"
