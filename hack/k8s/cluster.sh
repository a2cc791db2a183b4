#!/usr/bin/env bash
# A one-node Kubernetes 1.20 cluster on this machine, built only from Debian packages
# (hack/k8s/build.sh) and run in its own mount, network and cgroup namespaces, so that it
# leaves nothing outside its cache folder and those namespaces. docs/k8s-e2e.md has the design,
# the blockers and their fixes, and the timings.
#
#   hack/k8s/cluster.sh up          build or reuse the binaries, start etcd, containerd,
#                                   kube-apiserver, kube-controller-manager, kube-scheduler and
#                                   kubelet; returns once the node is Ready
#   hack/k8s/cluster.sh down        stop everything, remove the cgroups and the run folder, then
#                                   check that no process, mount, cgroup or namespace is left
#   hack/k8s/cluster.sh status      the processes, the node and the pods
#   hack/k8s/cluster.sh kubectl ARGS...
#                                   the cluster's own kubectl, inside the namespaces
#   hack/k8s/cluster.sh exec CMD... any command inside the namespaces (e.g. ctr, findmnt)
#
# Namespaces: a holder process (pid in run/holder.pid) owns a mount, a network and a cgroup
# namespace; every daemon joins them with nsenter. In the mount namespace /var/lib, /var/log
# are bound to run/var/{lib,log} and /run, /tmp are fresh tmpfs mounts, so kubelet's hard-coded
# paths (/var/lib/kubelet, /var/lib/kubelet/device-plugins), libcni's /var/lib/cni, containerd's
# /run/containerd and the pods' /var/log/pods stay inside the folder. The network namespace has
# lo and one veth end with the node's address; the veth's other end is in a second namespace
# (run/wire.pid) that holds nothing else. The cgroup namespace's root is a cgroup named dfc-e2e
# made under this shell's own cgroup in every hierarchy, so kubelet's kubepods cgroups are
# inside it and `down` can find every process of the cluster by its cgroup.
#
# Environment: DFC_E2E_CACHE (default /var/cache/dfc-e2e), DFC_E2E_UP_TIMEOUT (seconds `up`
# waits for the node, default 120).
set -euo pipefail
# shellcheck source=hack/k8s/lib.sh
. "$(dirname "$0")/lib.sh"

self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
up_timeout=${DFC_E2E_UP_TIMEOUT:-120}
kube=$cache/kube
rootfs=$cache/root
cg_name=dfc-e2e

# --- cgroups --------------------------------------------------------------------------------

# One line per hierarchy: "<mount point> <mount options for a fresh mount> <our cgroup dir>",
# computed at `up` from this shell's own cgroups and kept in run/cgroups for `down`.
cg_plan() {
    local mp fstype opts ctl path
    while read -r mp fstype opts; do
        if [ "$fstype" = cgroup2 ]; then
            ctl=""
        else
            # the options name the controllers (cpu, memory, name=systemd, ...)
            ctl=$(tr ',' '\n' <<<"$opts" | grep -v -x -e rw -e ro -e relatime -e noexec -e nosuid \
                -e nodev -e clone_children -e 'release_agent=.*' | paste -sd,)
        fi
        path=$(awk -F: -v c="$ctl" '$2 == c { sub(/^[^:]*:[^:]*:/, ""); print; exit }' /proc/self/cgroup)
        [ -n "$path" ] || continue
        [ "$path" = / ] && path=""
        echo "$mp ${ctl:-cgroup2} $mp$path/$cg_name"
    done < <(awk '$0 ~ / - cgroup2? / { n = split($0, f, " - "); split(f[2], g, " "); split(f[1], h, " ");
        print h[5], g[1], g[3] }' /proc/self/mountinfo)
}

cg_create() {
    local mp ctl dir
    while read -r mp ctl dir; do
        mkdir -p "$dir"
        if [ "$ctl" = cpuset ]; then
            cat "$(dirname "$dir")/cpuset.cpus" >"$dir/cpuset.cpus"
            cat "$(dirname "$dir")/cpuset.mems" >"$dir/cpuset.mems"
        fi
    done <"$run/cgroups"
}

# Moves the calling (sub)shell into the cluster's cgroup in every hierarchy.
cg_enter() {
    local mp ctl dir
    while read -r mp ctl dir; do
        echo "$BASHPID" >"$dir/cgroup.procs"
    done <"$run/cgroups"
}

# Every pid in the cluster's cgroups (any depth).
cg_pids() {
    [ -e "$run/cgroups" ] || return 0
    local mp ctl dir
    while read -r mp ctl dir; do
        [ -d "$dir" ] && find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null
    done <"$run/cgroups" | sort -un
}

# --- the namespaces -------------------------------------------------------------------------

holder_pid() { cat "$run/holder.pid" 2>/dev/null || true; }
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# Runs inside the new namespaces, as the holder (called via `unshare ... cluster.sh __holder`).
holder_main() {
    local wire=$1
    # /sys for this network namespace, and /sys/fs/cgroup showing the cgroup namespace's root
    mount -t sysfs sysfs /sys
    mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
    local mp ctl dir
    while read -r mp ctl dir; do
        mkdir -p "$mp"
        if [ "$ctl" = cgroup2 ]; then
            mount -t cgroup2 cgroup2 "$mp"
        else
            mount -t cgroup -o "$ctl" cgroup "$mp"
        fi
    done <"$run/cgroups"
    mount --bind "$run/var/lib" /var/lib
    mount --bind "$run/var/log" /var/log
    mount -t tmpfs -o mode=755 run /run
    mount -t tmpfs -o mode=1777 tmp /tmp
    # Shared inside this namespace only (it began private): containers' Bidirectional mounts
    # (the CSI plugin's /var/lib/kubelet) propagate back to kubelet's view.
    mount --make-rshared /

    ip link set lo up
    ip link add eth0 type veth peer name wire0 netns "$wire"
    ip addr add "$node_ip/24" dev eth0
    ip link set eth0 up
    nsenter -t "$wire" -n ip addr add "$wire_ip/24" dev wire0
    nsenter -t "$wire" -n ip link set wire0 up
    nsenter -t "$wire" -n ip link set lo up
    ip route add default via "$wire_ip"
    touch "$run/holder.ready"
    exec sleep infinity
}

# Runs "$@" inside the namespaces and the cluster's cgroups, in the foreground.
in_ns() {
    local h
    h=$(holder_pid)
    alive "$h" || die "the cluster is not up (no holder process)"
    (
        cg_enter
        cd "$run"
        exec nsenter -t "$h" -m -n -C -- env HOME="$run/home" TMPDIR=/tmp \
            PATH="$kube:$rootfs/usr/bin:$rootfs/usr/sbin:$rootfs/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
            "$@"
    )
}

# Starts daemon $1 (log run/logs/$1.log, pid run/pids/$1) running "${@:2}" in the namespaces.
start_daemon() {
    local name=$1
    shift
    (
        cg_enter
        cd "$run"
        exec nsenter -t "$(holder_pid)" -m -n -C -- env HOME="$run/home" TMPDIR=/tmp \
            PATH="$kube:$rootfs/usr/bin:$rootfs/usr/sbin:$rootfs/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
            "$@" </dev/null >"$run/logs/$name.log" 2>&1
    ) &
    echo $! >"$run/pids/$name"
}

kctl() { in_ns kubectl --kubeconfig "$kubeconfig" --cache-dir "$run/home/kube-cache" "$@"; }

# Waits up to $1 seconds for "${@:2}" to succeed.
wait_for() {
    local secs=$1 i
    shift
    for ((i = 0; i < secs * 4; i++)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.25
    done
    return 1
}

# --- configuration --------------------------------------------------------------------------

# A client certificate signed by the cluster's CA: $1 file stem, $2 CN, $3 O (may be empty).
mkcert() {
    local stem=$1 cn=$2 o=$3 subj
    subj="/CN=$cn"
    [ -n "$o" ] && subj="/O=$o$subj"
    openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$stem.key" -subj "$subj" \
        -out "$pki/$stem.csr" 2>/dev/null
    openssl x509 -req -in "$pki/$stem.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 2 -out "$pki/$stem.crt" ${4:+-extfile "$4"} 2>/dev/null
    rm -f "$pki/$stem.csr"
}

mkkubeconfig() {
    local stem=$1
    cat >"$pki/$stem.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dfc-e2e
  cluster:
    certificate-authority: $pki/ca.crt
    server: https://127.0.0.1:6443
users:
- name: $stem
  user:
    client-certificate: $pki/$stem.crt
    client-key: $pki/$stem.key
contexts:
- name: dfc-e2e
  context: {cluster: dfc-e2e, user: $stem}
current-context: dfc-e2e
EOF
}

write_config() {
    pki=$run/pki
    mkdir -p "$pki"
    openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -subj "/CN=dfc-e2e-ca" \
        -days 2 -out "$pki/ca.crt" 2>/dev/null
    cat >"$pki/apiserver.ext" <<EOF
subjectAltName = IP:127.0.0.1, IP:$node_ip, IP:${service_cidr%.0/24}.1, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage = serverAuth
EOF
    mkcert apiserver kube-apiserver "" "$pki/apiserver.ext"
    mkcert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
    mkcert admin dfc-e2e-admin system:masters
    mkcert controller-manager system:kube-controller-manager ""
    mkcert scheduler system:kube-scheduler ""
    mkcert kubelet "system:node:$node_name" system:nodes
    openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
    local k
    for k in admin controller-manager scheduler kubelet; do
        mkkubeconfig "$k"
    done

    mkdir -p "$run/cni/net.d" "$run/containerd"
    cat >"$run/cni/net.d/10-dfc-e2e.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "dfc-e2e",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$pod_cidr" }]],
                "routes": [{ "dst": "0.0.0.0/0" }], "dataDir": "$run/cni/ipam" }
    }
  ]
}
EOF
    cat >"$run/containerd/config.toml" <<EOF
version = 2
root = "$run/containerd/root"
state = "$run/containerd/state"
plugin_dir = ""
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$run/containerd/containerd.sock"
[ttrpc]
  address = "$run/containerd/containerd.ttrpc.sock"
[debug]
  address = "$run/containerd/debug.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$run/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/dfc-e2e/pause:1"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$rootfs/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$rootfs/usr/lib/cni"
    conf_dir = "$run/cni/net.d"
EOF
    mkdir -p "$run/kubelet"
    cat >"$run/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
makeIPTablesUtilChains: false
volumePluginDir: $run/kubelet/volume-plugins
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: []
resolvConf: /etc/resolv.conf
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
}

# --- up / down / status ---------------------------------------------------------------------

cmd_up() {
    local t0=$SECONDS h
    h=$(holder_pid)
    if alive "$h"; then
        log "already up (holder $h); \`$0 down\` first to restart"
        return 0
    fi
    [ "$(id -u)" -eq 0 ] || die "needs root (namespaces, mounts, cgroups)"
    bash "$self_dir/build.sh" all
    local tb=$SECONDS
    [ ! -e "$run" ] || die "$run exists without a running cluster: run \`$0 down\` first"
    mkdir -p "$run"/{logs,pids,home,var/lib,var/log}
    cg_plan >"$run/cgroups"
    [ -s "$run/cgroups" ] || die "found no cgroup hierarchy in /proc/self/mountinfo"
    cg_create
    write_config

    (
        cg_enter
        exec unshare -n -- sleep infinity
    ) </dev/null >/dev/null 2>&1 &
    echo $! >"$run/wire.pid"
    wait_for 5 test -e "/proc/$(cat "$run/wire.pid")/ns/net" || die "no wire namespace"
    sleep 0.2 # the subshell has exec'd unshare, which has made the namespace
    (
        cg_enter
        exec unshare -m -n -C --propagation private -- "$self" __holder "$(cat "$run/wire.pid")"
    ) </dev/null >"$run/logs/holder.log" 2>&1 &
    echo $! >"$run/holder.pid"
    wait_for 10 test -e "$run/holder.ready" || {
        cat "$run/logs/holder.log" >&2
        die "the namespace holder did not start"
    }
    h=$(holder_pid)
    local n
    for n in mnt net cgroup; do
        echo "$n $(stat -L -c %i "/proc/$h/ns/$n")"
    done >"$run/ns.ids"
    echo "net $(stat -L -c %i "/proc/$(cat "$run/wire.pid")/ns/net")" >>"$run/ns.ids"

    local pki=$run/pki
    start_daemon etcd etcd --name dfc-e2e --data-dir "$run/etcd" \
        --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
        --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
        --initial-cluster dfc-e2e=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381
    start_daemon containerd containerd --config "$run/containerd/config.toml"
    wait_for 20 in_ns etcdctl --endpoints http://127.0.0.1:2379 endpoint health ||
        die "etcd did not become healthy (log: $run/logs/etcd.log)"
    start_daemon kube-apiserver kube-apiserver --etcd-servers http://127.0.0.1:2379 \
        --bind-address 127.0.0.1 --advertise-address "$node_ip" --secure-port 6443 \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --client-ca-file "$pki/ca.crt" --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
        --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-cluster-ip-range "$service_cidr" --authorization-mode Node,RBAC \
        --enable-admission-plugins NodeRestriction --allow-privileged=true \
        --kubelet-preferred-address-types InternalIP
    wait_for 60 kctl get --raw /readyz ||
        die "kube-apiserver did not become ready (log: $run/logs/kube-apiserver.log)"
    log "kube-apiserver ready after $((SECONDS - tb)) s"
    start_daemon kube-controller-manager kube-controller-manager \
        --kubeconfig "$pki/controller-manager.kubeconfig" --leader-elect=false --port 0 \
        --bind-address 127.0.0.1 --service-account-private-key-file "$pki/sa.key" \
        --root-ca-file "$pki/ca.crt" --cluster-signing-cert-file "$pki/ca.crt" \
        --cluster-signing-key-file "$pki/ca.key" --use-service-account-credentials=true \
        --flex-volume-plugin-dir "$run/kubelet/volume-plugins" --node-monitor-grace-period 20s
    start_daemon kube-scheduler kube-scheduler --kubeconfig "$pki/scheduler.kubeconfig" \
        --leader-elect=false --port 0 --bind-address 127.0.0.1
    wait_for 20 in_ns ctr --address "$run/containerd/containerd.sock" version ||
        die "containerd did not start (log: $run/logs/containerd.log)"
    local img
    for img in pause busybox; do
        in_ns ctr --address "$run/containerd/containerd.sock" -n k8s.io images import \
            --no-unpack=false "$cache/images/$img.tar" >/dev/null
    done
    start_daemon kubelet kubelet --config "$run/kubelet/config.yaml" \
        --kubeconfig "$pki/kubelet.kubeconfig" --container-runtime remote \
        --container-runtime-endpoint "unix://$run/containerd/containerd.sock" \
        --hostname-override "$node_name" --node-ip "$node_ip" --root-dir /var/lib/kubelet \
        --cert-dir "$run/kubelet/pki"
    wait_for "$up_timeout" kctl wait --for=condition=Ready --timeout 2s "node/$node_name" || {
        tail -n 20 "$run/logs/kubelet.log" >&2
        die "the node did not become Ready in $up_timeout s (log: $run/logs/kubelet.log)"
    }
    log "node $node_name Ready: cluster start $((SECONDS - tb)) s, total $((SECONDS - t0)) s"
}

# The checks `down` runs (also `cluster.sh check`): non-zero when anything of the cluster is
# left. Every line printed says what was checked.
cmd_check() {
    local bad=0 left
    # processes: any task still in the cluster's cgroups, or any process in its namespaces
    left=$(cg_pids | paste -sd' ')
    if [ -n "$left" ]; then
        echo "check: FAIL processes still in the cluster's cgroups: $left"
        bad=1
    else
        echo "check: ok   no process in the cluster's cgroups"
    fi
    if [ -e "$run/ns.ids" ]; then
        local kind ino p hits=""
        while read -r kind ino; do
            for p in /proc/[0-9]*; do
                [ "$(stat -L -c %i "$p/ns/$kind" 2>/dev/null)" = "$ino" ] && hits+=" ${p#/proc/}($kind)"
            done
        done <"$run/ns.ids"
        if [ -n "$hits" ]; then
            echo "check: FAIL processes in the cluster's namespaces:$hits"
            bad=1
        else
            echo "check: ok   no process in the cluster's mount, network or cgroup namespaces ($(paste -sd' ' "$run/ns.ids" | tr '\n' ' '))"
        fi
    fi
    # mounts: none on this side refers to the cache folder or a CSI volume
    left=$(grep -F -e "$cache" -e 'kubernetes.io~csi' /proc/self/mountinfo || true)
    if [ -n "$left" ]; then
        echo "check: FAIL mounts left: $left"
        bad=1
    else
        echo "check: ok   no mount of $cache or of a kubernetes.io~csi volume in /proc/self/mountinfo"
    fi
    # network namespaces: none is left pinned by a bind mount, and no veth of ours is here
    if grep -q -e ' wire0[@:]' -e ' cni0:' <<<"$(ip -o link show 2>/dev/null)"; then
        echo "check: FAIL a veth or bridge of the cluster is in this network namespace"
        bad=1
    else
        echo "check: ok   no wire0/cni0 link here; the namespaces had no other reference"
    fi
    # cgroups: the dfc-e2e cgroup is gone from every hierarchy
    if [ -e "$run/cgroups" ]; then
        local mp ctl dir gone=1
        while read -r mp ctl dir; do
            if [ -d "$dir" ]; then
                echo "check: FAIL cgroup left: $dir"
                gone=0
                bad=1
            fi
        done <"$run/cgroups"
        [ $gone -eq 1 ] && echo "check: ok   no $cg_name cgroup in any of $(wc -l <"$run/cgroups") hierarchies"
    fi
    return $bad
}

cmd_down() {
    local t0=$SECONDS pids i
    if [ ! -e "$run" ]; then
        log "not up (no $run)"
        return 0
    fi
    # kubelet first so it does not restart containers while they stop, then everything else
    if [ -e "$run/pids/kubelet" ]; then
        kill "$(cat "$run/pids/kubelet")" 2>/dev/null || true
    fi
    for i in 1 2 3; do
        pids=$(cg_pids)
        [ -n "$pids" ] || break
        # shellcheck disable=SC2086 # a list of pids
        kill -TERM $pids 2>/dev/null || true
        wait_for 10 test -z "$(cg_pids)" && break
    done
    for i in $(seq 1 20); do
        pids=$(cg_pids)
        [ -n "$pids" ] || break
        # shellcheck disable=SC2086 # a list of pids
        kill -KILL $pids 2>/dev/null || true
        sleep 0.25
    done
    # the cgroups, deepest first (kubelet's kubepods tree is inside ours)
    if [ -e "$run/cgroups" ]; then
        local mp ctl dir
        while read -r mp ctl dir; do
            for i in $(seq 1 20); do
                [ -d "$dir" ] || break
                find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || sleep 0.25
            done
        done <"$run/cgroups"
    fi
    local rc=0
    cmd_check || rc=$?
    if [ $rc -eq 0 ]; then
        rm -rf "$cache/logs.last"
        mv "$run/logs" "$cache/logs.last"
        rm -rf "$run"
        log "down in $((SECONDS - t0)) s (logs kept in $cache/logs.last)"
    else
        die "down left something behind (above); $run kept"
    fi
}

cmd_status() {
    local h n p
    h=$(holder_pid)
    if ! alive "$h"; then
        echo "cluster: down"
        return 0
    fi
    echo "cluster: up (holder $h, cache $cache)"
    sed 's/^/  /' "$cache/kube/STAMP" "$cache/root/STAMP"
    for p in "$run"/pids/*; do
        n=$(basename "$p")
        if alive "$(cat "$p")"; then
            echo "  $n: running (pid $(cat "$p"))"
        else
            echo "  $n: NOT running (log: $run/logs/$n.log)"
        fi
    done
    kctl get nodes -o wide || true
    kctl get pods -A -o wide || true
}

self_dir=$(dirname "$self")
case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
check) cmd_check ;;
kubectl)
    shift
    kctl "$@"
    ;;
exec)
    shift
    in_ns "$@"
    ;;
__holder) holder_main "$2" ;;
*) die "usage: $0 up|down|status|check|kubectl ARGS|exec CMD" ;;
esac
