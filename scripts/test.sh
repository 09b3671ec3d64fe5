#!/usr/bin/env bash
# Usage: scripts/test.sh [go test flags/packages...]
#
# Runs the whole test suite: makes sure Redis and Postgres are reachable
# (reusing REDIS_URL / DATABASE_URL, else starting throwaway local servers that
# are stopped on exit), then go vet, a gofmt check, and go test -race.
# Extra arguments go to go test (default ./...).
#
# Without arguments it also runs the nested modules' tests, builds the
# release assets (scripts/release.sh) and the OCI image (scripts/image.sh),
# printing each one's time, then fuzzes every fuzz target of the main module
# for PAYLOCK_FUZZTIME (default 3s) each, one at a time (go test -fuzz takes
# one target of one package; each package's binary is built once), the targets declared in its _test.go files (func FuzzX(f *testing.F)); it prints
# the phase's time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh

# fuzz_seeds: how many seed inputs (f.Add and testdata/fuzz files) target
# has: its subtests when run as a test by bin, its package's test binary,
# in the package's directory dir (where testdata is).
fuzz_seeds() {
  local bin=$1 dir=$2 target=$3
  (cd "$dir" && "$bin" -test.run "^$target\$" -test.v 2>&1) | grep -cE "^ +--- (PASS|SKIP): $target/" || true
}

# fuzz_verdict: reads a go test -fuzz log and says whether the target got
# past its seed corpus: the corpus at the end ("total: M" of the last
# progress line: seeds, inputs cached by earlier runs and the new
# interesting ones) must be larger than the seeds, after at least
# PAYLOCK_FUZZ_MIN_EXECS (default 500) executions. Prints the target's
# line; returns 0 (fine), 1 (stayed at its seeds) or 2 (too few
# executions to tell: a machine too loaded, or a target too slow).
fuzz_verdict() {
  local log=$1 seeds=$2 min=${PAYLOCK_FUZZ_MIN_EXECS:-500} execs total
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 | awk '{print $2}')
  total=$(grep -o 'total: [0-9]*' "$log" | tail -n 1 | awk '{print $2}')
  if [[ -z $execs || -z $total || $execs -lt $min ]]; then
    echo "${execs:-0} execs (fewer than $min), corpus ${total:-?} for $seeds seeds"
    return 2
  fi
  if [[ $total -le $seeds ]]; then
    echo "$execs execs and no input beyond its $seeds seeds: it stays at its seed corpus"
    return 1
  fi
  echo "$execs execs, corpus $total for $seeds seeds"
}

# A new interesting input is minimized with at most 100 executions
# (-fuzzminimizetime 100x; the default is up to 60s each): minimizing a
# large input found early could otherwise take a target's whole time, and
# its executions would not count.
#
# Each package's test binary is built once, instrumented for fuzzing
# (go test -c -fuzz), and runs each of its targets in turn, from the
# package's directory, with the corpus cache go test -fuzz would use
# (GOCACHE/fuzz/<import path>): two go test commands per target linked
# the package's test binary twice each time, half the phase's time.
#
# fuzz_all: fuzzes every target the main module declares, one at a time; fails,
# after trying them all, if any failed, or stayed at its seed corpus or ran
# too few executions even when given PAYLOCK_FUZZTIME_RETRY (default 15s)
# the second time (a few seconds may find nothing new by chance: a target
# whose seeds cover most of its code needs longer).
fuzz_all() {
  local fuzztime=${PAYLOCK_FUZZTIME:-3s} retry=${PAYLOCK_FUZZTIME_RETRY:-15s} start=$SECONDS
  local listing line pkg entry target log t0 seeds verdict rc time bin dir
  local found=() failed=()
  local -A bins=()
  local bindir cache
  bindir=$(mktemp -d)
  cache=$(go env GOCACHE)/fuzz
  # The targets are the main module's "func FuzzX(f *testing.F)" in its
  # _test.go files (the nested modules have their own go.mod), found by
  # their declaration: listing them with go test -list would link every
  # package's test binary again (about a minute).
  local mod
  mod=$(go list -m)
  listing=$(git ls-files '*_test.go' 2>/dev/null || find . -name '*_test.go' | sed 's|^\./||')
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    local dir=${line%/*}
    [[ $line == */* ]] || dir=.
    # A file of a nested module (a go.mod between it and the root) is not
    # the main module's.
    local d=$dir nested=false
    while [[ $d != . && -n $d ]]; do
      [[ -f $d/go.mod ]] && { nested=true; break; }
      [[ $d == */* ]] && d=${d%/*} || d=.
    done
    $nested && continue
    while IFS= read -r target; do
      pkg=$mod
      [[ $dir == . ]] || pkg=$mod/$dir
      found+=("$pkg $dir $target")
    done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(f \*testing\.F) {$/\1/p' "$line")
  done <<<"$listing"
  if [[ ${#found[@]} -eq 0 ]]; then
    echo "fuzz: found no fuzz target (func FuzzX(f *testing.F)) in the main module" >&2
    return 1
  fi
  echo "== fuzz: ${#found[@]} targets, $fuzztime each"
  for entry in "${found[@]}"; do
    read -r pkg dir target <<<"$entry"
    log=$(mktemp)
    t0=$SECONDS
    bin=${bins[$pkg]:-}
    if [[ -z $bin ]]; then
      bin=$bindir/${#bins[@]}.test
      if ! go test -c -vet=off -fuzz=. -o "$bin" "$pkg" >"$log" 2>&1; then
        cat "$log" >&2
        failed+=("$target (${pkg#github.com/paylock/paylock/}): its package's test binary did not build")
        rm -f "$log"
        continue
      fi
      bins[$pkg]=$bin
    fi
    seeds=$(fuzz_seeds "$bin" "$dir" "$target")
    for time in "$fuzztime" "$retry"; do
      rc=0
      (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^$target\$" -test.fuzztime "$time" -test.fuzzminimizetime 100x \
        -test.fuzzcachedir "$cache/$pkg" -test.timeout 10m -test.paniconexit0) >"$log" 2>&1 || rc=3
      [[ $rc -eq 0 ]] || break
      verdict=$(fuzz_verdict "$log" "$seeds") || rc=$?
      [[ $rc -eq 1 || $rc -eq 2 ]] || break
    done
    case $rc in
      0) echo "   $target (${pkg#github.com/paylock/paylock/}): $verdict, $((SECONDS - t0))s" ;;
      3) cat "$log" >&2; failed+=("$target (${pkg#github.com/paylock/paylock/})") ;;
      *)
        echo "fuzz: $target (${pkg#github.com/paylock/paylock/}): $verdict" >&2
        failed+=("$target (${pkg#github.com/paylock/paylock/}): $verdict")
        ;;
    esac
    rm -f "$log"
  done
  rm -rf "$bindir"
  echo "== fuzz: ${#found[@]} targets fuzzed in $((SECONDS - start))s"
  if [[ ${#failed[@]} -gt 0 ]]; then
    printf 'fuzz: FAILED: %s\n' "${failed[@]}" >&2
    return 1
  fi
}
trap services_stop EXIT
services_start
# The tests' sessions commit without waiting for the WAL's flush to disk
# (synchronous_commit=off, a session setting carried in DATABASE_URL): a
# commit is as atomic and as visible as ever, only a crash of the server
# itself could lose the last ones, and no test crashes the shared server
# (the chaos suite runs its own). Most of the suite's time was Postgres
# waiting on fsync, the CPU idle. PAYLOCK_TEST_PARALLEL, when set, runs
# that many of a package's parallel tests at once (default: the CPUs; 4
# made a lock-timing test flaky on 2 cores).
case $DATABASE_URL in
  *synchronous_commit=*) ;;
  postgres://* | postgresql://*)
    if [[ $DATABASE_URL == *\?* ]]; then DATABASE_URL+="&synchronous_commit=off"; else DATABASE_URL+="?synchronous_commit=off"; fi
    export DATABASE_URL
    ;;
esac

echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then echo "gofmt would change: $unformatted" >&2; exit 1; fi
echo "== go test -race"
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(./...)
# -ldflags=-w: the test binaries without DWARF (stack traces and the race
# detector's reports do not need it), which links them in about half the
# time: with every package's test binary linked, a minute of the run.
go test -race -count=1 -timeout 10m ${PAYLOCK_TEST_PARALLEL:+-parallel "$PAYLOCK_TEST_PARALLEL"} -ldflags=-w "${args[@]}"
if [[ $# -eq 0 ]]; then
  # Nested modules: they depend on what the service must not.
  echo "== signature/compat (interoperability with the PSPs' own libraries)"
  (cd signature/compat && GOFLAGS=-mod=mod go test -race -count=1 ./...)
  echo "== deploy/validate (alerting rules and dashboard through Prometheus's parsers; the Helm chart through helm's engine and kubeconform)"
  (cd deploy/validate && GOFLAGS=-mod=mod go test -count=1 ./...)
  echo "== bench (the load generator's own tests; the benchmarks run with make bench)"
  (cd bench && GOFLAGS=-mod=mod go vet ./... && GOFLAGS=-mod=mod go test -count=1 ./...)
  # The release assets and the image, built and checked as a release makes
  # them (docs/releasing.md): a cold arm64 build takes minutes once, then
  # the build cache is warm. image.sh skips (exit 0) where neither buildah
  # nor podman is installed, unless CI=true.
  for step in release image; do
    echo "== scripts/$step.sh"
    t0=$SECONDS
    PAYLOCK_IMAGE_CLEAN=true "scripts/$step.sh"
    echo "== scripts/$step.sh took $((SECONDS - t0))s"
  done
  fuzz_all
fi
