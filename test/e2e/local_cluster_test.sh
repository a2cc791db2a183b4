#!/usr/bin/env bash
# The end-to-end test of peer to peer on a real local cluster (hack/local-cluster.sh): redis,
# the scheduler and 4 dfdaemons on 127.0.0.11..14, driven with dfcache and checked in each
# daemon's store (dfcache ls on its socket), in Redis (the scheduler's keys,
# docs/dragonfly-compat.md section 7.2) and in the daemons' logs. Run by hack/test.sh as root
# after ctest; skips with a message when not root.
#
#   test/e2e/local_cluster_test.sh [BUILD_DIR]     (default build)
#   E2E_KEEP=1  leave the cluster and its logs behind (the path is printed)
#
# Steps, each with the bound it waits at most (liveness bounds, not speed claims):
#   1. import on node 1 with --persistent-replica-count 3: two more nodes hold persistent
#      copies and Redis holds exactly those three persistent peers, Succeeded (60 s)
#   2. export on the node without a copy: fetched from peers (its log shows the download),
#      byte-identical (cmp) (60 s)
#   3. SIGKILL a replica node: host GC drops it and the count is restored on the remaining
#      node (90 s)
#   4. dfcache rm on a replica node: its peer leaves Redis at once (15 s) and the count is
#      restored (60 s)
#   5. the killed node starts again and announces (30 s); its kept copy joins the task again
#      (30 s)
#   6. every piece corrupted on one parent (bytes of its content file inverted): the receiving
#      daemon logs the CRC rejection naming that parent, fetches the pieces from the other,
#      and the export is byte-identical (60 s per attempt; the other parent is corrupted
#      instead when the first one was not asked)
#   7. the scheduler killed: a local import and export on a node still work (60 s)
#   8. the scheduler started again: every daemon re-announces (30 s), a new import is
#      replicated (60 s) and exported elsewhere byte-identical (60 s)
#   9. a task imported at the start with --ttl 5m (the shortest the API allows) is removed
#      from every node's store and from Redis by created_at + ttl + 30 s; so the whole test
#      takes a little over 5 minutes, most of it waiting for that expiry
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-${BUILD_DIR:-build}}
case $build in /*) ;; *) build=$root/$build ;; esac
name=local_cluster_test

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

work=$(mktemp -d /tmp/dfc-e2e-XXXXXX)
export CLUSTER_DIR=$work/cluster BUILD_DIR=$build
cluster() { bash "$root/hack/local-cluster.sh" "$@"; }
t0=$(date +%s)
passed=0
cleanup() {
    local rc=$?
    if [ "${E2E_KEEP:-0}" = 1 ]; then
        echo "$name: kept $work (hack/local-cluster.sh down with CLUSTER_DIR=$CLUSTER_DIR)"
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
ok() {
    passed=$((passed + 1))
    log "ok $passed - $*"
}

N=4
declare -A alive=()
dump() {
    echo "--- state at $(elapsed)s ---" >&2
    local i
    for i in $(seq $N); do
        if [ "${alive[$i]:-0}" = 1 ]; then
            echo "node$i ($(ip_of "$i")) dfcache ls:" >&2
            dfc "$i" ls >&2 2>&1 || true
        else
            echo "node$i: not running" >&2
        fi
    done
    local id p
    for id in "$@"; do
        echo "Redis, task $id: all peers on hosts [$(task_hosts "$id" all | tr '\n' ' ')]" \
            "persistent [$(task_hosts "$id" persistent | tr '\n' ' ')]" >&2
        for p in $(task_peers "$id" all); do
            echo "  peer $p: state $(rc HGET "$(peer_key "$p")" state)," \
                "persistent $(rc HGET "$(peer_key "$p")" persistent)" >&2
        done
    done
    echo "--- scheduler log (last 25 lines) ---" >&2
    tail -n 25 "$CLUSTER_DIR/scheduler/scheduler.log" >&2 2>/dev/null || true
    for i in $(seq $N); do
        echo "--- node$i log (last 15 lines) ---" >&2
        tail -n 15 "$CLUSTER_DIR/node$i/dfdaemon.log" >&2 2>/dev/null || true
    done
}
# fail MESSAGE [TASK_ID...]: the message, the cluster's state for those tasks, logs; exit 1.
fail() {
    local msg=$1
    shift
    echo "$name: FAIL at $(elapsed)s: $msg" >&2
    dump "$@"
    echo "$name: $passed passed, 1 failed"
    exit 1
}

ip_of() { echo "127.0.0.$((10 + $1))"; }
host_of() { echo "$(ip_of "$1")-dfc-node$1"; }
dfc() {
    local i=$1
    shift
    "$build/daemon/cmd/dfcache/dfcache" "$@" -e "$CLUSTER_DIR/node$i/run/dfdaemon.sock"
}
rc() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# "true" / "false" (persistent or not) when node i lists task id, else nothing.
ls_state() { dfc "$1" ls --json 2>/dev/null | jq -r --arg id "$2" '.[] | select(.id == $id) | .persistent'; }
# The live nodes holding id ("persistent": only persistent copies), ascending.
holders() {
    local id=$1 kind=${2:-all} i s
    for i in $(seq $N); do
        [ "${alive[$i]:-0}" = 1 ] || continue
        s=$(ls_state "$i" "$id")
        if [ "$s" = true ] || { [ "$kind" = all ] && [ "$s" = false ]; }; then
            echo "$i"
        fi
    done
}
# The host ids of the task's peers in Redis ("persistent": its persistent set), sorted.
set_key() {
    if [ "$2" = persistent ]; then
        echo "$REDIS_PREFIX:persistent-cache-tasks:$1:persistent-peers-for-persistent-cache-task"
    else
        echo "$REDIS_PREFIX:persistent-cache-tasks:$1:persistent-cache-peers-for-persistent-cache-task"
    fi
}
peer_key() { echo "$REDIS_PREFIX:persistent-cache-peers-for-persistent-cache-task:$1"; }
task_peers() { rc SMEMBERS "$(set_key "$1" "$2")" 2>/dev/null | sed '/^$/d'; }
task_hosts() {
    local p
    for p in $(task_peers "$1" "$2"); do
        rc HGET "$(peer_key "$p")" host_id
    done | sort
}
hosts_of_nodes() {
    local i
    for i in "$@"; do host_of "$i"; done | sort
}
# True when exactly nodes "$@" hold persistent copies of id, locally and in Redis (each of
# those peers Succeeded).
persistent_on() {
    local id=$1
    shift
    [ "$(holders "$id" persistent | tr '\n' ' ')" = "$(printf '%s ' "$@")" ] || return 1
    [ "$(task_hosts "$id" persistent)" = "$(hosts_of_nodes "$@")" ] || return 1
    local p
    for p in $(task_peers "$id" persistent); do
        [ "$(rc HGET "$(peer_key "$p")" state)" = Succeeded ] || return 1
    done
}
# Number of live nodes holding a persistent copy, locally and in Redis alike (else -1).
persistent_count() {
    local id=$1 nodes
    mapfile -t nodes < <(holders "$id" persistent)
    if persistent_on "$id" "${nodes[@]}"; then
        echo "${#nodes[@]}"
    else
        echo -1
    fi
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
count_is() { [ "$(persistent_count "$1")" = "$2" ]; }
# Why count_is ID N does not hold: the live nodes' persistent copies and Redis's persistent set.
why() {
    local id=$1 p states=""
    for p in $(task_peers "$id" persistent); do
        states+=" $(rc HGET "$(peer_key "$p")" host_id)=$(rc HGET "$(peer_key "$p")" state)"
    done
    echo "persistent copies on live nodes [$(holders "$id" persistent | tr '\n' ' ')]," \
        "Redis persistent set [${states# }]"
}

import() { # import VAR NODE FILE ARGS...: the task id into VAR
    local var=$1 i=$2 f=$3 out id
    shift 3
    out=$(dfc "$i" import --no-progress --piece-length 4MiB "$@" "$f" 2>&1) ||
        fail "dfcache import $f on node $i failed: $out"
    id=$(sed -n 's/^Done: //p' <<<"$out")
    [[ $id =~ ^[0-9a-f]{64}$ ]] || fail "dfcache import $f on node $i printed no task id: $out"
    printf -v "$var" '%s' "$id"
}
export_cmp() { # export_cmp NODE ID SRC ARGS...
    local i=$1 id=$2 src=$3 out dst
    shift 3
    dst=$work/out-$i-$RANDOM.bin
    out=$(dfc "$i" export --no-progress "$@" -O "$dst" "$id" 2>&1) ||
        fail "dfcache export $id on node $i failed: $out" "$id"
    cmp "$src" "$dst" || fail "the export of $id on node $i differs from the imported file" "$id"
    rm -f "$dst"
}
log_mark() { wc -l <"$CLUSTER_DIR/node$1/dfdaemon.log"; }
log_since() { tail -n +"$(($2 + 1))" "$CLUSTER_DIR/node$1/dfdaemon.log"; }
content_of() { # the content file of task id in node i's store, or nothing
    compgen -G "$CLUSTER_DIR/node$1/storage/content/persistent-cache-tasks/*/$2" || true
}
epoch() { date -d "$1" +%s; }

ttl_id="" a="" b="" c="" d=""
# ---- the cluster ----
log "starting a $N-node cluster from $build in $CLUSTER_DIR"
cluster up $N || fail "hack/local-cluster.sh up $N failed"
# shellcheck disable=SC1091
. "$CLUSTER_DIR/cluster.env"
for i in $(seq $N); do alive[$i]=1; done
ok "cluster up: $N nodes announced"

head -c $((8 << 20)) /dev/urandom >"$work/ttl.bin"
head -c $((24 << 20)) /dev/urandom >"$work/a.bin"
head -c $((16 << 20)) /dev/urandom >"$work/b.bin"
head -c $((8 << 20)) /dev/urandom >"$work/c.bin"
head -c $((12 << 20)) /dev/urandom >"$work/d.bin"

# Step 9 starts first: the shortest TTL is 5 minutes, so its clock runs during the others.
import ttl_id 2 "$work/ttl.bin" --ttl 5m --persistent-replica-count 2
log "imported $ttl_id on node 2 with --ttl 5m (checked last)"

# ---- 1. replicas ----
import a 1 "$work/a.bin" --persistent-replica-count 3
wait_for 60 count_is "$a" 3 ||
    fail "step 1: 60 s after the import of $a on node 1 with --persistent-replica-count 3, three nodes do not hold persistent copies (locally and in Redis, Succeeded): $(why "$a")" "$a"
mapfile -t reps < <(holders "$a" persistent)
[ "$(holders "$a" all | wc -l)" -eq 3 ] ||
    fail "step 1: more than 3 nodes hold $a: [$(holders "$a" all | tr '\n' ' ')]" "$a"
[[ " ${reps[*]} " == *" 1 "* ]] || fail "step 1: node 1 (the importer) has no persistent copy of $a" "$a"
ok "import on node 1, replica count 3: persistent copies on nodes ${reps[*]} in ${took}s (bound 60 s)"

# ---- 2. export where there is no copy ----
for i in $(seq $N); do [[ " ${reps[*]} " == *" $i "* ]] || spare=$i; done
mark=$(log_mark "$spare")
s=$(date +%s)
export_cmp "$spare" "$a" "$work/a.bin" --timeout 60s
grep -q "event=p2p.download_done task_id=$a" <<<"$(log_since "$spare" "$mark")" ||
    fail "step 2: node $spare exported $a without a p2p.download_done line in its log" "$a"
[ "$(ls_state "$spare" "$a")" = false ] ||
    fail "step 2: node $spare should now hold a cached (not persistent) copy of $a" "$a"
ok "export of $a on node $spare (no copy): fetched from peers, byte-identical, $(($(date +%s) - s))s (bound 60 s)"

# ---- 3. a replica node dies ----
for i in "${reps[@]}"; do [ "$i" = 1 ] || victim=$i; done
cluster kill "$victim" >/dev/null
alive[$victim]=0
wait_for 90 count_is "$a" 3 ||
    fail "step 3: 90 s after node $victim was killed, the persistent copies of $a are not back to 3 on the live nodes: $(why "$a")" "$a"
[ "$(ls_state "$spare" "$a")" = true ] ||
    fail "step 3: the remaining node $spare does not hold the restored persistent copy of $a" "$a"
[ "$(rc EXISTS "$REDIS_PREFIX:persistent-cache-hosts:$(host_of "$victim")")" = 0 ] ||
    fail "step 3: the killed node's host $(host_of "$victim") is still in Redis" "$a"
ok "node $victim killed: host GC removed it, $a restored on node $spare in ${took}s (bound 90 s)"

# ---- 4. dfcache rm on a replica node ----
for i in "${reps[@]}"; do [ "$i" = 1 ] || [ "$i" = "$victim" ] || rmnode=$i; done
old_peers=$(task_peers "$a" all)
out=$(dfc "$rmnode" rm "$a" 2>&1) || fail "step 4: dfcache rm $a on node $rmnode failed: $out" "$a"
[ -z "$(ls_state "$rmnode" "$a")" ] || fail "step 4: node $rmnode still lists $a after dfcache rm" "$a"
gone_from_redis() {
    local p
    for p in $old_peers; do
        if [ "$(rc HGET "$(peer_key "$p")" host_id)" = "$(host_of "$rmnode")" ]; then
            return 1
        fi
    done
}
wait_for 15 gone_from_redis ||
    fail "step 4: 15 s after dfcache rm on node $rmnode its peer of $a is still in Redis" "$a"
wait_for 60 count_is "$a" 3 ||
    fail "step 4: 60 s after dfcache rm on node $rmnode the persistent copies of $a are not back to 3: $(why "$a")" "$a"
ok "dfcache rm $a on node $rmnode: its peer left Redis, count restored in ${took}s (bound 60 s)"

# ---- 5. the killed node comes back, and its kept copy of a with it ----
CLUSTER_UP_TIMEOUT=30 cluster start "$victim" >/dev/null || fail "step 5: node $victim did not start and announce again"
alive[$victim]=1
# Host GC took its peers; its store kept the copy, which joins the task again (rejoin).
victim_rejoined() {
    local p
    for p in $(task_peers "$a" persistent); do
        if [ "$(rc HGET "$(peer_key "$p")" host_id)" = "$(host_of "$victim")" ] &&
            [ "$(rc HGET "$(peer_key "$p")" state)" = Succeeded ]; then
            return 0
        fi
    done
    return 1
}
wait_for 30 victim_rejoined ||
    fail "step 5: 30 s after node $victim started again, its kept copy of $a is not a persistent peer in Redis: $(why "$a")" "$a"
ok "node $victim started again and announced; its kept copy of $a joined the task again in ${took}s (bound 30 s)"

# ---- 6. a corrupted parent ----
import b 1 "$work/b.bin" --persistent-replica-count 2
wait_for 60 count_is "$b" 2 ||
    fail "step 6: $b is not on 2 nodes (locally and in Redis) 60 s after its import: $(why "$b")" "$b"
mapfile -t parents < <(holders "$b" all)
for i in $(seq $N); do [[ " ${parents[*]} " == *" $i "* ]] || receiver=$i; done
pieces=$(((16 << 20) / (4 << 20)))
# Inverts 16 bytes inside every piece of node $1's copy of $b (inverting twice restores it).
invert_pieces() {
    local f
    f=$(content_of "$1" "$b")
    [ -n "$f" ] || fail "step 6: no content file for $b in node $1's store" "$b"
    perl -e 'open(my $f, "+<", $ARGV[0]) or die "$ARGV[0]: $!";
        for my $k (0 .. $ARGV[1] - 1) {
            my $off = $k * 4194304 + 1000; my $buf;
            seek($f, $off, 0); read($f, $buf, 16) == 16 or die "short read";
            $buf ^= "\xff" x 16; seek($f, $off, 0); print $f $buf;
        } close($f) or die $!;' "$f" "$pieces"
}
rejected=""
for attempt in 1 2 3 4; do
    bad=${parents[$(((attempt - 1) % 2))]}
    invert_pieces "$bad"
    mark=$(log_mark "$receiver")
    export_cmp "$receiver" "$b" "$work/b.bin" --transfer-from-dfdaemon --timeout 60s
    failed=$(log_since "$receiver" "$mark" | grep "event=p2p.piece_failed" || true)
    if grep "task_id=$b" <<<"$failed" | grep "$(ip_of "$bad")" | grep -q "DATA_LOSS"; then
        rejected=$(head -n1 <<<"$failed")
        break
    fi
    # That parent was not asked for any piece: undo, drop the receiver's copy, try the other.
    invert_pieces "$bad"
    out=$(dfc "$receiver" rm "$b" 2>&1) || fail "step 6: dfcache rm $b on node $receiver: $out" "$b"
done
[ -n "$rejected" ] ||
    fail "step 6: after 4 exports on node $receiver, its log never shows a p2p.piece_failed DATA_LOSS line for $b from a corrupted parent" "$b"
log "node $receiver logged: $rejected"
ok "every piece of $b corrupted on node $bad: rejected by CRC on node $receiver, fetched from the other parent, byte-identical (attempt $attempt)"

# ---- 7. the scheduler away ----
cluster kill scheduler >/dev/null
s=$(date +%s)
c=$(timeout 60 "$build/daemon/cmd/dfcache/dfcache" import --no-progress --piece-length 4MiB \
    -e "$CLUSTER_DIR/node3/run/dfdaemon.sock" "$work/c.bin" 2>&1) ||
    fail "step 7: with the scheduler away, a local import on node 3 failed or took over 60 s: $c"
c=$(sed -n 's/^Done: //p' <<<"$c")
[ -n "$(ls_state 3 "$c")" ] || fail "step 7: node 3 does not list $c after importing it with the scheduler away"
export_cmp 3 "$c" "$work/c.bin" --timeout 60s
export_cmp 1 "$a" "$work/a.bin" --timeout 60s --transfer-from-dfdaemon
ok "scheduler killed: local import and exports on nodes 3 and 1 work, $(($(date +%s) - s))s (bound 60 s)"

# ---- 8. the scheduler back ----
# updated_at has whole seconds: after this pause every earlier announce is older than s.
sleep 1
s=$(date +%s)
cluster start scheduler >/dev/null || fail "step 8: the scheduler did not start again"
announced_since() {
    local i t
    for i in $(seq $N); do
        t=$(rc HGET "$REDIS_PREFIX:persistent-cache-hosts:$(host_of "$i")" updated_at)
        [ -n "$t" ] && [ "$(epoch "$t")" -ge "$s" ] || return 1
    done
}
wait_for 30 announced_since ||
    fail "step 8: 30 s after the scheduler restarted, not every node has announced again"
ok "scheduler restarted: all $N nodes re-announced in ${took}s (bound 30 s)"
import d 4 "$work/d.bin" --persistent-replica-count 2
wait_for 60 count_is "$d" 2 ||
    fail "step 8: $d (imported on node 4) is not on 2 nodes within 60 s: $(why "$d")" "$d"
mapfile -t dh < <(holders "$d" all)
for i in $(seq $N); do [[ " ${dh[*]} " == *" $i "* ]] || other=$i; done
export_cmp "$other" "$d" "$work/d.bin" --timeout 60s
ok "after the restart: $d replicated to nodes ${dh[*]} in ${took}s and exported on node $other byte-identical"

# ---- 9. TTL expiry ----
created=$(epoch "$(rc HGET "$REDIS_PREFIX:persistent-cache-tasks:$ttl_id" created_at)") ||
    fail "step 9: $ttl_id has no created_at in Redis before its expiry" "$ttl_id"
ttl_peers=$(task_peers "$ttl_id" all)
[ -n "$ttl_peers" ] || fail "step 9: $ttl_id has no peers in Redis before its expiry" "$ttl_id"
[ -n "$(holders "$ttl_id" all)" ] || fail "step 9: no node holds $ttl_id before its expiry" "$ttl_id"
expiry=$((created + 300))
log "waiting $((expiry - $(date +%s)))s for $ttl_id to reach created_at + ttl"
while [ "$(date +%s)" -lt "$expiry" ]; do sleep 1; done
expired_everywhere() {
    local i p
    for i in $(seq $N); do
        [ -z "$(ls_state "$i" "$ttl_id")" ] || return 1
        [ -z "$(content_of "$i" "$ttl_id")" ] || return 1
    done
    [ "$(rc EXISTS "$REDIS_PREFIX:persistent-cache-tasks:$ttl_id")" = 0 ] || return 1
    [ "$(rc EXISTS "$(set_key "$ttl_id" all)")" = 0 ] || return 1
    [ "$(rc EXISTS "$(set_key "$ttl_id" persistent)")" = 0 ] || return 1
    for p in $ttl_peers; do
        [ "$(rc EXISTS "$(peer_key "$p")")" = 0 ] || return 1
    done
}
wait_for 30 expired_everywhere ||
    fail "step 9: 30 s after created_at + ttl, $ttl_id is still in a store or in Redis" "$ttl_id"
ok "TTL: $ttl_id gone from all $N stores and from Redis ${took}s after created_at + 5m (bound 30 s)"

log "all steps done in $(elapsed)s"
echo "$name: $passed passed, 0 failed, 0 skipped"
