#!/usr/bin/env bash
# Runs a three-node raftbus cluster in containers (Docker with compose),
# one node per container on a private network.
#
#   scripts/compose.sh up      build the image and start n1..n3
#   scripts/compose.sh ps      show the containers
#   scripts/compose.sh down    stop and remove them (add -v to drop the data)
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
  if docker compose version >/dev/null 2>&1; then
    docker compose -p raftbus -f "$dir/compose.yaml" "$@"
  else
    docker-compose -p raftbus -f "$dir/compose.yaml" "$@"
  fi
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
    compose up -d
    # The root key, as n1 wrote it, with the address the host reaches n1 at.
    key=$RAFTBUS_CERTS/root-access-key
    for _ in $(seq 1 60); do
      docker cp "$(compose ps -q n1)":/data/root-access-key "$key.tmp" 2>/dev/null && break
      sleep 1
    done
    sed 's|Endpoint=sb://[^/]*/|Endpoint=sb://127.0.0.1:7400/|' "$key.tmp" >"$key" && rm -f "$key.tmp" && chmod 600 "$key"
    echo "clients: export RAFTBUS_TLS_CA=$RAFTBUS_CERTS/ca.pem RAFTBUS_CONNECTION_STRING=\"\$(cat $key)\""
    ;;
  ps) compose ps ;;
  down) shift; compose down "$@" ;;
  *) echo "usage: $0 up | ps | down [-v]" >&2; exit 2 ;;
esac
