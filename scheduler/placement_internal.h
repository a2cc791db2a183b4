/*
 * placement_internal.h - the pure parts of placement, for placement*.c and their tests: the
 * candidate-parent filter and ranking over records already loaded, and the repair back-off.
 * Nothing here touches Redis or the network.
 */
#ifndef SCHED_PLACEMENT_INTERNAL_H
#define SCHED_PLACEMENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Upstream's default scheduler.candidateParentLimit. */
#define SCHED_DEFAULT_PARENT_LIMIT 3
/* Candidate parents drawn per register or reschedule: from each of the task's two peer sets. */
#define SCHED_PARENT_DRAW 64

/* Ranks peers[i] (living on hosts[i]) as parents for a peer of host `asking`: keeps Running and
 * Succeeded peers whose id is not in block and whose host is not `asking`, scores them with
 * sched_parent_score, and writes the indices of the best `limit` to idx (best first; at equal
 * scores Succeeded peers before Running ones, then at random) with their scores in score
 * (may be NULL). idx and score hold
 * n entries. Returns the number written. */
size_t sched_parents_rank(const struct sched_peer *peers, const struct sched_host *hosts, size_t n,
                          const struct sched_host *asking, const char *const *block, size_t n_block,
                          size_t limit, size_t *idx, double *score);

/* Whether peer p may serve a peer of host `asking` (NULL: any host): state Running or
 * Succeeded, id not in block, host not `asking`. */
bool sched_parent_may_serve(const struct sched_peer *p, const struct sched_host *asking,
                            const char *const *block, size_t n_block);

/* Whether s is one of list[0..n). */
bool sched_str_in(const char *s, const char *const *list, size_t n);

/* The repair back-off of one task, counted in repair passes (each one replicaRepairInterval
 * apart), so it is exact in tests and needs no clock: after the k-th failure in a row the task
 * is skipped until pass failed_pass + min(2^k, SCHED_BACKOFF_MAX_PASSES). */
#define SCHED_BACKOFF_MAX_PASSES 64
struct sched_backoff {
    unsigned failures;
    uint64_t next_pass; /* first pass that may retry it */
};
void sched_backoff_failed(struct sched_backoff *b, uint64_t pass);
void sched_backoff_reset(struct sched_backoff *b);
bool sched_backoff_ready(const struct sched_backoff *b, uint64_t pass);

#endif /* SCHED_PLACEMENT_INTERNAL_H */
