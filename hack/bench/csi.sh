#!/usr/bin/env bash
# CSI benchmark: p50/p99 of a NodePublishVolume + NodeUnpublishVolume cycle over 1000 cycles
# against a real csi-plugin, with real bind mounts, and the mount count before and after.
# Needs root; runs everything in a private mount namespace.
#   usage: hack/bench/csi.sh [cycles]
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then
    echo "csi bench: needs root (bind mounts)" >&2
    exit 1
fi
cycles=${1:-1000}
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DDFC_BENCH=ON >/dev/null
cmake --build build-bench -j"$(nproc)" --target csi-plugin bench_csi_cycle >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/run" "$work/kubelet/pods/p/volumes/kubernetes.io~csi/v"
exec unshare -m sh -c '
    set -e
    mount --make-rprivate /
    w=$1; bin=$2; cycles=$3
    "$bin/csi/csi-plugin" --endpoint "unix://$w/csi.sock" --socket-dir "$w/run" \
        --kubelet-dir "$w/kubelet" --state-dir "$w/state" -l warn &
    pid=$!
    for _ in $(seq 100); do [ -S "$w/csi.sock" ] && break; sleep 0.05; done
    "$bin/hack/bench/bench_csi_cycle" "$w/csi.sock" \
        "$w/kubelet/pods/p/volumes/kubernetes.io~csi/v/mount" "$cycles"
    kill $pid; wait $pid
' sh "$work" "$PWD/build-bench" "$cycles"
