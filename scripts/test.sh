#!/usr/bin/env bash
# The test command: formatting, vet, proto lint, generated code up to date,
# build, and every package's tests under the race detector.
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestX ./engine).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source scripts/tools.sh

step() { printf '== %s\n' "$*"; }

step gofmt
unformatted=$(gofmt -l $(git ls-files -co --exclude-standard '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step go vet
go vet ./...

step buf lint
buf lint

step generated code is current
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
buf generate -o "$tmp/fresh"
mkdir -p "$tmp/committed"
(cd proto && find . -name '*.pb.go' -exec cp --parents {} "$tmp/committed" \;)
if ! diff -r "$tmp/fresh/proto" "$tmp/committed"; then
  echo "generated code is stale: run scripts/gen.sh and commit the result"
  exit 1
fi

step go build
go build ./...

step go test -race
if [[ $# -eq 0 ]]; then
  set -- ./...
fi
go test -race -count=1 "$@"
