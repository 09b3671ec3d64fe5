#!/usr/bin/env bash
# Usage: scripts/house-stats.sh [BEFORE [AFTER]]
#
# The house issue's figures, before and after: non-test Go lines per
# package of the main module, cmd/paylock's share, the longest production
# functions (internal/housestats), and the count of repeated blocks in
# production code (pairs of places sharing six or more lines, by the
# `duplicates` command where it is installed). BEFORE defaults to 26e7bf2
# (main before the house issue), AFTER to HEAD. Each revision is read from
# `git archive`, so the working tree is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
before=${1:-26e7bf2}
after=${2:-HEAD}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/housestats" ./internal/housestats

for rev in "$before" "$after"; do
  dir="$tmp/$rev"
  mkdir -p "$dir"
  git archive "$rev" | tar -x -C "$dir"
  echo "== $rev ($(git log -1 --format='%h %cs %s' "$rev" | cut -c1-70))"
  "$tmp/housestats" -top 12 "$dir"
  if command -v duplicates >/dev/null 2>&1; then
    # Production code only: tests, nested modules and non-Go files out.
    prod="$tmp/prod-$rev"
    mkdir -p "$prod"
    (cd "$dir" && find . -name '*.go' ! -name '*_test.go' -print0 | while IFS= read -r -d '' f; do
      d=$(dirname "$f"); nested=false
      while [[ $d != . ]]; do [[ -f $d/go.mod ]] && nested=true; d=$(dirname "$d"); done
      $nested || { mkdir -p "$prod/$(dirname "$f")"; cp "$f" "$prod/$f"; }
    done)
    echo "repeated blocks in production code: $(duplicates --repo "$prod" --most 1 --seconds 120 | head -n 1)"
  else
    echo "repeated blocks: not counted (the duplicates command is not installed)"
  fi
done
