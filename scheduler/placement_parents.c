/*
 * placement_parents.c - candidate parents for a downloading peer, as upstream's
 * FindCandidatePersistentCacheParents (docs/dragonfly-compat.md, "Scheduler on Redis"): the
 * task's peers and their hosts loaded from the store, then ranked by placement_rank.c. Host
 * disable_shared is not checked for download parents, as upstream.
 *
 * Beyond upstream: a register's cost is flat in the number of the task's peers. Upstream loads
 * every peer of the task (SMEMBERS, then a round trip per peer and per host) on every register
 * and reschedule; here the candidates are a random draw of at most SCHED_PARENT_DRAW peers of
 * the persistent set and as many of the all-peers set (the same as upstream while the task
 * has no more peers than that).
 *
 * Not as upstream: a host in the task's exclusion set (a parent that served a piece failing
 * verification, integrity_store.h, docs/integrity.md) is never a candidate.
 */
#include <stdlib.h>
#include <string.h>

#include "integrity_store.h"
#include "placement.h"
#include "placement_internal.h"

void sched_candidates_free(struct sched_candidate *c, size_t n) {
    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        sched_peer_done(&c[i].peer);
        sched_host_done(&c[i].host);
    }
    free(c);
}

int sched_find_parents(struct sched_store *s, int64_t dl, const char *task_id,
                       const struct sched_host *asking, const char *const *block_peers,
                       size_t n_block, size_t limit, struct sched_candidate **out, size_t *n_out,
                       struct dfc_error *err) {
    *out = NULL;
    *n_out = 0;
    if (limit == 0) {
        limit = SCHED_DEFAULT_PARENT_LIMIT;
    }
    struct sched_peer *peers = NULL;
    size_t n_peers = 0, kept = 0;
    struct sched_ids excluded = {0};
    int r = sched_parents_excluded(s, dl, task_id, &excluded, err);
    if (r < 0) {
        return r;
    }
    r = sched_peer_load_sample_by_task(s, dl, task_id, SCHED_PARENT_DRAW, &peers, &n_peers, err);
    if (r < 0) {
        sched_ids_free(&excluded);
        return r;
    }
    /* Filter on the peer records first, so only hosts of possible parents are loaded. */
    struct sched_host *hosts = calloc(n_peers ? n_peers : 1, sizeof(*hosts));
    size_t *idx = calloc(n_peers ? n_peers : 1, sizeof(*idx));
    double *score = calloc(n_peers ? n_peers : 1, sizeof(*score));
    if (hosts == NULL || idx == NULL || score == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_peers; i++) {
        if (!sched_parent_may_serve(&peers[i], asking, block_peers, n_block) ||
            sched_str_in(peers[i].host_id, (const char *const *)excluded.ids, excluded.n)) {
            continue;
        }
        struct dfc_error herr;
        r = sched_host_load(s, dl, peers[i].host_id, &hosts[kept], &herr);
        if (r == -ENOENT) {
            continue; /* the host went away since the peer was loaded: a missing peer */
        }
        if (r < 0) {
            *err = herr;
            goto done;
        }
        if (kept != i) { /* swap, so every peer stays in the list that is freed */
            struct sched_peer tmp = peers[kept];
            peers[kept] = peers[i];
            peers[i] = tmp;
        }
        kept++;
    }
    r = 0;
    size_t k =
        sched_parents_rank(peers, hosts, kept, asking, block_peers, n_block, limit, idx, score);
    if (k == 0) {
        goto done;
    }
    struct sched_candidate *c = calloc(k, sizeof(*c));
    if (c == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < k; i++) {
        c[i].peer = peers[idx[i]];
        c[i].host = hosts[idx[i]];
        c[i].score = score[i];
        memset(&peers[idx[i]], 0, sizeof(peers[idx[i]]));
        memset(&hosts[idx[i]], 0, sizeof(hosts[idx[i]]));
    }
    *out = c;
    *n_out = k;
done:
    if (hosts != NULL) {
        sched_host_list_free(hosts, kept);
    }
    sched_peer_list_free(peers, n_peers);
    sched_ids_free(&excluded);
    free(idx);
    free(score);
    return r;
}
