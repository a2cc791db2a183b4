#!/usr/bin/env bash
# UploadPersistentCacheTaskStarted+Finished pairs per second from 64 concurrent clients against
# build-bench/scheduler/scheduler on a real redis-server, with p50/p99 latency, with TLS off and
# with mutual TLS on the scheduler's gRPC port (as the chart and the local cluster run it); in
# the same run, redis-benchmark on the same Redis for the command mix one pair costs, the ratio
# of the scheduler's Redis command rate to redis-benchmark's for each (goal >= 0.5x, with TLS
# too), and the scheduler's peak RSS (VmHWM, goal <= 64 MiB).
#   [BENCH_ROUNDS=3] hack/bench/scheduler.sh [SECONDS=10] [CLIENTS=64] [POOL_SIZE=the scheduler's default, 20]
# Each round runs the load with TLS off and with TLS on (a scheduler started for each, the
# order alternating from round to round, as Redis grows with every pair), stops the scheduler,
# runs the reference, and gives one ratio per mode; the figures are the medians of the rounds'
# ratios, every round's printed. On this VM the
# reference repeats within a few percent while the same scheduler build's CPU per pair moves
# by a quarter from one 10 s load to the next (250 -> 330 us), so one round decides little.
#   SCHEDULER_BIN=path/to/scheduler hack/bench/scheduler.sh ...   (another build, e.g. main's,
#   to compare two builds run after run on a shared machine)
#
# How the mix is measured: one warm-up pair, then one pair under MONITOR records every command
# the scheduler sends for it (bench_sched_upload capture). The load run then counts what the
# scheduler really issued (INFO commandstats, reset before the run). redis-benchmark replays
# each captured command with 64 connections, no pipelining (the scheduler pipelines its reads:
# Started's host, task and peer, Finished's peer, task and host check, a task with its two
# counts; the reference replays them one by one), after the scheduler has been
# stopped so its replication backlog cannot slow the reference down, 2000 requests per
# connection per command so a short burst does not decide the rate, on the captured keys; the mix rate is k / sum(1 / rate_i) for the k commands of one pair.
# TLS: a CA and certificates from test/support/make-certs.sh (ECDSA P-256; core negotiates TLS
# 1.3): the scheduler's names 127.0.0.1 and is also its client certificate to the nodes
# (peer.tls, unused here); the load clients present one node certificate naming 127.0.0.1, the
# address of the host they announce. Redis is plaintext in both modes (the reference is the
# same), and the mix is captured with TLS off.
# Caveats, printed too: a NUL inside an argument is replayed as 0x01 (argv cannot carry NUL;
# same length, same cost), and a replayed write hits an existing key rather than a new one.
# Everything listens on 127.0.0.1 free ports; nothing touches 6379 or a system Redis.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=hack/bench/steal.sh
. hack/bench/steal.sh
seconds=${1:-10}
clients=${2:-64}
pool=${3:-}
rounds=${BENCH_ROUNDS:-3}

for bin in redis-server redis-cli redis-benchmark; do
    command -v "$bin" >/dev/null || { echo "bench: $bin missing (hack/install-deps.sh)" >&2; exit 1; }
done

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DDFC_BENCH=ON >/dev/null
cmake --build build-bench -j"$(nproc)" --target bench_sched_upload >/dev/null
if ! cmake --build build-bench -j"$(nproc)" --target scheduler >/dev/null 2>&1 ||
    [ ! -x build-bench/scheduler/scheduler ]; then
    echo "bench: build-bench/scheduler/scheduler does not build (no scheduler/main.c yet?)" >&2
    exit 1
fi
client=build-bench/hack/bench/bench_sched_upload
sched=${SCHEDULER_BIN:-build-bench/scheduler/scheduler}

dir=$(mktemp -d "${TMPDIR:-/tmp}/dfc-bench-sched-XXXXXX")
redis_pid="" sched_pid=""
# (A failed wait at the end of an && list would stop the trap under set -e, leaving $dir and
# making 137 the script's status.)
cleanup() {
    if [ -n "$sched_pid" ]; then
        kill "$sched_pid" 2>/dev/null || true
        wait "$sched_pid" 2>/dev/null || true
    fi
    if [ -n "$redis_pid" ]; then
        kill -9 "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

rport=$("$client" free-port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    --dir "$dir" --logfile "$dir/redis.log" &
redis_pid=$!
rcli=(redis-cli -h 127.0.0.1 -p "$rport")
for _ in $(seq 100); do
    [ "$("${rcli[@]}" ping 2>/dev/null)" = PONG ] && break
    sleep 0.05
done
[ "$("${rcli[@]}" ping 2>/dev/null)" = PONG ] || { echo "bench: redis-server did not start" >&2; exit 1; }

tls=$dir/tls
bash test/support/make-certs.sh ca "$tls/ca"
bash test/support/make-certs.sh leaf "$tls/ca" "$tls/scheduler" IP:127.0.0.1 --cn scheduler
bash test/support/make-certs.sh leaf "$tls/ca" "$tls/node" IP:127.0.0.1 --cn bench-node

sport=$("$client" free-port)
# scheduler-off.yaml and scheduler-tls.yaml (mutual TLS).
for mode in off tls; do
    {
        printf 'server:\n  listenIP: 127.0.0.1\n  port: %s\n  advertiseIP: 127.0.0.1\n' "$sport"
        if [ "$mode" = tls ]; then
            for side in server peer; do
                [ "$side" = peer ] && echo "peer:"
                printf '  tls:\n    caCert: %s/ca.crt\n    cert: %s/tls.crt\n    key: %s/tls.key\n' \
                    "$tls/scheduler" "$tls/scheduler" "$tls/scheduler"
            done
            printf 'security:\n  tlsPolicy: mutual\n'
        fi
        printf 'database:\n  redis:\n    addrs: ["127.0.0.1:%s"]\n' "$rport"
        if [ -n "$pool" ]; then
            echo "    poolSize: $pool"
        fi
        printf 'log:\n  level: warn\n'
    } >"$dir/scheduler-$mode.yaml"
done
# The metrics endpoint on, as deployed, on a free port (an environment variable: an older
# build given as SCHEDULER_BIN ignores it). $1: off or tls.
start_scheduler() {
    SCHEDULER_METRICS_SERVER_PORT=$("$client" free-port) \
        "$sched" --config "$dir/scheduler-$1.yaml" >>"$dir/scheduler.log" 2>&1 &
    sched_pid=$!
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$sport") 2>/dev/null && return 0
        kill -0 "$sched_pid" 2>/dev/null || { echo "bench: scheduler exited:" >&2; cat "$dir/scheduler.log" >&2; exit 1; }
        sleep 0.05
    done
}
saddr="127.0.0.1:$sport"
start_scheduler off

# The command mix of one pair. MONITOR also shows the commands a script runs (client "lua");
# those are part of their EVALSHA's cost and are not replayed on their own.
mkdir "$dir/mix"
read -r k in_scripts < <("$client" capture "$saddr" "$rport" "$dir/mix")
echo "one pair costs $k Redis commands (MONITOR); the scripts among them run $in_scripts more inside:"
for f in "$dir"/mix/cmd-*.args; do
    mapfile -d '' args <"$f"
    if [ "${args[0]^^}" = EVALSHA ]; then
        printf '  EVALSHA %s... %d keys, %d args\n' "${args[1]:0:12}" "${args[2]}" $((${#args[@]} - 3 - args[2]))
    else
        printf '  %s (%d args)\n' "${args[0]}" $((${#args[@]} - 1))
    fi
done

stop_scheduler() {
    if [ -n "$sched_pid" ]; then
        kill -TERM "$sched_pid" 2>/dev/null || true
        wait "$sched_pid" 2>/dev/null || true
    fi
    sched_pid=""
}

# One load with TLS $1 (off or tls): a scheduler started for it under load, then stopped (its
# placement workers may still be draining jobs queued by the load). Sets sched_rate,
# pps_round, cpu_per_pair and hwm_kb.
load_phase() {
    local mode=$1 label=TLS\ off tls_arg=()
    if [ "$mode" = tls ]; then
        label=mutual\ TLS tls_arg=("$tls/node")
    fi
    [ -n "$sched_pid" ] || start_scheduler "$mode"
    "${rcli[@]}" config resetstat >/dev/null
    cpu_s() { awk '{printf "%.2f", ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/$1/stat"; }
    s0=$(cpu_s "$sched_pid") r0=$(cpu_s "$redis_pid")
    steal_begin load
    line=$("$client" load "$saddr" "$seconds" "$clients" "${tls_arg[@]}")
    steal_end load
    sched_cpu=$(awk -v a="$(cpu_s "$sched_pid")" -v b="$s0" 'BEGIN {printf "%.2f", a - b}')
    redis_cpu=$(awk -v a="$(cpu_s "$redis_pid")" -v b="$r0" 'BEGIN {printf "%.2f", a - b}')
    stats=$("${rcli[@]}" info commandstats | tr -d '\r')
    hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$sched_pid/status")
    echo "scheduler, $label: $line (clients=$clients, database.redis.poolSize=${pool:-default})"
    pairs=$(sed -n 's/.*pairs=\([0-9]*\) .*/\1/p' <<<"$line")
    took=$(sed -n 's/.*seconds=\([0-9.]*\) .*/\1/p' <<<"$line")
    # commandstats also counts the commands scripts run. A command name the scripts of the
    # captured pair never run is all the scheduler's own (EVALSHA, HGETALL, ...); a name seen
    # both ways is split in the captured pair's proportion. Our own INFO/CONFIG are left out.
    declare -A as_client=() as_lua=()
    for f in "$dir"/mix/cmd-*.args; do
        mapfile -d '' args <"$f"
        name=${args[0],,}
        as_client[$name]=$((${as_client[$name]:-0} + 1))
    done
    while read -r name; do
        name=${name,,}
        as_lua[$name]=$((${as_lua[$name]:-0} + 1))
    done <"$dir/mix/lua-names"
    all=0 calls=0
    while IFS=' ' read -r name count; do
        all=$((all + count))
        c=${as_client[$name]:-0} l=${as_lua[$name]:-0}
        if [ "$l" -eq 0 ]; then
            calls=$((calls + count))
        elif [ "$c" -gt 0 ]; then
            calls=$((calls + count * c / (c + l)))
        fi
    done < <(awk -F'[:=,]' '/^cmdstat_/ && $1 !~ /^cmdstat_(info|config)/ {print substr($1, 9), $3}' <<<"$stats")
    echo "  Redis ran $all commands in ${took}s, $((all - calls)) of them inside scripts:" \
        "the scheduler sent $calls ($(awk -v c="$calls" -v p="$pairs" 'BEGIN {printf "%.2f", p ? c / p : 0}') per pair; the captured pair: $k)"
    sched_rate=$(awk -v c="$calls" -v t="$took" 'BEGIN {printf "%.1f", c / t}')
    cpu_per_pair=$(awk -v c="$sched_cpu" -v p="$pairs" 'BEGIN {printf "%.0f", p ? c * 1e6 / p : 0}')
    pps_round=$(sed -n 's/.*pairs_per_s=\([0-9.]*\) .*/\1/p' <<<"$line")
    echo "  CPU during the load: scheduler ${sched_cpu}s, redis-server ${redis_cpu}s of ${took}s wall on $(nproc) cores" \
        "($cpu_per_pair us of scheduler CPU per pair)"
    stop_scheduler
}

# redis-benchmark on the same Redis, one run per command of the mix, with the scheduler
# stopped so its replication backlog cannot slow it down. Sets bench_rate.
reference() {
    n=$((clients * 2000))
    inv_sum=0
    steal_begin ref
    for f in "$dir"/mix/cmd-*.args; do
        mapfile -d '' args <"$f"
        rps=$(redis-benchmark -h 127.0.0.1 -p "$rport" -c "$clients" -n "$n" --csv "${args[@]}" |
            tail -1 | awk -F'","' '{print $(NF - 6)}')
        printf '  redis-benchmark %-8s %12s req/s\n' "${args[0]}" "$rps"
        inv_sum=$(awk -v s="$inv_sum" -v r="$rps" 'BEGIN {printf "%.12f", s + 1 / r}')
    done
    steal_end ref
    bench_rate=$(awk -v k="$k" -v s="$inv_sum" 'BEGIN {printf "%.1f", k / s}')
}

# Per mode, space-separated lists of the rounds' figures.
declare -A ratios=([off]="" [tls]="") rates=([off]="" [tls]="") pps=([off]="" [tls]="")
declare -A cpp=([off]="" [tls]="") hwms=([off]="" [tls]="") now=()
refs=()
for r in $(seq "$rounds"); do
    echo "round $r of $rounds"
    order="off tls"
    if [ $((r % 2)) -eq 0 ]; then
        order="tls off"
    fi
    for mode in $order; do
        load_phase "$mode"
        now[$mode]=$sched_rate
        rates[$mode]+=" $sched_rate" pps[$mode]+=" $pps_round" cpp[$mode]+=" $cpu_per_pair"
        hwms[$mode]+=" $hwm_kb"
    done
    reference
    refs+=("$bench_rate")
    for mode in off tls; do
        ratios[$mode]+=" $(awk -v a="${now[$mode]}" -v b="$bench_rate" 'BEGIN {printf "%.2f", a / b}')"
    done
    echo "  round ratio: TLS off ${ratios[off]##* }x, mutual TLS ${ratios[tls]##* }x"
done
# The median; of an even count, the mean of the two middle values.
med() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
range() { printf '%s\n' "$@" | sort -g | sed -n '1p;$p' | paste -sd' ' | sed 's/ /-/'; }
echo
echo "over $rounds rounds (each: $seconds s of load with TLS off, $seconds s with mutual TLS, then the reference on the same mix):"
for mode in off tls; do
    label="TLS off"
    if [ "$mode" = tls ]; then
        label="mutual TLS (scheduler gRPC port; Redis plaintext)"
    fi
    # shellcheck disable=SC2086 # each list is words
    {
        echo "$label:"
        echo "  scheduler pairs per second     $(range ${pps[$mode]}) (median $(med ${pps[$mode]}))"
        echo "  scheduler CPU per pair         $(range ${cpp[$mode]}) us (median $(med ${cpp[$mode]}))"
        echo "  scheduler Redis command rate   $(range ${rates[$mode]}) commands/s (median $(med ${rates[$mode]}))"
        echo "  ratio per round               ${ratios[$mode]}"
        echo "  ratio (median of the rounds)   $(med ${ratios[$mode]})x (goal >= 0.5x)"
        hwm_kb=$(printf '%s\n' ${hwms[$mode]} | sort -g | tail -1)
    }
    awk -v kb="$hwm_kb" 'BEGIN {printf "  scheduler peak RSS (VmHWM)     %.1f MiB (goal <= 64 MiB)\n", kb / 1024}'
done
echo "redis-benchmark, same mix        $(range "${refs[@]}") commands/s ($clients connections, no pipelining)"
# shellcheck disable=SC2086 # each list is words
echo "mutual TLS / TLS off             $(awk -v a="$(med ${rates[tls]})" -v b="$(med ${rates[off]})" 'BEGIN {printf "%.2f", b ? a / b : 0}')x (medians of the Redis command rates)"
warns=$(grep -c 'level=warn' "$dir/scheduler.log" || true)
echo "CPU time stolen by the host     $(steal_pct load)% of the load phases, $(steal_pct ref)% of the reference (a quiet VM: under 2%)"
echo "scheduler log: $warns warnings during the run"
# no warning is grep's status 1, which pipefail and set -e would make the script's
{ grep -o 'level=warn event=[^ ]*' "$dir/scheduler.log" || true; } | sort | uniq -c | sort -rn | head -5 | sed 's/^/  /'
echo "caveats: NULs in replayed arguments become 0x01; replayed writes reuse the captured keys"
