#!/usr/bin/env bash
# Usage: scripts/test.sh [go test flags/packages...]
#
# Runs the whole test suite: makes sure Redis and Postgres are reachable
# (reusing REDIS_URL / DATABASE_URL, else starting throwaway local servers that
# are stopped on exit), then go vet, a gofmt check, and go test -race.
# Extra arguments go to go test (default ./...).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh
trap services_stop EXIT
services_start

echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then echo "gofmt would change: $unformatted" >&2; exit 1; fi
echo "== go test -race"
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(./...)
go test -race -count=1 -timeout 10m "${args[@]}"
if [[ $# -eq 0 ]]; then
  # Nested modules: they depend on what the service must not.
  echo "== signature/compat (interoperability with the PSPs' own libraries)"
  (cd signature/compat && GOFLAGS=-mod=mod go test -race -count=1 ./...)
  echo "== deploy/validate (alerting rules and dashboard through Prometheus's parsers)"
  (cd deploy/validate && GOFLAGS=-mod=mod go test -count=1 ./...)
  echo "== bench (the load generator's own tests; the benchmarks run with make bench)"
  (cd bench && GOFLAGS=-mod=mod go vet ./... && GOFLAGS=-mod=mod go test -count=1 ./...)
fi
