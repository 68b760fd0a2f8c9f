#!/usr/bin/env bash
# Runs the standard benchmark set against fresh local clusters (3 nodes,
# then 1 node) of raftbusd processes on this machine and writes the
# results as a markdown table (default docs/benchmarks-results.md).
#
#   scripts/bench.sh [output.md]     DURATION=10s by default per run
#
# Every node and the client share this machine, fsync on. Needs python3
# to assemble the table from the runs' JSON.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/docs/benchmarks-results.md}
duration=${DURATION:-10s}
run_dir=$(mktemp -d)
export RUN_DIR=$run_dir BASE_PORT=${BASE_PORT:-7600}
trap '"$root/scripts/cluster.sh" stop >/dev/null 2>&1 || true; rm -rf "$run_dir"' EXIT

(cd "$root" && go build -o "$run_dir/raftbus" ./cmd/raftbus)
results=$run_dir/results.jsonl

bench() { # nodes label flags...
  local nodes=$1 label=$2; shift 2
  local servers
  servers=$(seq -s, -f "127.0.0.1:%g" $((BASE_PORT + 1)) $((BASE_PORT + nodes)))
  echo "== $nodes node(s): $label" >&2
  "$run_dir/raftbus" bench --server "$servers" --duration "$duration" --output json "$@" |
    python3 -c 'import json,sys; r=json.load(sys.stdin); r["label"]=sys.argv[1]; r["nodes"]=int(sys.argv[2]); print(json.dumps(r))' "$label" "$nodes" >>"$results"
}

for nodes in 3 1; do
  "$root/scripts/cluster.sh" stop >/dev/null 2>&1 || true
  rm -rf "${run_dir:?}"/n*
  "$root/scripts/cluster.sh" start "$nodes" >/dev/null
  "$run_dir/raftbus" status --server "127.0.0.1:$((BASE_PORT + 1))" --timeout 30s >/dev/null
  bench "$nodes" "1 KiB, 256 in flight" --inflight 256 --producers 4 --consumers 4
  bench "$nodes" "1 KiB, 1 in flight (latency)" --inflight 1 --producers 1 --consumers 1
  if [[ $nodes == 3 ]]; then
    bench "$nodes" "1 KiB, 256 in flight, 16 partitions" --inflight 256 --producers 4 --consumers 8 --partitions 16
    bench "$nodes" "64 KiB, 64 in flight" --inflight 64 --producers 4 --consumers 4 --size 65536
    bench "$nodes" "1 KiB, receive-and-delete" --inflight 256 --producers 4 --consumers 4 --mode receive-and-delete
  fi
done

python3 - "$results" "$out" "$duration" <<'PY'
import json, platform, os, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
with open(sys.argv[2], "w") as f:
    f.write(f"Machine: {os.cpu_count()} cores ({cpu}), Linux {platform.release()}; every node and the client on it; fsync on; {sys.argv[3]} per run.\n\n")
    f.write("| nodes | run | send msgs/s | MB/s | receive+settle msgs/s | send-ack p50 / p90 / p99 / max ms | end-to-end p50 / p99 ms |\n")
    f.write("|---|---|---|---|---|---|---|\n")
    for r in rows:
        s, e = r["send_ack_latency"], r["end_to_end_latency"]
        f.write(f'| {r["nodes"]} | {r["label"]} | {r["send_msgs_per_second"]:.0f} | {r["send_mb_per_second"]:.1f} | '
                f'{r["receive_settle_msgs_per_second"]:.0f} | {s["p50_ms"]:.2f} / {s["p90_ms"]:.2f} / {s["p99_ms"]:.2f} / {s["max_ms"]:.2f} | '
                f'{e["p50_ms"]:.1f} / {e["p99_ms"]:.1f} |\n')
print(open(sys.argv[2]).read())
PY
