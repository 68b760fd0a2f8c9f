#!/usr/bin/env bash
# Regenerates the Go code of every .proto file under proto/ with the pinned
# tools. The output is committed; scripts/test.sh checks it is current.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source scripts/tools.sh

# Remove what the current sources would not produce (a deleted .proto).
find proto -name '*.pb.go' -delete
buf generate
