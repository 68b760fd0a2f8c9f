#!/usr/bin/env bash
# Measures what a backlog costs a cluster: fills one queue with COUNT
# messages of SIZE bytes and no consumer, kills every node (SIGKILL) and
# starts them again on their data, then drains the queue, and prints per
# node the resident memory (VmRSS) and the data directory's size at each
# step, the fill and drain rates, and how long after the restart the
# first peek was answered.
#
#   scripts/bench-backlog.sh            COUNT=1000000 SIZE=1024 NODES=3
#
# The nodes run on this machine with fsync on, each on its own data
# directory under a fresh temporary directory (TMPDIR decides the disk).
# RSS "after drain" is read when the last message has been received and
# again SETTLE seconds later (default 30), once the runtime has had time
# to return freed memory to the kernel.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
count=${COUNT:-1000000} size=${SIZE:-1024} nodes=${NODES:-3} settle=${SETTLE:-30}
run_dir=$(mktemp -d)
export RUN_DIR=$run_dir BASE_PORT=${BASE_PORT:-7700}
trap '"$root/scripts/cluster.sh" stop >/dev/null 2>&1 || true; rm -rf "$run_dir"' EXIT
servers=$(seq -s, -f "127.0.0.1:%g" $((BASE_PORT + 1)) $((BASE_PORT + nodes)))
(cd "$root" && go build -o "$run_dir/raftbus" ./cmd/raftbus)
rb() { "$run_dir/raftbus" "$@" --server "$servers"; }

# row prints one step: each node's RSS and data directory, in MB.
row() { # step
  local line="| $1 |" i pid rss disk
  for i in $(seq 1 "$nodes"); do
    pid=$(cat "$run_dir/n$i.pid")
    rss=$(awk '/^VmRSS:/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status")
    disk=$(du -sm "$run_dir/n$i" | cut -f1)
    line+=" $rss / $disk |"
  done
  echo "$line"
}

# ready waits until a peek of the queue is answered and prints how many
# seconds after $1 (a date +%s.%N) that was.
ready() { # since
  until rb peek backlog --max 1 --timeout 2s >/dev/null 2>&1; do sleep 0.05; done
  echo "$(date +%s.%N) - $1" | bc
}

rate() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.0f" % (r[sys.argv[2]]))' "$@"; }

"$root/scripts/cluster.sh" start "$nodes" >/dev/null
rb status --timeout 60s --interval 0 >/dev/null
rb queue create backlog --max-size-mb $((count * (size + 200) / 1000000 + 1024)) >/dev/null
header="| step |" rule="|---|"
for i in $(seq 1 "$nodes"); do header+=" n$i RSS / disk (MB) |" rule+="---|"; done
echo "backlog of $count messages of $size bytes ($((count * size / 1000000)) MB of bodies) on $nodes node(s)"
echo
echo "$header"
echo "$rule"
row "empty queue"
rb bench --workload fill --queue backlog --count "$count" --size "$size" --output json >"$run_dir/fill.json" 2>/dev/null
row "filled"
for i in $(seq 1 "$nodes"); do kill -KILL "$(cat "$run_dir/n$i.pid")"; done
for i in $(seq 1 "$nodes"); do while kill -0 "$(cat "$run_dir/n$i.pid")" 2>/dev/null; do sleep 0.05; done; done
started=$(date +%s.%N)
"$root/scripts/cluster.sh" start "$nodes" >/dev/null
first_peek=$(ready "$started")
row "restarted, first peek answered"
rb bench --workload drain --queue backlog --count "$count" --mode receive-and-delete --consumers 4 --output json >"$run_dir/drain.json" 2>/dev/null
row "drained"
sleep "$settle"
row "drained, ${settle}s later"
echo
echo "fill $(rate "$run_dir/fill.json" sendMsgsPerSecond) msgs/s, drain (receive-and-delete) $(rate "$run_dir/drain.json" receiveSettleMsgsPerSecond) msgs/s"
echo "whole-cluster SIGKILL and restart: first peek answered ${first_peek}s after the processes started"
