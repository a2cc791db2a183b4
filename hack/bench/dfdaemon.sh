#!/usr/bin/env bash
# dfdaemon benchmark: one run, each figure set against the physical limit that bounds it,
# measured in the same run on the same tmpfs:
#   the hash limit  `openssl dgst -sha256 SRC` (one core): whatever imports must hash all bytes
#   the copy limit  `cat SRC > DST`: whatever writes a copy of the bytes
#   path import, read-only file of the daemon's uid (hard link)  vs the hash  (goal <= 1.10x)
#   path import, writable file (tmpfs: a forced copy)            vs the hash  (goal <= 1.10x)
#     and vs the copy: an import that copies can be no faster than the slower of the two
#   fd import (--transfer fd), run by root inside a private mount namespace from a file on a
#     tmpfs of its own that the daemon cannot see, as a pod's   vs the hash  (goal <= 1.10x)
#   streamed import                                              vs the hash  (goal <= 1.20x)
#   streamed export (--transfer-from-dfdaemon: pieces over the socket)
#                                                  throughput vs the copy     (goal >= 0.60x)
#   daemon-written export (the daemon links or copies into the target; on the store's own
#     filesystem, as here, a hard link, so it is bounded by neither limit: printed for scale)
#   the daemon's peak RSS (VmHWM)                                             (goal <= 64 MiB)
#   the share of CPU time the host stole from this VM during the timed steps (hack/bench/
#     steal.sh; the fd row, timed inside its namespace, is left out of it)
# There is no raw Unix-socket copy reference: a plain read/write socket copy was slower than
# the streamed import it was meant to bound, so it bounded nothing.
# Without root there is no private mount namespace and the fd row is left out.
# Files and the store live in /dev/shm so the VM's disk does not decide the numbers.
# BENCH_METRICS=on (the default) serves metrics.server on a free loopback port and scrapes
# /metrics once a second for the whole run (harsher than Prometheus's 15-60 s); off sets
# metrics.server.port=0 (no registry, no per-call counting at all). Compare the ratios of an
# off and an on run against the spread of their own runs (printed under "runs").
#   usage: [BENCH_METRICS=on|off] hack/bench/dfdaemon.sh [size_MiB]    (default 1024)
set -euo pipefail
cd "$(dirname "$0")/../.."
size_mib=${1:-1024}
# Five runs: on this VM a single run of any row, the references included, now and then takes
# twice its usual time, and a median of three with two such runs says nothing about the code.
runs=5

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DDFC_BENCH=ON >/dev/null
cmake --build build-bench -j"$(nproc)" --target dfdaemon dfcache >/dev/null
bin=build-bench
work=$(mktemp -d /dev/shm/dfc-bench-XXXXXX)
daemon_pid=
cleanup() {
    pages_restore
    [ -n "${scrape_pid:-}" ] && kill "$scrape_pid" 2>/dev/null && wait "$scrape_pid" 2>/dev/null
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=hack/bench/pages.sh
. hack/bench/pages.sh
pages_hold

sock=$work/run/dfdaemon.sock
head -c $((size_mib << 20)) /dev/urandom >"$work/src.bin"
# A read-only file of the daemon's own uid: nobody else can change it, so it is hard-linked.
cp "$work/src.bin" "$work/ro.bin"
chmod 0444 "$work/ro.bin"
metrics=${BENCH_METRICS:-on}
mport=0
if [ "$metrics" = on ]; then
    mport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
"$bin/daemon/dfdaemon" --storage-dir "$work/store" --socket-path "$sock" -l warn \
    --set metrics.server.port="$mport" --set health.server.port=0 &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
scrapes=0
scrape_pid=
if [ "$metrics" = on ]; then
    # One GET /metrics a second, over bash's /dev/tcp (no HTTP client needed).
    (
        while sleep 1; do
            exec 3<>"/dev/tcp/127.0.0.1/$mport" || exit 0
            printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
            cat <&3 >/dev/null
            exec 3>&-
            echo x >>"$work/scrapes"
        done
    ) &
    scrape_pid=$!
fi

# shellcheck source=hack/bench/steal.sh
. hack/bench/steal.sh
now() { date +%s.%N; }
median() { sort -g | sed -n "$(((runs + 1) / 2))p"; }
dfcache() { "$bin/daemon/cmd/dfcache/dfcache" "$@" -e "$sock" --no-progress; }
# Runs "$@" and appends its wall time (s) to the array named by $1; its stdout goes to $out.
timed() {
    local -n arr=$1
    shift
    local s e
    steal_begin timed
    s=$(now)
    out=$("$@")
    e=$(now)
    steal_end timed
    arr+=("$(echo "$e - $s" | bc -l)")
}

# Warm the page cache so every contender reads from memory.
cat "$work/src.bin" "$work/ro.bin" >/dev/null

# Every timed step starts right after the same page warm-up: 1.1 x the size written to the
# tmpfs and removed. A VM with free page reporting (virtio-balloon) hands freed memory back to
# its host after a few seconds, and touching it again then costs ~1.4 s per GiB more, so
# without this whichever step ran on freshly freed pages won (hack/bench/p2p.sh does the same).
# Where the guest kernel lets it, pages_hold (hack/bench/pages.sh) also keeps freed memory in
# this VM for the run, so the warm-up's pages are still there when the timed step writes.
warm_up() {
    dd if=/dev/zero of="$work/warm" bs=1M count=$((size_mib + size_mib / 10 + 1)) status=none
    rm -f "$work/warm"
}

# The fd import: dfcache in a private mount namespace, the file on that namespace's own tmpfs
# (copied in before the clock starts); prints "<task id> <seconds>". The copy takes as much
# memory as the import then writes: a ballast file of that size, made before the copy and
# removed after it, hands the import memory freed just before, as warm_up does for every
# other step.
fd_import() {
    head -c $((size_mib << 20)) /dev/zero >"$work/ballast.bin"
    unshare -m --propagation private sh -c '
        set -e
        mkdir -p "$1/ns" && mount -t tmpfs -o size=$(($3 + 16))m tmpfs "$1/ns"
        cp "$1/src.bin" "$1/ns/src.bin"
        rm "$1/ballast.bin"
        s=$(date +%s.%N)
        out=$("$2" import --transfer fd -e "$1/run/dfdaemon.sock" --no-progress "$1/ns/src.bin")
        e=$(date +%s.%N)
        echo "$out $(echo "$e - $s" | bc -l)"' sh "$work" "$bin/daemon/cmd/dfcache/dfcache" "$size_mib"
}
have_fd=0
[ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null && have_fd=1

out=
t_ssl=() t_cat=() t_link=() t_copy=() t_fd=() t_stream=() t_export=() t_dexport=()
for i in $(seq $runs); do
    warm_up
    timed t_ssl openssl dgst -sha256 "$work/src.bin"
    warm_up
    timed t_cat sh -c 'cat "$1" >"$2"' sh "$work/src.bin" "$work/cat.bin"
    rm -f "$work/cat.bin"

    warm_up
    timed t_link dfcache import --transfer path "$work/ro.bin"
    id=$(cut -c7- <<<"$out")
    dfcache rm "$id" >/dev/null

    warm_up
    timed t_copy dfcache import --transfer path "$work/src.bin"
    dfcache rm "$id" >/dev/null
    if [ "$have_fd" = 1 ]; then
        r=$(fd_import)
        [ "$(cut -c7-70 <<<"$r")" = "$id" ] || { echo "fd import: $r" >&2; exit 1; }
        t_fd+=("${r##* }")
        dfcache rm "$id" >/dev/null
    fi
    warm_up
    timed t_stream dfcache import --transfer stream "$work/src.bin"

    warm_up
    timed t_export dfcache export --transfer-from-dfdaemon -O "$work/out.bin" "$id"
    cmp -s "$work/src.bin" "$work/out.bin" || { echo "streamed export differs" >&2; exit 1; }
    rm -f "$work/out.bin"
    warm_up
    timed t_dexport dfcache export -O "$work/out.bin" "$id"
    cmp -s "$work/src.bin" "$work/out.bin" || { echo "daemon-written export differs" >&2; exit 1; }
    rm -f "$work/out.bin"
    dfcache rm "$id" >/dev/null
done
hwm_kb=$(awk '/VmHWM/ {print $2}' "/proc/$daemon_pid/status")
if [ -n "$scrape_pid" ]; then
    kill "$scrape_pid" 2>/dev/null && wait "$scrape_pid" 2>/dev/null || true
    scrape_pid=
    scrapes=$(wc -l <"$work/scrapes" 2>/dev/null || echo 0)
fi

med() { printf '%s\n' "$@" | median; }
ssl=$(med "${t_ssl[@]}")
cat_=$(med "${t_cat[@]}")
link=$(med "${t_link[@]}")
copy=$(med "${t_copy[@]}")
stream=$(med "${t_stream[@]}")
fd=
[ "$have_fd" = 1 ] && fd=$(med "${t_fd[@]}")
export_=$(med "${t_export[@]}")
dexport=$(med "${t_dexport[@]}")
mbps() { echo "$size_mib * 1048576 / $1 / 1000000" | bc -l; }
x() { echo "$1 / $2" | bc -l; }

printf 'dfdaemon bench: %d MiB file in /dev/shm, median of %d runs, metrics %s (%s scrapes)\n' \
    "$size_mib" "$runs" "$metrics" "$scrapes"
printf '  runs (s): hash %s | cat %s | link %s | copy %s | fd %s | stream %s | export %s | dexport %s\n' \
    "${t_ssl[*]}" "${t_cat[*]}" "${t_link[*]}" "${t_copy[*]}" "${t_fd[*]:-}" "${t_stream[*]}" \
    "${t_export[*]}" "${t_dexport[*]}"
printf '  openssl dgst -sha256 (hash limit) %6.3f s  %5.0f MB/s\n' "$ssl" "$(mbps "$ssl")"
printf '  cat SRC > DST (copy limit)        %6.3f s  %5.0f MB/s\n' "$cat_" "$(mbps "$cat_")"
printf '  path import, read-only: link      %6.3f s  %.2fx the hash time (goal <= 1.10x)\n' \
    "$link" "$(x "$link" "$ssl")"
printf '  path import, writable: copy       %6.3f s  %.2fx the hash time (goal <= 1.10x), %.2fx the copy time\n' \
    "$copy" "$(x "$copy" "$ssl")" "$(x "$copy" "$cat_")"
if [ -n "$fd" ]; then
    printf '  fd import (private mount ns)      %6.3f s  %5.0f MB/s  %.2fx the hash time (goal <= 1.10x)\n' \
        "$fd" "$(mbps "$fd")" "$(x "$fd" "$ssl")"
else
    printf '  fd import                         not run: needs root and unshare -m\n'
fi
printf '  streamed import                   %6.3f s  %5.0f MB/s  %.2fx the hash time (goal <= 1.20x)\n' \
    "$stream" "$(mbps "$stream")" "$(x "$stream" "$ssl")"
printf '  streamed export (pieces)          %6.3f s  %5.0f MB/s  %.2fx the copy throughput (goal >= 0.60x)\n' \
    "$export_" "$(mbps "$export_")" "$(x "$cat_" "$export_")"
printf '  daemon-written export (hard link)  %5.3f s  %5.0f MB/s  %.2fx the copy throughput\n' \
    "$dexport" "$(mbps "$dexport")" "$(x "$cat_" "$dexport")"
printf '  dfdaemon peak RSS (VmHWM)         %6.1f MiB  (goal <= 64 MiB)\n' "$(echo "$hwm_kb / 1024" | bc -l)"
printf '  CPU time stolen by the host       %6s %%   (during the timed steps; a quiet VM: under 2%%)\n' \
    "$(steal_pct timed)"
printf '  %s\n' "$pages_note"
