/*
 * clock.h - an injected wall clock. Code that reads the time (the GC, the daemon's task times,
 * the scheduler's TTLs) takes a struct dfc_clock, so tests move time instead of waiting.
 *
 * A clock is a small value, copied by whoever keeps it; userdata stays owned by the clock's
 * maker and must outlive every copy.
 *
 * Deadlines, timeouts and latencies use the monotonic clock instead (dfc_mono_ns/ms): it
 * ignores clock steps, and nothing there is a time of day.
 */
#ifndef DFC_CLOCK_H
#define DFC_CLOCK_H

#include <stdint.h>

struct dfc_clock {
    int64_t (*now_ns)(void *userdata); /* wall clock, ns since the epoch */
    void *userdata;
};

/* The real wall clock (CLOCK_REALTIME). */
extern const struct dfc_clock dfc_clock_real;

/* The clock's current time, ns since the epoch. */
static inline int64_t dfc_clock_now(const struct dfc_clock *c) {
    return c->now_ns(c->userdata);
}

/* CLOCK_MONOTONIC, in ns and in ms. */
int64_t dfc_mono_ns(void);
int64_t dfc_mono_ms(void);

/* Waits until fd has one of events (POLLIN, POLLOUT), or an error or hang-up that the next call
 * on fd reports, or the monotonic deadline (ns) passes: 0, -ETIMEDOUT or a negative errno. */
int dfc_wait_fd(int fd, short events, int64_t deadline_ns);

#endif /* DFC_CLOCK_H */
