#!/usr/bin/env bash
# Runs every check on a fresh Debian 12 machine: installs the dependencies, checks formatting,
# runs hack/lint.sh (banned calls, layering, clang-tidy), builds with -Werror, runs all tests, then runs them again under ASan+UBSan and under TSan
# (test/tsan.supp silences only Debian's uninstrumented gRPC and absl libraries), and replays
# the fuzz targets' seed corpus.
#   hack/test.sh           everything
#   hack/test.sh --quick   skip the sanitizer passes
set -euo pipefail
cd "$(dirname "$0")/.."

bash hack/install-deps.sh
bash hack/format.sh --check

jobs=$(nproc)
# lint (clang-tidy included) on the first suite's build directory, before anything is built.
cmake -S . -B build -DDFC_WERROR=ON >/dev/null
bash hack/lint.sh build

passed=0
run_suite() {
    local dir=$1
    shift
    cmake -S . -B "$dir" -DDFC_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j"$jobs"
    (cd "$dir" && ctest --output-on-failure -j"$jobs") | tee "$dir/ctest.log"
    local n
    n=$(sed -n 's/^100% tests passed, 0 tests failed out of \([0-9]*\)$/\1/p' "$dir/ctest.log")
    passed=$((passed + n))
}

echo "== build and test (RelWithDebInfo) =="
run_suite build

if [ "${1:-}" != "--quick" ]; then
    echo "== build and test under ASan+UBSan =="
    run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DDFC_SANITIZE=address,undefined
    echo "== build and test under TSan =="
    run_suite build-tsan -DCMAKE_BUILD_TYPE=Debug -DDFC_SANITIZE=thread
    echo "== fuzz targets over their seed corpus (clang, ASan+UBSan) =="
    bash hack/fuzz.sh --replay
fi

echo "tests: $passed passed, 0 failed"
