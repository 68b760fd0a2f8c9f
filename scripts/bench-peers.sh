#!/usr/bin/env bash
# Runs the same workload against raftbus and NATS JetStream on this
# machine and writes their figures side by side (default
# docs/benchmarks-peers.md).
#
#   scripts/bench-peers.sh [output.md]
#
# Brokers, one after the other, each on a fresh 3-node cluster on
# 127.0.0.1 with its data in a temporary directory:
#   - raftbus (scripts/cluster.sh; fsync before every acknowledgement);
#   - NATS JetStream with `sync_interval: always` (fsync every write);
#   - NATS JetStream with its default sync (fsync every 2 minutes).
# NATS: nats-server at the version pinned below, installed into .bin/ with
# `go install` (as scripts/tools.sh installs its tools); a stream of 3
# replicas, file storage, work-queue retention; the harness in bench/peers
# (a module of its own) publishes asynchronously within the same window of
# sends awaiting their PubAck and acks each message it consumes, as `nats
# bench` does (see bench/peers/main.go).
#
# Runs, for each broker (1 KiB messages; DURATION=10s, COUNT=100000 and
# WARMUP=10000 by default):
#   mixed    256 in flight, 4 producers, 8 consumers, sending for DURATION
#   phased   the same window and clients, COUNT sent, then drained
#   latency  1 in flight, 1 producer, 1 consumer, for DURATION
# Every run reports the CPU per message of the client and the broker's
# processes and the foreign load (CPU other processes used meanwhile).
# Needs python3 to write the page. Takes about 3 minutes and uses both
# cores throughout: do not run it in a loop on a shared machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/docs/benchmarks-peers.md}
duration=${DURATION:-10s}
count=${COUNT:-100000}
warmup=${WARMUP:-10000}
base_port=${BASE_PORT:-7700}            # raftbus node i: base_port + i
nats_base_port=${NATS_BASE_PORT:-4320}  # NATS node i: clients + i, routes + 100 + i

NATS_SERVER_VERSION=v2.15.2

run_dir=$(mktemp -d)
nats_pids=()

stop_nats() {
  local pid
  for pid in "${nats_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${nats_pids[@]}"; do
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  nats_pids=()
}

cleanup() {
  RUN_DIR=$run_dir/raftbus BASE_PORT=$base_port "$root/scripts/cluster.sh" stop >/dev/null 2>&1 || true
  stop_nats
  rm -rf "$run_dir"
}
trap cleanup EXIT

# The pinned nats-server, into .bin/ like the tools of scripts/tools.sh.
bin=$root/.bin
mkdir -p "$bin"
if [[ ! -x $bin/nats-server || ! -f $bin/.nats-server-$NATS_SERVER_VERSION ]]; then
  echo "installing github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION" >&2
  GOBIN=$bin GOFLAGS=-mod=mod go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
  rm -f "$bin"/.nats-server-*
  touch "$bin/.nats-server-$NATS_SERVER_VERSION"
fi

(cd "$root" && go build -o "$run_dir/bin/raftbus" ./cmd/raftbus)
(cd "$root/bench/peers" && go build -o "$run_dir/bin/peers" .)

# The workloads, the same flags for both brokers.
declare -A workloads=(
  [mixed]="--workload mixed --duration $duration --inflight 256 --producers 4 --consumers 8 --size 1024 --warmup $warmup"
  [phased]="--workload phased --count $count --inflight 256 --producers 4 --consumers 8 --size 1024 --warmup $warmup"
  [latency]="--workload mixed --duration $duration --inflight 1 --producers 1 --consumers 1 --size 1024 --warmup 200"
)
order=(mixed phased latency)
commands=$run_dir/commands.txt

# run broker workload command...: one run, its JSON report kept as
# $run_dir/<broker>-<workload>.json; a failed run is left out of the page.
run() {
  local broker=$1 workload=$2; shift 2
  echo "== $broker: $workload" >&2
  echo "$*" | sed "s|$run_dir/bin/||g; s|--node-pids [0-9,]*|--node-pids <pids>|" >>"$commands"
  if ! "$@" --output json >"$run_dir/$broker-$workload.json"; then
    echo "   run failed; left out of the page" >&2
    rm -f "$run_dir/$broker-$workload.json"
  fi
}

# raftbus.
export RUN_DIR=$run_dir/raftbus BASE_PORT=$base_port
echo "# raftbus: RUN_DIR=<tmp> BASE_PORT=$base_port scripts/cluster.sh start 3" >>"$commands"
"$root/scripts/cluster.sh" start 3 >/dev/null
servers=$(seq -s, -f "127.0.0.1:%g" $((base_port + 1)) $((base_port + 3)))
"$run_dir/bin/raftbus" status --server "$servers" --timeout 30s >/dev/null
pids=$(cat "$RUN_DIR"/n*.pid | paste -sd,)
for w in "${order[@]}"; do
  # shellcheck disable=SC2086 # the workload's flags are words
  run raftbus "$w" "$run_dir/bin/raftbus" bench --server "$servers" --node-pids "$pids" ${workloads[$w]}
done
"$root/scripts/cluster.sh" stop >/dev/null
unset RUN_DIR BASE_PORT

# NATS JetStream, with sync_interval: always, then its default.
start_nats() { # sync (always|default)
  local sync=$1 dir=$run_dir/nats-$1 routes="" i
  mkdir -p "$dir"
  for i in 1 2 3; do
    routes+="${routes:+, }nats-route://127.0.0.1:$((nats_base_port + 100 + i))"
  done
  for i in 1 2 3; do
    {
      echo "server_name: n$i"
      echo "listen: 127.0.0.1:$((nats_base_port + i))"
      echo "jetstream {"
      echo "  store_dir: \"$dir/n$i\""
      [[ $sync == always ]] && echo "  sync_interval: always"
      echo "}"
      echo "cluster {"
      echo "  name: bench"
      echo "  listen: 127.0.0.1:$((nats_base_port + 100 + i))"
      echo "  routes: [$routes]"
      echo "}"
    } >"$dir/n$i.conf"
    "$bin/nats-server" -c "$dir/n$i.conf" >"$dir/n$i.log" 2>&1 &
    nats_pids+=($!)
  done
  for i in 1 2 3; do
    for _ in $(seq 1 300); do
      grep -q "Server is ready" "$dir/n$i.log" && break
      kill -0 "${nats_pids[$((i - 1))]}" 2>/dev/null || { cat "$dir/n$i.log" >&2; return 1; }
      sleep 0.1
    done
  done
  sed "s|$run_dir/||g; s/^/#   /" "$dir/n1.conf" | sed "1i # nats ($sync): nats-server -c n1.conf (n2, n3 alike):" >>"$commands"
}

nats_servers=$(seq -s, -f "nats://127.0.0.1:%g" $((nats_base_port + 1)) $((nats_base_port + 3)))
for sync in always default; do
  start_nats "$sync"
  pids=$(IFS=,; echo "${nats_pids[*]}")
  for w in "${order[@]}"; do
    # shellcheck disable=SC2086 # the workload's flags are words
    run "nats-$sync" "$w" "$run_dir/bin/peers" --servers "$nats_servers" --node-pids "$pids" ${workloads[$w]}
  done
  stop_nats
done

python3 - "$run_dir" "$out" "$commands" "$(cd "$root" && git rev-parse --short HEAD)$(cd "$root" && git diff --quiet HEAD -- . ':!docs' || echo +changes)" <<'PY'
import json, os, platform, sys, datetime
run, out, commands, commit = sys.argv[1:5]
brokers = [("raftbus", "raftbus"), ("nats-always", "NATS, sync_interval: always"), ("nats-default", "NATS, default sync")]
def load(b, w):
    try:
        return json.load(open(f"{run}/{b}-{w}.json"))
    except OSError:
        return None
R = {b: {w: load(b, w) for w in ("mixed", "phased", "latency")} for b, _ in brokers}
def phase(r, name):
    return next((p for p in (r or {}).get("phases", []) if p["name"] == name), None)
def cpu(r, name):
    p = phase(r, name)
    return p["cpu"]["usPerMessage"] if p and p.get("cpu") else None
fig = {}
for b, _ in brokers:
    m, p, l = R[b]["mixed"], R[b]["phased"], R[b]["latency"]
    fig[b] = {
        "mixed send": m and m["sendMsgsPerSecond"], "mixed recv": m and m["receiveSettleMsgsPerSecond"],
        "phased send": p and p["sendMsgsPerSecond"], "phased drain": p and p["receiveSettleMsgsPerSecond"],
        "p50": l and l["sendAckLatency"]["p50Ms"], "p99": l and l["sendAckLatency"]["p99Ms"],
        "e2e p50": l and l["endToEndLatency"]["p50Ms"], "e2e p99": l and l["endToEndLatency"]["p99Ms"],
        "cpu mixed": cpu(m, "mixed"), "cpu phased": cpu(p, "send+drain"),
    }
def f(v, fmt="{:.0f}"):
    return "-" if v is None else fmt.format(v)
def heap(p):
    b, n = p.get("nodeAllocatedBytesPerMessage"), p.get("nodeAllocationsPerMessage")
    return "-" if b is None else f"{b / 1024:.1f} ({n:.0f})"
cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
version = next((r["broker"] for b in ("nats-always", "nats-default") for r in R[b].values() if r), "nats-server ?")
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
with open(out, "w") as o:
    o.write("# raftbus and NATS JetStream, side by side\n\n")
    o.write("Written by `scripts/bench-peers.sh`; what the workload is and how each\n")
    o.write("broker is driven: [benchmarks.md](benchmarks.md#against-nats-jetstream).\n\n")
    o.write(f"Machine: {os.cpu_count()} cores ({cpu_model}), Linux {platform.release()}, shared with other work; "
            f"every node and the client on it, on 127.0.0.1. {now}; raftbus {commit}, {version}.\n\n")
    o.write("| broker | mixed: send msgs/s | mixed: receive+settle msgs/s | phased: send msgs/s | phased: drain msgs/s "
            "| 1 in flight: send-ack p50 / p99 ms | 1 in flight: end-to-end p50 / p99 ms "
            "| CPU µs per message, mixed | CPU µs per message, phased |\n")
    o.write("|---|---|---|---|---|---|---|---|---|\n")
    for b, name in brokers:
        x = fig[b]
        o.write(f'| {name} | {f(x["mixed send"])} | {f(x["mixed recv"])} | {f(x["phased send"])} | {f(x["phased drain"])} '
                f'| {f(x["p50"], "{:.2f}")} / {f(x["p99"], "{:.2f}")} | {f(x["e2e p50"], "{:.2f}")} / {f(x["e2e p99"], "{:.2f}")} '
                f'| {f(x["cpu mixed"])} | {f(x["cpu phased"])} |\n')
    o.write("\nraftbus over NATS (above 1 is raftbus ahead for throughput; below 1 is raftbus ahead for latency and CPU):\n\n")
    o.write("| against | mixed send | mixed receive+settle | phased send | phased drain | send-ack p99 @1 | CPU per message, mixed | CPU per message, phased |\n")
    o.write("|---|---|---|---|---|---|---|---|\n")
    def ratio(a, b):
        return "-" if a is None or not b else f"{a / b:.2f}x"
    for b, name in brokers[1:]:
        x, y = fig["raftbus"], fig[b]
        o.write(f'| {name} | {ratio(x["mixed send"], y["mixed send"])} | {ratio(x["mixed recv"], y["mixed recv"])} '
                f'| {ratio(x["phased send"], y["phased send"])} | {ratio(x["phased drain"], y["phased drain"])} '
                f'| {ratio(x["p99"], y["p99"])} | {ratio(x["cpu mixed"], y["cpu mixed"])} | {ratio(x["cpu phased"], y["cpu phased"])} |\n')
    o.write("\nEach run in detail: messages, errors, the most messages sent and not yet\n"
            "received (backlog), the CPU of the client and of the broker's three\n"
            "processes, and the foreign load: CPU that other processes on the machine\n"
            "used meanwhile, in cores (flagged over 0.05 of the machine's cores).\n"
            "raftbus also counts its nodes' log syncs (fdatasync, all nodes), messages\n"
            "per Raft entry and the heap its nodes allocated (all nodes, per message:\n"
            "KiB and objects); NATS does not report these.\n\n")
    o.write("| broker | run | phase | messages | seconds | errors (send / receive) | backlog | client CPU s | broker CPU s | CPU µs/msg | machine µs/msg | foreign cores | steal cores | syncs/msg | msgs per Raft entry | node heap KiB (objects) per msg |\n")
    o.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    flagged, foreign = [], []
    for b, name in brokers:
        for w in ("mixed", "phased", "latency"):
            r = R[b][w]
            if r is None:
                o.write(f"| {name} | {w} | failed | | | | | | | | | | | | | |\n")
                continue
            for p in r["phases"]:
                c = p.get("cpu") or {}
                if "foreignCores" in c:
                    foreign.append(c["foreignCores"])
                if c.get("foreignLoad"):
                    flagged.append(f"{name} {w} {p['name']}")
                o.write(f'| {name} | {w} | {p["name"]} | {p["messages"]} | {p["seconds"]:.2f} | {r["sendErrors"]} / {r["receiveErrors"]} '
                        f'| {r["maxBacklog"]} | {f(c.get("clientSeconds"), "{:.2f}")} | {f(c.get("nodeSeconds"), "{:.2f}")} '
                        f'| {f(c.get("usPerMessage"))} | {f(c.get("machineUsPerMessage"))} | {f(c.get("foreignCores"), "{:.2f}")} '
                        f'| {f(c.get("stealCores"), "{:.2f}")} | {f(p.get("nodeLogSyncsPerMessage"), "{:.3f}")} '
                        f'| {f(p.get("messagesPerRaftEntry"), "{:.1f}")} | {heap(p)} |\n')
    if flagged:
        o.write(f"\nForeign load: flagged in {len(flagged)} of {len(foreign)} phases; other processes used "
                f"{min(foreign):.2f} to {max(foreign):.2f} cores of {os.cpu_count()} during the phases. The brokers ran "
                "on what was left, so every figure here is lower than on a quiet machine, by an amount that differs "
                "from run to run; compare the brokers within this page only.\n")
    else:
        o.write(f"\nForeign load: none flagged (at most {max(foreign or [0]):.2f} cores).\n")
    o.write("\nCommands (in this order; `peers` is `go build ./bench/peers` run from its module):\n\n```sh\n")
    o.write(open(commands).read())
    o.write("```\n")
print(open(out).read())
PY
