#!/usr/bin/env bash
# Usage: scripts/test.sh [go test flags/packages...]
#
# Runs the whole test suite: makes sure Redis and Postgres are reachable
# (reusing REDIS_URL / DATABASE_URL, else starting throwaway local servers that
# are stopped on exit), then go vet, a gofmt check, and go test -race.
# Extra arguments go to go test (default ./...).
#
# Without arguments it also runs the nested modules' tests, then fuzzes every
# fuzz target of the main module for PAYLOCK_FUZZTIME (default 3s) each, one
# at a time (go test -fuzz takes one target of one package), the targets
# found by go test -list; it prints the phase's time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh

# fuzz_all: fuzzes every target go test -list finds, one at a time; fails,
# after trying them all, if any failed.
fuzz_all() {
  local fuzztime=${PAYLOCK_FUZZTIME:-3s} start=$SECONDS listing line pkg entry target log t0 execs
  local names=() found=() failed=()
  # -race, as the run before: its compiled packages are reused; vet has run.
  listing=$(go test -race -vet=off -list '^Fuzz' ./...)
  # Per package: the names that match, then its "ok" line.
  while IFS= read -r line; do
    case $line in
      Fuzz*) names+=("$line") ;;
      "ok "*)
        pkg=$(awk '{print $2}' <<<"$line")
        for target in "${names[@]}"; do found+=("$pkg $target"); done
        names=()
        ;;
    esac
  done <<<"$listing"
  if [[ ${#found[@]} -eq 0 ]]; then
    echo "fuzz: go test -list found no fuzz target in the main module" >&2
    return 1
  fi
  echo "== fuzz: ${#found[@]} targets, $fuzztime each"
  for entry in "${found[@]}"; do
    read -r pkg target <<<"$entry"
    log=$(mktemp)
    t0=$SECONDS
    if go test -vet=off -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
      # The time includes the baseline (the seed corpus and the cached
      # inputs); on a loaded machine it can take all of it.
      execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 || true)
      echo "   $target (${pkg#github.com/paylock/paylock/}): ${execs:-baseline only}, $((SECONDS - t0))s"
    else
      cat "$log" >&2
      failed+=("$target (${pkg#github.com/paylock/paylock/})")
    fi
    rm -f "$log"
  done
  echo "== fuzz: ${#found[@]} targets fuzzed in $((SECONDS - start))s"
  if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz: FAILED: ${failed[*]}" >&2
    return 1
  fi
}
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
  fuzz_all
fi
