#!/usr/bin/env bash
# CSI benchmark: p50/p99 of a NodePublishVolume + NodeUnpublishVolume cycle over 1000 cycles
# against a real csi-plugin, with real bind mounts, and the mount count before and after.
# With sizes (MiB), the same for a content volume of a task of each size (docs/content-volumes.md)
# against a real dfdaemon: each task imported from a sparse read-only file (hard-linked into the
# store, so even 10 GiB costs no disk), then cycles of pin + read-only bind + release, after 20
# volumes of the task were held at once and the store's disk usage compared before and after.
# Needs root; runs everything in a private mount namespace.
#   usage: hack/bench/csi.sh [cycles] [SIZE_MiB...]     (issue 34: 1024 10240)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then
    echo "csi bench: needs root (bind mounts)" >&2
    exit 1
fi
cycles=${1:-1000}
shift || true
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DDFC_BENCH=ON >/dev/null
targets=(csi-plugin bench_csi_cycle)
[ $# -eq 0 ] || targets+=(dfdaemon dfcache)
cmake --build build-bench -j"$(nproc)" --target "${targets[@]}" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/run" "$work/kubelet/pods/p/volumes/kubernetes.io~csi/v"
exec unshare -m sh -c '
    set -e
    mount --make-rprivate /
    w=$1; bin=$2; cycles=$3
    shift 3
    t="$w/kubelet/pods/p/volumes/kubernetes.io~csi/v/mount"
    dpid=
    if [ $# -gt 0 ]; then
        "$bin/daemon/dfdaemon" --storage-dir "$w/store" --socket-path "$w/run/dfdaemon.sock" \
            -l warn --set metrics.server.port=0 --set health.server.port=0 &
        dpid=$!
        for _ in $(seq 100); do [ -S "$w/run/dfdaemon.sock" ] && break; sleep 0.05; done
    fi
    "$bin/csi/csi-plugin" --endpoint "unix://$w/csi.sock" --socket-dir "$w/run" \
        --kubelet-dir "$w/kubelet" --state-dir "$w/state" -l warn &
    pid=$!
    for _ in $(seq 100); do [ -S "$w/csi.sock" ] && break; sleep 0.05; done
    "$bin/hack/bench/bench_csi_cycle" "$w/csi.sock" "$t" "$cycles"
    for mib in "$@"; do
        truncate -s "${mib}M" "$w/task-$mib.bin"
        chmod 0444 "$w/task-$mib.bin"
        id=$("$bin/daemon/cmd/dfcache/dfcache" import -e "$w/run/dfdaemon.sock" \
            "$w/task-$mib.bin" | sed -n "s/^Done: //p")
        echo "content volume of a $mib MiB task ($id):"
        "$bin/hack/bench/bench_csi_cycle" --hold 20 "$w/store" "$w/csi.sock" "$t" "$cycles" \
            "taskID=$id" "csi.storage.k8s.io/pod.namespace=bench"
    done
    kill $pid; wait $pid
    if [ -n "$dpid" ]; then kill $dpid; wait $dpid; fi
' sh "$work" "$PWD/build-bench" "$cycles" "$@"
