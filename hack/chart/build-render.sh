#!/usr/bin/env bash
# Builds the chart renderer (hack/chart/render, Go) offline from Debian's Go packages in GOPATH
# mode: BUILD/gopath links sprig/v3 and semver/v3 to their Debian paths (which lack the /v3).
#   hack/chart/build-render.sh [BUILD_DIR]   -> BUILD_DIR/chart-render (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)
if ! command -v go >/dev/null; then
    echo "build-render: go not found (Debian package golang-go; hack/install-deps.sh installs it)" >&2
    exit 3
fi
gp=$out/gopath
for m in sprig semver; do
    mkdir -p "$gp/src/github.com/Masterminds/$m"
    ln -sfn "/usr/share/gocode/src/github.com/Masterminds/$m" "$gp/src/github.com/Masterminds/$m/v3"
done
export GO111MODULE=off GOPATH=$gp:/usr/share/gocode GOCACHE=$out/gocache GOFLAGS= CGO_ENABLED=0
cd "$root/hack/chart/render"
go build -o "$out/chart-render" .
