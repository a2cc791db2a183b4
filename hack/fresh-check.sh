#!/usr/bin/env bash
# Proves the README's promise that its two commands work on a fresh Debian 12 machine: makes a
# minimal Debian 12 (bookworm) root with debootstrap, puts a clean `git clone` of this repo's HEAD
# in it at /src (no build dirs, no uncommitted changes), and runs, as root inside that root,
#     bash hack/demo.sh      then      bash hack/test.sh      (or --quick, see DFC_FRESH_QUICK)
# each in a private mount and PID namespace with /proc, /sys, /dev (own /dev/shm and /dev/pts)
# and tmpfs /tmp and /run mounted, and the root bind-mounted onto itself so that `/` is a mount point
# (tests run `mount --make-rprivate /`). Prints each command's exit status and wall time and
# exits non-zero when either fails. Needs root (debootstrap, mounts, chroot).
#
# Nothing the project installs can leak in from the host: the root starts as debootstrap's
# `--variant=minbase` and hack/install-deps.sh runs in it from scratch every time, so a
# dependency that install-deps does not name is missing there, whatever the host has.
#
# Cache, under ${DFC_FRESH_CACHE:-/var/cache/dragonfly-c/fresh} (outside the repo):
#   base-bookworm-minbase-<key>.tar   the pristine root, tarred right after debootstrap. <key> is
#                                     the sha256 of HEAD's hack/install-deps.sh, suite and variant,
#                                     so a change to install-deps rebuilds it. Each run unpacks a
#                                     NEW root from it (run.*/) and removes it on exit.
#   archives/                         downloaded .deb files, bind-mounted over the root's
#                                     /var/cache/apt/archives to save downloads. This cannot hide
#                                     a missing install step: apt-get still has to name a package
#                                     to install it.
#   last-demo.log, last-test.log      the output of the last run's two commands.
#
# Run by hand (as root):
#   bash hack/fresh-check.sh
# Knobs (environment):
#   DFC_FRESH_CACHE=DIR   cache directory (default /var/cache/dragonfly-c/fresh)
#   DFC_FRESH_QUICK=1     run `bash hack/test.sh --quick` (no sanitizer passes, no fuzz replay)
#   DFC_FRESH_KEEP=1      keep the unpacked root afterwards (its path is printed) to look around
#
# Only Debian packages are downloaded, from the mirror this host's apt already uses (read at run
# time from /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list); the host's
# /etc/resolv.conf and its apt Acquire settings (proxy, date checks) are copied into the root,
# and an /etc/hosts like an installed machine's is written.
# debootstrap is installed on the host with apt-get if it is missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${DFC_FRESH_CACHE:-/var/cache/dragonfly-c/fresh}
quick=${DFC_FRESH_QUICK:-0}
keep=${DFC_FRESH_KEEP:-0}
suite=bookworm
variant=minbase

say() { printf 'fresh-check: %s\n' "$*"; }
die() {
    say "$*" >&2
    exit 1
}
now() { date +%s; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mount namespaces, chroot)"

# host_uri SUITE: the first URI of a `deb` source for SUITE in the host's apt configuration.
host_uri() {
    local s=$1 f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v s="$s" '
            function flush() {
                if (!done && (" " types " ") ~ / deb / && enabled != "no" &&
                    (" " suites " ") ~ (" " s " ") && uris != "") {
                    split(uris, u, " ")
                    print u[1]
                    done = 1
                }
                types = suites = uris = ""
                enabled = "yes"
            }
            BEGIN { enabled = "yes" }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                key = tolower($1)
                val = $0
                sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types:") types = val
                else if (key == "suites:") suites = val
                else if (key == "uris:") uris = val
                else if (key == "enabled:") enabled = tolower(val)
            }
            END { flush() }
        ' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v s="$s" '$1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
            if ($(i + 1) == s) print $i
        }' "$f"
    done
}
first() { printf '%s' "${1%%$'\n'*}"; }

mirror=$(first "$(host_uri "$suite")")
[ -n "$mirror" ] || die "no apt source for suite $suite on this host (/etc/apt/sources.list*)"
updates=$(first "$(host_uri "$suite-updates")")
security=$(first "$(host_uri "$suite-security")")

if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap on the host (a tool of this check, not a project dependency)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
        >/dev/null || {
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
            >/dev/null
    }
fi
for tool in unshare chroot git tar mount; do
    command -v "$tool" >/dev/null || die "needs $tool on the host"
done

mkdir -p "$cache/archives/partial"
sha=$(git -C "$repo" rev-parse HEAD)
key=$( (
    git -C "$repo" show "$sha:hack/install-deps.sh" | sha256sum # the version under test
    echo "$suite $variant"
) | sha256sum | cut -c1-16)
base=$cache/base-$suite-$variant-$key.tar

t_start=$(now)
root=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$root" ] && [ -d "$root" ]; then
        # Every mount lives in a namespace that died with its command; refuse to delete through
        # a mount that is somehow still visible here.
        if grep -qF " $root/" /proc/self/mountinfo || grep -qF " $root " /proc/self/mountinfo; then
            say "mounts still under $root; not removing it" >&2
        elif [ "$keep" = 1 ]; then
            say "kept the root: $root (enter: unshare -m chroot $root /bin/bash)"
        else
            rm -rf --one-file-system "$root"
        fi
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted" >&2; exit 130' INT
trap 'say "terminated" >&2; exit 143' TERM

# 1. The pristine minimal root, cached.
t0=$(now)
if [ -f "$base" ]; then
    say "base root: $base (cached)"
    t_boot=0
else
    say "base root: debootstrap --variant=$variant $suite (key $key) ..."
    root=$(mktemp -d "$cache/run.XXXXXX")
    if ! debootstrap --variant="$variant" "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1; then
        tail -20 "$cache/debootstrap.log" >&2
        die "debootstrap failed (log: $cache/debootstrap.log)"
    fi
    chmod 0755 "$root"
    tar -C "$root" --numeric-owner -cf "$base.tmp" .
    rm -f "$cache"/base-"$suite"-"$variant"-*.tar
    mv "$base.tmp" "$base"
    rm -rf --one-file-system "$root"
    root=
    t_boot=$(($(now) - t0))
    say "base root: built in ${t_boot} s"
fi

# 2. A new root for this run, with the project's HEAD in /src.
t0=$(now)
root=$(mktemp -d "$cache/run.XXXXXX")
tar -C "$root" --numeric-owner -xf "$base"
chmod 0755 "$root" # it becomes `/`: mktemp's 0700 would lock out every other uid (_apt, nobody)
cp /etc/resolv.conf "$root/etc/resolv.conf"
# What a Debian installer writes and debootstrap does not: /etc/hosts naming localhost and this
# machine (the chart tests bind a copy over it in their own mount namespace).
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(hostname)" >"$root/etc/hosts"
{
    echo "deb $mirror $suite main"
    if [ -n "$updates" ]; then echo "deb $updates $suite-updates main"; fi
    if [ -n "$security" ]; then echo "deb $security $suite-security main"; fi
} >"$root/etc/apt/sources.list"
# How this host reaches the mirror (not what the project installs): proxy and date checks.
for k in Acquire::http::Proxy Acquire::https::Proxy Acquire::Check-Valid-Until Acquire::Check-Date; do
    v=$(first "$(apt-config dump "$k" 2>/dev/null | sed -n "s/^$k \"\(.*\)\";\$/\1/p")")
    if [ -n "$v" ]; then printf '%s "%s";\n' "$k" "$v"; fi
done >"$root/etc/apt/apt.conf.d/90host-access"
# How this host reaches the npm registry (the chart validator's packages): a site's extra TLS
# anchors (an egress proxy's CA), from NODE_EXTRA_CA_CERTS or /usr/local/share/ca-certificates,
# handed to Node in the root the same way. Site trust, not something the project installs.
extra_ca=
mkdir -p "$root/etc/ssl"
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r "$NODE_EXTRA_CA_CERTS" ]; then
    cp "$NODE_EXTRA_CA_CERTS" "$root/etc/ssl/dfc-host-extra-ca.pem"
    extra_ca=/etc/ssl/dfc-host-extra-ca.pem
elif compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cat /usr/local/share/ca-certificates/*.crt >"$root/etc/ssl/dfc-host-extra-ca.pem"
    extra_ca=/etc/ssl/dfc-host-extra-ca.pem
fi
git clone -q --no-hardlinks --no-checkout "$repo" "$root/src"
git -C "$root/src" cat-file -e "$sha^{commit}" 2>/dev/null || git -C "$root/src" fetch -q "$repo" HEAD
git -C "$root/src" -c advice.detachedHead=false checkout -q "$sha"
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
    say "note: uncommitted changes in $repo are not part of the check (it tests HEAD)"
fi
t_unpack=$(($(now) - t0))
say "root: $root, /src at $(git -C "$root/src" log -1 --format='%h %s') (ready in ${t_unpack} s)"

# in_root CMD: runs the shell command CMD in /src inside the root, as root, in a private mount and
# PID namespace (everything it starts dies with it, and its mounts vanish with it).
in_root() {
    unshare --mount --propagation private --pid --fork -- /bin/bash -c '
        set -eu
        r=$1 arch=$2 cmd=$3 ca=$4
        mount --bind "$r" "$r"
        mount -t proc proc "$r/proc"
        mount --rbind /sys "$r/sys" # with the host'"'"'s cgroup mounts, as a booted machine has
        mount --bind /dev "$r/dev"
        mount -t tmpfs -o mode=1777,nosuid,nodev shm "$r/dev/shm"
        mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$r/dev/pts"
        mount --bind "$r/dev/pts/ptmx" "$r/dev/ptmx"
        mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
        mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$r/run"
        mkdir -m 1777 "$r/run/lock"
        mount --bind "$arch" "$r/var/cache/apt/archives"
        chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 CI=true TERM="${TERM:-dumb}" \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            ${ca:+NODE_EXTRA_CA_CERTS=$ca} \
            /bin/bash -c "cd /src && $cmd"
    ' in_root "$root" "$cache/archives" "$1" "$extra_ca"
}

# run_step NAME CMD: runs CMD in the root, output to the terminal and $cache/last-NAME.log.
declare -A rc_of secs_of
run_step() {
    local name=$1 cmd=$2 t rc
    say "== $cmd (in the clean root)"
    t=$(now)
    set +e
    in_root "$cmd" 2>&1 | tee "$cache/last-$name.log"
    rc=${PIPESTATUS[0]}
    set -e
    rc_of[$name]=$rc
    secs_of[$name]=$(($(now) - t))
    say "== $cmd: exit $rc after ${secs_of[$name]} s"
}

test_cmd="bash hack/test.sh"
if [ "$quick" = 1 ]; then test_cmd="bash hack/test.sh --quick"; fi
run_step demo "bash hack/demo.sh"
run_step test "$test_cmd"

# Tests that skipped in the clean root (cmocka cases, from ctest's full log of the plain pass),
# and which of them did not skip in the host's own build of this repo, if it has one.
skipped() {
    [ -f "$1" ] || return 0
    awk '/^[0-9]+\/[0-9]+ Testing: / { t = $3 }
         /^\[  SKIPPED \] / { print t ": " $4 }' "$1" | sort -u
}
in_root_skips=$(skipped "$root/src/build/Testing/Temporary/LastTest.log")
if [ -n "$in_root_skips" ]; then
    say "cmocka cases skipped in the clean root:"
    sed 's/^/  /' <<<"$in_root_skips"
    host_log=$repo/build/Testing/Temporary/LastTest.log
    if [ -f "$host_log" ]; then
        only=$(comm -23 <(echo "$in_root_skips") <(skipped "$host_log"))
        if [ -n "$only" ]; then
            say "skipped ONLY in the clean root (they run on this host):"
            sed 's/^/  /' <<<"$only"
        fi
    fi
else
    say "no cmocka case skipped in the clean root"
fi

failed=0
for name in demo test; do
    if [ "${rc_of[$name]}" -ne 0 ]; then failed=$((failed + 1)); fi
done
say "summary: Debian $suite $variant root (base ${t_boot} s, unpack+clone ${t_unpack} s)," \
    "demo exit ${rc_of[demo]} in ${secs_of[demo]} s, ${test_cmd#bash } exit ${rc_of[test]}" \
    "in ${secs_of[test]} s, total $(($(now) - t_start)) s"
echo "fresh-check: $((2 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
