/*
 * clock.c - the real wall clock behind struct dfc_clock, and the monotonic clock.
 */
#include "dfc/clock.h"

#include <time.h>

#include "dfc/pbtime.h"

static int64_t real_now(void *userdata) {
    (void)userdata;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return dfc_timespec_to_ns(&ts);
}

const struct dfc_clock dfc_clock_real = {real_now, NULL};

int64_t dfc_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return dfc_timespec_to_ns(&ts);
}

int64_t dfc_mono_ms(void) {
    return dfc_mono_ns() / 1000000;
}
