#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages. Idempotent: packages that are
# already present are skipped, so a second run does no network I/O. Packages come without their
# Recommends, so everything a command needs is named here (hack/fresh-check.sh proves the list on a
# minimal Debian 12 root): libclang-rt-dev is clang's sanitizer and libFuzzer runtime (fuzz.sh);
# golang-go with sprig, sigs.k8s.io/yaml and gojsonschema build the chart renderer offline
# (hack/chart/render).
#   hack/install-deps.sh           build and test dependencies (what hack/test.sh needs)
#   hack/install-deps.sh --build   only what building the four binaries with -DDFC_TESTS=OFF needs
#                                  (the build stage of hack/image/Containerfile)
#   hack/install-deps.sh --image   the container image tools of hack/image/build.sh and smoke.sh
#                                  (podman, runc, debootstrap); opt-in, not a test dependency
#   hack/install-deps.sh --e2e     the default set plus what hack/k8s/ needs to build and run its
#                                  one-node Kubernetes cluster (docs/k8s-e2e.md): dpkg-source, jq,
#                                  iproute2 and the keyring its private apt lists are checked
#                                  against. Kubernetes, etcd, containerd, runc and the CNI plugins
#                                  themselves are not installed: hack/k8s/build.sh unpacks them
#                                  into its cache.
set -euo pipefail

build_pkgs=(
    build-essential cmake pkg-config git
    libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
    libyaml-dev uuid-dev libssl-dev zlib1g-dev libsqlite3-dev libhiredis-dev libmicrohttpd-dev
)
test_pkgs=(
    libcmocka-dev redis-server redis-sentinel redis-tools
    clang libclang-rt-dev clang-format clang-tidy openssl util-linux procps bc acl sqlite3
    golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
    golang-github-xeipuuv-gojsonschema-dev
    python3-prometheus-client
    jq python3 # dfcache --json: read by the e2e and bench scripts (jq) and the tests (python3)
    iproute2   # ip netns, veth, tc and ss: the netns testbed (test/e2e/swarm_chaos_test.sh)
    curl       # the netns testbed's `metrics` (hack/netns-cluster.sh checks for it at `up`)
)
image_pkgs=(podman runc debootstrap)
e2e_pkgs=(dpkg-dev xz-utils jq iproute2 debian-archive-keyring libc6-dev gzip)

mode=full
case "${1:-}" in
"") pkgs=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
--build)
    mode=build
    pkgs=("${build_pkgs[@]}")
    ;;
--image)
    mode=image
    pkgs=("${image_pkgs[@]}")
    ;;
--e2e) pkgs=("${build_pkgs[@]}" "${test_pkgs[@]}" "${e2e_pkgs[@]}") ;;
*)
    echo "install-deps: unknown mode '$1' (none, --build, --image or --e2e)" >&2
    exit 2
    ;;
esac

# The chart validator (hack/chart/validate.mjs) runs on Node.js; machines that have a node and npm
# (another packaging) keep theirs. npm fetches over TLS: ca-certificates.
if [ "$mode" = full ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
    pkgs+=(nodejs npm ca-certificates)
fi

# The validator's npm packages, pinned in hack/chart/package-lock.json, into hack/chart/node_modules
# (again only when the lock file is newer than the last install). Not in --build or --image.
npm_ci() {
    [ "$mode" = full ] || return 0
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
