#!/usr/bin/env bash
# Usage: scripts/mutate.sh [-run REGEXP] [-list] [-check] [-timeout 5m]
#
# Checks that the tests fail when the code is wrong: applies each mutation
# of internal/mutate/mutations.go, one at a time, through go test -overlay
# (the work tree never changes), runs the tests the entry names and reports
# it killed or survived. Any survivor, a snippet the code no longer holds
# exactly once, a mutation that does not compile, or tests that fail
# unmutated make it exit non-zero. It prints each result and the total
# duration.
#
# Makes sure Redis and Postgres are reachable first, as scripts/test.sh
# does (reusing REDIS_URL / DATABASE_URL, else starting throwaway servers
# stopped on exit). Not part of make test or CI: it recompiles the tested
# packages once per mutation (see docs/testing.md for its duration).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh
trap services_stop EXIT
services_start
start=$SECONDS
go run ./internal/mutate "$@"
echo "mutate: done in $((SECONDS - start))s" >&2
