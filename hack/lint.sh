#!/usr/bin/env bash
# The project's static checks; prints each finding and exits 1 when there is one.
#   1. banned C library calls (curl's list): unbounded or non-reentrant string, number and time
#      functions;
#   2. layering: gRPC core headers (<grpc/...>) only in lib/src/, no "../" includes (so that a
#      directory's include root, e.g. daemon/storage's, cannot be stepped around), getenv() only
#      in the option module;
#   3. no call cycles between the files of the libraries in cycle_libs (hack/call-cycles.sh,
#      from their objects in BUILD_DIR, which it builds);
#   4. clang-tidy (.clang-tidy, test/.clang-tidy) over every project .c file, with zero findings.
#
#   hack/lint.sh [--no-tidy] [BUILD_DIR]   (--no-tidy: steps 1 and 2 only)
# clang-tidy reads BUILD_DIR/compile_commands.json (default: build-lint, configured here) and
# needs the generated protobuf-c headers, which it builds there. DFC_LINT_JOBS (default 2) files
# are checked in parallel.
set -euo pipefail
cd "$(dirname "$0")/.."

tidy=true
if [ "${1:-}" = "--no-tidy" ]; then
    tidy=false
    shift
fi
build=${1:-build-lint}

fail=0
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.c' '*.h')

banned='\b(sprintf|vsprintf|strcpy|strcat|strncpy|strncat|strtok|atoi|atol|atoll|gets|localtime|gmtime|ctime|asctime|strerror|tmpnam)\s*\('
if hits=$(grep -nE "$banned" "${files[@]}" | grep -vE '^\S+:[0-9]+:\s*(/\*|\*)'); then
    echo "lint: banned functions (use snprintf, strlcpy-style code, strtol/dfc_parse_*, *_r):" >&2
    echo "$hits" >&2
    fail=1
fi

# The white-box tests of lib/src's codec build grpc_byte_buffers themselves; nothing else may.
grpc_ok='^(lib/src/|test/unit/lib/test_rpc_codec\.c:|test/fuzz/fuzz_unpack\.c:)'
if hits=$(grep -nE '^\s*#\s*include\s*<grpc/' "${files[@]}" | grep -vE "$grpc_ok"); then
    echo "lint: gRPC core headers outside lib/src/ (use dfc/rpc_*.h):" >&2
    echo "$hits" >&2
    fail=1
fi
if hits=$(grep -nE '^\s*#\s*include\s*"\.\./' "${files[@]}"); then
    echo "lint: \"../\" includes step around a directory's include root:" >&2
    echo "$hits" >&2
    fail=1
fi
# The environment is read in one place, the option module (lib/src/options.c), so every
# variable is a schema row with a flag, a default and a --help line (dfc/config.h).
if hits=$(grep -nE '\b(secure_)?getenv\s*\(' "${files[@]}" | grep -v '^lib/src/options\.c:' |
    grep -vE '^\S+:[0-9]+:\s*(/\*|\*)'); then
    echo "lint: getenv outside lib/src/options.c (declare a schema row with .env instead):" >&2
    echo "$hits" >&2
    fail=1
fi
if [ $fail -ne 0 ]; then
    exit 1
fi
echo "lint: ${#files[@]} files, no banned functions, getenv only in lib/src/options.c, layering kept"

if ! $tidy; then
    exit 0
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" >/dev/null
fi
cmake --build "$build" -j"${DFC_LINT_JOBS:-2}" --target dfc_proto dfc_proto_test >/dev/null

# Libraries whose files call each other without a cycle (targets, archives under BUILD_DIR).
cycle_targets=(sched_core dfd_p2p dfd_storage)
cycle_libs=(scheduler/libsched_core.a daemon/libdfd_p2p.a daemon/libdfd_storage.a)
cmake --build "$build" -j"${DFC_LINT_JOBS:-2}" --target "${cycle_targets[@]}" >/dev/null
if ! bash hack/call-cycles.sh "${cycle_libs[@]/#/$build/}"; then
    echo "lint: call cycles between files (move the shared part below both)" >&2
    exit 1
fi

# Every project .c file must be in the compilation database (generated .pb-c.c files live in
# the build directory and are not project files).
mapfile -t sources < <(git ls-files --cached --others --exclude-standard -- '*.c')
root=$(pwd -P)
db=$(sed -n 's/.*"file": "\([^"]*\)".*/\1/p' "$build/compile_commands.json")
missing=()
for f in "${sources[@]}"; do
    if ! grep -qxF "$root/$f" <<<"$db"; then
        missing+=("$f")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "lint: not in $build/compile_commands.json (configure it with DFC_TESTS=ON):" >&2
    printf '  %s\n' "${missing[@]}" >&2
    exit 1
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
if ! printf '%s\n' "${sources[@]}" |
    xargs -P"${DFC_LINT_JOBS:-2}" -n4 clang-tidy -p "$build" --quiet >"$out" 2>/dev/null; then
    grep -E '(warning|error):' "$out" | sort -u >&2 || cat "$out" >&2
    echo "lint: clang-tidy findings above (full notes: clang-tidy -p $build FILE)" >&2
    exit 1
fi
echo "lint: clang-tidy clean on ${#sources[@]} files ($(($(date +%s) - start)) s)"
