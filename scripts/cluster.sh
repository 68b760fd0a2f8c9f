#!/usr/bin/env bash
# Runs a local raftbus cluster of N raftbusd processes on loopback, so that
# failover can be tried by killing one of them.
#
#   scripts/cluster.sh start [N] [--tls [--auth]]
#                                  build raftbusd, start N nodes (default 3);
#                                  --tls: with a CA and certificates made in
#                                  $RUN_DIR/certs (kept for later starts);
#                                  --auth: access policies too (clients sign
#                                  with the root key the nodes write)
#   scripts/cluster.sh status      show each node's pid, address and state
#   scripts/cluster.sh stop        stop every node (SIGTERM, then SIGKILL)
#
# Node i (1..N) listens on 127.0.0.1:$((BASE_PORT + i)) (BASE_PORT=7400 by
# default), keeps its data in $RUN_DIR/nI/ and logs to $RUN_DIR/nI.log;
# RUN_DIR defaults to ./.run/cluster. Kill one with
#   kill -9 "$(cat .run/cluster/n2.pid)"
# and bring it back with `scripts/cluster.sh start N` again: running nodes
# are left alone, stopped ones restart on their data. Node i serves
# /metrics, /healthz and /readyz on 127.0.0.1:$((base_port + 2000 + i))
# (9401.. by default); with PPROF=1 also Go's profiles at /debug/pprof/.
# RAFTBUSD_FLAGS adds flags to every node (e.g. "--quiesce-after 5s").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
run_dir=${RUN_DIR:-$root/.run/cluster}
base_port=${BASE_PORT:-7400}
bin=$run_dir/raftbusd

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  local n=3 tls= auth=
  for a in "$@"; do
    case $a in
      --tls) tls=1 ;;
      --auth) auth=1 ;;
      *) n=$a ;;
    esac
  done
  mkdir -p "$run_dir"
  (cd "$root" && go build -o "$bin" ./cmd/raftbusd)
  local certs=$run_dir/certs
  if [[ -n $tls && ! -f $certs/ca.pem ]]; then
    "$bin" certs init --dir "$certs"
    "$bin" certs client --dir "$certs" --name client
  fi
  local peers=""
  for i in $(seq 1 "$n"); do
    peers+="${peers:+,}n$i=127.0.0.1:$((base_port + i))"
  done
  echo "$n" >"$run_dir/size"
  for i in $(seq 1 "$n"); do
    local pidfile=$run_dir/n$i.pid
    if alive "$pidfile"; then
      echo "n$i already running (pid $(cat "$pidfile"))"
      continue
    fi
    local extra=()
    [[ -n ${PPROF:-} ]] && extra+=(--pprof)
    if [[ -n $tls ]]; then
      [[ -f $certs/n$i.pem ]] || "$bin" certs node --dir "$certs" --id "n$i" --host 127.0.0.1,localhost
      extra+=(--tls-ca "$certs/ca.pem" --tls-cert "$certs/n$i.pem" --tls-key "$certs/n$i-key.pem")
    fi
    [[ -n $auth ]] && extra+=(--auth)
    # shellcheck disable=SC2206 # split into flags on purpose
    [[ -n ${RAFTBUSD_FLAGS:-} ]] && extra+=($RAFTBUSD_FLAGS)
    "$bin" --node-id "n$i" --listen "127.0.0.1:$((base_port + i))" \
      --data-dir "$run_dir/n$i" --peers "$peers" "${extra[@]}" >>"$run_dir/n$i.log" 2>&1 &
    echo $! >"$pidfile"
    echo "n$i started (pid $!) on 127.0.0.1:$((base_port + i)), metrics http://127.0.0.1:$((base_port + 2000 + i))/metrics, log $run_dir/n$i.log"
  done
  echo "clients: export RAFTBUS_ADDR=127.0.0.1:$((base_port + 1))"
  if [[ -n $auth ]]; then
    echo "         export RAFTBUS_TLS_CA=$certs/ca.pem RAFTBUS_CONNECTION_STRING=\"\$(cat $run_dir/n1/root-access-key)\""
  elif [[ -n $tls ]]; then
    echo "         export RAFTBUS_TLS_CA=$certs/ca.pem RAFTBUS_TLS_CERT=$certs/client.pem RAFTBUS_TLS_KEY=$certs/client-key.pem"
  fi
}

status() {
  local n
  n=$(cat "$run_dir/size" 2>/dev/null || echo 0)
  [[ $n -gt 0 ]] || { echo "no cluster in $run_dir"; return 0; }
  printf '%-4s %-8s %-22s %s\n' NODE PID ADDRESS STATE
  for i in $(seq 1 "$n"); do
    local pidfile=$run_dir/n$i.pid state=stopped pid=-
    if alive "$pidfile"; then state=running; pid=$(cat "$pidfile"); fi
    printf '%-4s %-8s %-22s %s\n' "n$i" "$pid" "127.0.0.1:$((base_port + i))" "$state"
  done
}

stop() {
  local pids=()
  for pidfile in "$run_dir"/n*.pid; do
    [[ -f $pidfile ]] || continue
    if alive "$pidfile"; then
      kill -CONT "$(cat "$pidfile")" 2>/dev/null || true
      kill -TERM "$(cat "$pidfile")" && pids+=("$(cat "$pidfile")")
    fi
    rm -f "$pidfile"
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  echo "stopped ${#pids[@]} node(s); data kept in $run_dir (remove it for a fresh cluster)"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  status) status ;;
  stop) stop ;;
  *) echo "usage: $0 start [N] [--tls [--auth]] | status | stop" >&2; exit 2 ;;
esac
