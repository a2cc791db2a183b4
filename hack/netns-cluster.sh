#!/usr/bin/env bash
# A multi-host P2P cluster on this machine: every node in its own network namespace behind a
# veth pair and a bridge, its link shaped with tc; Redis and the scheduler in a namespace of
# their own. The sibling of hack/local-cluster.sh (same commands where they overlap, same TLS
# layout); docs/testbed.md tells how to use it. Needs root (prints "SKIP: needs root" and exits
# 77 otherwise). Every address is 10.213.0.0/24 inside namespaces this script creates: nothing
# touches the root namespace's interfaces, routes or addresses.
#
#   hack/netns-cluster.sh up N [--rate R] [--delay D] [--loss L] [--sentinel]
#                                 create the namespaces and links, start Redis (with --sentinel:
#                                 a master, a replica and 3 Sentinels), the scheduler and nodes
#                                 1..N; returns once every node's host is in Redis. R is a tc
#                                 rate (default 200mbit; off = unshaped), D a netem delay (20ms),
#                                 L a netem loss (1%); delay and loss need sch_netem.
#   hack/netns-cluster.sh kill|stop|start I|scheduler
#                                 as hack/local-cluster.sh: SIGKILL, SIGTERM, start again
#   hack/netns-cluster.sh link I down|up
#                                 partition node I (or ctl): its veth's bridge end down or up
#   hack/netns-cluster.sh shape I RATE [DELAY [LOSS]]
#                                 re-shape node I's link both ways (RATE off: unshaped)
#   hack/netns-cluster.sh exec I CMD...
#                                 run CMD in node I's namespace (I may be ctl)
#   hack/netns-cluster.sh redis-cli ARGS...
#                                 redis-cli against the current Redis master
#   hack/netns-cluster.sh metrics I
#                                 node I's Prometheus text (GET /metrics)
#   hack/netns-cluster.sh failover
#                                 (--sentinel) SENTINEL FAILOVER; returns once every Sentinel
#                                 names the new master (cluster.env's REDIS_ADDR follows it)
#   hack/netns-cluster.sh status  every process, link and host in Redis
#   hack/netns-cluster.sh down    stop everything, delete the namespaces and the cluster dir
#                                 (safe to run twice)
#
# Topology (<tag> = 6 hex digits of the cluster dir's path, so two clusters can coexist):
#   dfcbr-<tag>    bridge br0; the bridge ends v<i> (node i) and vctl (ctl) are on it
#   dfcctl-<tag>   10.213.0.2: redis-server :6379 (replica :6380, Sentinels :26379..26381),
#                  the scheduler :8002; its link is not shaped
#   dfcn<i>-<tag>  node i at 10.213.0.(10+i), eth0; hostname dfc-node<i>, host id
#                  10.213.0.(10+i)-dfc-node<i>; upload :4000, Vortex :4005, metrics :4002,
#                  health :4003 on its address
# Each node link is shaped both ways: tbf at the rate on the egress of the node's eth0 (its
# uplink) and of v<i> (its downlink), under a netem qdisc when a delay or loss is given.
#
# Environment:
#   BUILD_DIR    the build to run (default build; relative to the repository root)
#   CLUSTER_DIR  where everything lives (default /tmp/dfc-netns), as hack/local-cluster.sh:
#                cluster.env, redis/, scheduler/, node<i>/ (dfdaemon.yaml, dfdaemon.log,
#                dfdaemon.pid, storage/, run/dfdaemon.sock, tls/), tls/ (the CA)
#   CLUSTER_TLS  mutual (default) or off; certificates as hack/local-cluster.sh's, with the
#                10.213.0.x addresses in their SANs
#   CLUSTER_UP_TIMEOUT  seconds `up`/`start` wait for the announces (default 30)
#   CLUSTER_LOG_LEVEL   the daemons' and the scheduler's log.level (default info)
#   CLUSTER_GC_INTERVAL the daemons' gc.interval (default 5s)
#   CLUSTER_KEEP_ON_FAIL=1  a failing `up` leaves what it made for inspection (default: the
#                           trap removes it)
#   NETNS_MTU    the links' MTU (default 1500). Every node's kernel work runs on this one
#                machine's cores: 9000 (jumbo frames, common in data centres) carries the same
#                bytes in a sixth of the packets
#   NETNS_EXTRA_DAEMON_YAML a YAML fragment (2-space indents) merged into every dfdaemon.yaml
#                           at `up`: its top-level sections are added to the generated ones,
#                           e.g. $'download:\n  pieceTimeout: 5s'
#
# cluster.env (sourceable) defines CLUSTER_NODES, CLUSTER_TAG, NS_BR, NS_CTL, CTL_IP,
# NODE_IP_<i>, NODE_NS_<i>, NODE_ID_<i>, NODE_SOCK_<i>, SCHED_IP, SCHED_PORT, SCHED_ADDR,
# REDIS_PORT, REDIS_ADDR (the current master), REDIS_PREFIX, SENTINEL (0 or 1), SENTINEL_ADDRS,
# REDIS_MASTER_NAME, UPLOAD_PORT, VORTEX_PORT, METRICS_PORT, HEALTH_PORT, RATE, DELAY, LOSS,
# BIN_DIR and CLUSTER_TLS.
# shellcheck disable=SC2153 # CLUSTER_NODES and the other upper-case names come from cluster.env
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CLUSTER_DIR:-/tmp/dfc-netns}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
build=${BUILD_DIR:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
up_timeout=${CLUSTER_UP_TIMEOUT:-30}
log_level=${CLUSTER_LOG_LEVEL:-info}
mtu=${NETNS_MTU:-1500}
case $mtu in '' | *[!0-9]*) echo "netns-cluster: NETNS_MTU must be a number, not '$mtu'" >&2; exit 2 ;; esac
gc_interval=${CLUSTER_GC_INTERVAL:-5s}
tls=${CLUSTER_TLS:-mutual}
tag=$(printf '%s' "$dir" | md5sum | cut -c1-6)
ns_br=dfcbr-$tag
ns_ctl=dfcctl-$tag
ctl_ip=10.213.0.2
master_name=dfcmaster

die() {
    echo "netns-cluster: $*" >&2
    exit 1
}
say() { echo "netns-cluster: $*"; }

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root (network namespaces, veth, tc)"
    exit 77
fi
case $tls in mutual | off) ;; *) die "CLUSTER_TLS must be mutual or off, not '$tls'" ;; esac

node_ip() { echo "10.213.0.$((10 + $1))"; }
node_host() { echo "dfc-node$1"; }
node_id() { echo "$(node_ip "$1")-$(node_host "$1")"; }
node_ns() { echo "dfcn$1-$tag"; }
nsx() {
    local ns=$1
    shift
    ip netns exec "$ns" "$@"
}

# The namespaces of this cluster that exist now.
our_namespaces() {
    ip netns list 2>/dev/null | awk -v t="$tag" '$1 ~ "^dfc(br|ctl|n[0-9]+)-" t "$" { print $1 }'
}

load_env() {
    [ -f "$dir/cluster.env" ] || return 1
    # shellcheck disable=SC1091
    . "$dir/cluster.env"
}

check_tools() {
    local b
    for b in ip tc redis-server redis-cli setsid curl; do
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

# --- processes (as hack/local-cluster.sh) ---

live_pid() {
    local pidfile=$1 what=$2 pid
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    grep -qF -- "$what" <<<"$(tr '\0' ' ' <"/proc/$pid/cmdline")" || return 1
    [ "$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)" != Z ] || return 1
    echo "$pid"
}

started_alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    [ "$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)" != Z ]
}

# spawn NS PIDFILE LOGFILE CMD...: CMD detached in namespace NS. setsid and `ip netns exec`
# both exec (no fork), so the pid recorded is CMD's.
spawn() {
    local ns=$1 pidfile=$2 logfile=$3
    shift 3
    setsid ip netns exec "$ns" "$@" </dev/null >>"$logfile" 2>&1 &
    echo $! >"$pidfile"
}

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

# --- links ---

# tc_rate R: R as bytes per second (R = <n>bit|kbit|mbit|gbit), or nothing when R is invalid.
rate_bytes() {
    local n unit
    [[ $1 =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] || return 1
    n=${BASH_REMATCH[1]}
    unit=${BASH_REMATCH[2]}
    case $unit in
    bit) echo $((n / 8)) ;;
    kbit) echo $((n * 1000 / 8)) ;;
    mbit) echo $((n * 1000000 / 8)) ;;
    gbit) echo $((n * 1000000000 / 8)) ;;
    esac
}

check_shape() {
    local rate=$1 delay=$2 loss=$3
    [ "$rate" = off ] || rate_bytes "$rate" >/dev/null ||
        die "rate must be <n>bit|kbit|mbit|gbit or off, not '$rate'"
    [ -z "$delay" ] || [[ $delay =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] ||
        die "delay must look like 20ms, not '$delay'"
    [ -z "$loss" ] || [[ $loss =~ ^[0-9]+(\.[0-9]+)?%$ ]] || die "loss must look like 1%, not '$loss'"
}

# shape_dev NS DEV RATE DELAY LOSS: the egress qdiscs of DEV in NS (replacing any).
shape_dev() {
    local ns=$1 dev=$2 rate=$3 delay=$4 loss=$5 parent=root bytes burst
    nsx "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
    if [ -n "$delay" ] || [ -n "$loss" ]; then
        local args=(limit 100000)
        [ -z "$delay" ] || args+=(delay "$delay")
        [ -z "$loss" ] || args+=(loss "$loss")
        nsx "$ns" tc qdisc add dev "$dev" root handle 1: netem "${args[@]}" ||
            die "tc netem failed on $dev in $ns (does the kernel have sch_netem?)"
        parent="parent 1:1"
    fi
    [ "$rate" != off ] || return 0
    bytes=$(rate_bytes "$rate")
    # The bucket holds 10 ms at the rate (at least 16 kB), the queue 50 ms.
    burst=$((bytes / 100))
    [ "$burst" -ge 16000 ] || burst=16000
    # shellcheck disable=SC2086 # parent is one or two words on purpose
    nsx "$ns" tc qdisc add dev "$dev" $parent handle 10: tbf rate "$rate" burst "$burst" \
        latency 50ms || die "tc tbf failed on $dev in $ns"
}

shape_node() {
    local i=$1 rate=$2 delay=$3 loss=$4
    shape_dev "$(node_ns "$i")" eth0 "$rate" "$delay" "$loss"
    shape_dev "$ns_br" "v$i" "$rate" "$delay" "$loss"
}

# link_ns NS IFNAME IP: a veth from the bridge (IFNAME there) to NS (eth0 there, at IP/24).
link_ns() {
    local ns=$1 brend=$2 ip=$3
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns_br" link add "$brend" mtu "$mtu" type veth peer name eth0 netns "$ns" mtu "$mtu"
    ip -n "$ns_br" link set "$brend" master br0 up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
}

make_network() {
    local n=$1 i
    ip netns add "$ns_br"
    ip -n "$ns_br" link set lo up
    ip -n "$ns_br" link add br0 mtu "$mtu" type bridge
    ip -n "$ns_br" link set br0 up
    link_ns "$ns_ctl" vctl "$ctl_ip"
    for i in $(seq "$n"); do
        link_ns "$(node_ns "$i")" "v$i" "$(node_ip "$i")"
        shape_node "$i" "$RATE" "$DELAY" "$LOSS"
    done
}

# --- TLS and configs ---

make_certs() {
    local n=$1 certs=$root/test/support/make-certs.sh i
    [ "$tls" = off ] && return 0
    [ -f "$dir/tls/ca.crt" ] || bash "$certs" ca "$dir/tls" >/dev/null ||
        die "making the cluster's CA failed"
    [ -f "$dir/scheduler/tls/tls.crt" ] ||
        bash "$certs" leaf "$dir/tls" "$dir/scheduler/tls" "IP:$SCHED_IP,URI:dragonfly://scheduler" \
            --cn dfc-scheduler >/dev/null || die "making the scheduler's certificate failed"
    for i in $(seq "$n"); do
        [ -f "$dir/node$i/tls/tls.crt" ] ||
            bash "$certs" leaf "$dir/tls" "$dir/node$i/tls" \
                "IP:$(node_ip "$i"),URI:dragonfly://host/$(node_id "$i")" --cn "$(node_id "$i")" \
                >/dev/null || die "making node $i's certificate failed"
    done
}

tls_files_yaml() {
    local d=$1 pad=$2
    printf '%scaCert: "%s"\n%scert: "%s"\n%skey: "%s"\n' "$pad" "$dir/tls/ca.crt" "$pad" \
        "$d/tls/tls.crt" "$pad" "$d/tls/tls.key"
}

write_scheduler_config() {
    mkdir -p "$dir/scheduler"
    local redis_yaml
    if [ "$SENTINEL" = 1 ]; then
        redis_yaml=$(printf '    addrs: [%s]\n    masterName: "%s"' \
            "$(sed 's/\([^ ]*\)/"\1"/g; s/ /, /g' <<<"$SENTINEL_ADDRS")" "$REDIS_MASTER_NAME")
    else
        redis_yaml=$(printf '    addrs: ["%s"]' "$REDIS_ADDR")
    fi
    cat >"$dir/scheduler/scheduler.yaml" <<EOF
# Written by hack/netns-cluster.sh.
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
    port: 8000
database:
  redis:
$redis_yaml
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

# merge_yaml BASE FRAGMENT: BASE with FRAGMENT's top-level sections merged in (a section both
# have gets the fragment's lines at its end; the others are appended).
merge_yaml() {
    awk -v frag="$2" '
        function flush() {
            if (cur != "" && (cur in body)) {
                printf "%s", body[cur]
                done[cur] = 1
            }
        }
        BEGIN {
            n = split(frag, fl, "\n")
            for (i = 1; i <= n; i++) {
                if (fl[i] ~ /^[A-Za-z_][^ ]*:/) {
                    sec = fl[i]
                    sub(/:.*/, "", sec)
                    order[++ns] = sec
                    head[sec] = fl[i]
                } else if (sec != "" && fl[i] != "") {
                    body[sec] = body[sec] fl[i] "\n"
                }
            }
        }
        /^[A-Za-z_][^ ]*:/ { flush(); cur = $0; sub(/:.*/, "", cur) }
        { print }
        END {
            flush()
            for (i = 1; i <= ns; i++) {
                if (!(order[i] in done)) {
                    print head[order[i]]
                    printf "%s", body[order[i]]
                }
            }
        }' "$1"
}

write_node_config() {
    local i=$1 ip nd
    ip=$(node_ip "$i")
    nd=$dir/node$i
    mkdir -p "$nd/storage" "$nd/run"
    cat >"$nd/dfdaemon.yaml" <<EOF
# Written by hack/netns-cluster.sh: node $i, namespace $(node_ns "$i").
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
    port: $METRICS_PORT
health:
  server:
    ip: "$ip"
    port: $HEALTH_PORT
log:
  level: "$log_level"
EOF
    if [ -n "${NETNS_EXTRA_DAEMON_YAML:-}" ]; then
        merge_yaml "$nd/dfdaemon.yaml" "$NETNS_EXTRA_DAEMON_YAML" >"$nd/dfdaemon.yaml.new"
        mv "$nd/dfdaemon.yaml.new" "$nd/dfdaemon.yaml"
    fi
}

# --- Redis ---

# redis-cli in the control namespace against ip:port ($1), the rest its arguments.
rcli_at() {
    local addr=$1
    shift
    nsx "$ns_ctl" redis-cli -h "${addr%:*}" -p "${addr##*:}" "$@"
}

# The master's ip:port (from the first Sentinel that answers, else REDIS_ADDR).
current_master() {
    local s out
    if [ "$SENTINEL" = 1 ]; then
        for s in $SENTINEL_ADDRS; do
            out=$(rcli_at "$s" SENTINEL get-master-addr-by-name "$REDIS_MASTER_NAME" 2>/dev/null |
                paste -sd: -) || continue
            [[ $out =~ ^[0-9.]+:[0-9]+$ ]] && echo "$out" && return 0
        done
    fi
    echo "$REDIS_ADDR"
}

rcli() { rcli_at "$(current_master)" "$@"; }

start_redis_server() {
    local port=$1 d=$dir/redis/$1
    shift
    if live_pid "$d/redis.pid" ":$port" >/dev/null; then
        return 0
    fi
    mkdir -p "$d"
    spawn "$ns_ctl" "$d/redis.pid" "$d/redis.log" redis-server --bind "$ctl_ip" --port "$port" \
        --save '' --appendonly no --dir "$d" --logfile "$d/redis.log" --daemonize no \
        --protected-mode no --repl-diskless-sync-delay 0 "$@"
    for _ in $(seq 100); do
        [ "$(rcli_at "$ctl_ip:$port" ping 2>/dev/null)" = PONG ] && return 0
        started_alive "$d/redis.pid" || break
        sleep 0.05
    done
    tail_log "$d/redis.log"
    die "redis-server did not start on $ctl_ip:$port"
}

start_sentinel() {
    local port=$1 d=$dir/redis/sentinel$1
    if live_pid "$d/sentinel.pid" ":$port" >/dev/null; then
        return 0
    fi
    mkdir -p "$d"
    [ -f "$d/sentinel.conf" ] || cat >"$d/sentinel.conf" <<EOF
port $port
bind $ctl_ip
daemonize no
protected-mode no
dir $d
logfile $d/sentinel.log
sentinel monitor $REDIS_MASTER_NAME $ctl_ip 6379 2
sentinel down-after-milliseconds $REDIS_MASTER_NAME 1000
sentinel failover-timeout $REDIS_MASTER_NAME 5000
sentinel parallel-syncs $REDIS_MASTER_NAME 1
EOF
    spawn "$ns_ctl" "$d/sentinel.pid" "$d/sentinel.log" redis-sentinel "$d/sentinel.conf"
    for _ in $(seq 100); do
        [ "$(rcli_at "$ctl_ip:$port" ping 2>/dev/null)" = PONG ] && return 0
        started_alive "$d/sentinel.pid" || break
        sleep 0.05
    done
    tail_log "$d/sentinel.log"
    die "redis-sentinel did not start on $ctl_ip:$port"
}

# Waits until every Sentinel names $1 (ip:port) as the master and knows the other server.
wait_sentinels() {
    local want=$1 s ok got n
    for _ in $(seq 300); do
        ok=1
        for s in $SENTINEL_ADDRS; do
            got=$(rcli_at "$s" SENTINEL get-master-addr-by-name "$REDIS_MASTER_NAME" 2>/dev/null |
                paste -sd: -) || got=
            n=$(rcli_at "$s" SENTINEL replicas "$REDIS_MASTER_NAME" 2>/dev/null |
                grep -c '^flags$') || n=0
            if [ "$got" != "$want" ] || [ "$n" -lt 1 ]; then
                ok=0
                break
            fi
        done
        [ $ok -eq 1 ] && return 0
        sleep 0.1
    done
    return 1
}

start_redis() {
    start_redis_server 6379
    [ "$SENTINEL" = 1 ] || return 0
    start_redis_server 6380 --replicaof "$ctl_ip" 6379
    local p
    for p in 26379 26380 26381; do start_sentinel "$p"; done
    wait_sentinels "$(current_master)" || die "the Sentinels did not agree on a master with a replica"
}

# --- scheduler and nodes ---

listening_in() {
    local ns=$1 ip=$2 port=$3 a b c d hex
    IFS=. read -r a b c d <<<"$ip"
    hex=$(printf '%02X%02X%02X%02X:%04X' "$d" "$c" "$b" "$a" "$port")
    # shellcheck disable=SC2016 # an awk program
    nsx "$ns" awk -v h="$hex" -v m="0000000000000000FFFF0000$hex" \
        '$4 == "0A" && ($2 == h || $2 == m) { found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

start_scheduler() {
    local cfg=$dir/scheduler/scheduler.yaml
    if live_pid "$dir/scheduler/scheduler.pid" "$cfg" >/dev/null; then
        return 0
    fi
    spawn "$ns_ctl" "$dir/scheduler/scheduler.pid" "$dir/scheduler/scheduler.log" \
        "$BIN_DIR/scheduler/scheduler" --config "$cfg"
    for _ in $(seq 200); do
        started_alive "$dir/scheduler/scheduler.pid" || break
        listening_in "$ns_ctl" "$SCHED_IP" "$SCHED_PORT" && return 0
        sleep 0.05
    done
    tail_log "$dir/scheduler/scheduler.log"
    die "the scheduler did not start on $SCHED_ADDR (log: $dir/scheduler/scheduler.log)"
}

start_node() {
    local i=$1 nd=$dir/node$1
    if live_pid "$nd/dfdaemon.pid" "$nd/dfdaemon.yaml" >/dev/null; then
        return 0
    fi
    [ -f "$nd/dfdaemon.yaml" ] || write_node_config "$i"
    spawn "$(node_ns "$i")" "$nd/dfdaemon.pid" "$nd/dfdaemon.log" "$BIN_DIR/daemon/dfdaemon" \
        --config "$nd/dfdaemon.yaml"
}

host_updated() {
    local t
    t=$(rcli HGET "$REDIS_PREFIX:persistent-cache-hosts:$(node_id "$1")" updated_at 2>/dev/null) ||
        return 0
    if [ -n "$t" ]; then
        date -d "$t" +%s 2>/dev/null || true
    fi
}

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
            for i in "${pending[@]}"; do tail_log "$dir/node$i/dfdaemon.log" 8; done
            local ids=()
            for i in "${pending[@]}"; do ids+=("$(node_id "$i")"); done
            die "after ${up_timeout}s these nodes have not announced (no key" \
                "$REDIS_PREFIX:persistent-cache-hosts:<host id> updated since start, or no socket):" \
                "${ids[*]}"
        fi
        sleep 0.2
    done
}

# --- teardown ---

# Stops every process of the cluster (nodes first, so they say goodbye), then anything left in
# its namespaces, deletes the namespaces and the dir.
teardown() {
    local i ns pid pids
    if load_env 2>/dev/null; then
        for i in $(seq "$CLUSTER_NODES"); do
            if pid=$(live_pid "$dir/node$i/dfdaemon.pid" "$dir/node$i/dfdaemon.yaml"); then
                kill -TERM "$pid" 2>/dev/null || true
            fi
        done
        for i in $(seq "$CLUSTER_NODES"); do
            end_process "$dir/node$i/dfdaemon.pid" "$dir/node$i/dfdaemon.yaml" TERM 12
        done
        end_process "$dir/scheduler/scheduler.pid" "$dir/scheduler/scheduler.yaml" TERM 12
    fi
    # Whatever still runs in our namespaces (Redis, Sentinels, a half-started process) is ours.
    for ns in $(our_namespaces); do
        pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
        # shellcheck disable=SC2086 # a list of pids
        [ -z "$pids" ] || kill -TERM $pids 2>/dev/null || true
    done
    for _ in $(seq 100); do
        pids=
        for ns in $(our_namespaces); do pids+=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' '); done
        [ -z "${pids// /}" ] && break
        sleep 0.05
    done
    # shellcheck disable=SC2086 # a list of pids
    [ -z "${pids// /}" ] || kill -KILL $pids 2>/dev/null || true
    for ns in $(our_namespaces); do ip netns del "$ns" 2>/dev/null || true; done
    if [ -f "$dir/cluster.env" ] || [ -f "$dir/.netns-cluster" ]; then
        rm -rf "$dir"
    fi
}

on_up_exit() {
    local rc=$?
    [ $rc -ne 0 ] || return 0
    if [ "${CLUSTER_KEEP_ON_FAIL:-0}" = 1 ]; then
        say "up failed; CLUSTER_KEEP_ON_FAIL=1 leaves $dir and the namespaces" \
            "(hack/netns-cluster.sh down removes them)" >&2
        return 0
    fi
    say "up failed; removing what it made" >&2
    teardown
}

# --- commands ---

cmd_up() {
    local n=${1:-} rate=200mbit delay='' loss='' sentinel=0
    shift || true
    if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then
        die "usage: up N [--rate R] [--delay D] [--loss L] [--sentinel] (N = 1..200 nodes)"
    fi
    while [ $# -gt 0 ]; do
        case $1 in
        --rate) rate=${2:?--rate needs a value} && shift 2 ;;
        --delay) delay=${2:?--delay needs a value} && shift 2 ;;
        --loss) loss=${2:?--loss needs a value} && shift 2 ;;
        --sentinel) sentinel=1 && shift ;;
        *) die "unknown option '$1'" ;;
        esac
    done
    check_shape "$rate" "$delay" "$loss"
    check_tools
    local i since
    if load_env; then
        [ "$CLUSTER_NODES" -eq "$n" ] ||
            die "a cluster of $CLUSTER_NODES nodes exists in $dir; run hack/netns-cluster.sh down first"
        [ -n "$(our_namespaces)" ] || die "$dir has a cluster.env but no namespaces; run down first"
    else
        [ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] ||
            die "$dir exists and is not a cluster dir (no cluster.env); set CLUSTER_DIR or remove it"
        [ -z "$(our_namespaces)" ] ||
            die "namespaces of tag $tag exist without $dir/cluster.env: hack/netns-cluster.sh down"
        mkdir -p "$dir"
        : >"$dir/.netns-cluster"
        trap on_up_exit EXIT
        {
            echo "# Written by hack/netns-cluster.sh up $n."
            echo "CLUSTER_NODES=$n"
            echo "CLUSTER_TAG=$tag"
            echo "NS_BR=$ns_br"
            echo "NS_CTL=$ns_ctl"
            echo "CTL_IP=$ctl_ip"
            echo "REDIS_PORT=6379"
            echo "REDIS_ADDR=$ctl_ip:6379"
            echo "REDIS_PREFIX=scheduler:scheduler-clusters:1"
            echo "SENTINEL=$sentinel"
            if [ "$sentinel" = 1 ]; then
                echo "SENTINEL_ADDRS='$ctl_ip:26379 $ctl_ip:26380 $ctl_ip:26381'"
            else
                echo "SENTINEL_ADDRS=''"
            fi
            echo "REDIS_MASTER_NAME=$master_name"
            echo "SCHED_IP=$ctl_ip"
            echo "SCHED_PORT=8002"
            echo "SCHED_ADDR=$ctl_ip:8002"
            echo "UPLOAD_PORT=4000"
            echo "VORTEX_PORT=4005"
            echo "METRICS_PORT=4002"
            echo "HEALTH_PORT=4003"
            echo "RATE=$rate"
            echo "DELAY=$delay"
            echo "LOSS=$loss"
            echo "BIN_DIR=$build"
            echo "CLUSTER_TLS=$tls"
            for i in $(seq "$n"); do
                echo "NODE_IP_$i=$(node_ip "$i")"
                echo "NODE_NS_$i=$(node_ns "$i")"
                echo "NODE_ID_$i=$(node_id "$i")"
                echo "NODE_SOCK_$i=$dir/node$i/run/dfdaemon.sock"
            done
        } >"$dir/cluster.env"
        load_env
        make_network "$n"
        make_certs "$n"
        write_scheduler_config
        for i in $(seq "$n"); do write_node_config "$i"; done
    fi
    since=$(date +%s)
    start_redis
    start_scheduler
    for i in $(seq "$n"); do start_node "$i"; done
    wait_announced "$since" $(seq "$n")
    trap - EXIT
    local shape="rate $RATE"
    [ -z "$DELAY" ] || shape+=", delay $DELAY"
    [ -z "$LOSS" ] || shape+=", loss $LOSS"
    say "up: redis $(current_master)$([ "$SENTINEL" = 0 ] || echo " (Sentinels $SENTINEL_ADDRS)")," \
        "scheduler $SCHED_ADDR, $n nodes on $(node_ip 1)..$(node_ip "$n") ($shape), dir $dir"
}

node_arg() {
    local i=$1
    load_env || die "no cluster in $dir (run hack/netns-cluster.sh up N)"
    if ! [[ $i =~ ^[0-9]+$ ]] || [ "$i" -lt 1 ] || [ "$i" -gt "$CLUSTER_NODES" ]; then
        die "node must be 1..$CLUSTER_NODES, not '$i'"
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
    local what=${1:-} since
    [ -n "$what" ] || die "usage: start I|scheduler"
    check_tools
    if [ "$what" = scheduler ]; then
        load_env || die "no cluster in $dir"
        start_scheduler
        say "scheduler: running on $SCHED_ADDR"
        return 0
    fi
    node_arg "$what"
    since=$(date +%s)
    start_node "$what"
    wait_announced "$since" "$what"
    say "node $what ($(node_ip "$what")): announced"
}

cmd_link() {
    local what=${1:-} state=${2:-} brend
    case $state in up | down) ;; *) die "usage: link I|ctl down|up" ;; esac
    if [ "$what" = ctl ]; then
        load_env || die "no cluster in $dir"
        brend=vctl
    else
        node_arg "$what"
        brend=v$what
    fi
    ip -n "$ns_br" link set "$brend" "$state"
    say "link $what: $state"
}

cmd_shape() {
    local i=${1:-} rate=${2:-} delay=${3:-} loss=${4:-}
    [ -n "$rate" ] || die "usage: shape I RATE [DELAY [LOSS]]"
    node_arg "$i"
    check_shape "$rate" "$delay" "$loss"
    shape_node "$i" "$rate" "$delay" "$loss"
    say "node $i: rate $rate${delay:+, delay $delay}${loss:+, loss $loss}"
}

cmd_exec() {
    local what=${1:-}
    [ $# -ge 2 ] || die "usage: exec I|ctl CMD..."
    shift
    if [ "$what" = ctl ]; then
        load_env || die "no cluster in $dir"
        exec ip netns exec "$ns_ctl" "$@"
    fi
    node_arg "$what"
    exec ip netns exec "$(node_ns "$what")" "$@"
}

cmd_metrics() {
    node_arg "${1:-}"
    nsx "$(node_ns "$1")" curl -sS --max-time 5 "http://$(node_ip "$1"):$METRICS_PORT/metrics"
}

cmd_failover() {
    load_env || die "no cluster in $dir"
    [ "$SENTINEL" = 1 ] || die "the cluster runs without Sentinels (up ... --sentinel)"
    local old new s reply deadline=$(($(date +%s) + 30))
    old=$(current_master)
    s=${SENTINEL_ADDRS%% *}
    while :; do
        reply=$(rcli_at "$s" SENTINEL failover "$REDIS_MASTER_NAME" 2>&1) || true
        [ "$reply" = OK ] && break
        case $reply in
        *NOGOODSLAVE* | *INPROGRESS*) ;;
        *) die "SENTINEL FAILOVER $REDIS_MASTER_NAME: $reply" ;;
        esac
        [ "$(date +%s)" -lt "$deadline" ] || die "SENTINEL FAILOVER kept failing: $reply"
        sleep 0.2
    done
    new=
    while [ "$(date +%s)" -lt "$deadline" ]; do
        new=$(current_master)
        if [ "$new" != "$old" ] &&
            rcli_at "$new" ROLE 2>/dev/null | head -n1 | grep -qx master &&
            wait_sentinels "$new"; then
            break
        fi
        new=
        sleep 0.1
    done
    [ -n "$new" ] || die "no Sentinel named a new master within 30 s (still $old)"
    sed -i "s/^REDIS_ADDR=.*/REDIS_ADDR=$new/; s/^REDIS_PORT=.*/REDIS_PORT=${new##*:}/" \
        "$dir/cluster.env"
    say "failover: master $old -> $new"
}

cmd_status() {
    load_env || {
        say "no cluster in $dir"
        return 1
    }
    local bad=0 pid t i nd f state
    for f in "$dir"/redis/*/redis.pid "$dir"/redis/*/sentinel.pid; do
        [ -f "$f" ] || continue
        local port=${f%/*}
        port=${port##*/}
        port=${port#sentinel}
        if pid=$(live_pid "$f" ":$port"); then
            say "$(basename "$f" .pid)  $ctl_ip:$port  pid $pid"
        else
            say "$(basename "$f" .pid)  $ctl_ip:$port  not running"
            bad=1
        fi
    done
    [ "$SENTINEL" = 0 ] || say "redis master  $(current_master)"
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
        state=down
        ! ip -n "$ns_br" -o link show "v$i" 2>/dev/null | grep -q 'state UP' || state=up
        if pid=$(live_pid "$nd/dfdaemon.pid" "$nd/dfdaemon.yaml"); then
            say "node$i  $(node_ip "$i")  pid $pid  link $state  $seen"
        else
            say "node$i  $(node_ip "$i")  not running  link $state"
            bad=1
        fi
    done
    return $bad
}

cmd_down() {
    if [ ! -f "$dir/cluster.env" ] && [ -e "$dir" ] && [ ! -f "$dir/.netns-cluster" ]; then
        die "$dir is not a cluster dir (no cluster.env); not removing it"
    fi
    if [ ! -e "$dir" ] && [ -z "$(our_namespaces)" ]; then
        say "down: no cluster in $dir"
        return 0
    fi
    teardown
    say "down: removed $dir and the namespaces of tag $tag"
}

case ${1:-} in
up)
    shift
    cmd_up "$@"
    ;;
kill) cmd_signal KILL "${2:-}" ;;
stop) cmd_signal TERM "${2:-}" ;;
start) cmd_start "${2:-}" ;;
link) cmd_link "${2:-}" "${3:-}" ;;
shape)
    shift
    cmd_shape "$@"
    ;;
exec)
    shift
    cmd_exec "$@"
    ;;
redis-cli)
    shift
    load_env || die "no cluster in $dir"
    rcli "$@"
    ;;
metrics) cmd_metrics "${2:-}" ;;
failover) cmd_failover ;;
status) cmd_status ;;
down) cmd_down ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed '/^# shellcheck/d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
