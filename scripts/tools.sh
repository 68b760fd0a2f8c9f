#!/usr/bin/env bash
# Installs the pinned code generation and lint tools into .bin/ and prints
# that directory. Sourced by gen.sh and test.sh; safe to run repeatedly.
set -euo pipefail

BUF_VERSION=v1.75.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
# The version of its runtime that go.mod requires (a dependency of gRPC's
# needs this one).
PROTOC_GEN_GO_VTPROTO_VERSION=v0.6.1-0.20240319094008-0393e58bdf10

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/.bin"
mkdir -p "$bin"

install_tool() { # name module version
  local stamp="$bin/.$1-$3"
  if [[ -x "$bin/$1" && -f "$stamp" ]]; then
    return
  fi
  echo "installing $2@$3" >&2
  GOBIN="$bin" GOFLAGS=-mod=mod go install "$2@$3"
  rm -f "$bin/.$1-"*
  touch "$stamp"
}

install_tool buf github.com/bufbuild/buf/cmd/buf "$BUF_VERSION"
install_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"
install_tool protoc-gen-go-vtproto github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto "$PROTOC_GEN_GO_VTPROTO_VERSION"

export PATH="$bin:$PATH"
