#!/usr/bin/env bash
# Builds the project's container image, localhost/dragonfly-csi:<version>, with podman from
# hack/image/Containerfile (one image: dfdaemon, dfcache, csi-plugin, scheduler), without a
# registry: the base of both stages is localhost/dfc-debian:bookworm, a Debian 12 root that
# debootstrap (--variant=minbase) makes from Debian packages, trimmed like debian:*-slim (no docs,
# man pages or locales) and imported with `podman import`. Needs root (debootstrap, rootful podman).
#
#   bash hack/image/build.sh           build (the base only when it is missing)
#   bash hack/image/build.sh --save    also write build/image/dragonfly-csi.tar (docker-archive, for
#                                      `ctr -n k8s.io images import`)
# Knobs (environment):
#   BASE_IMAGE=REF         base of both stages (e.g. docker.io/library/debian:bookworm-slim); when
#                          set, no local base is made
#   DFC_CACHE=DIR          cache dir (default ~/.cache/dfc); the base root's tarball is
#                          DIR/image/debian-bookworm-minbase.tar
#   DFC_IMAGE_REBUILD_BASE=1  debootstrap the base again
#   DFC_IMAGE_NO_CACHE=1   build without podman's layer cache (a cold build)
#   DFC_MIRROR, DFC_SECURITY_MIRROR   Debian mirrors (default deb.debian.org)
#   DFC_OCI_RUNTIME=NAME   podman's OCI runtime (default runc when installed; see lib.sh)
# The mirror is reached over the host's network (podman build --network host); the host's apt
# Acquire settings (proxy, date checks) go into the base as /etc/apt/apt.conf.d/90dfc-host-access,
# which the run stage deletes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=hack/image/lib.sh
. "$here/lib.sh"

say() { printf 'image: %s\n' "$*"; }
die() {
    say "$*" >&2
    exit 1
}
now() { date +%s; }

save=0
for a in "$@"; do
    case "$a" in
    --save) save=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown argument '$a' (--save, --help)" ;;
    esac
done

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap and rootful podman)"
command -v podman >/dev/null || die "podman is missing (bash hack/install-deps.sh --image)"

suite=bookworm
local_base=localhost/dfc-debian:$suite
base_image=${BASE_IMAGE:-$local_base}
cache=${DFC_CACHE:-$HOME/.cache/dfc}/image
mirror=${DFC_MIRROR:-http://deb.debian.org/debian}
security=${DFC_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
t_start=$(now)

# make_base_tar TAR: debootstraps a minimal bookworm root and tars it to TAR.
make_base_tar() {
    local tar=$1 root
    command -v debootstrap >/dev/null || die "debootstrap is missing (bash hack/install-deps.sh --image)"
    mkdir -p "$cache"
    root=$(mktemp -d "$cache/root.XXXXXX")
    # shellcheck disable=SC2064 # expand now: $root is local
    trap "rm -rf --one-file-system '$root'" EXIT
    say "base: debootstrap --variant=minbase $suite from $mirror (log $cache/debootstrap.log) ..."
    if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1; then
        tail -20 "$cache/debootstrap.log" >&2
        die "debootstrap failed (log: $cache/debootstrap.log)"
    fi
    chmod 0755 "$root"
    {
        echo "deb $mirror $suite main"
        echo "deb $mirror $suite-updates main"
        echo "deb $security $suite-security main"
    } >"$root/etc/apt/sources.list"
    # How this host reaches the mirror (not what the image installs): proxy and date checks.
    local k v
    for k in Acquire::http::Proxy Acquire::https::Proxy Acquire::Check-Valid-Until Acquire::Check-Date; do
        v=$(apt-config dump "$k" 2>/dev/null | sed -n "s/^$k \"\(.*\)\";\$/\1/p" | head -1)
        if [ -n "$v" ]; then printf '%s "%s";\n' "$k" "$v"; fi
    done >"$root/etc/apt/apt.conf.d/90dfc-host-access"
    # Trimmed as debian:*-slim is: dpkg leaves out docs (not copyrights), man pages and locales.
    cat >"$root/etc/dpkg/dpkg.cfg.d/90dfc-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
CFG
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$root/usr/share/locale" -mindepth 1 -not -name locale.alias -not -type d -delete
    rm -rf "$root/usr/share/man"/* "$root/usr/share/info"/* "$root/usr/share/lintian"/*
    rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/* "$root/var/log"/*.log \
        "$root/var/cache/apt"/*.bin "$root/debootstrap"
    : >"$root/etc/resolv.conf" # podman provides it at run time
    tar -C "$root" --numeric-owner -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    rm -rf --one-file-system "$root"
    trap - EXIT
}

# 1. The base image (only the local one).
t0=$(now)
if [ "$base_image" = "$local_base" ]; then
    tar=$cache/debian-$suite-minbase.tar
    if [ "${DFC_IMAGE_REBUILD_BASE:-0}" = 1 ] || [ ! -f "$tar" ]; then
        make_base_tar "$tar"
        podman rmi -f "$local_base" >/dev/null 2>&1 || true
    fi
    if ! podman image exists "$local_base"; then
        say "base: podman import $tar as $local_base"
        podman import --change 'CMD ["/bin/bash"]' "$tar" "$local_base" >/dev/null
    else
        say "base: $local_base (present)"
    fi
else
    say "base: $base_image (BASE_IMAGE)"
fi
t_base=$(($(now) - t0))

# 2. The image. Version: the CMake project version, the commit, and -dirty for uncommitted edits.
version=$(sed -n 's/^project([^ ]* VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
[ -n "$version" ] || die "no project VERSION in $repo/CMakeLists.txt"
revision=unknown
source_url=
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    revision=$(git -C "$repo" rev-parse HEAD)
    version=$version-g$(git -C "$repo" rev-parse --short=7 HEAD)
    if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
        version=$version-dirty
        revision=$revision-dirty
    fi
    source_url=$(git -C "$repo" remote get-url origin 2>/dev/null || true)
fi
image=localhost/dragonfly-csi:$version

build_args=(
    --file "$here/Containerfile" --ignorefile "$here/containerignore" --network host
    --build-arg "BASE_IMAGE=$base_image" --build-arg "VERSION=$version"
    --build-arg "REVISION=$revision" --build-arg "SOURCE=$source_url"
    --build-arg "CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    --tag "$image" --tag localhost/dragonfly-csi:latest
)
if [ "${DFC_IMAGE_NO_CACHE:-0}" = 1 ]; then build_args+=(--no-cache); fi
mapfile -t limits < <(dfc_podman_limits)
say "building $image (runtime ${dfc_runtime:-podman default}) ..."
t0=$(now)
dfc_podman build "${limits[@]}" "${build_args[@]}" "$repo"
t_build=$(($(now) - t0))

size=$(podman image inspect --format '{{.Size}}' "$image")
say "built $image: $((size / 1024 / 1024)) MiB ($size bytes); base ${t_base} s, build ${t_build} s"

# 3. The archive for containerd (no registry): docker-archive keeps the repo:tag.
if [ "$save" = 1 ]; then
    out=$repo/build/image/dragonfly-csi.tar
    mkdir -p "$(dirname "$out")"
    rm -f "$out"
    podman save --format docker-archive -o "$out" "$image"
    say "saved $out ($(($(stat -c %s "$out") / 1024 / 1024)) MiB): ctr -n k8s.io images import $out"
fi
say "done in $(($(now) - t_start)) s"
