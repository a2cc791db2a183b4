# shellcheck shell=bash
# steal.sh - sourced by the benchmarks: the share of CPU time the hypervisor took from this
# VM (the "steal" column of /proc/stat) while a benchmark's timed parts ran. On a shared host
# it is what makes one run of the same build twice as slow as the next: a figure measured at
# 20% steal says more about the host than about the code. Each caller keeps its own tally:
#   steal_begin NAME; ...timed work...; steal_end NAME; steal_pct NAME  ->  "12.3"
# (NAME: a prefix for the tally's two variables; any shell word.)

# Prints "<steal ticks> <all ticks>" of all CPUs so far (user, nice, system, idle, iowait,
# irq, softirq, steal; guest time is already inside user).
steal_ticks_now() {
    awk '/^cpu / {t = 0; for (i = 2; i <= 9; i++) t += $i; print $9, t; exit}' /proc/stat
}

steal_begin() {
    local s a
    read -r s a < <(steal_ticks_now)
    printf -v "_steal0_$1" '%s %s' "$s" "$a"
}

steal_end() {
    local s a s0 a0 ref="_steal0_$1" st="_steal_s_$1" at="_steal_a_$1"
    read -r s a < <(steal_ticks_now)
    read -r s0 a0 <<<"${!ref}"
    printf -v "$st" '%d' $((${!st:-0} + s - s0))
    printf -v "$at" '%d' $((${!at:-0} + a - a0))
}

steal_pct() {
    local st="_steal_s_$1" at="_steal_a_$1"
    awk -v s="${!st:-0}" -v a="${!at:-0}" 'BEGIN {printf "%.1f", (a > 0 ? 100 * s / a : 0)}'
}
