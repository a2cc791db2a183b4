#!/usr/bin/env bash
# dfdaemon benchmark: one run, references measured beside the project's figures.
#   path import      vs  openssl dgst -sha256 of the same file      (goal <= 1.10x the time)
#     of a writable file (the store reflinks or, here on tmpfs, copies it) and of a
#     read-only file of the daemon's uid (the one kind the store may hard-link); the copy is
#     also set against `cat SRC > DST` on the same tmpfs (the copy limit), since an import that
#     copies can be no faster than the slower of the hash and the copy
#   streamed import  vs  raw Unix-socket file copy (bench_raw_copy)  (goal >= 0.75x throughput)
#   streamed export  vs  the same raw copy                           (goal >= 0.80x throughput)
#   the daemon's peak RSS (VmHWM)                                    (goal <= 64 MiB)
# Files and the store live in /dev/shm so the VM's disk does not decide the numbers.
#   usage: hack/bench/dfdaemon.sh [size_MiB]    (default 1024)
set -euo pipefail
cd "$(dirname "$0")/../.."
size_mib=${1:-1024}
runs=3

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j"$(nproc)" --target dfdaemon dfcache bench_raw_copy >/dev/null
bin=build-bench
work=$(mktemp -d /dev/shm/dfc-bench-XXXXXX)
daemon_pid=
cleanup() {
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

sock=$work/run/dfdaemon.sock
head -c $((size_mib << 20)) /dev/urandom >"$work/src.bin"
"$bin/daemon/dfdaemon" --storage-dir "$work/store" --socket-path "$sock" -l warn &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

now() { date +%s.%N; }
median() { sort -g | sed -n "$(( (runs + 1) / 2 ))p"; }
dfcache() { "$bin/daemon/cmd/dfcache/dfcache" "$@" -e "$sock" --no-progress; }

# Warm the page cache so every contender reads from memory.
cat "$work/src.bin" >/dev/null

t_ssl=() t_cat=() t_path=() t_raw=() t_stream=() t_export=()
for i in $(seq $runs); do
    s=$(now); openssl dgst -sha256 "$work/src.bin" >/dev/null; e=$(now)
    t_ssl+=("$(echo "$e - $s" | bc -l)")

    s=$(now); cat "$work/src.bin" >"$work/cat.bin"; e=$(now)
    t_cat+=("$(echo "$e - $s" | bc -l)")
    rm -f "$work/cat.bin"

    s=$(now); id=$(dfcache import --transfer path "$work/src.bin" | cut -c7-); e=$(now)
    t_path+=("$(echo "$e - $s" | bc -l)")

    read -r _ secs < <("$bin/hack/bench/bench_raw_copy" "$work/src.bin" "$work/raw.bin")
    t_raw+=("$secs")
    rm -f "$work/raw.bin"

    dfcache rm "$id" >/dev/null
    s=$(now); dfcache import --transfer stream "$work/src.bin" >/dev/null; e=$(now)
    t_stream+=("$(echo "$e - $s" | bc -l)")

    s=$(now); dfcache export --transfer-from-dfdaemon -O "$work/out.bin" "$id" >/dev/null; e=$(now)
    t_export+=("$(echo "$e - $s" | bc -l)")
    cmp -s "$work/src.bin" "$work/out.bin" || { echo "export differs" >&2; exit 1; }
    rm -f "$work/out.bin"
done
# A read-only file of the daemon's own uid: nobody else can change it, so it is hard-linked.
cp "$work/src.bin" "$work/ro.bin"
chmod 0444 "$work/ro.bin"
t_link=()
for i in $(seq $runs); do
    s=$(now); id=$(dfcache import --transfer path "$work/ro.bin" | cut -c7-); e=$(now)
    t_link+=("$(echo "$e - $s" | bc -l)")
    dfcache rm "$id" >/dev/null
done
hwm_kb=$(awk '/VmHWM/ {print $2}' "/proc/$daemon_pid/status")

ssl=$(printf '%s\n' "${t_ssl[@]}" | median)
cat_=$(printf '%s\n' "${t_cat[@]}" | median)
path=$(printf '%s\n' "${t_path[@]}" | median)
link=$(printf '%s\n' "${t_link[@]}" | median)
raw=$(printf '%s\n' "${t_raw[@]}" | median)
stream=$(printf '%s\n' "${t_stream[@]}" | median)
export_=$(printf '%s\n' "${t_export[@]}" | median)
mbps() { echo "$size_mib * 1048576 / $1 / 1000000" | bc -l; }

printf 'dfdaemon bench: %d MiB file in /dev/shm, median of %d runs\n' "$size_mib" "$runs"
printf '  openssl dgst -sha256          %6.3f s  (reference)\n' "$ssl"
printf '  cat SRC > DST (copy limit)    %6.3f s  (reference)\n' "$cat_"
printf '  path import (writable: copy)  %6.3f s  %.2fx the hash time, %.2fx the copy time\n' \
    "$path" "$(echo "$path / $ssl" | bc -l)" "$(echo "$path / $cat_" | bc -l)"
printf '  path import (read-only: link) %6.3f s  %.2fx the reference time (goal <= 1.10x)\n' \
    "$link" "$(echo "$link / $ssl" | bc -l)"
printf '  raw unix-socket file copy     %6.0f MB/s  (reference)\n' "$(mbps "$raw")"
printf '  streamed import               %6.0f MB/s  %.2fx raw (goal >= 0.75x)\n' \
    "$(mbps "$stream")" "$(echo "$raw / $stream" | bc -l)"
printf '  streamed export (pieces)      %6.0f MB/s  %.2fx raw (goal >= 0.80x)\n' \
    "$(mbps "$export_")" "$(echo "$raw / $export_" | bc -l)"
printf '  dfdaemon peak RSS (VmHWM)     %6.1f MiB  (goal <= 64 MiB)\n' "$(echo "$hwm_kb / 1024" | bc -l)"
