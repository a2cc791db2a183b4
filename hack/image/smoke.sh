#!/usr/bin/env bash
# Smoke test of the image that build.sh made: runs it with podman, as a user would.
#   1. every binary answers in the image: dfdaemon --print-config, scheduler --print-config (also
#      as uid 65532, the scheduler's user), csi-plugin --help, dfcache --version (the project's
#      version), kubectl-dfcache --help (the plugin, installed with them); tini is the entrypoint;
#   2. a real dfdaemon in a container, its socket dir bind-mounted from a host temp dir, and real
#      imports and exports through that socket:
#        - host dfcache, --transfer stream (the file systems differ), export -O - (streamed back);
#        - `podman exec -i CTR dfcache import -` from stdin (what tools/kubectl-dfcache runs in the
#          dfdaemon container), export -O - the same way;
#        - host dfcache, --transfer path, of a file in a dir bind-mounted at the same path, and an
#          export to a file in that dir (the daemon writes it);
#        - host dfcache, --transfer auto, of a file the container cannot see (falls back to
#          streaming: see 4.);
#      each compared byte for byte with its source;
#   3. `podman stop` (SIGTERM to tini, which forwards it): the container must exit 0 (not killed
#      by the 30 s stop timeout); the seconds it took are printed, not asserted;
#   4. a second dfdaemon container in the host's PID namespace (--pid host, as the chart's
#      hostPID): host dfcache --transfer fd of a host-only file (the descriptor goes over the
#      socket's sibling <socket>.fd), export, compare, stop (exit 0).
#   bash hack/image/smoke.sh [IMAGE] [BUILD_DIR]
# IMAGE defaults to localhost/dragonfly-csi:latest (build.sh tags it); BUILD_DIR (default build)
# holds the host's dfcache (daemon/cmd/dfcache/dfcache); without one, the host-side steps use the
# image's dfcache in a second container that shares the socket dir.
# Exits 0 after "smoke: skipped: <why>" when this host cannot run it (not root, no podman, or
# podman cannot start a container: the error is printed); exits 1 on a failed check.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=hack/image/lib.sh
. "$here/lib.sh"
image=${1:-localhost/dragonfly-csi:latest}
build_dir=${2:-$repo/build}

say() { printf 'smoke: %s\n' "$*"; }
skip() {
    say "skipped: $*"
    exit 0
}
fail() {
    say "FAILED: $*" >&2
    exit 1
}
now_ms() { date +%s%3N; }

[ "$(id -u)" -eq 0 ] || skip "needs root (rootful podman, bind mounts of host dirs)"
command -v podman >/dev/null || skip "podman is missing (bash hack/install-deps.sh --image)"
podman image exists "$image" || fail "no image $image (bash hack/image/build.sh)"
mapfile -t limits < <(dfc_podman_limits)
run() { dfc_podman run --rm "${limits[@]}" "$image" "$@"; }
if ! probe=$(run true 2>&1); then
    skip "podman cannot run a container here: $probe"
fi

t_start=$(now_ms)
work=$(mktemp -d "${TMPDIR:-/tmp}/dfc-image-smoke.XXXXXX")
ctr=dfc-smoke-$$
cleanup() {
    local rc=$?
    if podman container exists "$ctr" 2>/dev/null; then
        if [ $rc -ne 0 ]; then
            say "container log ($ctr):" >&2
            podman logs "$ctr" 2>&1 | tail -40 >&2 || true
        fi
        podman rm -f -t 0 "$ctr" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
passed=0
ok() {
    passed=$((passed + 1))
    say "ok: $*"
}

# 1. The binaries.
out=$(run dfdaemon --print-config) || fail "dfdaemon --print-config exited $?"
grep -q 'socketPath: "/var/run/dragonfly/dfdaemon.sock"' <<<"$out" ||
    fail "dfdaemon --print-config: no default socketPath in: $out"
ok "dfdaemon --print-config"
out=$(run scheduler --print-config) || fail "scheduler --print-config exited $?"
grep -q '^  port: 8002$' <<<"$out" || fail "scheduler --print-config: no port 8002 in: $out"
out=$(dfc_podman run --rm "${limits[@]}" --user 65532:65532 "$image" \
    sh -c 'id -un; scheduler --print-config >/dev/null && echo config-ok') ||
    fail "scheduler --print-config as uid 65532 exited $?"
[ "$out" = $'dragonfly\nconfig-ok' ] || fail "as uid 65532: expected user dragonfly, got: $out"
ok "scheduler --print-config (as root and as uid 65532 dragonfly)"
out=$(run csi-plugin --help) || fail "csi-plugin --help exited $?"
grep -q '^Usage: csi-plugin' <<<"$out" || fail "csi-plugin --help: $out"
ok "csi-plugin --help"
version=$(sed -n 's/^project([^ ]* VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
out=$(run dfcache --version) || fail "dfcache --version exited $?"
[ "$out" = "dfcache $version" ] || fail "dfcache --version: expected 'dfcache $version', got '$out'"
ok "dfcache --version ($out)"
out=$(run kubectl-dfcache --help) || fail "kubectl-dfcache --help exited $?"
grep -q '^Usage: kubectl dfcache' <<<"$out" || fail "kubectl-dfcache --help: $out"
ok "kubectl-dfcache --help (the plugin, installed with the binaries)"
entry=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")
[ "$entry" = '["/usr/bin/tini","-s","--"]' ] || fail "entrypoint is $entry, not tini"

# 2. A real dfdaemon in the container; the socket dir and a data dir come from the host.
mkdir -p "$work/sock" "$work/data" "$work/host"
sock=$work/sock/dfdaemon.sock
dfc_podman run -d --name "$ctr" "${limits[@]}" -v "$work/sock:/var/run/dragonfly" \
    -v "$work/data:$work/data" "$image" dfdaemon --log-level debug >/dev/null
for _ in $(seq 300); do
    [ -S "$sock" ] && break
    [ "$(podman inspect --format '{{.State.Running}}' "$ctr")" = true ] ||
        fail "dfdaemon exited before its socket appeared"
    sleep 0.1
done
[ -S "$sock" ] || fail "no socket $sock after 30 s"
pid1=$(podman exec "$ctr" cat /proc/1/comm)
[ "$pid1" = tini ] || fail "PID 1 in the container is '$pid1', not tini"
ok "dfdaemon runs in $ctr under tini; socket $sock on the host"

host_dfcache=$build_dir/daemon/cmd/dfcache/dfcache
if [ -x "$host_dfcache" ]; then
    dfcache() { "$host_dfcache" "$@"; }
    who="host dfcache"
    say "host dfcache: $host_dfcache"
else
    # The image's dfcache in a second container that sees the same socket dir and data dir, and
    # reads standard input (for `-`) and the host file given as the last argument by path.
    say "no host dfcache in $build_dir: using the image's, in a second container"
    who="dfcache in a second container"
    dfcache() {
        dfc_podman run --rm -i "${limits[@]}" -v "$work/sock:$work/sock" \
            -v "$work/data:$work/data" -v "$work/host:$work/host" "$image" dfcache "$@"
    }
fi
task_of() { sed -n 's/^Done: \([0-9a-f]\{64\}\)$/\1/p'; }
same() { cmp -s "$1" "$2" || fail "$3: the bytes differ ($1, $2)"; }

# 2a. host dfcache, streamed both ways.
head -c $((3 << 20)) /dev/urandom >"$work/host/a.bin"
id=$(dfcache import -e "$sock" --transfer stream --no-progress "$work/host/a.bin" | task_of)
[ -n "$id" ] || fail "import --transfer stream printed no task id"
dfcache export -e "$sock" --no-progress -O - "$id" >"$work/host/a.out"
same "$work/host/a.bin" "$work/host/a.out" "stream import + export -O -"
ok "$who import --transfer stream, export -O - ($id)"

# 2b. the image's dfcache inside the dfdaemon container, from stdin (the kubectl plugin's pipe).
head -c $((5 << 20)) /dev/urandom >"$work/host/b.bin"
id=$(podman exec -i "$ctr" dfcache import --no-progress - <"$work/host/b.bin" | task_of)
[ -n "$id" ] || fail "podman exec dfcache import - printed no task id"
podman exec "$ctr" dfcache export --no-progress -O - "$id" >"$work/host/b.out"
same "$work/host/b.bin" "$work/host/b.out" "podman exec import - + export -O -"
ok "podman exec -i $ctr dfcache import -, export -O - ($id)"

# 2c. by path: the daemon opens the file in the bind-mounted dir and writes the export there.
head -c $((4 << 20)) /dev/urandom >"$work/data/c.bin"
id=$(dfcache import -e "$sock" --transfer path --no-progress "$work/data/c.bin" | task_of)
[ -n "$id" ] || fail "import --transfer path printed no task id"
dfcache export -e "$sock" --no-progress -O "$work/data/c.out" "$id" >/dev/null
same "$work/data/c.bin" "$work/data/c.out" "path import + export to a file"
ok "$who import --transfer path of a bind-mounted file, export -O FILE ($id)"

# 2d. a file only the host sees, --transfer auto: path fails (the daemon sees no such file); the
# fd step is refused because the container has its own PID namespace (the daemon binds a passed
# descriptor to the passer's pid, which SO_PEERCRED reports as 0 from another PID namespace: see
# 4.), so dfcache falls back to streaming.
head -c $((2 << 20)) /dev/urandom >"$work/host/d.bin"
id=$(dfcache import -e "$sock" --no-progress "$work/host/d.bin" | task_of)
[ -n "$id" ] || fail "import (auto) of a host-only file printed no task id"
dfcache export -e "$sock" --no-progress -O - "$id" >"$work/host/d.out"
same "$work/host/d.bin" "$work/host/d.out" "auto import + export -O -"
ok "$who import (auto) of a host-only file, export -O - ($id)"
n=$(dfcache ls -e "$sock" 2>/dev/null | grep -c '^[0-9a-f]\{64\}' || true)
say "tasks listed: $n"

# 3. SIGTERM through tini.
t0=$(now_ms)
podman stop -t 30 "$ctr" >/dev/null
t_stop=$(($(now_ms) - t0))
code=$(podman inspect --format '{{.State.ExitCode}}' "$ctr")
[ "$code" = 0 ] || fail "after podman stop (SIGTERM) the container exited $code, not 0"
ok "podman stop: exit 0 after ${t_stop} ms (SIGTERM forwarded by tini)"
podman rm "$ctr" >/dev/null

# 4. With the host's PID namespace (the chart's hostPID), a passed descriptor works: the daemon
# sees the passer's real pid. Host dfcache only (the image's would be in its own namespace).
if [ -x "$host_dfcache" ]; then
    rm -rf "$work/sock"/*
    dfc_podman run -d --name "$ctr" --pid host "${limits[@]}" -v "$work/sock:/var/run/dragonfly" \
        "$image" dfdaemon >/dev/null
    for _ in $(seq 300); do
        [ -S "$sock.fd" ] && break
        [ "$(podman inspect --format '{{.State.Running}}' "$ctr")" = true ] ||
            fail "dfdaemon (--pid host) exited before its socket appeared"
        sleep 0.1
    done
    [ -S "$sock.fd" ] || fail "no socket $sock.fd after 30 s (--pid host)"
    head -c $((2 << 20)) /dev/urandom >"$work/host/e.bin"
    id=$(dfcache import -e "$sock" --transfer fd --no-progress "$work/host/e.bin" | task_of)
    [ -n "$id" ] || fail "import --transfer fd (--pid host) printed no task id"
    dfcache export -e "$sock" --no-progress -O - "$id" >"$work/host/e.out"
    same "$work/host/e.bin" "$work/host/e.out" "fd import + export -O - (--pid host)"
    ok "--pid host: host dfcache import --transfer fd of a host-only file ($id)"
    podman stop -t 30 "$ctr" >/dev/null
    code=$(podman inspect --format '{{.State.ExitCode}}' "$ctr")
    [ "$code" = 0 ] || fail "--pid host: after podman stop the container exited $code, not 0"
    ok "--pid host: podman stop: exit 0"
    podman rm "$ctr" >/dev/null
fi

say "$passed passed, 0 failed ($(($(now_ms) - t_start)) ms)"
