#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages. Idempotent: packages that are
# already present are skipped, so a second run does no network I/O. Packages come without their
# Recommends, so everything a command needs is named here (hack/fresh-check.sh proves the list on a
# minimal Debian 12 root): libclang-rt-dev is clang's sanitizer and libFuzzer runtime (fuzz.sh).
set -euo pipefail

pkgs=(
    build-essential cmake pkg-config git
    libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
    libyaml-dev uuid-dev libcmocka-dev libssl-dev zlib1g-dev
    libsqlite3-dev libhiredis-dev redis-server redis-sentinel redis-tools
    clang libclang-rt-dev clang-format clang-tidy openssl util-linux procps bc acl sqlite3
    jq python3 # dfcache --json: read by the e2e and bench scripts (jq) and the tests (python3)
)

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#pkgs[@]} packages present"
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
echo "install-deps: done"
