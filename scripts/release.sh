#!/usr/bin/env bash
# Usage: scripts/release.sh [-h]
#
# Builds paylock's release assets into dist/ (PAYLOCK_DIST overrides):
#
#   paylock_<version>_linux_<arch>            static binaries of ./cmd/paylock
#                                             (CGO_ENABLED=0, -trimpath, -buildvcs=true,
#                                             -ldflags '-s -w'), one per arch of
#                                             PAYLOCK_RELEASE_ARCHES (default "amd64 arm64")
#   paylock_<version>_linux_<arch>.cdx.json   a CycloneDX SBOM of each binary (the modules
#                                             linked into it, from its build information)
#   SHA256SUMS                                the checksums of all of the above
#
# <version> is the module version the go command stamps into the binary: the
# tag (v1.2.0) when HEAD is a tagged commit of a clean tree, else a
# pseudo-version naming the commit (v0.0.0-20260102030405-0123456789ab,
# "+dirty" when the tree has uncommitted changes); "paylock version" prints
# the same. The go command stamps VCS information only in a checkout whose
# .git is a directory: in a linked worktree (.git is a file) the script
# builds a clone of HEAD instead, and says so (uncommitted changes are then
# left out).
#
# Then it checks what it built: each binary statically linked (file(1), when
# installed), built with CGO_ENABLED=0 for its arch from HEAD's revision (go
# version -m), the host's own binary answering "paylock version", each SBOM
# naming paylock, and sha256sum -c over SHA256SUMS. Any failed check fails
# the script. It prints its duration.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "release: unexpected argument $1 (scripts/release.sh -h)" >&2
  exit 2
fi

# cyclonedx-gomod comes from the Go module proxy, at this version.
CYCLONEDX_GOMOD=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
dist=${PAYLOCK_DIST:-dist}
arches=${PAYLOCK_RELEASE_ARCHES:-amd64 arm64}
start=$SECONDS

fail() {
  echo "release: FAILED: $*" >&2
  exit 1
}

head=$(git rev-parse HEAD)
src=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ ! -d .git ]]; then
  echo "release: $PWD is a linked worktree (.git is a file), where go build stamps no VCS information: building a clone of HEAD ($head)"
  if [[ -n $(git status --porcelain) ]]; then
    echo "release: the worktree has uncommitted changes; they are NOT in these binaries (commit them first)" >&2
  fi
  git clone --quiet --shared --no-checkout "$PWD" "$tmp/src"
  git -C "$tmp/src" checkout --quiet --detach "$head"
  src=$tmp/src
fi
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
rm -f "$dist"/paylock_* "$dist"/SHA256SUMS

# buildinfo BIN KEY: a value of go version -m's output ("mod" for the main
# module's version, else a build setting such as vcs.revision).
buildinfo() {
  local bin=$1 key=$2
  if [[ $key == mod ]]; then
    go version -m "$bin" | awk '$1 == "mod" { print $3; exit }'
  else
    go version -m "$bin" | awk -v k="$key" '$1 == "build" { split($2, kv, "="); if (kv[1] == k) { print substr($2, length(k) + 2); exit } }'
  fi
}

version=""
host_arch=$(go env GOHOSTARCH)
for arch in $arches; do
  t0=$SECONDS
  bin=$tmp/paylock_$arch
  (cd "$src" && GOOS=linux GOARCH=$arch CGO_ENABLED=0 \
    go build -trimpath -buildvcs=true -ldflags '-s -w' -o "$bin" ./cmd/paylock)
  v=$(buildinfo "$bin" mod)
  [[ -n $v && $v != "(devel)" ]] || fail "linux/$arch: the binary carries no module version (go version -m: ${v:-none})"
  [[ -z $version || $v == "$version" ]] || fail "linux/$arch is version $v, another arch $version"
  version=$v
  name=paylock_${version}_linux_${arch}
  mv "$bin" "$dist/$name"
  bin=$dist/$name

  # The checks of one binary.
  [[ $(buildinfo "$bin" vcs.revision) == "$head" ]] ||
    fail "$name: go version -m names revision '$(buildinfo "$bin" vcs.revision)', HEAD is $head"
  [[ $(buildinfo "$bin" CGO_ENABLED) == 0 ]] || fail "$name: not built with CGO_ENABLED=0"
  [[ $(buildinfo "$bin" GOARCH) == "$arch" && $(buildinfo "$bin" GOOS) == linux ]] || fail "$name: not built for linux/$arch"
  [[ $(buildinfo "$bin" -trimpath) == true ]] || fail "$name: not built with -trimpath"
  if command -v file >/dev/null 2>&1; then
    desc=$(file -b "$bin")
    [[ $desc == *"statically linked"* ]] || fail "$name: file(1) says: $desc"
  else
    echo "release: file(1) not installed; static linking checked through CGO_ENABLED=0 alone"
  fi
  if [[ $arch == "$host_arch" ]]; then
    out=$("$bin" version) || fail "$name: paylock version failed"
    [[ $out == *"revision $head"* ]] || fail "$name: paylock version printed '$out'"
    echo "release: $out"
  fi

  go run "$CYCLONEDX_GOMOD" bin -json -version "$version" -output "$bin.cdx.json" "$bin"
  grep -q '"name": "github.com/paylock/paylock"' "$bin.cdx.json" || fail "$name.cdx.json does not name github.com/paylock/paylock"
  echo "release: $name and $name.cdx.json ($(du -h "$bin" | cut -f1)) in $((SECONDS - t0))s"
done

(cd "$dist" && sha256sum paylock_* >SHA256SUMS && sha256sum --quiet -c SHA256SUMS) || fail "sha256sum -c SHA256SUMS"
echo "release: $dist:"
(cd "$dist" && ls -l paylock_* SHA256SUMS)
echo "release: version $version (revision $head) built and checked in $((SECONDS - start))s"
