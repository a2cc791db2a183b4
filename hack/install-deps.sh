#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages. Idempotent: packages that are
# already present are skipped, so a second run does no network I/O. Packages come without their
# Recommends, so everything a command needs is named here (hack/fresh-check.sh proves the list on a
# minimal Debian 12 root): libclang-rt-dev is clang's sanitizer and libFuzzer runtime (fuzz.sh);
# golang-go with sprig and sigs.k8s.io/yaml build the chart renderer offline (hack/chart/render).
set -euo pipefail

pkgs=(
    build-essential cmake pkg-config git
    libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
    libyaml-dev uuid-dev libcmocka-dev libssl-dev zlib1g-dev
    libsqlite3-dev libhiredis-dev redis-server redis-sentinel redis-tools
    clang libclang-rt-dev clang-format clang-tidy openssl util-linux procps bc acl sqlite3
    golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
)

# The chart validator (hack/chart/validate.mjs) runs on Node.js; machines that have a node and npm
# (another packaging) keep theirs. npm fetches over TLS: ca-certificates.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    pkgs+=(nodejs npm ca-certificates)
fi

# The validator's npm packages, pinned in hack/chart/package-lock.json, into hack/chart/node_modules
# (again only when the lock file is newer than the last install).
npm_ci() {
    local d=hack/chart
    cd "$(dirname "$0")/.."
    if [ ! -f "$d/node_modules/.package-lock.json" ] ||
        [ "$d/package-lock.json" -nt "$d/node_modules/.package-lock.json" ]; then
        echo "install-deps: npm ci in $d"
        npm ci --prefix "$d" --no-audit --no-fund --loglevel=error >/dev/null
    fi
}

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#pkgs[@]} packages present"
    npm_ci
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_ci
echo "install-deps: done"
