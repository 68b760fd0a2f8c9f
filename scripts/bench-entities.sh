#!/usr/bin/env bash
# Measures what entities cost a cluster while nothing uses them: creates
# COUNT queues of PARTITIONS partitions from CLIENTS clients at once (each
# create followed by one send, both timed), then, with no traffic at all,
# waits SETTLE seconds and prints per node over IDLE seconds its CPU,
# goroutines and resident memory; then deletes every queue (timed) and
# prints the same again. QUIESCE is the nodes' --quiesce-after (0: idle
# partitions keep running, as before it existed).
#
#   scripts/bench-entities.sh     COUNT=1000 PARTITIONS=1 CLIENTS=8 IDLE=30 NODES=3 QUIESCE=30s SETTLE=40 KILL=
#
# The nodes run on this machine with fsync on, each on its own data
# directory under a fresh temporary directory (TMPDIR decides the disk).
# CPU is utime+stime of the node processes (/proc/<pid>/stat) over the
# idle window, in cores; goroutines come from each node's /metrics.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
count=${COUNT:-1000} partitions=${PARTITIONS:-1} clients=${CLIENTS:-8} idle=${IDLE:-30} nodes=${NODES:-3}
quiesce=${QUIESCE:-30s} settle=${SETTLE:-40}
export RAFTBUSD_FLAGS="--quiesce-after $quiesce ${RAFTBUSD_FLAGS:-}"
run_dir=$(mktemp -d)
export RUN_DIR=$run_dir BASE_PORT=${BASE_PORT:-7700}
trap '"$root/scripts/cluster.sh" stop >/dev/null 2>&1 || true; rm -rf "$run_dir"' EXIT
servers=$(seq -s, -f "127.0.0.1:%g" $((BASE_PORT + 1)) $((BASE_PORT + nodes)))
(cd "$root" && go build -o "$run_dir/raftbus" ./cmd/raftbus)
rb() { "$run_dir/raftbus" "$@" --server "$servers"; }
pid() { cat "$run_dir/n$1.pid"; }
ticks() { awk '{print $14 + $15}' "/proc/$(pid "$1")/stat"; }
hz=$(getconf CLK_TCK)

# idle_row prints one step: the CPU of each node over the idle window
# (in cores), its goroutines and RSS (MB), and the nodes' CPU together.
idle_row() { # step
  local i before=() line="| $1 |" total=0
  for i in $(seq 1 "$nodes"); do before[i]=$(ticks "$i"); done
  sleep "$idle"
  for i in $(seq 1 "$nodes"); do
    local cores goroutines rss
    cores=$(echo "scale=3; ($(ticks "$i") - ${before[i]}) / $hz / $idle" | bc)
    total=$(echo "scale=3; $total + $cores" | bc)
    goroutines=$(curl -s "http://127.0.0.1:$((BASE_PORT + 2000 + i))/metrics" | awk '/^go_goroutines / {print $2}')
    rss=$(awk '/^VmRSS:/ {printf "%.0f", $2 / 1024}' "/proc/$(pid "$i")/status")
    line+=" $cores / $goroutines / $rss |"
  done
  echo "$line $total |"
}

"$root/scripts/cluster.sh" start "$nodes" >/dev/null
rb status --timeout 60s --interval 0 >/dev/null
header="| step |" rule="|---|"
for i in $(seq 1 "$nodes"); do header+=" n$i cores / goroutines / RSS MB |" rule+="---|"; done
echo "$count queues of $partitions partition(s) on $nodes node(s), created and deleted by $clients clients; --quiesce-after $quiesce; idle windows of ${idle}s, ${settle}s after the creates"
echo
echo "$header all nodes, cores |"
echo "$rule---|"
idle_row "no queues"
rb bench --workload create --queue idle --count "$count" --partitions "$partitions" --producers "$clients" >"$run_dir/create.txt"
sleep "$settle"
idle_row "$count queues, idle"
rb bench --workload send-each --queue idle --count "$count" --producers "$clients" >"$run_dir/wake.txt"
if [[ -n ${KILL:-} ]]; then
  kill -9 "$(pid "$nodes")"
  rb bench --workload send-each --queue idle --count "$count" --producers "$clients" >"$run_dir/failover.txt"
  rm -f "$run_dir/n$nodes.pid"
  "$root/scripts/cluster.sh" start "$nodes" >/dev/null
  sed -i '1s/^/after SIGKILL of n'"$nodes"': /' "$run_dir/failover.txt"
fi
rb bench --workload delete --queue idle --count "$count" --producers "$clients" >"$run_dir/delete.txt"
idle_row "deleted"
echo
cat "$run_dir/create.txt" "$run_dir/wake.txt" "$run_dir"/failover.txt "$run_dir/delete.txt" 2>/dev/null
