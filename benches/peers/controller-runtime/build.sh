#!/usr/bin/env bash
# Build the controller-runtime peer once and print the path of its binary.
#
#   benches/peers/controller-runtime/build.sh     # last line: .../controller-runtime-<hash>/peer
#
# The build is cached in ${GANTRY_PEER_CACHE:-~/.cache/gantry/peers}, keyed
# by go.mod, go.sum, the Go sources, the Go version and the build flags, so
# an edit of any of them builds anew and a warm machine builds nothing (as
# scripts/real-cluster caches the Kubernetes binaries). Modules come from
# the Go module proxy the first time. Logs go to stderr.
set -euo pipefail

dir=$(cd "$(dirname "$0")" && pwd)
ldflags="-s -w"
pins=$( (cd "$dir" && cat go.mod go.sum ./*.go; go version; echo "$ldflags") | sha256sum | cut -c1-12)
root="${GANTRY_PEER_CACHE:-$HOME/.cache/gantry/peers}"
cache="$root/controller-runtime-$pins"
bin="$cache/peer"

log() { echo "peer build: $*" >&2; }

if [ ! -x "$bin" ]; then
  mkdir -p "$cache"
  # One build at a time: parallel benches may all ask for it at once.
  exec 9>"$cache/.lock"
  flock 9
  if [ ! -x "$bin" ]; then
    log "building the controller-runtime peer into $cache"
    started=$SECONDS
    (cd "$dir" && GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
      go build -trimpath -ldflags "$ldflags" -o "$cache/peer.tmp" .)
    mv "$cache/peer.tmp" "$bin"
    log "built in $((SECONDS - started)) s: $(du -h "$bin" | cut -f1)"
    # Builds of other sources are not used again: keep one.
    find "$root" -mindepth 1 -maxdepth 1 -type d -name 'controller-runtime-*' ! -path "$cache" -exec rm -rf {} +
  fi
  flock -u 9
fi
echo "$bin"
