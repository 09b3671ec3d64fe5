#!/usr/bin/env bash
# Usage: signature/testdata/adyen/gen-vectors.sh > signature/testdata/adyen/vectors.json
#
# Computes Adyen notification HMAC vectors with Adyen's own Node library,
# @adyen/api-library (HmacValidator), an implementation independent of the Go
# code under test. The library is installed with npm into a temporary
# directory that is removed on exit; nothing is left in the repository.
# ADYEN_LIBRARY_VERSION picks the version (default: the one that made
# vectors.json, recorded in its "library" member).
set -euo pipefail
command -v node >/dev/null && command -v npm >/dev/null || { echo "needs node and npm" >&2; exit 1; }

version=${ADYEN_LIBRARY_VERSION:-32.1.0}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund "@adyen/api-library@$version" >&2)
NODE_PATH="$tmp/node_modules" node "$here/gen-vectors.js"
