#!/usr/bin/env bash
# Runs the standard benchmark set against fresh local clusters (3 nodes,
# then 1 node) of raftbusd processes on this machine and writes the
# results as a markdown table (default docs/benchmarks-results.md).
#
#   scripts/bench.sh [output.md]     DURATION=10s by default per run
#
# Every node and the client share this machine, fsync on. Besides the
# client's figures, each run reports per node the bytes the raftbusd
# process had written to disk (/proc/<pid>/io write_bytes) per payload
# byte it stores (every node holds every partition here), and the syncs
# per second of its node log (from `raftbus status`), and for the run the
# CPU per message of the client and the nodes, the heap the nodes
# allocated per message, and the foreign load (CPU other processes used
# meanwhile; see `raftbus bench --help`). Needs
# python3 to assemble the table from the runs' JSON.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/docs/benchmarks-results.md}
duration=${DURATION:-10s}
run_dir=$(mktemp -d)
export RUN_DIR=$run_dir BASE_PORT=${BASE_PORT:-7600}
trap '"$root/scripts/cluster.sh" stop >/dev/null 2>&1 || true; rm -rf "$run_dir"' EXIT

(cd "$root" && go build -o "$run_dir/raftbus" ./cmd/raftbus)
results=$run_dir/results.jsonl

# counters prints each node's disk writes and node log syncs so far, as
# JSON: {"n1": {"write_bytes": ..., "syncs": ...}, ...}.
counters() { # nodes
  "$run_dir/raftbus" status --server "127.0.0.1:$((BASE_PORT + 1))" --output json --timeout 30s --interval 0 >"$run_dir/status.json"
  python3 - "$run_dir" "$1" "$run_dir/status.json" <<'PY'
import json, sys
run, n, st = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))
logs = {x["nodeId"]: x.get("log") or {} for x in st["cluster"]["nodes"]}
out = {}
for i in range(1, n + 1):
    pid = open(f"{run}/n{i}.pid").read().strip()
    io = dict(l.split(": ") for l in open(f"/proc/{pid}/io").read().splitlines())
    out[f"n{i}"] = {"write_bytes": int(io["write_bytes"]), "syncs": int(logs.get(f"n{i}", {}).get("syncs", 0))}
print(json.dumps(out))
PY
}

bench() { # nodes label flags...
  local nodes=$1 label=$2; shift 2
  local servers before pids
  servers=$(seq -s, -f "127.0.0.1:%g" $((BASE_PORT + 1)) $((BASE_PORT + nodes)))
  pids=$(cat "$run_dir"/n*.pid | paste -sd,)
  echo "== $nodes node(s): $label" >&2
  before=$(counters "$nodes")
  if ! "$run_dir/raftbus" bench --server "$servers" --duration "$duration" --node-pids "$pids" --output json "$@" >"$run_dir/run.json"; then
    echo "   run failed; left out of the table" >&2
    return
  fi
  python3 - "$label" "$nodes" "$before" "$(counters "$nodes")" "$run_dir/run.json" >>"$results" <<'PY'
import json, sys
label, nodes, before, after, run = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5]
r = json.load(open(run))
r["label"], r["nodes"] = label, nodes
payload = max(r["sent"] * r["messageBytes"], 1)
secs = max(r["sendSeconds"], r["receiveSeconds"], 1e-9)
r["disk_bytes_per_payload_byte"] = {n: (after[n]["write_bytes"] - before[n]["write_bytes"]) / payload for n in after}
r["node_log_syncs_per_second"] = {n: (after[n]["syncs"] - before[n]["syncs"]) / secs for n in after}
print(json.dumps(r))
PY
}

for nodes in 3 1; do
  "$root/scripts/cluster.sh" stop >/dev/null 2>&1 || true
  rm -rf "${run_dir:?}"/n*
  "$root/scripts/cluster.sh" start "$nodes" >/dev/null
  "$run_dir/raftbus" status --server "127.0.0.1:$((BASE_PORT + 1))" --timeout 30s --interval 0 >/dev/null
  bench "$nodes" "1 KiB, 256 in flight" --inflight 256 --producers 4 --consumers 4
  bench "$nodes" "1 KiB, 1 in flight (latency)" --inflight 1 --producers 1 --consumers 1
  # The same sends with no consumer at work meanwhile (each message is
  # received after all are sent): what a send alone waits for, where in
  # the run above it often waits behind a receive's or a settlement's
  # entry (one entry in flight per partition).
  bench "$nodes" "1 KiB, 1 in flight, sends alone (latency)" --inflight 1 --producers 1 --consumers 1 --workload phased
  if [[ $nodes == 3 ]]; then
    # The first row's 4 consumers fall behind its producers; the
    # 16-partition row's 8 keep up. This row is what 16 partitions are
    # measured against: the same clients on one partition.
    bench "$nodes" "1 KiB, 256 in flight, 8 consumers" --inflight 256 --producers 4 --consumers 8
    bench "$nodes" "1 KiB, 256 in flight, 16 partitions" --inflight 256 --producers 4 --consumers 8 --partitions 16
    bench "$nodes" "1 KiB, 20 msgs/s, 16 partitions (latency)" --inflight 1 --producers 1 --consumers 1 --rate 20 --partitions 16
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
    f.write("| nodes | run | send msgs/s | MB/s | receive+settle msgs/s | send-ack p50 / p90 / p99 / max ms | end-to-end p50 / p99 ms | disk bytes per payload byte, per node | node log syncs/s, per node | CPU µs per message, client + nodes | node heap KiB (objects) per message | foreign load, cores |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        s, e = r["sendAckLatency"], r["endToEndLatency"]
        phase = (r.get("phases") or [{}])[0]
        cpu = phase.get("cpu")
        heap = phase.get("nodeAllocatedBytesPerMessage")
        heap = f'{heap / 1024:.1f} ({phase["nodeAllocationsPerMessage"]:.0f})' if heap is not None else "-"
        cpu_cols = f'{cpu["usPerMessage"]:.0f} | {heap} | {cpu["foreignCores"]:.2f}' if cpu else f"- | {heap} | -"
        amp = " / ".join(f"{v:.2f}" for _, v in sorted(r["disk_bytes_per_payload_byte"].items()))
        syncs = " / ".join(f"{v:.0f}" for _, v in sorted(r["node_log_syncs_per_second"].items()))
        # A phased run receives after sending: its end-to-end is the wait
        # for the drain, and its CPU the send phase's.
        e2e = "-" if r.get("workload") == "phased" else f'{e["p50Ms"]:.1f} / {e["p99Ms"]:.1f}'
        f.write(f'| {r["nodes"]} | {r["label"]} | {r["sendMsgsPerSecond"]:.0f} | {r["sendMbPerSecond"]:.1f} | '
                f'{r["receiveSettleMsgsPerSecond"]:.0f} | {s["p50Ms"]:.2f} / {s["p90Ms"]:.2f} / {s["p99Ms"]:.2f} / {s["maxMs"]:.2f} | '
                f'{e2e} | {amp} | {syncs} | {cpu_cols} |\n')
    one = next((r for r in rows if r["nodes"] == 3 and r["label"] == "1 KiB, 256 in flight, 8 consumers"), None)
    many = next((r for r in rows if r["nodes"] == 3 and "16 partitions" in r["label"]), None)
    if one and many:
        f.write(f'\n16 partitions / 1 partition, 3 nodes, 256 in flight, 8 consumers: sends {many["sendMsgsPerSecond"] / max(one["sendMsgsPerSecond"], 1):.2f}x, '
                f'receive+settle {many["receiveSettleMsgsPerSecond"] / max(one["receiveSettleMsgsPerSecond"], 1):.2f}x\n')
print(open(sys.argv[2]).read())
PY
