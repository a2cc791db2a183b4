# shellcheck shell=bash
# Shared by build.sh and smoke.sh (sourced): how podman is run on this kind of host.
#
# dfc_podman ARGS...  runs podman with an OCI runtime and resource limits that work here:
#   - runtime: $DFC_OCI_RUNTIME, else runc when installed. crun (podman's default on Debian 12)
#     refuses a "hybrid" cgroup set-up whose cgroup2 mount has controllers ("cgroups in hybrid
#     mode not supported, drop all controllers from cgroupv2"); runc accepts it.
#   - limits: a rootful podman asks for RLIMIT_NOFILE 1048576 and RLIMIT_NPROC 4194304, which a
#     host without CAP_SYS_RESOURCE cannot grant ("setrlimit `RLIMIT_NOFILE`: Operation not
#     permitted"); podman itself lowers its RLIMIT_NPROC to 32768 at start. So the container
#     gets this shell's hard limits, capped at those.
#   dfc_podman_limits prints the --ulimit flags (podman build takes them too).

dfc_runtime=${DFC_OCI_RUNTIME:-}
if [ -z "$dfc_runtime" ] && command -v runc >/dev/null; then
    dfc_runtime=runc
fi

dfc_podman_limits() {
    local n u
    n=$(ulimit -Hn)
    u=$(ulimit -Hu)
    if [ "$n" = unlimited ] || [ "$n" -gt 1048576 ]; then n=1048576; fi
    if [ "$u" = unlimited ] || [ "$u" -gt 32768 ]; then u=32768; fi
    printf '%s\n' "--ulimit=nofile=$n:$n" "--ulimit=nproc=$u:$u"
}

dfc_podman() {
    if [ -n "$dfc_runtime" ]; then
        podman --runtime "$dfc_runtime" "$@"
    else
        podman "$@"
    fi
}
