#!/usr/bin/env bash
# Flash-crowd benchmark (issue 33): N nodes in their own network namespaces, each link shaped
# to RATE both ways (hack/netns-cluster.sh), one SIZE_MIB random file imported on node 1 with
# --persistent-replica-count 1, then every other node exports it at once. Prints
#   the single-link bound     SIZE * 8 / RATE: one full copy over one link
#   first, last and mean      each export's completion, from the moment all were started
#   last / bound              (issue 33's goal at N=8, 200mbit, 256 MiB: <= 1.5x, aim 1.25x)
#   per node                  its export time, the pieces it served and fetched over Vortex and
#                             the bytes it served (its Prometheus counters
#                             dragonfly_dfdaemon_vortex_pieces_served_total,
#                             _vortex_pieces_fetched_total and _upload_traffic)
#   busiest uplink            the share of RATE x last that the node serving most sent
#   the CPU                   busy and steal share of the machine during the exports and the
#                             load average before and after: every node shares this machine's cores,
#                             so a busy or stolen CPU, not a link, can be what limits the crowd
# Every exported file is compared with the source (cmp); a failed or differing export fails
# the run. The cluster is brought down at the end (BENCH_KEEP=1 keeps it and the files).
#
#   usage: hack/bench/swarm.sh [N=8] [RATE=200mbit] [SIZE_MIB=256]     (root; not in CI)
# Environment: BUILD_DIR (default build: the targets dfdaemon, dfcache and scheduler are built
# there when it is a configured CMake tree), CLUSTER_TLS (mutual default, or off),
# BENCH_LOG_LEVEL (the nodes' log.level, default warn), BENCH_DIR (default a new
# /dev/shm/dfc-bench-swarm-XXXXXX: stores and files in memory so the disk does not decide).
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-8}
rate=${2:-200mbit}
size_mib=${3:-256}
build=${BUILD_DIR:-build}

die() {
    echo "swarm: $*" >&2
    exit 1
}
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (network namespaces)"
    exit 77
fi
if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 2 ] || [ "$n" -gt 200 ]; then
    die "N must be 2..200, not '$n'"
fi
if ! [[ $size_mib =~ ^[0-9]+$ ]] || [ "$size_mib" -lt 1 ]; then
    die "SIZE_MIB must be a positive integer, not '$size_mib'"
fi
[[ $rate =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || die "RATE must be <n>bit|kbit|mbit|gbit, not '$rate'"
case ${BASH_REMATCH[2]} in
bit) rate_bps=${BASH_REMATCH[1]} ;;
kbit) rate_bps=$((BASH_REMATCH[1] * 1000)) ;;
mbit) rate_bps=$((BASH_REMATCH[1] * 1000000)) ;;
gbit) rate_bps=$((BASH_REMATCH[1] * 1000000000)) ;;
esac
for b in jq bc cmp; do
    command -v "$b" >/dev/null || die "$b is missing (bash hack/install-deps.sh)"
done
if [ -f "$build/CMakeCache.txt" ]; then
    cmake --build "$build" -j2 --target dfdaemon dfcache scheduler >/dev/null ||
        die "building dfdaemon, dfcache and scheduler in $build failed"
fi

work=${BENCH_DIR:-$(mktemp -d /dev/shm/dfc-bench-swarm-XXXXXX)}
mkdir -p "$work"
export CLUSTER_DIR=$work/cluster BUILD_DIR=$build
export CLUSTER_LOG_LEVEL=${BENCH_LOG_LEVEL:-warn} CLUSTER_GC_INTERVAL=10m
cluster() { bash hack/netns-cluster.sh "$@"; }
# shellcheck source=hack/bench/pages.sh
. hack/bench/pages.sh
# shellcheck source=hack/bench/steal.sh
. hack/bench/steal.sh
cleanup() {
    pages_restore
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        echo "swarm: kept $work (CLUSTER_DIR=$CLUSTER_DIR hack/netns-cluster.sh down)" >&2
        return
    fi
    cluster down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
pages_hold

dfcache() {
    local i=$1
    shift
    "$build/daemon/cmd/dfcache/dfcache" "$@" -e "$CLUSTER_DIR/node$i/run/dfdaemon.sock" --no-progress
}
now() { date +%s.%N; }
# metric I NAME: node I's counter NAME (summed over its labels; 0 when absent).
metric() {
    cluster metrics "$1" 2>/dev/null |
        awk -v m="dragonfly_dfdaemon_$2" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%.0f", s }'
}
# busy and all CPU ticks of the machine so far (busy: everything but idle and iowait).
cpu_ticks() { awk '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t; exit}' /proc/stat; }

bound=$(echo "$size_mib * 1048576 * 8 / $rate_bps" | bc -l)
# An export that takes 20 times the bound plus 2 minutes has hung.
timeout_s=$(printf '%.0f' "$(echo "$bound * 20 + 120" | bc -l)")

head -c $((size_mib << 20)) /dev/urandom >"$work/src.bin"
cluster up "$n" --rate "$rate" >/dev/null || die "hack/netns-cluster.sh up $n --rate $rate failed"
# shellcheck disable=SC1091
. "$CLUSTER_DIR/cluster.env"

s=$(now)
id=$(dfcache 1 import --persistent-replica-count 1 "$work/src.bin" | sed -n 's/^Done: //p')
[ -n "$id" ] || die "the import on node 1 failed"
t_import=$(echo "$(now) - $s" | bc -l)
piece_len=$(dfcache 1 ls --json | jq -r --arg id "$id" '.[] | select(.id == $id) | .piece_length')
pieces=$(((size_mib * 1048576 + piece_len - 1) / piece_len))
for i in $(seq 2 "$n"); do
    if dfcache "$i" ls --json | jq -e --arg id "$id" 'any(.[]; .id == $id)' >/dev/null; then
        die "node $i already holds $id before the crowd"
    fi
done
declare -A served0 fetched0 bytes0
for i in $(seq "$n"); do
    served0[$i]=$(metric "$i" vortex_pieces_served_total)
    fetched0[$i]=$(metric "$i" vortex_pieces_fetched_total)
    bytes0[$i]=$(metric "$i" upload_traffic)
done

# The crowd: every other node exports at once; each writes "<rc> <end time>" when done.
read -r load0 _ </proc/loadavg
read -r busy0 all0 < <(cpu_ticks)
steal_begin crowd
t0=$(now)
for i in $(seq 2 "$n"); do
    (
        rc=0
        dfcache "$i" export --timeout "${timeout_s}s" -O "$work/out$i.bin" "$id" \
            >"$work/export$i.log" 2>&1 || rc=$?
        echo "$rc $(now)" >"$work/done$i"
    ) &
done
wait
steal_end crowd
read -r busy1 all1 < <(cpu_ticks)
read -r load1 _ </proc/loadavg

declare -A took
failed=0
for i in $(seq 2 "$n"); do
    read -r rc e <"$work/done$i"
    took[$i]=$(echo "$e - $t0" | bc -l)
    if [ "$rc" -ne 0 ]; then
        echo "swarm: node $i's export failed (exit $rc): $(tail -n 3 "$work/export$i.log")" >&2
        failed=1
    elif ! cmp -s "$work/src.bin" "$work/out$i.bin"; then
        echo "swarm: node $i's export differs from the source" >&2
        failed=1
    fi
done

printf 'swarm: %d nodes at %s both ways, one %d MiB task (%d pieces of %d MiB), TLS %s, build %s\n' \
    "$n" "$rate" "$size_mib" "$pieces" $((piece_len >> 20)) "$CLUSTER_TLS" "$build"
printf '  import on node 1 (replica count 1)   %7.2f s\n' "$t_import"
printf '  single-link bound (SIZE*8/RATE)      %7.2f s\n' "$bound"
sorted=$(for i in $(seq 2 "$n"); do echo "${took[$i]}"; done | sort -g)
first=$(head -n1 <<<"$sorted")
last=$(tail -n1 <<<"$sorted")
mean=$(awk '{s += $1} END {printf "%.3f", s / NR}' <<<"$sorted")
printf '  %d exports at once: first %.2f s, last %.2f s, mean %.2f s\n' $((n - 1)) "$first" "$last" "$mean"
printf '  last / bound                         %7.2fx\n' "$(echo "$last / $bound" | bc -l)"
top_bytes=0 top_node=0
printf '  %-6s %10s %14s %14s %12s\n' node export_s pieces_served pieces_fetched served_MiB
for i in $(seq "$n"); do
    sv=$(($(metric "$i" vortex_pieces_served_total) - ${served0[$i]}))
    fe=$(($(metric "$i" vortex_pieces_fetched_total) - ${fetched0[$i]}))
    by=$(($(metric "$i" upload_traffic) - ${bytes0[$i]}))
    t=import
    [ "$i" -eq 1 ] || t=$(printf '%.2f' "${took[$i]}")
    printf '  %-6s %10s %14d %14d %12.1f\n' "node$i" "$t" "$sv" "$fe" "$(echo "$by / 1048576" | bc -l)"
    if [ "$by" -gt "$top_bytes" ]; then
        top_bytes=$by top_node=$i
    fi
done
# The busiest uplink's use of its link over the whole crowd (~100%: that uplink was the limit).
[ "$top_node" -eq 0 ] || printf '  busiest uplink: node%d sent %.0f%% of RATE x last\n' "$top_node" \
    "$(echo "100 * $top_bytes * 8 / ($rate_bps * $last)" | bc -l)"
printf '  CPU during the exports: %.0f%% busy (%d cores), %s%% steal; load average %s before, %s after\n' \
    "$(echo "100 * ($busy1 - $busy0) / ($all1 - $all0)" | bc -l)" "$(nproc)" "$(steal_pct crowd)" \
    "$load0" "$load1"
echo "  $pages_note"
[ $failed -eq 0 ] || die "some exports failed or differ (above)"
echo "  every export matches the source (cmp)"
