#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for N seconds (default 60),
# starting from the seed corpus in test/fuzz/corpus/<target> and keeping what it finds in
# build-fuzz/corpus/<target>. Exits non-zero on the first crash, leak or sanitizer report.
#   hack/fuzz.sh [seconds]     explore for N seconds per target (default 60)
#   hack/fuzz.sh --replay      only run the committed seed corpus (deterministic; CI does this)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
replay=false
if [ "$secs" = "--replay" ]; then
    replay=true
fi
CC=clang cmake -S . -B build-fuzz -DDFC_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_unpack fuzz_config fuzz_mountinfo fuzz_sched_model fuzz_vortex >/dev/null
log=build-fuzz/fuzz.log
for t in fuzz_unpack fuzz_config fuzz_mountinfo fuzz_sched_model fuzz_vortex; do
    if $replay; then
        echo "== $t: replaying test/fuzz/corpus/$t"
        args=(-runs=0 "test/fuzz/corpus/$t")
    else
        echo "== $t: exploring for ${secs}s"
        mkdir -p "build-fuzz/corpus/$t"
        args=(-max_total_time="$secs" -max_len=65536 "build-fuzz/corpus/$t" "test/fuzz/corpus/$t")
    fi
    if ! "build-fuzz/test/fuzz/$t" -print_final_stats=1 -artifact_prefix=build-fuzz/ "${args[@]}" \
        >"$log" 2>&1; then
        grep -E "ERROR|SUMMARY|Test unit written" "$log" >&2 || tail -20 "$log" >&2
        echo "fuzz: $t failed (artifact under build-fuzz/)" >&2
        exit 1
    fi
    grep -E "stat::number_of_executed_units" "$log" || true
done
echo "fuzz: no crashes, leaks or sanitizer reports"
