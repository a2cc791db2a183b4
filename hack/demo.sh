#!/usr/bin/env bash
# The main job, on an embedded default: builds, starts a standalone dfdaemon on a temp dir and
# socket, imports a file with dfcache (by path, then by streaming it), stats and lists it,
# exports it both ways and verifies the bytes, removes it, and stops the daemon cleanly.
#   hack/demo.sh [size_MiB]     (default 64)
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-64}

bash hack/install-deps.sh >/dev/null
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" --target dfdaemon dfcache >/dev/null

work=$(mktemp -d)
daemon_pid=
cleanup() {
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill "$daemon_pid"
        wait "$daemon_pid" || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

sock=$work/run/dfdaemon.sock
cat >"$work/dfdaemon.yaml" <<YAML
download:
  server:
    socketPath: $sock
storage:
  dir: $work/store
gc:
  interval: 1m
metrics:
  server:
    port: 0 # the endpoints are off here: a demo must not fail when 4002/4003 are taken
health:
  server:
    port: 0
YAML
step() { printf '\n== %s\n' "$*"; }
dfcache() { build/daemon/cmd/dfcache/dfcache "$@"; }

step "start dfdaemon (config $work/dfdaemon.yaml)"
build/daemon/dfdaemon --config "$work/dfdaemon.yaml" 2>"$work/dfdaemon.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { cat "$work/dfdaemon.log"; exit 1; }
export DFCACHE_IMPORT_DFDAEMON_ENDPOINT=$sock DFCACHE_EXPORT_DFDAEMON_ENDPOINT=$sock \
    DFCACHE_STAT_DFDAEMON_ENDPOINT=$sock DFCACHE_LS_DFDAEMON_ENDPOINT=$sock \
    DFCACHE_RM_DFDAEMON_ENDPOINT=$sock

step "make a ${size_mib} MiB file"
head -c $((size_mib << 20)) /dev/urandom >"$work/model.bin"
sha256sum "$work/model.bin" | cut -c1-64

step "dfcache import (the daemon sees the file: by path)"
id=$(dfcache import --ttl 2h --tag demo "$work/model.bin" | tee /dev/stderr | sed 's/^Done: //')

step "dfcache import --transfer stream (as from a pod: same bytes, same task)"
id2=$(dfcache import --ttl 2h --tag demo --transfer stream "$work/model.bin" | sed 's/^Done: //')
[ "$id" = "$id2" ] && echo "same task id: $id2"

step "dfcache stat"
dfcache stat "$id"

step "dfcache ls"
dfcache ls

step "dfcache export (the daemon writes the file)"
dfcache export -O "$work/out-daemon.bin" "$id"
cmp "$work/model.bin" "$work/out-daemon.bin" && echo "verified: byte-identical"

step "dfcache export --transfer-from-dfdaemon --digest (pieces streamed over the socket)"
digest=sha256:$(sha256sum "$work/model.bin" | cut -c1-64)
dfcache export --transfer-from-dfdaemon --digest "$digest" -O "$work/out-stream.bin" "$id"
cmp "$work/model.bin" "$work/out-stream.bin" && echo "verified: byte-identical"

step "dfcache rm"
dfcache rm "$id"

step "stop dfdaemon (SIGTERM)"
kill "$daemon_pid"
wait "$daemon_pid"
daemon_pid=
[ ! -e "$sock" ] && echo "socket removed"
echo
echo "daemon log:"
cat "$work/dfdaemon.log"
echo
echo "demo: OK"
