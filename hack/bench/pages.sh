# shellcheck shell=bash
# pages.sh - sourced by the benchmarks that write GiBs into tmpfs: keep freed memory in this
# VM for the length of the run.
#
# This VM hands memory the guest frees back to its host (virtio-balloon free page reporting),
# and touching such a page again costs a fault in the host: a 1 GiB write to /dev/shm takes
# ~0.8 s on pages freed a moment ago and 1.3-1.7 s on pages already handed back. Which timed
# step, reference or contender, lands on which pages is chance, so a median of three could be
# moved by it alone (2026-12-04: `head -c 1G` into /dev/shm right after a 1.1 GiB warm-up
# took 0.82-1.66 s with pages handed back at once, 0.79-0.89 s with them held). The guest
# kernel here has a knob for that delay, page_reporting.min_free_ms (0: report at once);
# pages_hold raises it to five minutes (its maximum here; each benchmark takes about
# a minute) for the run and pages_restore puts the old value back.
# Every step, reference and contender alike, then writes into memory this VM still holds.
# Where the knob does not exist, or without root, nothing changes and the warm-ups the
# benchmarks do before each timed step are all there is.
#   pages_hold; ...; pages_restore      (pages_note says what was done, for the report)

_pages_knob=/sys/module/page_reporting/parameters/min_free_ms
_pages_old=
# shellcheck disable=SC2034 # pages_note is read by the scripts that source this one
pages_note="freed pages: as the VM does (no page_reporting.min_free_ms knob, or not root)"

pages_hold() {
    [ -w "$_pages_knob" ] || return 0
    _pages_old=$(cat "$_pages_knob")
    if echo 300000 >"$_pages_knob" 2>/dev/null; then
        # shellcheck disable=SC2034
        pages_note="freed pages: held by this VM for the run (page_reporting.min_free_ms $_pages_old -> 300000, restored after)"
    else
        _pages_old=
    fi
}

pages_restore() {
    [ -n "$_pages_old" ] || return 0
    echo "$_pages_old" >"$_pages_knob" 2>/dev/null || true
    _pages_old=
}
