/* Tests for lib/src/ratelimit.c: the token bucket's rate, burst, deadline and stop. Times are
 * only ever checked from below (a bucket never lets bytes through faster than its rate), or
 * against bounds many times the expected value, so a loaded machine cannot fail them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "dfc/clock.h"
#include "dfc/ratelimit.h"
#include "dfc/units.h"

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)

static void sleep_ms(long ms) {
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0) {
    }
}

/* NULL and rate 0 take anything at once: even with a deadline already past, nothing waits. */
static void test_unlimited_is_free(void **state) {
    (void)state;
    int64_t past = dfc_mono_ns() - DFC_NS_PER_SEC;
    assert_int_equal(dfc_ratelimit_take(NULL, UINT64_MAX, past, NULL), 0);
    struct dfc_ratelimit rl;
    dfc_ratelimit_init(&rl, 0, 0);
    assert_false(dfc_ratelimit_on(&rl));
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(dfc_ratelimit_take(&rl, 1024 * MiB, past, NULL), 0);
    }
    dfc_ratelimit_wake(&rl);
    dfc_ratelimit_destroy(&rl);
}

/* The burst is there at once; past it a take that cannot be paid by its deadline fails at
 * once and takes nothing, so after a refill the burst is whole again. */
static void test_burst_and_deadline(void **state) {
    (void)state;
    struct dfc_ratelimit rl;
    dfc_ratelimit_init(&rl, 1 * MiB, 64 * KiB);
    assert_true(dfc_ratelimit_on(&rl));
    int64_t now = dfc_mono_ns();
    assert_int_equal(dfc_ratelimit_take(&rl, 64 * KiB, now, NULL), 0);
    /* 64 KiB more would take 62.5 ms: not by 1 ms from now. */
    int64_t t0 = dfc_mono_ns();
    assert_int_equal(dfc_ratelimit_take(&rl, 64 * KiB, t0 + DFC_NS_PER_MS, NULL), -ETIMEDOUT);
    /* 100 MiB would take 100 s: refused at once, not after a wait (a generous bound). */
    assert_int_equal(dfc_ratelimit_take(&rl, 100 * MiB, t0 + 50 * DFC_NS_PER_SEC, NULL),
                     -ETIMEDOUT);
    assert_true(dfc_mono_ns() - t0 < 10 * DFC_NS_PER_SEC);
    /* Nothing was taken by the refusals: 70 ms refill the whole burst (capped at 64 KiB). */
    sleep_ms(70);
    assert_int_equal(dfc_ratelimit_take(&rl, 64 * KiB, dfc_mono_ns(), NULL), 0);
    /* A take larger than the burst waits for the rest: 192 KiB more than the bucket holds at
     * 1 MiB/s is at least 187 ms. */
    t0 = dfc_mono_ns();
    assert_int_equal(dfc_ratelimit_take(&rl, 192 * KiB, t0 + 60 * DFC_NS_PER_SEC, NULL), 0);
    assert_true(dfc_mono_ns() - t0 >= 187 * DFC_NS_PER_MS);
    dfc_ratelimit_destroy(&rl);
}

struct taker {
    struct dfc_ratelimit *rl;
    uint64_t total, chunk;
    const atomic_bool *stop;
    int r;
};

static void *take_main(void *arg) {
    struct taker *t = arg;
    int64_t deadline = dfc_mono_ns() + 120 * DFC_NS_PER_SEC;
    for (uint64_t done = 0; done < t->total && t->r == 0; done += t->chunk) {
        t->r = dfc_ratelimit_take(t->rl, t->chunk, deadline, t->stop);
    }
    return NULL;
}

/* Four threads share one bucket of 8 MiB/s (burst 1 MiB, the default eighth of a second):
 * 6 MiB in 256 KiB takes cannot pass in less than (6 - 1) / 8 s = 625 ms. */
static void test_threads_share_the_rate(void **state) {
    (void)state;
    struct dfc_ratelimit rl;
    dfc_ratelimit_init(&rl, 8 * MiB, 0);
    pthread_t th[4];
    struct taker t[4];
    int64_t t0 = dfc_mono_ns();
    for (int i = 0; i < 4; i++) {
        t[i] = (struct taker){.rl = &rl, .total = 1536 * KiB, .chunk = 256 * KiB};
        assert_int_equal(pthread_create(&th[i], NULL, take_main, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].r, 0);
    }
    int64_t took = dfc_mono_ns() - t0;
    assert_true(took >= 625 * DFC_NS_PER_MS);
    dfc_ratelimit_destroy(&rl);
}

/* A take sleeping on a long debt returns -ECANCELED as soon as its stop flag is set and the
 * bucket woken, and gives its bytes back; a set flag refuses a take at once. */
static void test_stop_cancels_a_sleeping_take(void **state) {
    (void)state;
    struct dfc_ratelimit rl;
    dfc_ratelimit_init(&rl, 64 * KiB, 64 * KiB);
    atomic_bool stop = false;
    /* The burst, then 1 MiB: 16 s of debt. */
    assert_int_equal(dfc_ratelimit_take(&rl, 64 * KiB, dfc_mono_ns(), &stop), 0);
    struct taker t = {.rl = &rl, .total = MiB, .chunk = MiB, .stop = &stop};
    pthread_t th;
    int64_t t0 = dfc_mono_ns();
    assert_int_equal(pthread_create(&th, NULL, take_main, &t), 0);
    sleep_ms(50);
    atomic_store(&stop, true);
    dfc_ratelimit_wake(&rl);
    pthread_join(th, NULL);
    assert_int_equal(t.r, -ECANCELED);
    assert_true(dfc_mono_ns() - t0 < 8 * DFC_NS_PER_SEC); /* far less than the 16 s debt */
    assert_int_equal(dfc_ratelimit_take(&rl, 1, dfc_mono_ns() + DFC_NS_PER_SEC, &stop), -ECANCELED);
    /* The 1 MiB was given back: after a refill of the bucket (~1 s at 64 KiB/s) the burst is
     * there at once, not 16 s later. */
    sleep_ms(1100);
    assert_int_equal(dfc_ratelimit_take(&rl, 64 * KiB, dfc_mono_ns(), NULL), 0);
    dfc_ratelimit_destroy(&rl);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlimited_is_free),
        cmocka_unit_test(test_burst_and_deadline),
        cmocka_unit_test(test_threads_share_the_rate),
        cmocka_unit_test(test_stop_cancels_a_sleeping_take),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
