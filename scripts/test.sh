#!/usr/bin/env bash
# The test command: formatting, vet, proto lint and breaking-change check,
# generated code up to date, build, and every package's tests under the
# race detector.
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestX ./engine).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Each stage prints its name as it starts; at the end (pass or fail) a
# summary gives each stage's time.
stages=() stage="" stage_start=$SECONDS
end_stage() {
  [[ -n $stage ]] && stages+=("$(printf '%5ds  %s' $((SECONDS - stage_start)) "$stage")")
  stage=""
}
step() {
  end_stage
  stage="$*" stage_start=$SECONDS
  printf '== %s\n' "$*"
}
cleanup=()
finish() {
  local rc=$?
  end_stage
  ((${#cleanup[@]})) && rm -rf "${cleanup[@]}"
  printf '== summary (%s, %ds in all)\n' "$( ((rc == 0)) && echo passed || echo "failed: exit $rc")" "$SECONDS"
  printf '%s\n' "${stages[@]}"
}
trap finish EXIT

# Debian's packages that tests run: chromium drives the console's pages;
# python3-azure (azure-servicebus on uamqp) and python3-qpid-proton are
# the Python clients of test/pysdk, run with Debian's python3. They
# install in the background while the stages before the tests run (the
# install is mostly waiting on the network and the disk), and the tests
# wait for it.
missing=()
command -v chromium >/dev/null || missing+=(chromium)
/usr/bin/python3 -c 'import azure.servicebus, uamqp' 2>/dev/null || missing+=(python3-azure)
/usr/bin/python3 -c 'import proton' 2>/dev/null || missing+=(python3-qpid-proton)
install_pid="" install_log=$(mktemp)
cleanup+=("$install_log")
if ((${#missing[@]})); then
  echo "== installing ${missing[*]} (in the background)"
  if [[ $(id -u) -eq 0 ]]; then sudo=""; else sudo="sudo"; fi
  ($sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}") >"$install_log" 2>&1 &
  install_pid=$!
fi

step "tools (pinned, installed when missing)"
source scripts/tools.sh

step gofmt
unformatted=$(gofmt -l $(git ls-files -co --exclude-standard '*.go'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step go vet
go vet ./...

step buf lint
buf lint

# The protos are the Raft log and snapshot formats on disk as well as the
# API: a change that breaks either must be a decision. The baseline is
# where this branch left main (main's last commit when on main, so that
# uncommitted edits are checked).
step buf breaking
if base=$(git merge-base HEAD main 2>/dev/null || git merge-base HEAD origin/main 2>/dev/null); then
  buf breaking --against ".git#ref=$base"
else
  echo "no main branch to compare with: skipped"
fi

step generated code is current
tmp=$(mktemp -d)
cleanup+=("$tmp")
buf generate -o "$tmp/fresh"
mkdir -p "$tmp/committed"
(cd proto && find . -name '*.pb.go' -exec cp --parents {} "$tmp/committed" \;)
if ! diff -r "$tmp/fresh/proto" "$tmp/committed"; then
  echo "generated code is stale: run scripts/gen.sh and commit the result"
  exit 1
fi

step go build
go build ./...

if [[ -n $install_pid ]]; then
  step "waiting for the install of ${missing[*]}"
  if ! wait "$install_pid"; then
    cat "$install_log"; echo "installing ${missing[*]} failed"; exit 1
  fi
fi

step go test -race
whole=false
if [[ $# -eq 0 ]]; then
  whole=true
  set -- ./...
fi
go test -race -count=1 "$@"

# The Azure Service Bus SDK against raftbusd over AMQP: a module of its
# own, so that the raftbus module does not depend on the Azure SDK. Part
# of the whole suite only, not of a run narrowed by arguments.
if $whole; then
  step "go vet, go test -race (test/azsdk: the Azure SDK over AMQP)"
  (cd test/azsdk && go vet ./... && go test -race -count=1 ./...)
  step "go vet, go test -race (examples/azsdk: the examples with the Azure SDK)"
  (cd examples/azsdk && go vet ./... && go test -race -count=1 ./...)
  # The NATS harness of scripts/bench-peers.sh, a module of its own too:
  # built and vetted, so that it keeps up with the main module.
  step "go vet (bench/peers)"
  (cd bench/peers && go vet ./...)
fi
