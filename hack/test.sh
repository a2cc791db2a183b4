#!/usr/bin/env bash
# Runs every check on a fresh Debian 12 machine: installs the dependencies, checks formatting,
# runs hack/lint.sh (banned calls, layering, clang-tidy), builds with -Werror, runs all tests and
# the end-to-end test on a local P2P cluster (in the background), then runs ctest again under
# ASan+UBSan and under TSan (test/tsan.supp silences only Debian's uninstrumented gRPC and absl
# libraries), and replays the fuzz targets' seed corpus.
#   hack/test.sh           everything
#   hack/test.sh --quick   skip the sanitizer passes
#   DFC_IMAGE_TEST=1 hack/test.sh   also build the container image (hack/image/build.sh, about
#                          3 minutes cold) and run its smoke test (hack/image/smoke.sh); needs root
set -euo pipefail
cd "$(dirname "$0")/.."

bash hack/install-deps.sh
bash hack/format.sh --check

jobs=$(nproc)
# lint (clang-tidy included) on the first suite's build directory, before anything is built.
cmake -S . -B build -DDFC_WERROR=ON >/dev/null
bash hack/lint.sh build

passed=0
skipped=0
# ctest counts a skipped test (exit 77, SKIP_RETURN_CODE) in "out of N" and lists it under "The
# following tests did not run:" as "<n> - <name> (Skipped)".
run_suite() {
    local dir=$1
    shift
    cmake -S . -B "$dir" -DDFC_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j"$jobs"
    (cd "$dir" && ctest --output-on-failure -j"$jobs") | tee "$dir/ctest.log"
    local n k
    n=$(sed -n 's/^100% tests passed, 0 tests failed out of \([0-9]*\)$/\1/p' "$dir/ctest.log")
    k=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$dir/ctest.log" || true)
    passed=$((passed + n - k))
    skipped=$((skipped + k))
}

echo "== build and test (RelWithDebInfo) =="
run_suite build

# The end-to-end test on a real local cluster (redis, the scheduler, 4 dfdaemons on
# 127.0.0.11..14) runs once, on the plain build; it skips with a message when not root. It takes
# a little over 5 minutes, nearly all of it waiting for a 5-minute TTL (the shortest the API
# allows) to expire, so a full run starts it in the background beside the sanitizer passes.
e2e_log=build/e2e.log
e2e_pid=""
stop_e2e() {
    if [ -n "$e2e_pid" ]; then
        kill -TERM "$e2e_pid" 2>/dev/null || true
        wait "$e2e_pid" 2>/dev/null || true
    fi
}
finish_e2e() {
    local rc=0
    wait "$e2e_pid" || rc=$?
    e2e_pid=""
    cat "$e2e_log"
    if [ $rc -ne 0 ]; then
        echo "test: test/e2e/local_cluster_test.sh failed (exit $rc; log above, $e2e_log)" >&2
        exit 1
    fi
    local n k
    n=$(sed -n 's/^local_cluster_test: \([0-9]*\) passed, 0 failed.*/\1/p' "$e2e_log")
    k=$(sed -n 's/^local_cluster_test: [0-9]* passed, 0 failed, \([0-9]*\) skipped$/\1/p' "$e2e_log")
    passed=$((passed + ${n:-0}))
    skipped=$((skipped + ${k:-0}))
}
trap stop_e2e EXIT
echo "== end-to-end: P2P on a local cluster (test/e2e/local_cluster_test.sh, log $e2e_log) =="
bash test/e2e/local_cluster_test.sh build >"$e2e_log" 2>&1 &
e2e_pid=$!

if [ "${1:-}" != "--quick" ]; then
    echo "== build and test under ASan+UBSan =="
    run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DDFC_SANITIZE=address,undefined
    echo "== build and test under TSan =="
    run_suite build-tsan -DCMAKE_BUILD_TYPE=Debug -DDFC_SANITIZE=thread
    echo "== fuzz targets over their seed corpus (clang, ASan+UBSan) =="
    bash hack/fuzz.sh --replay
fi
if [ "${DFC_IMAGE_TEST:-0}" = 1 ]; then
    echo "== container image: hack/image/build.sh, hack/image/smoke.sh =="
    bash hack/install-deps.sh --image
    if [ "$(id -u)" -eq 0 ]; then
        bash hack/image/build.sh
    fi
    bash hack/image/smoke.sh localhost/dragonfly-csi:latest build | tee build/image-smoke.log
    n=$(sed -n 's/^smoke: \([0-9]*\) passed, 0 failed.*/\1/p' build/image-smoke.log)
    passed=$((passed + ${n:-0}))
fi
echo "== end-to-end test results =="
finish_e2e

echo "tests: $passed passed, 0 failed, $skipped skipped"
