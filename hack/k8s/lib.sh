# shellcheck shell=bash
# Shared by hack/k8s/cluster.sh and hack/k8s/run.sh (sourced, never run): the cache layout, the
# pinned Debian versions and small helpers. docs/k8s-e2e.md describes the layout and why each
# part is where it is.
#
# The cache folder (DFC_E2E_CACHE, default /var/cache/dfc-e2e) holds everything; nothing of the
# cluster lives anywhere else:
#   apt/         a private apt state (sources.list with deb-src, lists, downloaded .debs); the
#                system's apt configuration is never touched
#   src/         the kubernetes source package, unpacked and fixed (vendor/modules.txt, OpenAPI)
#   kube/        kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and a
#                STAMP naming the source version and the build recipe's hash
#   root/        etcd, containerd, runc, CNI plugins, busybox-static unpacked with dpkg-deb -x,
#                and a STAMP naming their versions
#   go/          GOCACHE and GOPATH of the build (warm rebuilds take ~30 s instead of ~4 min)
#   images/      OCI archives made here (pause, busybox) for `ctr images import`
#   run/         one running cluster: certificates, etcd data, containerd and kubelet roots,
#                logs, pid files; removed by `cluster.sh down`

# shellcheck disable=SC2034 # used by the scripts that source this file
e2e_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${DFC_E2E_CACHE:-/var/cache/dfc-e2e}
run=$cache/run

# The Debian source package the cluster is built from (bookworm). A new version here rebuilds
# kube/ on the next `up`. Its orig tarball is upstream v1.20.2 with vendor/.
kube_src_pkg=kubernetes
kube_src_ver=1.20.5+really1.20.2-1.1+deb12u1
# Binary packages unpacked into root/ (whatever bookworm's current version is; root/STAMP
# records which, and `cluster.sh status` prints it).
root_debs=(etcd-server etcd-client containerd runc containernetworking-plugins busybox-static)

# The node's network: a veth pair between two namespaces made by cluster.sh. The host side is
# never configured: "node" holds every address, "wire" is only the veth's other end so the node
# has a real interface with an address (this kernel has no dummy netdev).
node_ip=10.213.0.2
wire_ip=10.213.0.1
pod_cidr=10.214.0.0/24
service_cidr=10.215.0.0/24
node_name=dfc-e2e-node

log() { echo "e2e: $*" >&2; }
die() {
    echo "e2e: error: $*" >&2
    exit 1
}

apt_opts() {
    printf '%s\n' -o "Dir::Etc::SourceList=$cache/apt/sources.list" \
        -o "Dir::Etc::SourceParts=/dev/null" -o "Dir::State::Lists=$cache/apt/lists" \
        -o "Dir::Cache=$cache/apt/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
}

# The private apt state: a sources.list of bookworm (binary and deb-src) and its own lists.
apt_setup() {
    mkdir -p "$cache/apt/lists/partial" "$cache/apt/cache/archives/partial"
    local k=/usr/share/keyrings/debian-archive-keyring.gpg
    cat >"$cache/apt/sources.list" <<EOF
deb [signed-by=$k] http://deb.debian.org/debian bookworm main
deb [signed-by=$k] http://deb.debian.org/debian bookworm-updates main
deb [signed-by=$k] http://deb.debian.org/debian-security bookworm-security main
deb-src [signed-by=$k] http://deb.debian.org/debian bookworm main
deb-src [signed-by=$k] http://deb.debian.org/debian bookworm-updates main
deb-src [signed-by=$k] http://deb.debian.org/debian-security bookworm-security main
EOF
    if [ ! -e "$cache/apt/lists/UPDATED" ] || [ -n "${DFC_E2E_APT_UPDATE:-}" ]; then
        local opts
        mapfile -t opts < <(apt_opts)
        apt-get "${opts[@]}" -qq update
        touch "$cache/apt/lists/UPDATED"
    fi
}

# The kubernetes tools, inside the cluster's namespaces (after `cluster.sh up`).
kubeconfig=$run/pki/admin.kubeconfig
