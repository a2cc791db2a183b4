/*
 * placement_backoff.c - the repair back-off of one task, counted in repair passes
 * (placement_internal.h): exponential, capped at SCHED_BACKOFF_MAX_PASSES, pure.
 */
#include "placement_internal.h"

void sched_backoff_failed(struct sched_backoff *b, uint64_t pass) {
    if (b->failures < 32) {
        b->failures++;
    }
    uint64_t delay = b->failures >= 6 ? SCHED_BACKOFF_MAX_PASSES : (uint64_t)1 << b->failures;
    if (delay > SCHED_BACKOFF_MAX_PASSES) {
        delay = SCHED_BACKOFF_MAX_PASSES;
    }
    b->next_pass = pass + delay;
}

void sched_backoff_reset(struct sched_backoff *b) {
    b->failures = 0;
    b->next_pass = 0;
}

bool sched_backoff_ready(const struct sched_backoff *b, uint64_t pass) {
    return pass >= b->next_pass;
}
