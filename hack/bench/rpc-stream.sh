#!/usr/bin/env bash
# Streams 1 GiB (or $1 MiB) over the RPC layer and over a raw Unix socket, prints both and the
# ratio. Builds a Release tree in build-bench/ first.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DDFC_BENCH=ON >/dev/null
cmake --build build-bench -j"$(nproc)" --target bench_rpc_stream >/dev/null
exec build-bench/hack/bench/bench_rpc_stream "${1:-1024}" "${2:-4096}"
