#!/usr/bin/env bash
# Usage: scripts/image.sh [-h]
#
# Builds paylock's OCI image from the Containerfile (FROM scratch: the
# static binary, the build host's CA certificates, user 65532, ENTRYPOINT
# ["/paylock"], CMD ["serve"], OCI labels) with buildah, one image per
# linux binary in dist/ (scripts/release.sh builds them; the script runs it
# when dist/ holds no binary of HEAD for this host's arch):
#
#   $PAYLOCK_IMAGE:<tag>-<arch>   each arch's image (PAYLOCK_IMAGE defaults to
#                                 ghcr.io/paylock/paylock, the Helm chart's repository)
#   $PAYLOCK_IMAGE:<tag>          a manifest list of them (buildah manifest)
#
# <tag> is the binaries' version without its leading "v" and with "+" (as
# in "+dirty") turned into "-": v1.2.0 is tagged 1.2.0, the Helm chart's
# appVersion form.
# Then it proves the host arch's image starts: "podman run <image> version"
# when podman is installed, else "buildah from" and "buildah run -- /paylock
# version"; the output must name HEAD's revision. It also checks the image's
# user, entrypoint, command and labels (buildah inspect).
#
# With PAYLOCK_IMAGE_CLEAN=true (scripts/test.sh sets it) the images are
# removed again at the end: the build was the check, and the runner's
# storage does not grow with each commit.
#
# buildah (or podman) runs with --storage-driver vfs and --isolation chroot,
# which work inside an unprivileged container without fuse-overlayfs. Where
# neither buildah nor podman is installed (Debian: apt-get install buildah)
# the script says so and exits 0, unless CI=true: CI does not skip, it
# fails. It prints its duration. Push with "buildah manifest push --all"
# (docs/releasing.md).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "image: unexpected argument $1 (scripts/image.sh -h)" >&2
  exit 2
fi

start=$SECONDS
fail() {
  echo "image: FAILED: $*" >&2
  exit 1
}

if command -v buildah >/dev/null 2>&1; then
  builder=buildah
elif command -v podman >/dev/null 2>&1; then
  builder=podman
else
  reason="neither buildah nor podman is installed (Debian: apt-get install buildah)"
  if [[ ${CI:-} == true ]]; then
    fail "$reason; CI does not skip the image build"
  fi
  echo "image: SKIPPED: $reason; the image was not built"
  exit 0
fi
storage=(--storage-driver vfs)
certs=${PAYLOCK_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
[[ -s $certs ]] || fail "no CA certificates at $certs (Debian: apt-get install ca-certificates; or set PAYLOCK_CA_CERTS)"
image=${PAYLOCK_IMAGE:-ghcr.io/paylock/paylock}
dist=${PAYLOCK_DIST:-dist}
head=$(git rev-parse HEAD)
host_arch=$(go env GOHOSTARCH)

# revision BIN: the vcs.revision go version -m reads in BIN.
revision() { go version -m "$1" 2>/dev/null | awk '$2 ~ /^vcs.revision=/ { sub(/^vcs.revision=/, "", $2); print $2 }'; }

# binaries: dist/'s binaries of HEAD, one per line.
binaries() {
  local bin
  for bin in "$dist"/paylock_*_linux_*; do
    [[ -f $bin && $bin != *.cdx.json && $(revision "$bin") == "$head" ]] && echo "$bin"
  done
  return 0
}
if ! binaries | grep -q "_linux_${host_arch}\$"; then
  echo "image: no binary of HEAD ($head) for linux/$host_arch in $dist/: running scripts/release.sh"
  scripts/release.sh
fi
mapfile -t bins < <(binaries)
[[ ${#bins[@]} -gt 0 ]] || fail "no binary of HEAD in $dist/ after scripts/release.sh"

first=${bins[0]##*/paylock_}
version=${first%_linux_*}
tag=${version#v}
tag=${tag//+/-}
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ctx=$(mktemp -d)
ctr=""
cleanup() {
  [[ -z $ctr ]] || buildah "${storage[@]}" rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$ctx"
  if [[ ${PAYLOCK_IMAGE_CLEAN:-} == true ]]; then
    $builder "${storage[@]}" manifest rm "$image:$tag" >/dev/null 2>&1 || true
    for bin in "${bins[@]}"; do
      $builder "${storage[@]}" rmi "$image:$tag-${bin##*_linux_}" >/dev/null 2>&1 || true
    done
  fi
}
trap cleanup EXIT
cp "$certs" "$ctx/ca-certificates.crt"

$builder "${storage[@]}" manifest rm "$image:$tag" >/dev/null 2>&1 || true
$builder "${storage[@]}" manifest create "$image:$tag" >/dev/null
for bin in "${bins[@]}"; do
  arch=${bin##*_linux_}
  t0=$SECONDS
  cp "$bin" "$ctx/paylock"
  $builder "${storage[@]}" build --quiet --isolation chroot --platform "linux/$arch" \
    --build-arg "VERSION=$version" --build-arg "REVISION=$head" --build-arg "CREATED=$created" \
    -f Containerfile -t "$image:$tag-$arch" "$ctx" >/dev/null
  $builder "${storage[@]}" manifest add "$image:$tag" "containers-storage:$image:$tag-$arch" >/dev/null
  echo "image: $image:$tag-$arch from ${bin##*/} in $((SECONDS - t0))s"
done

# What the image says about itself: config FIELD is a field of its OCI
# configuration (a Go template over it, as buildah and podman take).
ref=$image:$tag-$host_arch
config() {
  if [[ $builder == buildah ]]; then
    buildah "${storage[@]}" inspect --type image --format "{{${1/./.OCIv1.Config.}}}" "$ref"
  else
    podman "${storage[@]}" image inspect --format "{{${1/./.Config.}}}" "$ref"
  fi
}
label() { config "index .Labels \"org.opencontainers.image.$1\""; }
check() {
  local what=$1 got=$2 want=$3
  [[ $got == "$want" ]] || fail "$ref: $what is '$got', want '$want'"
}
check user "$(config .User)" 65532:65532
check entrypoint "$(config .Entrypoint)" "[/paylock]"
check command "$(config .Cmd)" "[serve]"
check "label revision" "$(label revision)" "$head"
check "label version" "$(label version)" "$version"
check "label licenses" "$(label licenses)" Apache-2.0
check "label source" "$(label source)" https://github.com/paylock/paylock

# It starts: "paylock version" in a container of the image.
if command -v podman >/dev/null 2>&1; then
  out=$(podman "${storage[@]}" run --rm "$ref" version) || fail "podman run $ref version failed: $out"
  how="podman run"
else
  ctr=$(buildah "${storage[@]}" from --quiet "$ref")
  out=$(buildah "${storage[@]}" run --isolation chroot "$ctr" -- /paylock version) ||
    fail "buildah run $ref -- /paylock version failed: $out"
  how="buildah run"
fi
[[ $out == *"revision $head"* ]] || fail "$ref printed '$out', not revision $head"
echo "image: $how $ref version: $out"
echo "image: $image:$tag (manifest list of ${#bins[@]} arches) built and started in $((SECONDS - start))s"
