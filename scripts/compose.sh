#!/usr/bin/env bash
# Runs a three-node raftbus cluster in containers (Docker with compose),
# one node per container on a private network.
#
#   scripts/compose.sh up      build the image and start n1..n3
#   scripts/compose.sh ps      show the containers
#   scripts/compose.sh down    stop and remove them (add -v to drop the data)
#
# Clients on the host reach n1 at 127.0.0.1:7400; any node serves any
# request. Try failover with `docker kill raftbus_n2_1` (the name
# docker-compose gives) and bring it back with `scripts/compose.sh up`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$root/scripts/docker
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
    docker build -q -t raftbusd:local "$dir"
    compose up -d
    ;;
  ps) compose ps ;;
  down) shift; compose down "$@" ;;
  *) echo "usage: $0 up | ps | down [-v]" >&2; exit 2 ;;
esac
