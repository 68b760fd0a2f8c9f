#!/usr/bin/env bash
# Runs a three-node raftbus cluster in containers (Docker with compose),
# one node per container on a private network.
#
#   scripts/compose.sh up        build the image and start n1..n3
#   scripts/compose.sh scale 5   add n4 and n5: they join and get their share of replicas
#   scripts/compose.sh scale 3   drain n4 and n5 (their replicas move back), then stop them
#   scripts/compose.sh ps        show the containers
#   scripts/compose.sh down      stop and remove them (add -v to drop the data)
#
# The nodes talk mutual TLS and check access policies: `up` makes a CA
# and the certificates in .run/compose-certs (once), copies the root
# policy's connection string out of n1 and prints the settings a client
# on the host needs. Clients on the host reach n1 at
# 127.0.0.1:7400; any node serves any request. Try failover with `docker kill raftbus_n2_1` (the name
# docker-compose gives) and bring it back with `scripts/compose.sh up`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$root/scripts/docker
export RAFTBUS_CERTS=$root/.run/compose-certs
compose() {
  local files=(-f "$dir/compose.yaml" -f "$dir/compose.five.yaml")
  if docker compose version >/dev/null 2>&1; then
    docker compose -p raftbus "${files[@]}" "$@"
  else
    docker-compose -p raftbus "${files[@]}" "$@"
  fi
}
# raftbus runs the CLI on the host against n1, with the root key.
raftbus() {
  (cd "$root" && go build -o "$dir/raftbus" ./cmd/raftbus)
  RAFTBUS_TLS_CA=$RAFTBUS_CERTS/ca.pem RAFTBUS_CONNECTION_STRING="$(cat "$RAFTBUS_CERTS/root-access-key")" "$dir/raftbus" "$@"
}
# replicas prints how many replicas node $1 holds and how many are moving.
replicas() {
  raftbus node list --output json | python3 -c '
import json, sys
for n in json.load(sys.stdin)["nodes"]:
    if n["nodeId"] == sys.argv[1]:
        print(n["replicas"] + n["replicasMoving"])' "$1"
}
case "${1:-}" in
  up)
    (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$dir/raftbusd" ./cmd/raftbusd)
    if [[ ! -f $RAFTBUS_CERTS/ca.pem ]]; then
      "$dir/raftbusd" certs init --dir "$RAFTBUS_CERTS"
      for n in n1 n2 n3; do
        "$dir/raftbusd" certs node --dir "$RAFTBUS_CERTS" --id "$n" --host "$n,localhost,127.0.0.1"
      done
      "$dir/raftbusd" certs client --dir "$RAFTBUS_CERTS" --name client
    fi
    docker build -q -t raftbusd:local "$dir"
    compose up -d n1 n2 n3
    # The root key, as n1 wrote it, with the address the host reaches n1 at.
    key=$RAFTBUS_CERTS/root-access-key
    for _ in $(seq 1 60); do
      docker cp "$(compose ps -q n1)":/data/root-access-key "$key.tmp" 2>/dev/null && break
      sleep 1
    done
    sed 's|Endpoint=sb://[^/]*/|Endpoint=sb://127.0.0.1:7400/|' "$key.tmp" >"$key" && rm -f "$key.tmp" && chmod 600 "$key"
    echo "clients: export RAFTBUS_TLS_CA=$RAFTBUS_CERTS/ca.pem RAFTBUS_CONNECTION_STRING=\"\$(cat $key)\""
    ;;
  scale)
    case "${2:-}" in
      5)
        for n in n4 n5; do
          [[ -f $RAFTBUS_CERTS/$n.pem ]] || "$dir/raftbusd" certs node --dir "$RAFTBUS_CERTS" --id "$n" --host "$n,localhost,127.0.0.1"
        done
        compose up -d n4 n5
        # Back from a scale to 3: they were drained; take them back.
        for n in n4 n5; do
          for _ in $(seq 1 60); do raftbus node undrain "$n" >/dev/null 2>&1 && break; sleep 1; done
        done
        raftbus node list
        echo "n4 and n5 get their share of replicas over the next seconds: scripts/compose.sh node list"
        ;;
      3)
        raftbus node drain n4 >/dev/null
        raftbus node drain n5 >/dev/null
        for n in n4 n5; do
          until [[ $(replicas "$n") == 0 ]]; do sleep 1; done
        done
        compose stop n4 n5
        raftbus node list
        ;;
      *) echo "usage: $0 scale 3|5" >&2; exit 2 ;;
    esac
    ;;
  node) shift; raftbus node "$@" ;;
  ps) compose ps ;;
  down) shift; compose down "$@" ;;
  *) echo "usage: $0 up | scale 3|5 | node list|drain|undrain|remove ... | ps | down [-v]" >&2; exit 2 ;;
esac
