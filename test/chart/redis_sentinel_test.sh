#!/usr/bin/env bash
# The chart's bundled Redis with Sentinel, run for real: renders charts/dragonfly-csi with
# ci/bundled-redis-values.yaml, takes the rendered start scripts (start-redis.sh,
# start-sentinel.sh), redis.conf and the Secret's password, and runs three "pods" of
# redis-server + redis-sentinel with them on 127.0.0.21-23, each pod's DNS name (the StatefulSet
# name under the headless Service) resolving to its address through a private /etc/hosts.
# Checks: pod 0 starts as the master and the others as its replicas, by DNS name; the Sentinels
# agree on it, by name; the real scheduler, given the rendered database.redis settings, registers
# a host through the Sentinels; after pod 0's Redis is killed the Sentinels fail over and the
# data survives; a restarted pod 0 asks the Sentinels and comes back as a replica of the new
# master (never a second master); the scheduler keeps working after the failover.
#
# What differs from a cluster, and only that: paths (/scripts, /run/redis, /run/sentinel, /data
# become directories of this test's pod), and every pod binds its own loopback address
# (redis.conf's `bind` line, and a redis-sentinel wrapper adding --bind), since the three pods
# share this machine's network.
#
#   test/chart/redis_sentinel_test.sh [BUILD_DIR]
# Exit 77 (skip) when not root (a private mount namespace for /etc/hosts), or when go, node,
# redis-server or redis-sentinel is missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(mkdir -p "${1:-$root/build}" && cd "${1:-$root/build}" && pwd)
chart=${CHART_DIR:-$root/charts/dragonfly-csi}
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$root/test/chart/lib.sh" redis_sentinel_test

[ "$(id -u)" = 0 ] || skip "needs root (a private mount namespace for /etc/hosts)"
# A minimal root (debootstrap minbase, as in hack/fresh-check.sh) has no /etc/hosts to bind over.
[ -e /etc/hosts ] || skip "no /etc/hosts to bind a test copy over"
need_tools go node npm redis-server redis-sentinel redis-cli unshare timeout getent
need_built scheduler/scheduler
[ -f "$root/hack/chart/build-render.sh" ] || skip "hack/chart/build-render.sh (the renderer) is not in this tree"

# Re-run inside a private mount namespace (the /etc/hosts bind dies with it).
if [ -z "${REDIS_SENTINEL_TEST_NS:-}" ]; then
    exec env REDIS_SENTINEL_TEST_NS=1 unshare -m --propagation private bash "$0" "$build"
fi

bash "$root/hack/chart/build-render.sh" "$build" || die "building the renderer failed"
npm_ci_chart

make_work KILL

# Fixed ports below the ephemeral range (32768-60999: a client socket there can take one), and a
# short down-after so the failover is quick. The scheduler's and dfdaemon's HTTP endpoints are
# off: their default ports (8000, 4002, 4003) are not this test's to take.
redis_port=21391
sentinel_port=21392
ns=dfc-test
# A password with a space, a quote and a backslash: the scripts must escape it in redis.conf.
cat >"$work/password-values.yaml" <<'YAML'
redis:
  auth:
    password: 'pa ss"wo\rd'
YAML
# Sentinel auth (redis.sentinel.auth.enabled) and TLS to Redis and the Sentinels
# (redis.tls.enabled, database.redis.tls.*): both on, so the rendered configuration is what a
# secure install runs.
sentinel_auth=true
redis_tls=true
echo "redis_sentinel_test: Sentinel auth $sentinel_auth, Redis TLS $redis_tls"
"$build/chart-render" --chart "$chart" --name df --namespace "$ns" \
    -f "$chart/ci/bundled-redis-values.yaml" -f "$work/password-values.yaml" \
    --set redis.sentinel.auth.enabled=$sentinel_auth,redis.tls.enabled=$redis_tls \
    --set redis.port=$redis_port,redis.sentinel.port=$sentinel_port \
    --set redis.sentinel.downAfterMilliseconds=1500,redis.sentinel.failoverTimeout=10000 \
    >"$work/rendered.yaml" || {
    echo "redis_sentinel_test: rendering failed" >&2
    exit 1
}

# The rendered files: ConfigMap data and the Secret's password.
NODE_PATH=$root/hack/chart/node_modules node - "$work/rendered.yaml" "$work" <<'JS' || exit 1
const { parseAllDocuments } = require("yaml");
const fs = require("fs");
const [file, out] = process.argv.slice(2);
const docs = parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
const want = { "start-redis.sh": 0, "start-sentinel.sh": 0, "redis.conf": 0, "scheduler.yaml": 0 };
for (const d of docs) {
  if (d.kind === "ConfigMap") {
    for (const [k, v] of Object.entries(d.data || {})) {
      if (k in want) { fs.writeFileSync(`${out}/${k}`, v); want[k]++; }
    }
  }
  if (d.kind === "Secret" && d.metadata.name === "df-dragonfly-csi-redis") {
    fs.writeFileSync(`${out}/password`, Buffer.from(d.data.password, "base64").toString());
  }
  // The certificates of Redis (redis.tls.enabled) and of the scheduler.
  const certDirs = { "df-dragonfly-csi-redis-tls": "redis-tls", "df-dragonfly-csi-scheduler-tls": "sched-tls" };
  if (d.kind === "Secret" && certDirs[d.metadata.name]) {
    fs.mkdirSync(`${out}/${certDirs[d.metadata.name]}`, { recursive: true });
    for (const [k, v] of Object.entries(d.data)) fs.writeFileSync(`${out}/${certDirs[d.metadata.name]}/${k}`, Buffer.from(v, "base64"));
  }
  if (d.kind === "StatefulSet") {
    fs.writeFileSync(`${out}/replicas`, String(d.spec.replicas));
  }
}
for (const [k, n] of Object.entries(want)) {
  if (n !== 1) { console.error(`redis_sentinel_test: rendered ${k}: found ${n} times`); process.exit(1); }
}
JS
[ -s "$work/password" ] || { echo "redis_sentinel_test: no Redis password rendered" >&2; exit 1; }
if [ "$redis_tls" = true ]; then
    if [ ! -s "$work/redis-tls/tls.key" ] || [ ! -s "$work/sched-tls/tls.key" ]; then
        echo "redis_sentinel_test: no Redis or scheduler certificate rendered" >&2
        exit 1
    fi
fi
# redis-cli's TLS options as the rendered scripts have them, with /etc/redis-tls mapped.
tls_args=()
[ "$redis_tls" = true ] && tls_args=(--tls --cacert "$work/redis-tls/ca.crt" --cert "$work/redis-tls/tls.crt" --key "$work/redis-tls/tls.key")
[ "$(cat "$work/replicas")" = 3 ] || fail "StatefulSet replicas: want 3, got $(cat "$work/replicas")"
password=$(cat "$work/password")
[ "$password" = 'pa ss"wo\rd' ] || fail "the Secret's password: got $password"

headless=df-dragonfly-csi-redis-headless
host() { echo "df-dragonfly-csi-redis-$1.$headless.$ns.svc.cluster.local"; }
ip() { echo "127.0.0.2$(($1 + 1))"; }

# Every pod's name resolves to its own loopback address.
cp /etc/hosts "$work/hosts"
for i in 0 1 2; do
    echo "$(ip $i) $(host $i)" >>"$work/hosts"
done
mount --bind "$work/hosts" /etc/hosts || { echo "redis_sentinel_test: cannot bind /etc/hosts" >&2; exit 1; }

# A pod: its own copies of the scripts with the mount paths mapped into $work/pod<i>.
make_pod() {
    local i=$1 d=$work/pod$1
    mkdir -p "$d/scripts" "$d/run/redis" "$d/run/sentinel" "$d/data" "$d/bin"
    sed "s|^bind .*|bind $(ip "$i")|; s|^dir /data$|dir $d/data|; s|/etc/redis-tls/|$work/redis-tls/|g" \
        "$work/redis.conf" >"$d/scripts/redis.conf"
    grep -q "^bind $(ip "$i")\$" "$d/scripts/redis.conf" || fail "redis.conf has no bind line to map"
    for s in start-redis.sh start-sentinel.sh; do
        sed "s|/scripts/|$d/scripts/|g; s|/run/redis|$d/run/redis|g; s|/run/sentinel|$d/run/sentinel|g; s|/etc/redis-tls/|$work/redis-tls/|g" \
            "$work/$s" >"$d/scripts/$s"
    done
    printf '#!/bin/sh\nexec /usr/bin/redis-sentinel "$@" --bind %s\n' "$(ip "$i")" >"$d/bin/redis-sentinel"
    chmod +x "$d/bin/redis-sentinel"
}
# Starts a pod's container (redis or sentinel) as the StatefulSet would: env from the pod spec.
declare -A pid_of
start() {
    local i=$1 what=$2 d=$work/pod$1
    local envs=(POD_NAME="df-dragonfly-csi-redis-$i" REDIS_PASSWORD="$password" PATH="$d/bin:$PATH")
    if [ "$what" = redis ] || [ "$sentinel_auth" = true ]; then
        envs+=(REDISCLI_AUTH="$password")
    fi
    env "${envs[@]}" sh "$d/scripts/start-$what.sh" >>"$d/$what.log" 2>&1 &
    pids+=("$!")
    pid_of[$what$i]=$!
}
rcli() { # rcli POD ARGS...: a command to pod's Redis
    local i=$1
    shift
    REDISCLI_AUTH=$password timeout 5 redis-cli "${tls_args[@]}" -h "$(ip "$i")" -p $redis_port --no-auth-warning --raw "$@" 2>/dev/null
}
scli() { # scli POD ARGS...: a command to pod's Sentinel
    local i=$1
    shift
    if [ "$sentinel_auth" = true ]; then
        REDISCLI_AUTH=$password timeout 5 redis-cli "${tls_args[@]}" -h "$(ip "$i")" -p $sentinel_port --no-auth-warning --raw "$@" 2>/dev/null
    else
        timeout 5 redis-cli "${tls_args[@]}" -h "$(ip "$i")" -p $sentinel_port --raw "$@" 2>/dev/null
    fi
}
# wait_for SECONDS DESCRIPTION COMMAND...: polls until COMMAND succeeds (a liveness deadline).
wait_for() {
    local secs=$1 what=$2 n=0
    shift 2
    until "$@"; do
        n=$((n + 1))
        if [ "$n" -ge $((secs * 10)) ]; then
            fail "$what (not within ${secs}s)"
            return 1
        fi
        sleep 0.1
    done
}
is_pong() { [ "$("$@" ping)" = PONG ]; }
role_is() { rcli "$1" role | head -n 1 | grep -qx "$2"; }
replica_of() { # replica_of POD MASTER_POD: linked to that master
    local info
    info=$(rcli "$1" info replication | tr -d '\r')
    echo "$info" | grep -qx "master_host:$(host "$2")" && echo "$info" | grep -qx "master_link_status:up"
}
sentinel_master_is() { [ "$(scli "$1" sentinel get-master-addr-by-name dragonfly | head -n 1)" = "$(host "$2")" ]; }
sentinel_knows() { # sentinel_knows POD: 2 replicas and 2 other Sentinels
    [ "$(scli "$1" sentinel master dragonfly | sed -n '/^num-slaves$/{n;p}')" = 2 ] &&
        [ "$(scli "$1" sentinel master dragonfly | sed -n '/^num-other-sentinels$/{n;p}')" = 2 ]
}

# ---- start the pods in StatefulSet order: each one ready before the next ----
for i in 0 1 2; do
    make_pod "$i"
    start "$i" redis
    start "$i" sentinel
    wait_for 30 "pod $i Redis answers PING" is_pong rcli "$i"
    wait_for 30 "pod $i Sentinel answers PING" is_pong scli "$i"
done

if role_is 0 master; then ok "pod 0 is the first master"; else fail "pod 0 is not the master: $(rcli 0 role | head -n 1)"; fi
for i in 1 2; do
    wait_for 30 "pod $i replicates pod 0 by name" replica_of "$i" 0 && ok "pod $i replicates $(host 0)"
done
for i in 0 1 2; do
    wait_for 30 "Sentinel $i names pod 0 the master" sentinel_master_is "$i" 0 &&
        wait_for 60 "Sentinel $i knows 2 replicas and 2 Sentinels" sentinel_knows "$i" &&
        ok "Sentinel $i: master $(host 0), 2 replicas, 2 other Sentinels"
done
if [ "$(env -u REDISCLI_AUTH timeout 5 redis-cli "${tls_args[@]}" -h "$(ip 0)" -p $redis_port ping 2>&1)" = PONG ]; then
    fail "Redis answers without the password"
else
    ok "Redis requires the password"
fi
if [ "$sentinel_auth" = true ]; then
    # A stranger can neither ask a Sentinel for the master nor re-point it.
    out=$(env -u REDISCLI_AUTH timeout 5 redis-cli "${tls_args[@]}" -h "$(ip 0)" -p $sentinel_port sentinel get-master-addr-by-name dragonfly 2>&1)
    out2=$(env -u REDISCLI_AUTH timeout 5 redis-cli "${tls_args[@]}" -h "$(ip 0)" -p $sentinel_port sentinel set dragonfly down-after-milliseconds 1 2>&1)
    if grep -q NOAUTH <<<"$out" && grep -q NOAUTH <<<"$out2"; then
        ok "the Sentinels require the password (NOAUTH for a stranger's query and SENTINEL SET)"
    else
        fail "a Sentinel answered without the password: $out / $out2"
    fi
fi

if [ "$redis_tls" = true ]; then
    # Plaintext, or TLS without a client certificate, gets nothing from Redis or a Sentinel.
    bad=0
    for p in $redis_port $sentinel_port; do
        [ "$(REDISCLI_AUTH=$password timeout 5 redis-cli -h "$(ip 0)" -p "$p" --no-auth-warning ping 2>&1)" = PONG ] && bad=1
        [ "$(REDISCLI_AUTH=$password timeout 5 redis-cli --tls --cacert "$work/redis-tls/ca.crt" -h "$(ip 0)" -p "$p" \
            --no-auth-warning ping 2>&1)" = PONG ] && bad=1
    done
    if [ "$bad" = 0 ]; then
        ok "Redis and the Sentinels take only TLS with a client certificate of the CA"
    else
        fail "Redis or a Sentinel answered plaintext or a client without a certificate"
    fi
fi

# ---- the real scheduler, with the rendered database.redis settings ----
sed -n '/^database:/,/^[a-z]/p' "$work/scheduler.yaml" | sed '$d' >"$work/sched-db.yaml"
grep -q "masterName: dragonfly" "$work/sched-db.yaml" || fail "scheduler.yaml: no masterName: $(cat "$work/sched-db.yaml")"
if [ "$redis_tls" = true ]; then
    grep -q "caCert: /etc/dragonfly-tls/ca.crt" "$work/sched-db.yaml" || fail "scheduler.yaml: no database.redis.tls"
    sed -i "s|/etc/dragonfly-tls/|$work/sched-tls/|" "$work/sched-db.yaml"
fi
sched_port=21393
sentinel_env=()
[ "$sentinel_auth" = true ] && sentinel_env=(SCHEDULER_DATABASE_REDIS_SENTINELPASSWORD="$password")
env "${sentinel_env[@]}" SCHEDULER_DATABASE_REDIS_PASSWORD="$password" "$build/scheduler/scheduler" --config "$work/sched-db.yaml" \
    --set server.listenIP=127.0.0.1 --set server.port=$sched_port --set server.advertiseIP=127.0.0.1 \
    --set metrics.server.port=0 >"$work/scheduler.log" 2>&1 &
sched_pid=$!
pids+=("$sched_pid")
sched_ready() { grep -qs "scheduler.ready" "$work/scheduler.log" || ! kill -0 "$sched_pid" 2>/dev/null; }
wait_for 30 "the scheduler is ready" sched_ready
kill -0 "$sched_pid" 2>/dev/null || fail "the scheduler exited: $(cat "$work/scheduler.log")"

# A dfdaemon announcing its host: the scheduler writes it to the master it got from the
# Sentinels (a DNS name).
mkdir -p "$work/dfdaemon/run" "$work/dfdaemon/store"
daemon_pid=
start_daemon() {
    "$build/daemon/dfdaemon" --socket-path "$work/dfdaemon/run/dfdaemon.sock" \
        --storage-dir "$work/dfdaemon/store" --set scheduler.addrs=127.0.0.1:$sched_port \
        --set host.hostname="$1" --set upload.server.ip=127.0.0.1 --set upload.server.port=21394 \
        --set storage.server.ip=127.0.0.1 --set storage.server.tcpPort=21395 \
        --set metrics.server.port=0 --set health.server.port=0 >>"$work/dfdaemon.log" 2>&1 &
    daemon_pid=$!
    pids+=("$daemon_pid")
}
hosts_on() { # hosts_on POD HOSTNAME: the master at POD has a host hash with that hostname
    local k
    for k in $(rcli "$1" --scan --pattern 'scheduler:scheduler-clusters:1:persistent-cache-hosts:*'); do
        [ "$(rcli "$1" hget "$k" hostname)" = "$2" ] && return 0
    done
    return 1
}
start_daemon node-a
wait_for 60 "the scheduler registered node-a in Redis (through the Sentinels)" hosts_on 0 node-a &&
    ok "the scheduler found the master through the Sentinels by name and stored node-a"
kill -TERM "$daemon_pid" 2>/dev/null
wait "$daemon_pid" 2>/dev/null

# ---- failover: kill pod 0's Redis ----
rcli 0 set dfc-test-key before-failover >/dev/null
key_on_replicas() { [ "$(rcli 1 get dfc-test-key)" = before-failover ] && [ "$(rcli 2 get dfc-test-key)" = before-failover ]; }
wait_for 30 "the key reached both replicas" key_on_replicas
kill -KILL "${pid_of[redis0]}"
wait "${pid_of[redis0]}" 2>/dev/null
new_master=
failed_over() {
    local m
    m=$(scli 1 sentinel get-master-addr-by-name dragonfly | head -n 1)
    case $m in
    "$(host 1)") new_master=1 ;;
    "$(host 2)") new_master=2 ;;
    *) return 1 ;;
    esac
    role_is "$new_master" master
}
if wait_for 60 "the Sentinels failed over from pod 0" failed_over; then
    ok "failover: pod $new_master ($(host "$new_master")) is the master"
    other=$((3 - new_master))
    wait_for 30 "pod $other follows the new master" replica_of "$other" "$new_master" &&
        ok "pod $other replicates the new master"
    if [ "$(rcli "$new_master" get dfc-test-key)" = before-failover ]; then
        ok "the data survived the failover"
    else
        fail "the key is lost on the new master"
    fi

    # ---- pod 0 restarts: it must come back as a replica, not a second master ----
    start 0 redis
    wait_for 30 "pod 0's Redis answers again" is_pong rcli 0
    if role_is 0 master; then
        fail "restarted pod 0 came back as a second master"
    else
        wait_for 30 "restarted pod 0 replicates pod $new_master" replica_of 0 "$new_master" &&
            ok "restarted pod 0 is a replica of $(host "$new_master")"
    fi
    grep -q "^replicaof $(host "$new_master") $redis_port\$" "$work/pod0/run/redis/redis.conf" ||
        fail "pod 0's redis.conf has no replicaof for the new master"

    # ---- the scheduler follows the failover by itself ----
    start_daemon node-b
    wait_for 60 "the scheduler registered node-b on the new master" hosts_on "$new_master" node-b &&
        ok "after the failover the scheduler writes to the new master"
    kill -TERM "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
fi

if [ "$failed" -gt 0 ]; then
    for f in "$work"/pod*/*.log "$work/scheduler.log" "$work/dfdaemon.log"; do
        [ -f "$f" ] && { echo "--- $f (last lines)"; tail -n 15 "$f"; } >&2
    done
    echo "redis_sentinel_test: $failed failure(s)" >&2
    exit 1
fi
echo "redis_sentinel_test: all passed"
