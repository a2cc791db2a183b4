/*
 * rpc_limits.c - the bookkeeping behind the server's per-caller limits: counts by uid (calls
 * in flight, open connections) and a rate limit for the log lines that refusals write.
 *
 * DESIGN
 *
 * A uid count is a short unsorted array of the uids that have something open; a uid leaves it
 * when its count drops to zero, so its length is the number of distinct callers at the moment,
 * a handful on a node, and a linear scan beats any hashing. Callers hold their own lock.
 *
 * A refusal must not cost a log line each: a flood of them would fill the disk and the log
 * pipe. dfc__ratelimit_hit() counts every refusal and lets one line through per interval,
 * carrying the number of refusals since the previous line.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "rpc_server_internal.h"

static struct uid_count *uid_find(const struct uid_counts *u, uid_t uid) {
    for (size_t i = 0; i < u->n; i++) {
        if (u->v[i].uid == uid) {
            return &u->v[i];
        }
    }
    return NULL;
}

unsigned dfc__uid_count(const struct uid_counts *u, uid_t uid) {
    struct uid_count *e = uid_find(u, uid);
    return e != NULL ? e->n : 0;
}

int dfc__uid_count_add(struct uid_counts *u, uid_t uid) {
    struct uid_count *e = uid_find(u, uid);
    if (e == NULL) {
        if (u->n == u->cap) {
            size_t cap = u->cap ? u->cap * 2 : 16;
            struct uid_count *v = realloc(u->v, cap * sizeof(*v));
            if (v == NULL) {
                return -ENOMEM;
            }
            u->v = v;
            u->cap = cap;
        }
        e = &u->v[u->n++];
        e->uid = uid;
        e->n = 0;
    }
    e->n++;
    return (int)(e->n > INT32_MAX ? INT32_MAX : e->n);
}

void dfc__uid_count_sub(struct uid_counts *u, uid_t uid) {
    struct uid_count *e = uid_find(u, uid);
    if (e != NULL && --e->n == 0) {
        *e = u->v[--u->n];
    }
}

void dfc__uid_counts_free(struct uid_counts *u) {
    free(u->v);
    u->v = NULL;
    u->n = u->cap = 0;
}

bool dfc__ratelimit_hit(struct ratelimit *rl, int64_t interval_ms, unsigned *ret_count) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    rl->count++;
    if (rl->logged && now_ms - rl->last_ms < interval_ms) {
        return false;
    }
    *ret_count = rl->count;
    rl->count = 0;
    rl->last_ms = now_ms;
    rl->logged = true;
    return true;
}
