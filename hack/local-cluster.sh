#!/usr/bin/env bash
# A local P2P cluster on this machine: redis-server, the scheduler and N dfdaemons, each daemon
# on its own loopback address with its own hostname (so its own host id), store and socket.
# Every address is inside 127.0.0.0/8 (Linux routes all of it to lo): nothing here sends
# traffic anywhere else.
#
#   hack/local-cluster.sh up N          start redis, the scheduler and nodes 1..N; returns once
#                                       every node's host is in Redis (each has announced)
#   hack/local-cluster.sh kill I        SIGKILL node I (a crash: no DeleteHost)
#   hack/local-cluster.sh stop I        SIGTERM node I (a clean shutdown: DeleteHost)
#   hack/local-cluster.sh start I       start node I again (same config and store) and wait for
#                                       its announce
#   hack/local-cluster.sh kill|stop|start scheduler
#                                       the same for the scheduler (same address and port)
#   hack/local-cluster.sh status        every process, its address and its host in Redis
#   hack/local-cluster.sh down          stop everything and remove the cluster dir
#
# Environment:
#   BUILD_DIR    the build to run (default build; relative to the repository root)
#   CLUSTER_DIR  where everything lives (default /tmp/dfc-cluster):
#                  cluster.env                 the cluster's facts, sourceable (below)
#                  redis/      redis.log, redis.pid
#                  scheduler/  scheduler.yaml, scheduler.log, scheduler.pid
#                  node<i>/    dfdaemon.yaml, dfdaemon.log, dfdaemon.pid,
#                              storage/ (storage.dir), run/dfdaemon.sock
#   CLUSTER_UP_TIMEOUT    seconds `up`/`start` wait for the announces (default 30)
#   CLUSTER_LOG_LEVEL     the daemons' and the scheduler's log.level (default info)
#   CLUSTER_GC_INTERVAL   the daemons' gc.interval (default 5s, so TTL expiry shows quickly)
#   CLUSTER_SCHED_IP      the scheduler's address (default 127.0.0.1, see below)
#   CLUSTER_TLS           mutual (default) or off: TLS on every TCP connection of the cluster
#
# TLS (this layout is an interface; keep it): `up` makes one CA per cluster with openssl
# (test/support/make-certs.sh) and a certificate for each process, in cert-manager's Secret
# layout: the CA at $CLUSTER_DIR/tls/ca.crt (its key beside it), node i's certificate and key at
# $CLUSTER_DIR/node<i>/tls/tls.crt and tls.key, the scheduler's at
# $CLUSTER_DIR/scheduler/tls/tls.crt and tls.key. Each certificate's SAN holds its process's IP
# address (a node's 127.0.0.(10+i), the scheduler's address) and, for a node, its host id as
# URI dragonfly://host/<host id>; the scheduler's also holds URI dragonfly://scheduler (its role).
# Every config then sets security.tlsPolicy and the files.
#
# Addresses: Redis 127.0.0.1:<free port>; the scheduler 127.0.0.1:8002 (another free port if
# 8002 is taken); node i on 127.0.0.(10+i), hostname dfc-node<i>, host id
# 127.0.0.(10+i)-dfc-node<i>, DfdaemonUpload on upload.server.port 4000 and Vortex on
# storage.server.tcpPort 4005 (the same ports on every address; another free pair when either
# is taken). The scheduler runs with short intervals (host GC every 5 s, so a node silent for
# 2 x its 2 s announce interval is gone within ~10 s, replica repair every 2 s), so a killed
# node's copies are restored within seconds.
#
# Why the scheduler is on 127.0.0.1 by default: a daemon takes UpdatePersistentCacheTask,
# Delete and a persistent replication pull only from a scheduler. With mutual TLS that is a
# caller whose certificate names one of scheduler.addrs' IPs, wherever the call comes from. With
# CLUSTER_TLS=off it is the caller's source address, and the kernel gives every connection to a
# 127.0.0.0/8 address the source address 127.0.0.1 (lo's primary address) unless the client
# binds another one, which gRPC's client does not: a scheduler elsewhere than 127.0.0.1 would be
# a stranger then (and the daemons' own calls to each other, also from 127.0.0.1, pass).
#
# cluster.env defines: CLUSTER_NODES, REDIS_PORT, REDIS_ADDR, SCHED_IP, SCHED_PORT, SCHED_ADDR,
# UPLOAD_PORT, VORTEX_PORT, REDIS_PREFIX (the scheduler's key prefix, docs/dragonfly-compat.md
# section 7.2), BIN_DIR (the absolute build dir) and CLUSTER_TLS (mutual or off).
#
# `up` is idempotent: on a running cluster of the same size it starts only what is not running.
# `down` is idempotent too, and removes only a directory that holds a cluster.env.
# shellcheck disable=SC2153 # SCHED_IP and the other upper-case names come from cluster.env
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-/tmp/dfc-cluster}
build=${BUILD_DIR:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
up_timeout=${CLUSTER_UP_TIMEOUT:-30}
log_level=${CLUSTER_LOG_LEVEL:-info}
gc_interval=${CLUSTER_GC_INTERVAL:-5s}
sched_ip=${CLUSTER_SCHED_IP:-127.0.0.1}

die() {
    echo "local-cluster: $*" >&2
    exit 1
}
say() { echo "local-cluster: $*"; }

node_ip() { echo "127.0.0.$((10 + $1))"; }
node_host() { echo "dfc-node$1"; }
node_id() { echo "$(node_ip "$1")-$(node_host "$1")"; }
tls=${CLUSTER_TLS:-mutual}
case $tls in mutual | off) ;; *) die "CLUSTER_TLS must be mutual or off, not '$tls'" ;; esac

# make_certs N: the cluster's CA and the scheduler's and nodes 1..N's certificates (kept when
# they exist, so `up` on a running cluster changes nothing).
make_certs() {
    local n=$1 certs=$root/test/support/make-certs.sh
    [ "$tls" = off ] && return 0
    [ -f "$dir/tls/ca.crt" ] || bash "$certs" ca "$dir/tls" || die "making the cluster's CA failed"
    [ -f "$dir/scheduler/tls/tls.crt" ] ||
        bash "$certs" leaf "$dir/tls" "$dir/scheduler/tls" "IP:$SCHED_IP,URI:dragonfly://scheduler" --cn dfc-scheduler ||
        die "making the scheduler's certificate failed"
    for i in $(seq "$n"); do
        [ -f "$dir/node$i/tls/tls.crt" ] ||
            bash "$certs" leaf "$dir/tls" "$dir/node$i/tls" \
                "IP:$(node_ip "$i"),URI:dragonfly://host/$(node_id "$i")" --cn "$(node_id "$i")" ||
            die "making node $i's certificate failed"
    done
}

# tls_files_yaml DIR PAD: YAML lines caCert (the cluster's CA), cert and key (DIR/tls/), each
# prefixed by PAD.
tls_files_yaml() {
    local d=$1 pad=$2
    printf '%scaCert: "%s"\n%scert: "%s"\n%skey: "%s"\n' "$pad" "$dir/tls/ca.crt" "$pad" \
        "$d/tls/tls.crt" "$pad" "$d/tls/tls.key"
}

# Whether a TCP socket uses ip:port (listening there or on a wildcard, v4 or v6, or any
# connection with that local address, IPv4-mapped included), from /proc/net/tcp{,6}.
port_used() {
    local ip=$1 port=$2 a b c d hex
    IFS=. read -r a b c d <<<"$ip"
    hex=$(printf '%02X%02X%02X%02X:%04X' "$d" "$c" "$b" "$a" "$port")
    # gRPC listens on IPv6 sockets with IPv4-mapped addresses (::ffff:a.b.c.d).
    local mapped wild4 wild6
    mapped=0000000000000000FFFF0000$hex
    wild4=$(printf '00000000:%04X' "$port")
    wild6=$(printf '00000000000000000000000000000000:%04X' "$port")
    awk -v h="$hex" -v m="$mapped" -v w4="$wild4" -v w6="$wild6" \
        '$2 == h || $2 == m || ($4 == "0A" && ($2 == w4 || $2 == w6)) { found = 1 }
         END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Whether something listens on TCP ip:port (that address, IPv4-mapped or not; with "any",
# also a wildcard listener, which would take the port from us too).
listening() {
    local a b c d hex
    IFS=. read -r a b c d <<<"$1"
    hex=$(printf '%02X%02X%02X%02X:%04X' "$d" "$c" "$b" "$a" "$2")
    local w4='' w6=''
    if [ "${3:-}" = any ]; then
        w4=$(printf '00000000:%04X' "$2")
        w6=$(printf '00000000000000000000000000000000:%04X' "$2")
    fi
    awk -v h="$hex" -v m="0000000000000000FFFF0000$hex" -v w4="$w4" -v w6="$w6" \
        '$4 == "0A" && ($2 == h || $2 == m || $2 == w4 || $2 == w6) { found = 1 }
         END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# A port in 10000..32767 (below Linux's default ephemeral range, so no outgoing connection
# takes it meanwhile) that no socket uses at any of the given addresses.
free_port() {
    local p ip busy
    for _ in $(seq 200); do
        p=$((10000 + RANDOM % 22768))
        busy=0
        for ip in "$@"; do
            if port_used "$ip" "$p"; then
                busy=1
                break
            fi
        done
        [ $busy -eq 0 ] && echo "$p" && return 0
    done
    die "no free TCP port found on $*"
}

# pid of a process we started, when that process still runs the expected program.
live_pid() {
    local pidfile=$1 what=$2 pid
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    grep -qF -- "$what" <<<"$(tr '\0' ' ' <"/proc/$pid/cmdline")" || return 1
    # A zombie (killed, not yet reaped by our caller's shell) counts as gone.
    [ "$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)" != Z ] || return 1
    echo "$pid"
}

# Whether the process in pidfile, which this script just started, still runs. Unlike live_pid
# it does not look at the command line: right after the fork the child may not have exec'd yet.
started_alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    [ "$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)" != Z ]
}

# Starts a program detached from the caller's session (it outlives this script), its output
# to a log, and records its pid.
spawn() {
    local pidfile=$1 logfile=$2
    shift 2
    setsid "$@" </dev/null >>"$logfile" 2>&1 &
    echo $! >"$pidfile"
}

# Sends sig to the process in pidfile and waits up to secs for it to go; then SIGKILL.
end_process() {
    local pidfile=$1 what=$2 sig=$3 secs=$4 pid
    if pid=$(live_pid "$pidfile" "$what"); then
        kill "-$sig" "$pid" 2>/dev/null || true
        for _ in $(seq $((secs * 20))); do
            live_pid "$pidfile" "$what" >/dev/null || break
            sleep 0.05
        done
        if live_pid "$pidfile" "$what" >/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            for _ in $(seq 100); do
                live_pid "$pidfile" "$what" >/dev/null || break
                sleep 0.05
            done
        fi
    fi
    rm -f "$pidfile"
}

rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# Defines the cluster.env variables (CLUSTER_NODES, REDIS_PORT, SCHED_IP, ...).
load_env() {
    [ -f "$dir/cluster.env" ] || return 1
    # shellcheck disable=SC1091
    . "$dir/cluster.env"
}

check_tools() {
    local b
    for b in redis-server redis-cli setsid; do
        command -v "$b" >/dev/null || die "$b is missing (bash hack/install-deps.sh)"
    done
    for b in daemon/dfdaemon scheduler/scheduler daemon/cmd/dfcache/dfcache; do
        [ -x "$build/$b" ] || die "$build/$b is missing: build first (cmake -S . -B build && cmake --build build -j2), or set BUILD_DIR"
    done
}

tail_log() {
    echo "--- last lines of $1 ---" >&2
    tail -n "${2:-15}" "$1" >&2 2>/dev/null || true
}

start_redis() {
    if live_pid "$dir/redis/redis.pid" redis-server >/dev/null; then
        return 0
    fi
    mkdir -p "$dir/redis"
    spawn "$dir/redis/redis.pid" "$dir/redis/redis.log" redis-server --bind 127.0.0.1 \
        --port "$REDIS_PORT" --save '' --appendonly no --dir "$dir/redis" \
        --logfile "$dir/redis/redis.log" --daemonize no
    for _ in $(seq 100); do
        [ "$(rcli ping 2>/dev/null)" = PONG ] && return 0
        started_alive "$dir/redis/redis.pid" || break
        sleep 0.05
    done
    tail_log "$dir/redis/redis.log"
    die "redis-server did not start on 127.0.0.1:$REDIS_PORT"
}

write_scheduler_config() {
    mkdir -p "$dir/scheduler"
    cat >"$dir/scheduler/scheduler.yaml" <<EOF
# Written by hack/local-cluster.sh.
server:
  listenIP: "$SCHED_IP"
  port: $SCHED_PORT
  advertiseIP: "$SCHED_IP"
  shutdownGrace: 2s
$(if [ "$tls" != off ]; then
        printf '  tls:\n'
        tls_files_yaml "$dir/scheduler" "    "
    fi)
$(if [ "$tls" != off ]; then
        printf 'security:\n  tlsPolicy: %s\npeer:\n  tls:\n' "$tls"
        tls_files_yaml "$dir/scheduler" "    "
    fi)
metrics:
  server:
    ip: "$SCHED_IP"
    port: $(free_port "$SCHED_IP") # not 8000: clusters and tests share the machine
database:
  redis:
    addrs: ["$REDIS_ADDR"]
    timeout: 5s
manager:
  schedulerClusterID: 1
scheduler:
  gc:
    hostGCInterval: 5s
  replicaRepairInterval: 2s
log:
  level: "$log_level"
EOF
}

start_scheduler() {
    local cfg=$dir/scheduler/scheduler.yaml
    if live_pid "$dir/scheduler/scheduler.pid" "$cfg" >/dev/null; then
        return 0
    fi
    if listening "$SCHED_IP" "$SCHED_PORT" any; then
        die "something else listens on $SCHED_ADDR; the scheduler cannot start there"
    fi
    spawn "$dir/scheduler/scheduler.pid" "$dir/scheduler/scheduler.log" \
        "$BIN_DIR/scheduler/scheduler" --config "$cfg"
    # Ready once its port listens (the scheduler.ready line is not logged below info).
    for _ in $(seq 200); do
        started_alive "$dir/scheduler/scheduler.pid" || break
        listening "$SCHED_IP" "$SCHED_PORT" && return 0
        sleep 0.05
    done
    tail_log "$dir/scheduler/scheduler.log"
    die "the scheduler did not start on $SCHED_ADDR (log: $dir/scheduler/scheduler.log)"
}

write_node_config() {
    local i=$1 ip nd
    ip=$(node_ip "$i")
    nd=$dir/node$i
    mkdir -p "$nd/storage" "$nd/run"
    cat >"$nd/dfdaemon.yaml" <<EOF
# Written by hack/local-cluster.sh: node $i of the local cluster.
download:
  server:
    socketPath: "$nd/run/dfdaemon.sock"
storage:
  dir: "$nd/storage"
  server:
    ip: "$ip"
    tcpPort: $VORTEX_PORT
gc:
  interval: $gc_interval
host:
  ip: "$ip"
  hostname: "$(node_host "$i")"
scheduler:
  addrs: ["$SCHED_ADDR"]
  announceInterval: 2s
$(if [ "$tls" != off ]; then tls_files_yaml "$nd" "  "; fi)
upload:
  server:
    ip: "$ip"
    port: $UPLOAD_PORT
$(if [ "$tls" != off ]; then
        tls_files_yaml "$nd" "    "
        printf '  client:\n'
        tls_files_yaml "$nd" "    "
    fi)
$(if [ "$tls" != off ]; then printf 'security:\n  tlsPolicy: %s\n' "$tls"; fi)
metrics:
  server:
    ip: "$ip"
    port: $(free_port "$ip")
health:
  server:
    ip: "$ip"
    port: $(free_port "$ip")
log:
  level: "$log_level"
EOF
}

start_node() {
    local i=$1 nd=$dir/node$1
    if live_pid "$nd/dfdaemon.pid" "$nd/dfdaemon.yaml" >/dev/null; then
        return 0
    fi
    [ -f "$nd/dfdaemon.yaml" ] || write_node_config "$i"
    spawn "$nd/dfdaemon.pid" "$nd/dfdaemon.log" "$BIN_DIR/daemon/dfdaemon" --config "$nd/dfdaemon.yaml"
}

# The host's updated_at in Redis as epoch seconds, or nothing when the host is not there.
host_updated() {
    local t
    t=$(rcli HGET "$REDIS_PREFIX:persistent-cache-hosts:$(node_id "$1")" updated_at 2>/dev/null) || return 0
    if [ -n "$t" ]; then
        date -d "$t" +%s 2>/dev/null || true
    fi
}

# Waits until each node given has a host hash in Redis updated at or after since (epoch s).
wait_announced() {
    local since=$1
    shift
    local deadline=$(($(date +%s) + up_timeout)) pending i t nd
    while :; do
        pending=()
        for i in "$@"; do
            nd=$dir/node$i
            if ! started_alive "$nd/dfdaemon.pid"; then
                tail_log "$nd/dfdaemon.log"
                die "node $i ($(node_ip "$i")) exited during start-up (log: $nd/dfdaemon.log)"
            fi
            t=$(host_updated "$i")
            if [ -z "$t" ] || [ "$t" -lt "$since" ] || [ ! -S "$nd/run/dfdaemon.sock" ]; then
                pending+=("$i")
            fi
        done
        [ ${#pending[@]} -eq 0 ] && return 0
        if [ "$(date +%s)" -ge "$deadline" ]; then
            for i in "${pending[@]}"; do
                tail_log "$dir/node$i/dfdaemon.log" 8
            done
            local ids=()
            for i in "${pending[@]}"; do ids+=("$(node_id "$i")"); done
            die "after ${up_timeout}s these nodes have not announced (no key" \
                "$REDIS_PREFIX:persistent-cache-hosts:<host id> updated since start, or no socket):" \
                "${ids[*]}; the cluster is left running for inspection: hack/local-cluster.sh down"
        fi
        sleep 0.2
    done
}

cmd_up() {
    local n=${1:-}
    if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then
        die "usage: up N (N = 1..200 nodes)"
    fi
    check_tools
    if load_env; then
        [ "$CLUSTER_NODES" -eq "$n" ] ||
            die "a cluster of $CLUSTER_NODES nodes exists in $dir; run hack/local-cluster.sh down first"
    else
        [ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] ||
            die "$dir exists and is not a cluster dir (no cluster.env); set CLUSTER_DIR or remove it"
        mkdir -p "$dir"
        local ips=() i
        for i in $(seq "$n"); do ips+=("$(node_ip "$i")"); done
        local up=4000 vp=4005
        for i in "${ips[@]}"; do
            if listening "$i" "$up" any || listening "$i" "$vp" any; then
                up=$(free_port "${ips[@]}")
                vp=$(free_port "${ips[@]}")
                while [ "$vp" = "$up" ]; do vp=$(free_port "${ips[@]}"); done
                say "4000 or 4005 is taken; the nodes use ports $up (upload) and $vp (Vortex)"
                break
            fi
        done
        local sp=8002
        if listening "$sched_ip" $sp any; then
            sp=$(free_port "$sched_ip")
            say "8002 is taken on $sched_ip; the scheduler uses $sp"
        fi
        local rp
        rp=$(free_port 127.0.0.1)
        cat >"$dir/cluster.env" <<EOF
# Written by hack/local-cluster.sh up $n.
CLUSTER_NODES=$n
REDIS_PORT=$rp
REDIS_ADDR=127.0.0.1:$rp
SCHED_IP=$sched_ip
SCHED_PORT=$sp
SCHED_ADDR=$sched_ip:$sp
UPLOAD_PORT=$up
VORTEX_PORT=$vp
REDIS_PREFIX=scheduler:scheduler-clusters:1
BIN_DIR=$build
CLUSTER_TLS=$tls
EOF
        load_env
        make_certs "$n"
        write_scheduler_config
        for i in $(seq "$n"); do write_node_config "$i"; done
    fi
    local since
    since=$(date +%s)
    start_redis
    start_scheduler
    for i in $(seq "$n"); do start_node "$i"; done
    # Every live node announces every 2 s, so waiting for an announce since now from all of
    # them also proves that the ones already running still announce.
    wait_announced "$since" $(seq "$n")
    say "up: redis $REDIS_ADDR, scheduler $SCHED_ADDR, $n nodes on $(node_ip 1)..$(node_ip "$n")" \
        "(upload :$UPLOAD_PORT, Vortex :$VORTEX_PORT), dir $dir"
}

node_arg() {
    local i=$1
    load_env || die "no cluster in $dir (run hack/local-cluster.sh up N)"
    if ! [[ $i =~ ^[0-9]+$ ]] || [ "$i" -lt 1 ] || [ "$i" -gt "$CLUSTER_NODES" ]; then
        die "node must be 1..$CLUSTER_NODES or scheduler, not '$i'"
    fi
}

cmd_signal() {
    local sig=$1 what=${2:-}
    [ -n "$what" ] || die "usage: kill|stop I|scheduler"
    if [ "$what" = scheduler ]; then
        load_env || die "no cluster in $dir"
        live_pid "$dir/scheduler/scheduler.pid" "$dir/scheduler/scheduler.yaml" >/dev/null ||
            say "the scheduler is not running"
        end_process "$dir/scheduler/scheduler.pid" "$dir/scheduler/scheduler.yaml" "$sig" 15
        say "scheduler: $sig"
        return 0
    fi
    node_arg "$what"
    local nd=$dir/node$what
    live_pid "$nd/dfdaemon.pid" "$nd/dfdaemon.yaml" >/dev/null || say "node $what is not running"
    end_process "$nd/dfdaemon.pid" "$nd/dfdaemon.yaml" "$sig" 15
    say "node $what ($(node_ip "$what")): $sig"
}

cmd_start() {
    local what=${1:-}
    [ -n "$what" ] || die "usage: start I|scheduler"
    check_tools
    if [ "$what" = scheduler ]; then
        load_env || die "no cluster in $dir"
        start_scheduler
        say "scheduler: running on $SCHED_ADDR"
        return 0
    fi
    node_arg "$what"
    local since
    since=$(date +%s)
    start_node "$what"
    wait_announced "$since" "$what"
    say "node $what ($(node_ip "$what")): announced"
}

cmd_status() {
    load_env || {
        say "no cluster in $dir"
        return 1
    }
    local bad=0 pid t i nd
    if pid=$(live_pid "$dir/redis/redis.pid" redis-server); then
        say "redis      $REDIS_ADDR  pid $pid"
    else
        say "redis      $REDIS_ADDR  not running"
        bad=1
    fi
    if pid=$(live_pid "$dir/scheduler/scheduler.pid" "$dir/scheduler/scheduler.yaml"); then
        say "scheduler  $SCHED_ADDR  pid $pid"
    else
        say "scheduler  $SCHED_ADDR  not running"
        bad=1
    fi
    for i in $(seq "$CLUSTER_NODES"); do
        nd=$dir/node$i
        t=$(host_updated "$i")
        local seen="not in Redis"
        [ -z "$t" ] || seen="announced $(($(date +%s) - t))s ago"
        if pid=$(live_pid "$nd/dfdaemon.pid" "$nd/dfdaemon.yaml"); then
            say "node$i      $(node_ip "$i")  pid $pid  host $(node_id "$i")  $seen"
        else
            say "node$i      $(node_ip "$i")  not running"
            bad=1
        fi
    done
    return $bad
}

cmd_down() {
    if ! load_env; then
        if [ -e "$dir" ]; then
            die "$dir is not a cluster dir (no cluster.env); not removing it"
        fi
        say "down: no cluster in $dir"
        return 0
    fi
    local i pid
    # Nodes first (they tell the scheduler goodbye), then the scheduler, then Redis.
    for i in $(seq "$CLUSTER_NODES"); do
        if pid=$(live_pid "$dir/node$i/dfdaemon.pid" "$dir/node$i/dfdaemon.yaml"); then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    for i in $(seq "$CLUSTER_NODES"); do
        end_process "$dir/node$i/dfdaemon.pid" "$dir/node$i/dfdaemon.yaml" TERM 12
    done
    end_process "$dir/scheduler/scheduler.pid" "$dir/scheduler/scheduler.yaml" TERM 12
    end_process "$dir/redis/redis.pid" redis-server TERM 5
    rm -rf "$dir"
    say "down: removed $dir"
}

case ${1:-} in
up) cmd_up "${2:-}" ;;
kill) cmd_signal KILL "${2:-}" ;;
stop) cmd_signal TERM "${2:-}" ;;
start) cmd_start "${2:-}" ;;
status) cmd_status ;;
down) cmd_down ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
