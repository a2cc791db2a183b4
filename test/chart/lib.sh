# shellcheck shell=bash disable=SC2154 # root and build are the sourcing test's
# test/chart/lib.sh - what the chart tests (test/chart/*_test.sh) share. Sourced, after the
# test has set root (the repository) and build where it has one:
#   . "$root/test/chart/lib.sh" NAME        NAME (chart_test, ...) starts the test's messages
#
#   ok MSG             a check passed: "ok   MSG", counted in $passed
#   fail MSG           a check failed: "FAIL: MSG" on stderr, counted in $failed
#   skip MSG           "NAME: SKIP: MSG" and exit 77 (ctest's SKIP_RETURN_CODE)
#   die MSG            "NAME: MSG" on stderr and exit 1
#   need_tools TOOL... skip unless every TOOL is on PATH
#   need_built BIN...  exit 1 unless every BIN (a path below $build) is built
#   npm_ci_chart       npm ci in hack/chart (the YAML parser, the validator's schemas) unless done
#   make_work SIGNAL   $work: a new temp dir; at exit every pid in $pids gets SIGNAL and is waited
#                      for, then $work is removed
test_name=$1
passed=0
failed=0

ok() {
    passed=$((passed + 1))
    echo "ok   $*"
}

fail() {
    failed=$((failed + 1))
    echo "FAIL: $*" >&2
}

skip() {
    echo "$test_name: SKIP: $*"
    exit 77
}

die() {
    echo "$test_name: $*" >&2
    exit 1
}

need_tools() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null || skip "$tool not found (hack/install-deps.sh installs it)"
    done
}

need_built() {
    local b
    for b in "$@"; do
        [ -x "$build/$b" ] || die "$build/$b is not built (cmake --build $build)"
    done
}

npm_ci_chart() {
    if [ ! -f "$root/hack/chart/node_modules/.package-lock.json" ]; then
        echo "$test_name: npm ci in hack/chart"
        npm ci --prefix "$root/hack/chart" --no-audit --no-fund --loglevel=error >/dev/null ||
            die "npm ci in hack/chart failed"
    fi
}

make_work() {
    work_signal=$1
    work=$(mktemp -d "${TMPDIR:-/tmp}/$test_name.XXXXXX")
    pids=()
    trap work_cleanup EXIT
}

work_cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill "-$work_signal" "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$work"
}
