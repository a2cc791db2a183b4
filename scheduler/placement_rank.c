/*
 * placement_rank.c - the pure half of candidate-parent selection (placement_internal.h): which
 * loaded peers may serve, and upstream's default evaluator for persistent cache parents,
 * 0.7 * IDC affinity + 0.3 * location affinity (docs/dragonfly-compat.md, "Scheduler on
 * Redis"). No Redis, no network: placement_parents.c loads the records.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "placement.h"
#include "placement_internal.h"

#define IDC_WEIGHT      0.7
#define LOCATION_WEIGHT 0.3
#define MAX_ELEMENTS    5 /* location elements compared: "country|province|city|zone|cluster" */

bool sched_str_in(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (list[i] != NULL && strcmp(s, list[i]) == 0) {
            return true;
        }
    }
    return false;
}

static bool empty(const char *s) {
    return s == NULL || s[0] == '\0';
}

/* Upstream compares with strings.EqualFold; ASCII case folding here (IDC and location names
 * are ASCII in practice). Empty on either side is no affinity: two empty strings do not match. */
static double idc_score(const char *a, const char *b) {
    if (empty(a) || empty(b)) {
        return 0;
    }
    return strcasecmp(a, b) == 0 ? 1 : 0;
}

/* Equal leading '|'-separated elements, at most MAX_ELEMENTS, over MAX_ELEMENTS; an equal
 * whole string is 1 whatever its element count, as upstream. */
static double location_score(const char *a, const char *b) {
    if (empty(a) || empty(b)) {
        return 0;
    }
    if (strcasecmp(a, b) == 0) {
        return 1;
    }
    int matched = 0;
    while (matched < MAX_ELEMENTS) {
        size_t la = strcspn(a, "|"), lb = strcspn(b, "|");
        if (la != lb || strncasecmp(a, b, la) != 0) {
            break;
        }
        matched++;
        if (a[la] != '|' || b[lb] != '|') {
            break; /* one side has no further element */
        }
        a += la + 1;
        b += lb + 1;
    }
    return (double)matched / MAX_ELEMENTS;
}

double sched_parent_score(const struct sched_host *parent, const struct sched_host *child) {
    return IDC_WEIGHT * idc_score(parent->network.idc, child->network.idc) +
           LOCATION_WEIGHT * location_score(parent->network.location, child->network.location);
}

/* Running and Succeeded peers only: the others have nothing to serve (upstream's "bad"
 * states: Pending, Uploading, ReceivedEmpty, ReceivedNormal, Failed). */
bool sched_parent_may_serve(const struct sched_peer *p, const struct sched_host *asking,
                            const char *const *block, size_t n_block) {
    if (p->state != SCHED_PEER_RUNNING && p->state != SCHED_PEER_SUCCEEDED) {
        return false;
    }
    if (sched_str_in(p->id, block, n_block)) {
        return false;
    }
    return asking == NULL || asking->id == NULL || strcmp(p->host_id, asking->id) != 0;
}

struct ranked {
    size_t idx;
    double score;
    bool complete;    /* Succeeded: it holds every piece */
    uint32_t shuffle; /* random: the order among equals */
};

/* Best score first; at equal scores a complete copy before a peer still downloading (beyond
 * upstream: in a crowd that starts together every downloader is then offered a copy that has
 * every piece, docs/swarm.md); then at random. SRANDMEMBER returns a set smaller than the draw
 * whole, in the set's own order: without the shuffle every downloader of a crowd would be
 * offered the same few peers. */
static int by_score_desc(const void *a, const void *b) {
    const struct ranked *x = a, *y = b;
    if (x->score != y->score) {
        return x->score > y->score ? -1 : 1;
    }
    if (x->complete != y->complete) {
        return x->complete ? -1 : 1;
    }
    if (x->shuffle != y->shuffle) {
        return x->shuffle < y->shuffle ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

size_t sched_parents_rank(const struct sched_peer *peers, const struct sched_host *hosts, size_t n,
                          const struct sched_host *asking, const char *const *block, size_t n_block,
                          size_t limit, size_t *idx, double *score) {
    if (n == 0) {
        return 0;
    }
    struct ranked *r = calloc(n, sizeof(*r));
    if (r == NULL) {
        return 0;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!sched_parent_may_serve(&peers[i], asking, block, n_block)) {
            continue;
        }
        r[k].idx = i;
        r[k].score = asking != NULL ? sched_parent_score(&hosts[i], asking) : 0;
        r[k].complete = peers[i].state == SCHED_PEER_SUCCEEDED;
        if (getrandom(&r[k].shuffle, sizeof(r[k].shuffle), GRND_NONBLOCK) !=
            (ssize_t)sizeof(r[k].shuffle)) {
            r[k].shuffle = 0; /* no entropy yet: the input order */
        }
        k++;
    }
    qsort(r, k, sizeof(*r), by_score_desc);
    if (k > limit) {
        k = limit;
    }
    for (size_t i = 0; i < k; i++) {
        idx[i] = r[i].idx;
        if (score != NULL) {
            score[i] = r[i].score;
        }
    }
    free(r);
    return k;
}
