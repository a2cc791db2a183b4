/*
 * clock.c - the real wall clock behind struct dfc_clock, and the monotonic clock.
 */
#include "dfc/clock.h"

#include <errno.h>
#include <poll.h>
#include <time.h>

#include "dfc/pbtime.h"
#include "dfc/units.h"

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

int dfc_wait_fd(int fd, short events, int64_t deadline_ns) {
    for (;;) {
        int64_t left = deadline_ns - dfc_mono_ns();
        if (left <= 0) {
            return -ETIMEDOUT;
        }
        int ms = left / DFC_NS_PER_MS >= 1000000
                     ? 1000000
                     : (int)((left + DFC_NS_PER_MS - 1) / DFC_NS_PER_MS);
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, ms);
        if (n > 0) {
            return 0;
        }
        if (n < 0 && errno != EINTR) {
            return -errno;
        }
    }
}
