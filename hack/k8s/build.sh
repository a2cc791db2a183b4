#!/usr/bin/env bash
# Builds (or reuses) everything the one-node cluster runs, in the cache folder (hack/k8s/lib.sh
# has the layout, docs/k8s-e2e.md the why):
#   - kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl from Debian's
#     `kubernetes` source package, with two fixes Go 1.19 needs (vendor/modules.txt order, the
#     generated OpenAPI definitions);
#   - etcd, containerd, runc, the CNI plugins and busybox-static from Debian binary packages,
#     unpacked with dpkg-deb -x (no maintainer script runs, no service starts);
#   - a static pause binary and OCI archives of pause and busybox for `ctr images import`.
# Each part is skipped when its STAMP matches (source version + the recipe's hash), so a warm
# run does no network I/O and no compilation. Called by `cluster.sh up`; runnable alone.
set -euo pipefail
# shellcheck source=hack/k8s/lib.sh
. "$(dirname "$0")/lib.sh"

jobs=${DFC_E2E_JOBS:-2} # the machine is shared: at most 2 parallel compiles
# A part's recipe hash: its function's text (and the awk fix for kubernetes), so editing one
# part of this script rebuilds only that part.
recipe_hash() {
    { declare -f "$@" && cat "$(dirname "$0")/modules-fix.awk"; } | sha256sum | cut -c1-16
}

# --- kubernetes from source ---------------------------------------------------------------

kube_bins=(kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl)

build_kube() {
    # shellcheck disable=SC2155 # recipe_hash cannot fail
    local stamp="$kube_src_pkg $kube_src_ver recipe $(recipe_hash build_kube)"
    if [ "$(cat "$cache/kube/STAMP" 2>/dev/null)" = "$stamp" ]; then
        log "kubernetes $kube_src_ver: cached in $cache/kube"
        return
    fi
    local t0=$SECONDS opts
    apt_setup
    mapfile -t opts < <(apt_opts)
    mkdir -p "$cache/src"
    local dsc="$cache/src/${kube_src_pkg}_${kube_src_ver}.dsc"
    if [ ! -e "$dsc" ]; then
        log "downloading source package $kube_src_pkg=$kube_src_ver"
        (cd "$cache/src" && apt-get "${opts[@]}" -qq source --download-only \
            "$kube_src_pkg=$kube_src_ver")
    fi
    # A fresh tree each time the recipe changes: dpkg-source applies Debian's patches.
    local tree=$cache/src/tree
    rm -rf "$tree"
    log "unpacking $(basename "$dsc")"
    dpkg-source --no-check -x "$dsc" "$tree" >/dev/null

    # Fix 1: Go >= 1.17 reads vendor/modules.txt strictly; a wildcard replace line
    # "# mod => repl" must come before that module's "# mod version => ..." header.
    awk -f "$(dirname "$0")/modules-fix.awk" "$tree/vendor/modules.txt" "$tree/vendor/modules.txt" >"$tree/vendor/modules.txt.new"
    mv "$tree/vendor/modules.txt.new" "$tree/vendor/modules.txt"

    export GOCACHE=$cache/go/cache GOFLAGS=-mod=vendor GOPROXY=off CGO_ENABLED=0 GO111MODULE=on
    export GOPATH=$cache/go/path HOME=$cache/go/home
    mkdir -p "$GOCACHE" "$GOPATH/src/k8s.io" "$HOME"
    ln -sfn "$tree" "$GOPATH/src/k8s.io/kubernetes"

    # Fix 2: kube-apiserver needs pkg/generated/openapi/zz_generated.openapi.go, which upstream
    # generates at build time (Makefile.generated_files, KUBE target): openapi-gen over every
    # package tagged +k8s:openapi-gen=, in GOPATH mode.
    log "building openapi-gen"
    (cd "$tree" && go build -p "$jobs" -o "$cache/go/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen)
    log "generating the OpenAPI definitions"
    local dirs
    # The same package set as upstream's Makefile: the tree without vendor/, with staging/src/
    # named as its vendor/ equivalent, minus code-generator and sample-apiserver.
    dirs=$(cd "$tree" &&
        find . \( -path ./vendor -o -path './_*' -o -path './.*' \) -prune -o \
            -type f -name '*.go' -print0 |
        xargs -0 grep -l --color=never '+k8s:openapi-gen=' |
        sed 's|^\./||; s|^staging/src/|vendor/|; s|/[^/]*$||' |
        grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' |
        LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd,)
    # shellcheck disable=SC1007 # GOFLAGS empty: GOPATH mode takes no -mod=vendor
    (cd "$GOPATH/src/k8s.io/kubernetes" && GO111MODULE=off GOFLAGS= "$cache/go/openapi-gen" \
        --logtostderr -v 0 -i "$dirs" -p k8s.io/kubernetes/pkg/generated/openapi \
        -O zz_generated.openapi -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
        -r "$cache/go/openapi-violations.report" >"$cache/go/openapi-gen.log" 2>&1) ||
        {
            tail -n 30 "$cache/go/openapi-gen.log" >&2
            die "openapi-gen failed (log: $cache/go/openapi-gen.log)"
        }
    [ -s "$tree/pkg/generated/openapi/zz_generated.openapi.go" ] ||
        die "openapi-gen wrote no $tree/pkg/generated/openapi/zz_generated.openapi.go"

    rm -rf "$cache/kube"
    mkdir -p "$cache/kube"
    local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v1.20.2 \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=20 \
-X k8s.io/client-go/pkg/version.gitVersion=v1.20.2"
    local b
    for b in "${kube_bins[@]}"; do
        log "building $b"
        (cd "$tree" && go build -p "$jobs" -trimpath -ldflags "$ldflags" -o "$cache/kube/$b" "./cmd/$b")
    done
    echo "$stamp" >"$cache/kube/STAMP"
    log "kubernetes built in $((SECONDS - t0)) s"
}

# --- Debian binary packages -----------------------------------------------------------------

unpack_debs() {
    local stamp_file=$cache/root/STAMP
    if [ -e "$stamp_file" ] && [ "$(sed -n 1p "$stamp_file")" = "recipe $(recipe_hash unpack_debs)" ]; then
        log "binary packages: cached in $cache/root"
        return
    fi
    local opts
    apt_setup
    mapfile -t opts < <(apt_opts)
    rm -rf "$cache/root" "$cache/debs"
    mkdir -p "$cache/root" "$cache/debs"
    (cd "$cache/debs" && apt-get "${opts[@]}" -qq download "${root_debs[@]}")
    local d
    {
        echo "recipe $(recipe_hash unpack_debs)"
        for d in "$cache"/debs/*.deb; do
            dpkg-deb -x "$d" "$cache/root"
            # shellcheck disable=SC2016 # dpkg-deb's own ${field} syntax
            dpkg-deb -W --showformat='${Package} ${Version}\n' "$d"
        done
    } >"$stamp_file.new"
    mv "$stamp_file.new" "$stamp_file"
    log "binary packages unpacked: $(tail -n +2 "$stamp_file" | paste -sd, | sed 's/,/, /g')"
}

# --- images without a registry --------------------------------------------------------------

# An OCI image archive (index.json, oci-layout, blobs) from a directory tree, for
# `ctr -n k8s.io images import`. $1 tree, $2 image name, $3 output archive, $4.. entrypoint.
oci_archive() {
    local tree=$1 name=$2 out=$3
    shift 3
    local work
    work=$(mktemp -d "$cache/images/.work.XXXXXX")
    mkdir -p "$work/blobs/sha256"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tree" -cf "$work/layer.tar" .
    local diff_id layer_digest layer_size
    diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
    gzip -n -c "$work/layer.tar" >"$work/layer.tar.gz"
    layer_digest=$(sha256sum "$work/layer.tar.gz" | cut -d' ' -f1)
    layer_size=$(stat -c %s "$work/layer.tar.gz")
    mv "$work/layer.tar.gz" "$work/blobs/sha256/$layer_digest"
    rm "$work/layer.tar"
    local entry
    entry=$(printf '%s\n' "$@" | jq -R . | jq -sc .)
    jq -nc --argjson e "$entry" --arg d "sha256:$diff_id" \
        '{architecture:"amd64",os:"linux",config:{Entrypoint:$e,Env:["PATH=/usr/bin:/bin:/usr/sbin:/sbin"]},rootfs:{type:"layers",diff_ids:[$d]}}' \
        >"$work/config.json"
    local cfg_digest cfg_size
    cfg_digest=$(sha256sum "$work/config.json" | cut -d' ' -f1)
    cfg_size=$(stat -c %s "$work/config.json")
    mv "$work/config.json" "$work/blobs/sha256/$cfg_digest"
    jq -nc --arg c "sha256:$cfg_digest" --argjson cs "$cfg_size" --arg l "sha256:$layer_digest" --argjson ls "$layer_size" \
        '{schemaVersion:2,mediaType:"application/vnd.oci.image.manifest.v1+json",config:{mediaType:"application/vnd.oci.image.config.v1+json",digest:$c,size:$cs},layers:[{mediaType:"application/vnd.oci.image.layer.v1.tar+gzip",digest:$l,size:$ls}]}' \
        >"$work/manifest.json"
    local man_digest man_size
    man_digest=$(sha256sum "$work/manifest.json" | cut -d' ' -f1)
    man_size=$(stat -c %s "$work/manifest.json")
    mv "$work/manifest.json" "$work/blobs/sha256/$man_digest"
    jq -nc --arg m "sha256:$man_digest" --argjson ms "$man_size" --arg n "$name" \
        '{schemaVersion:2,manifests:[{mediaType:"application/vnd.oci.image.manifest.v1+json",digest:$m,size:$ms,annotations:{"io.containerd.image.name":$n,"org.opencontainers.image.ref.name":($n|split(":")|last)}}]}' \
        >"$work/index.json"
    echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci-layout"
    tar -C "$work" -cf "$out.new" oci-layout index.json blobs
    mv "$out.new" "$out"
    rm -rf "$work"
}

build_images() {
    # shellcheck disable=SC2155 # neither can fail
    local stamp="recipe $(recipe_hash build_images oci_archive) $(sed -n '/busybox-static/p' "$cache/root/STAMP")"
    if [ "$(cat "$cache/images/STAMP" 2>/dev/null)" = "$stamp" ]; then
        log "pause and busybox images: cached in $cache/images"
        return
    fi
    rm -rf "$cache/images"
    mkdir -p "$cache/images"
    local t
    t=$(mktemp -d "$cache/images/.tree.XXXXXX")
    # pause: sleeps until a signal, reaps nothing (the pod's pid namespace is not shared here).
    mkdir -p "$t/pause"
    cat >"$t/pause.c" <<'EOF'
#include <signal.h>
#include <unistd.h>
static void done(int sig) { (void)sig; _exit(0); }
int main(void) {
    signal(SIGTERM, done);
    signal(SIGINT, done);
    for (;;) pause();
}
EOF
    gcc -static -O2 -o "$t/pause/pause" "$t/pause.c"
    oci_archive "$t/pause" localhost/dfc-e2e/pause:1 "$cache/images/pause.tar" /pause
    # busybox: busybox-static with its applets linked in /bin.
    mkdir -p "$t/busybox/bin" "$t/busybox/tmp" "$t/busybox/etc"
    cp "$cache/root/bin/busybox" "$t/busybox/bin/busybox"
    local a
    for a in $("$t/busybox/bin/busybox" --list); do
        [ "$a" = busybox ] || ln -s busybox "$t/busybox/bin/$a"
    done
    chmod 1777 "$t/busybox/tmp"
    oci_archive "$t/busybox" localhost/dfc-e2e/busybox:1 "$cache/images/busybox.tar" /bin/sh
    rm -rf "$t"
    echo "$stamp" >"$cache/images/STAMP"
    log "pause and busybox images built"
}

# Exit 0 when every part is cached for the current recipe (nothing to download or build).
is_warm() {
    [ "$(cat "$cache/kube/STAMP" 2>/dev/null)" = \
        "$kube_src_pkg $kube_src_ver recipe $(recipe_hash build_kube)" ] &&
        [ "$(sed -n 1p "$cache/root/STAMP" 2>/dev/null)" = "recipe $(recipe_hash unpack_debs)" ] &&
        [ "$(cat "$cache/images/STAMP" 2>/dev/null)" = \
            "recipe $(recipe_hash build_images oci_archive) $(sed -n '/busybox-static/p' "$cache/root/STAMP")" ]
}

case ${1:-all} in
warm) is_warm ;;
kube) build_kube ;;
debs) unpack_debs ;;
images) unpack_debs && build_images ;;
all)
    build_kube
    unpack_debs
    build_images
    ;;
*) die "usage: $0 [all|kube|debs|images|warm]" ;;
esac
