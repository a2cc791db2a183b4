#!/usr/bin/env bash
# Call cycles between the source files of a static library: file A refers to (calls, or takes
# the address of) a function or object defined in file B while B, directly or through other
# files of the library, refers back to A. Read from the archive with nm: each member's defined
# global symbols against the undefined ones of the others. Static functions and static inline
# helpers are file-local and make no edge, so a cycle can only run through a file's interface.
#
#   hack/call-cycles.sh LIBRARY.a...   (e.g. build/scheduler/libsched_core.a)
# Prints one line per library; exits 1 listing every edge that lies on a cycle (with the
# symbol that makes it), 2 when a library is missing or holds no object.
set -euo pipefail

fail=0
for lib in "$@"; do
    if [ ! -f "$lib" ]; then
        echo "call-cycles: $lib: no such library (build it first)" >&2
        exit 2
    fi
    # "D member symbol" and "U member symbol"; nm -A prefixes each line with "lib:member:".
    rows=$({
        nm -A --defined-only -g "$lib" | awk '{ n = split($1, p, ":"); print "D", p[n - 1], $NF }'
        nm -A -u "$lib" | awk '{ n = split($1, p, ":"); print "U", p[n - 1], $NF }'
    } | sed 's/\.o / /')
    # Edges between members, then the transitive closure (Floyd-Warshall: a library has tens
    # of files): an edge a -> b lies on a cycle exactly when b reaches a.
    if ! out=$(awk -v lib="$lib" '
        $1 == "D" { def[$3] = $2; file[$2] = 1; next }
        { use[++nu] = $2 SUBSEP $3; file[$2] = 1 }
        END {
            for (i = 1; i <= nu; i++) {
                split(use[i], u, SUBSEP)
                if (!(u[2] in def) || def[u[2]] == u[1]) continue
                e = u[1] SUBSEP def[u[2]]
                if (!(e in edge)) { edge[e] = u[2]; ne++ }
                reach[e] = 1
            }
            nf = 0
            for (f in file) name[++nf] = f
            for (k = 1; k <= nf; k++)
                for (i = 1; i <= nf; i++)
                    if ((name[i], name[k]) in reach)
                        for (j = 1; j <= nf; j++)
                            if ((name[k], name[j]) in reach) reach[name[i], name[j]] = 1
            bad = 0
            for (e in edge) {
                split(e, ab, SUBSEP)
                if ((ab[2], ab[1]) in reach) {
                    printf "  %s -> %s (%s)\n", ab[1], ab[2], edge[e]
                    bad = 1
                }
            }
            if (bad) exit 1
            printf "call-cycles: %s: %d files, %d file-to-file edges, no cycle\n", lib, nf, ne
        }' <<<"$rows"); then
        echo "call-cycles: $lib: these references close a cycle between files:" >&2
        sort <<<"$out" >&2
        fail=1
        continue
    fi
    if [ -z "$out" ]; then
        echo "call-cycles: $lib: no object in it" >&2
        exit 2
    fi
    echo "$out"
done
exit $fail
