#!/usr/bin/env bash
# Chaos in a flash crowd on the network-namespace testbed (hack/netns-cluster.sh): 5 nodes
# behind shaped links, Redis with a replica and Sentinels, the scheduler on a control node. In
# each scenario a fresh task is imported on node 1, then every other node exports it at once
# (dfcache export on its socket, in the background, each with its own deadline) and something
# breaks mid-swarm. Run by hack/test.sh as root after test/e2e/local_cluster_test.sh; skips
# with a message when not root.
#
#   test/e2e/swarm_chaos_test.sh [BUILD_DIR]     (default build)
#   E2E_KEEP=1  leave the cluster and its logs behind (the path is printed)
#
# After every scenario, each with the bounds it waits at most (liveness bounds, never speed
# claims):
#   - no export hangs: each attempt runs with dfcache --timeout 60s and is killed (a hang, a
#     failure) if it is still running 15 s later;
#   - every export ends: it succeeds, or fails cleanly and a second attempt (60 s), made once
#     the fault is over (the node linked again, the scheduler started again...), succeeds;
#   - every node that finished holds byte-identical content (cmp with the imported file);
#   - no partial task remains: every running node's storage tmp/ (the spools of imports and
#     downloads, daemon/storage/storage.c) is empty within 15 s of the last export's end.
# Scenarios:
#   0. the crowd alone, nothing broken (the baseline the others are read against)
#   1. the seed (node 1) SIGKILLed 2 s into the crowd, once another node holds a copy (node 1
#      imports with --persistent-replica-count 2 and the crowd starts once the replica is
#      there): some receiver loses a piece (or the piece list) it asked node 1 for, and the
#      rest must come from the others. Node 1 is started again afterwards. The kill is followed by
#      `ss -K` in node 1's namespace, so its orphaned sockets die with it as on a crashed host:
#      a Vortex server socket's buffer holds a whole 4 MiB piece (SO_SNDBUF, daemon/p2p/
#      vortex.h), so 8 of them hold a 32 MiB task, which the kernel would otherwise still
#      deliver after the process died
#   2. node 3 partitioned (its link down) for 20 s mid-swarm, then up: it completes (on its
#      first attempt or, linked again, on its second)
#   3. the scheduler SIGKILLed mid-swarm and started again
#   4. a Sentinel failover of Redis mid-swarm
#   5. a parent serving bad bytes: node 1 imports with --persistent-replica-count 2 and the
#      replica's content file is corrupted (16 bytes inverted in every piece) before the crowd
#      starts; the other nodes export: each ends with verified bytes, and some receiver's log
#      names the corrupted parent in a p2p.piece_failed DATA_LOSS line
# Each scenario runs even when an earlier one failed; the last line counts them.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-${BUILD_DIR:-build}}
case $build in /*) ;; *) build=$root/$build ;; esac
name=swarm_chaos_test

if [ "$(id -u)" -ne 0 ]; then
    echo "$name: SKIP: needs root (CI runs as root)"
    echo "$name: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
for b in daemon/dfdaemon scheduler/scheduler daemon/cmd/dfcache/dfcache; do
    [ -x "$build/$b" ] || {
        echo "$name: FAIL: $build/$b is missing (build first)" >&2
        exit 1
    }
done
for t in ip tc ss jq perl redis-sentinel; do
    command -v "$t" >/dev/null || {
        echo "$name: FAIL: $t is missing (hack/install-deps.sh installs it)" >&2
        exit 1
    }
done

N=5
RATE=100mbit
SIZE=$((32 << 20))
BOUND=60 # each export attempt's dfcache --timeout, in seconds
HANG=15  # an attempt still running this long after its deadline hangs

work=$(mktemp -d /tmp/dfc-chaos-XXXXXX)
export CLUSTER_DIR=$work/cluster BUILD_DIR=$build
# A stalled parent (a partitioned or killed node) must not hold a piece for the default 6
# minutes (hack/netns-cluster.sh merges this section into the one it writes). The timeout
# bounds a whole piece: 4 downloaders x 8 concurrent 4 MiB pieces from one 100 mbit seed take
# ~11 s each, so it leaves twice that.
export NETNS_EXTRA_DAEMON_YAML=$'download:\n  pieceTimeout: 20s'
cluster() { bash "$root/hack/netns-cluster.sh" "$@"; }
t0=$(date +%s)
passed=0
failed=0
failures=""
cleanup() {
    local rc=$?
    jobs -p | xargs -r kill 2>/dev/null || true
    if [ "${E2E_KEEP:-0}" = 1 ]; then
        echo "$name: kept $work (hack/netns-cluster.sh down with CLUSTER_DIR=$CLUSTER_DIR)"
    else
        cluster down >/dev/null 2>&1 || true
        rm -rf "$work"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM # so that cleanup runs when hack/test.sh stops the test
trap 'exit 130' INT

elapsed() { echo $(($(date +%s) - t0)); }
log() { echo "$name: [$(elapsed)s] $*"; }

declare -A alive=()
sock() { echo "$CLUSTER_DIR/node$1/run/dfdaemon.sock"; }
dfc() {
    local i=$1
    shift
    "$build/daemon/cmd/dfcache/dfcache" "$@" -e "$(sock "$i")"
}
ip_of() { echo "10.213.0.$((10 + $1))"; }
nlog() { echo "$CLUSTER_DIR/node$1/dfdaemon.log"; }
ls_has() { dfc "$1" ls --json 2>/dev/null | jq -e --arg id "$2" 'any(.[]; .id == $id)' >/dev/null; }
content_of() { # the content file of task id in node i's store, or nothing
    compgen -G "$CLUSTER_DIR/node$1/storage/content/persistent-cache-tasks/*/$2" || true
}

# wait_for BOUND CMD...: polls CMD every 0.5 s until it succeeds (0) or BOUND seconds pass (1);
# took= the seconds it waited.
took=0
wait_for() {
    local bound=$1 start
    shift
    start=$(date +%s)
    while :; do
        if "$@"; then
            took=$(($(date +%s) - start))
            return 0
        fi
        if [ $(($(date +%s) - start)) -ge "$bound" ]; then
            took=$bound
            return 1
        fi
        sleep 0.5
    done
}

# ---- one scenario's state ----
sc="" # the scenario's directory under $work
sc_name=""
sc_t0=0
sc_err="" # the first failure, empty while the scenario passes
task=""   # the task id
src=""    # the imported file
declare -A mark=() # each node's log line count when the scenario started

# check MESSAGE CMD...: records MESSAGE as the scenario's failure (the first one is reported)
# when CMD fails; the scenario goes on either way.
check() {
    local msg=$1
    shift
    "$@" && return 0
    [ -n "$sc_err" ] || sc_err=$msg
    log "  not ok: $msg"
}
begin() { # begin N TITLE: a fresh file and directory
    sc_name=$1
    sc=$work/s$1
    mkdir -p "$sc"
    sc_err=""
    sc_t0=$(date +%s)
    src=$sc/src.bin
    head -c "$SIZE" /dev/urandom >"$src"
    local i
    for i in $(seq $N); do mark[$i]=$(wc -l <"$(nlog "$i")" 2>/dev/null || echo 0); done
    log "scenario $1: $2"
}
import_src() { # import_src ARGS...: imports $src on node 1 into $task
    local out
    if ! out=$(timeout $((BOUND + HANG)) "$build/daemon/cmd/dfcache/dfcache" import \
        --no-progress --piece-length 4MiB --timeout "${BOUND}s" "$@" -e "$(sock 1)" "$src" 2>&1); then
        check "dfcache import on node 1 failed: $out" false
        return 1
    fi
    task=$(sed -n 's/^Done: //p' <<<"$out")
    echo "$task" >"$sc/task"
    [[ $task =~ ^[0-9a-f]{64}$ ]] || {
        check "dfcache import on node 1 printed no task id: $out" false
        return 1
    }
}

# export_node I: node I exports $task into $sc/out-I.bin; at most two attempts, each with
# dfcache --timeout BOUND and killed HANG seconds after it, the second once the scenario's
# fault is over ($sc/healed, or BOUND seconds). Writes $sc/node-I.result:
# "ok ATTEMPT SECONDS", "failed" or "hang ATTEMPT", and each attempt's output to
# $sc/node-I.attempt-K.
export_node() {
    local i=$1 k rc s
    s=$(date +%s)
    for k in 1 2; do
        rc=0
        timeout -k 5 $((BOUND + HANG)) "$build/daemon/cmd/dfcache/dfcache" export --no-progress \
            --timeout "${BOUND}s" -O "$sc/out-$i.bin" -e "$(sock "$i")" "$task" \
            >"$sc/node-$i.attempt-$k" 2>&1 || rc=$?
        echo "exit $rc after $(($(date +%s) - s))s" >>"$sc/node-$i.attempt-$k"
        if [ $rc -eq 0 ]; then
            echo "ok $k $(($(date +%s) - s))" >"$sc/node-$i.result"
            return 0
        fi
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            echo "hang $k" >"$sc/node-$i.result"
            return 0
        fi
        rm -f "$sc/out-$i.bin"
        [ $k = 2 ] || wait_for $BOUND test -e "$sc/healed" || true
    done
    echo "failed" >"$sc/node-$i.result"
}
crowd_pids=()
crowd=() # the exporting nodes
crowd_start() { # crowd_start NODES...: each exports $task at once, in the background
    crowd=("$@")
    crowd_pids=()
    local i
    for i in "$@"; do
        rm -f "$sc/node-$i.result"
        export_node "$i" &
        crowd_pids+=($!)
    done
    log "  nodes $* exporting"
}
running() { [ ! -f "$sc/node-$1.result" ]; }
any_running() {
    local i
    for i in "${crowd[@]}"; do running "$i" && return 0; done
    return 1
}
heal() { touch "$sc/healed"; } # the fault is over: a failed export may try again
tmp_empty() { # every running node's storage tmp/ is empty
    local i
    for i in $(seq $N); do
        [ "${alive[$i]}" = 1 ] || continue
        [ -z "$(ls -A "$CLUSTER_DIR/node$i/storage/tmp" 2>/dev/null)" ] || return 1
    done
}
tmp_listing() {
    local i
    for i in $(seq $N); do
        [ "${alive[$i]}" = 1 ] || continue
        echo "node$i: [$(find "$CLUSTER_DIR/node$i/storage/tmp" -mindepth 1 -printf '%f ' 2>/dev/null)]"
    done | tr '\n' ' '
}
# crowd_check: waits for the crowd and checks each export, then every storage tmp/.
crowd_check() {
    local p i r kind k secs
    for p in "${crowd_pids[@]}"; do wait "$p" || true; done
    for i in "${crowd[@]}"; do
        r=$(cat "$sc/node-$i.result" 2>/dev/null || echo "none")
        read -r kind k secs <<<"$r"
        case $kind in
            ok)
                if cmp -s "$src" "$sc/out-$i.bin"; then
                    log "  node $i: byte-identical, attempt $k after ${secs}s"
                else
                    check "node $i's export of $task (attempt $k) differs from the imported file" false
                fi
                [ "$k" = 1 ] ||
                    log "  node $i's first attempt failed: $(tail -c 300 "$sc/node-$i.attempt-1" | tr '\n' ' ')"
                ;;
            hang)
                check "node $i: export attempt $k of $task still ran ${HANG}s past its ${BOUND}s deadline (killed)" false
                ;;
            *)
                check "node $i: both exports of $task failed: $(tail -c 400 "$sc/node-$i.attempt-2" 2>/dev/null | tr '\n' ' ')" false
                ;;
        esac
    done
    wait_for 15 tmp_empty ||
        check "15 s after the last export, a storage tmp/ still holds a partial task: $(tmp_listing)" false
}
# Whether a node other than node 1 holds $task (listed, its content file present): into replica.
replica=""
has_replica() {
    local i
    replica=""
    for i in $(seq 2 $N); do
        if ls_has "$i" "$task" && [ -n "$(content_of "$i" "$task")" ]; then
            replica=$i
            return 0
        fi
    done
    return 1
}
# The task's p2p.* log lines (warnings and outcomes) on node I since the scenario began.
p2p_lines() {
    tail -n +"$((${mark[$1]} + 1))" "$(nlog "$1")" 2>/dev/null | grep -F "$task" | grep 'p2p\.' || true
}
finish() {
    local d=$(($(date +%s) - sc_t0)) i
    if [ -z "$sc_err" ]; then
        passed=$((passed + 1))
        log "ok - scenario $sc_name ($d s)"
        return 0
    fi
    failed=$((failed + 1))
    failures+=" $sc_name"
    echo "$name: FAIL: scenario $sc_name ($d s): $sc_err" >&2
    {
        echo "--- scenario $sc_name: the task's p2p lines per node (last 8, cut) ---"
        for i in $(seq $N); do
            echo "node$i ($(ip_of "$i")):"
            p2p_lines "$i" | tail -n 8 | sed 's/task_id=[0-9a-f]* //' | cut -c1-300
        done
        echo "--- scheduler log (last 10 lines, cut) ---"
        tail -n 10 "$CLUSTER_DIR/scheduler/scheduler.log" 2>/dev/null | cut -c1-300 || true
    } >&2
}
# Brings the cluster back to its starting shape after a scenario: every node running, every
# link up at $RATE, the scheduler running.
restore() {
    local i
    for i in $(seq $N); do
        cluster link "$i" up >/dev/null 2>&1 || true
        cluster shape "$i" "$RATE" >/dev/null 2>&1 || true
        if [ "${alive[$i]}" != 1 ]; then
            CLUSTER_UP_TIMEOUT=30 cluster start "$i" >/dev/null || log "node $i did not start again"
            alive[$i]=1
        fi
    done
    cluster start scheduler >/dev/null 2>&1 || true
}

# ---- the cluster ----
log "starting a $N-node netns cluster (links $RATE, Redis with Sentinels) from $build in $CLUSTER_DIR"
if ! cluster up $N --rate $RATE --sentinel; then
    echo "$name: FAIL: hack/netns-cluster.sh up $N --rate $RATE --sentinel failed" >&2
    echo "$name: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
# shellcheck disable=SC1091
. "$CLUSTER_DIR/cluster.env"
for i in $(seq $N); do alive[$i]=1; done
log "cluster up"

# ---- 0. the crowd alone ----
# The same checks with nothing broken: what a later scenario's failure owes to its chaos.
begin 0 "the crowd alone (no chaos)"
if import_src; then
    heal
    crowd_start 2 3 4 5
    crowd_check
fi
finish

# ---- 1. the seed killed mid-swarm ----
begin 1 "the seed (node 1) SIGKILLed mid-swarm, another node holding a copy"
if import_src --persistent-replica-count 2; then
    if wait_for $BOUND has_replica; then
        log "  node $replica holds a replica (${took}s after the import)"
        crowd_start 2 3 4 5
        sleep 2
        check "every export ended before node 1 was killed: not mid-swarm" any_running
        cluster kill 1 >/dev/null
        check "ss -K in node 1's namespace failed" cluster exec 1 ss -K -tn >/dev/null # (header)
        alive[1]=0
        heal # node 1 stays away until the crowd is done: the others must do without it
        log "  node 1 killed"
        crowd_check
    else
        check "no second node holds the task ${BOUND}s after an import with --persistent-replica-count 2" false
    fi
    cut_off=""
    for i in 2 3 4 5; do
        # (grep -c, not -q: with pipefail, an early exit would fail the pipeline)
        n=$(p2p_lines "$i" | grep -E 'p2p\.(piece|sync)_failed' | grep -cF "parent=$(ip_of 1)-") || true
        [ "${n:-0}" -eq 0 ] || cut_off+=" $i"
    done
    if [ -n "$cut_off" ]; then
        log "  nodes that lost a piece or a piece list from node 1:$cut_off"
    else
        check "no receiver lost a piece or a piece list from node 1: the kill cut nothing" false
    fi
    restore
    wait_for 15 tmp_empty || check "node 1's storage tmp/ is not empty after its restart: $(tmp_listing)" false
fi
finish

# ---- 2. a node partitioned ----
begin 2 "node 3 partitioned for 20 s mid-swarm"
if import_src; then
    crowd_start 2 3 4 5
    sleep 1
    check "node 3 finished within 1 s: not mid-swarm" running 3
    check "hack/netns-cluster.sh link 3 down failed" cluster link 3 down >/dev/null
    log "  node 3's link down"
    sleep 20
    check "hack/netns-cluster.sh link 3 up failed" cluster link 3 up >/dev/null
    heal
    log "  node 3's link up"
    crowd_check
    restore
fi
finish

# ---- 3. the scheduler restarted ----
begin 3 "the scheduler SIGKILLed mid-swarm and started again"
if import_src; then
    crowd_start 2 3 4 5
    sleep 1
    check "every export ended before the scheduler was killed: not mid-swarm" any_running
    check "hack/netns-cluster.sh kill scheduler failed" cluster kill scheduler >/dev/null
    log "  scheduler killed"
    sleep 2
    check "hack/netns-cluster.sh start scheduler failed" cluster start scheduler >/dev/null
    heal
    log "  scheduler started again"
    crowd_check
    restore
fi
finish

# ---- 4. a Sentinel failover ----
begin 4 "a Sentinel failover of Redis mid-swarm"
if import_src; then
    crowd_start 2 3 4 5
    sleep 1
    check "every export ended before the failover began: not mid-swarm" any_running
    check "hack/netns-cluster.sh failover failed" cluster failover >/dev/null
    heal
    log "  Redis failed over"
    crowd_check
    restore
fi
finish

# ---- 5. a parent serving bad bytes ----
begin 5 "a parent serving bad bytes (a replica's content corrupted before the crowd)"
if import_src --persistent-replica-count 2; then
    if wait_for $BOUND has_replica; then
        bad=$replica
        # 16 bytes inverted inside every 4 MiB piece of the replica's content file.
        perl -e 'open(my $f, "+<", $ARGV[0]) or die "$ARGV[0]: $!";
            for my $k (0 .. $ARGV[1] - 1) {
                my $off = $k * 4194304 + 1000; my $buf;
                seek($f, $off, 0); read($f, $buf, 16) == 16 or die "short read";
                $buf ^= "\xff" x 16; seek($f, $off, 0); print $f $buf;
            } close($f) or die $!;' "$(content_of "$bad" "$task")" $((SIZE >> 22))
        log "  node $bad holds the replica (${took}s after the import); its content corrupted"
        others=()
        for i in $(seq 2 $N); do [ "$i" = "$bad" ] || others+=("$i"); done
        heal
        crowd_start "${others[@]}"
        crowd_check
        named=""
        for i in "${others[@]}"; do
            named=$(p2p_lines "$i" | grep 'p2p\.piece_failed' | grep -F "parent=$(ip_of "$bad")-" |
                grep DATA_LOSS | head -n1) || true
            [ -z "$named" ] || break
        done
        if [ -n "$named" ]; then
            log "  node $i logged: $named"
        else
            check "no receiver logged a p2p.piece_failed DATA_LOSS line naming the corrupted node $bad ($(ip_of "$bad"))" false
        fi
    else
        check "no second node holds the task ${BOUND}s after an import with --persistent-replica-count 2" false
    fi
    restore
fi
finish

log "all scenarios done in $(elapsed)s${failures:+; failed:$failures}"
echo "$name: $passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
