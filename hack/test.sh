#!/usr/bin/env bash
# Runs every check on a fresh Debian 12 machine: installs the dependencies, checks formatting,
# runs hack/lint.sh (banned calls, layering, clang-tidy), builds with -Werror, runs all tests and
# the end-to-end tests (in the background: a local P2P cluster, then chaos on a netns testbed),
# then runs ctest again under ASan+UBSan and under TSan (test/tsan.supp silences only Debian's
# uninstrumented gRPC and absl libraries), and replays the fuzz targets' seed corpus.
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

# The end-to-end tests run once, on the plain build, one after the other in one background job
# beside the sanitizer passes; each skips with a message when not root. First the local cluster
# (redis, the scheduler, 4 dfdaemons on 127.0.0.11..14): a little over 5 minutes, nearly all of
# it waiting for a 5-minute TTL (the shortest the API allows) to expire. Then chaos in a flash
# crowd on the network-namespace testbed (5 nodes behind shaped links, about 3 minutes).
e2e_tests=(local_cluster_test swarm_chaos_test)
e2e_pid=""
stop_e2e() {
    if [ -n "$e2e_pid" ]; then
        kill -TERM "$e2e_pid" 2>/dev/null || true
        wait "$e2e_pid" 2>/dev/null || true
    fi
}
# Runs each test into build/<name>.log and its exit status into build/<name>.rc; a TERM stops
# the running test (its trap takes its cluster down) and the job.
run_e2e() {
    local t pid="" rc
    trap '[ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null; wait "$pid"; }; exit 143' TERM
    for t in "${e2e_tests[@]}"; do
        rm -f "build/$t.rc"
        bash "test/e2e/$t.sh" build >"build/$t.log" 2>&1 &
        pid=$!
        rc=0
        wait "$pid" || rc=$?
        pid=""
        echo "$rc" >"build/$t.rc"
    done
}
finish_e2e() {
    wait "$e2e_pid" || true
    e2e_pid=""
    local t rc n k failed=0
    for t in "${e2e_tests[@]}"; do
        cat "build/$t.log" 2>/dev/null || true
        rc=$(cat "build/$t.rc" 2>/dev/null || echo "none")
        if [ "$rc" != 0 ]; then
            echo "test: test/e2e/$t.sh failed (exit $rc; log above, build/$t.log)" >&2
            failed=1
            continue
        fi
        n=$(sed -n "s/^$t: \([0-9]*\) passed, 0 failed.*/\1/p" "build/$t.log")
        k=$(sed -n "s/^$t: [0-9]* passed, 0 failed, \([0-9]*\) skipped$/\1/p" "build/$t.log")
        passed=$((passed + ${n:-0}))
        skipped=$((skipped + ${k:-0}))
    done
    [ $failed = 0 ] || exit 1
}
trap stop_e2e EXIT
echo "== end-to-end: P2P on a local cluster, then chaos on a netns testbed (test/e2e/local_cluster_test.sh, swarm_chaos_test.sh; logs build/<name>.log) =="
run_e2e &
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
