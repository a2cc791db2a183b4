/* Tests for lib/src/thread.c: a helper thread's sleep, wake, stop and join. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include "dfc/pbtime.h"
#include "dfc/thread.h"

/* A periodic thread: counts its ticks until stopped. */
struct ticker {
    struct dfc_thread t;
    int64_t interval_ns;
    atomic_int ticks;
    atomic_bool returned;
};

static void *tick_main(void *arg) {
    struct ticker *k = arg;
    while (dfc_thread_sleep(&k->t, k->interval_ns)) {
        atomic_fetch_add(&k->ticks, 1);
    }
    atomic_store(&k->returned, true);
    return NULL;
}

/* A thread sleeping for "ever" (a saturated deadline) is stopped and joined at once; the
 * test hangs to its ctest timeout if the stop does not wake it. */
static void test_stop_wakes_a_long_sleep(void **state) {
    struct ticker k = {.interval_ns = INT64_MAX};
    assert_int_equal(dfc_thread_start(&k.t, tick_main, &k), 0);
    dfc_thread_stop(&k.t);
    assert_true(atomic_load(&k.returned));
    assert_int_equal(atomic_load(&k.ticks), 0);
}

/* A short interval ticks; after the stop no further tick happens. */
static void test_periodic_ticks_then_stops(void **state) {
    struct ticker k = {.interval_ns = DFC_NS_PER_MS};
    assert_int_equal(dfc_thread_start(&k.t, tick_main, &k), 0);
    while (atomic_load(&k.ticks) < 3) {
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    dfc_thread_stop(&k.t);
    assert_true(atomic_load(&k.returned));
    int n = atomic_load(&k.ticks);
    struct timespec d = {0, 5000000};
    nanosleep(&d, NULL);
    assert_int_equal(atomic_load(&k.ticks), n);
}

/* A sleep after the stop returns false without waiting. */
static void *late_main(void *arg) {
    struct dfc_thread *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        dfc_thread_wait_locked(t, NULL);
    }
    pthread_mutex_unlock(&t->mu);
    /* Stopped: every later sleep, however long, returns false at once. */
    for (int i = 0; i < 100; i++) {
        if (dfc_thread_sleep(t, INT64_MAX)) {
            return (void *)1;
        }
    }
    return NULL;
}

static void test_sleep_after_stop(void **state) {
    struct dfc_thread t;
    assert_int_equal(dfc_thread_start(&t, late_main, &t), 0);
    pthread_mutex_lock(&t.mu);
    t.stop = true;
    dfc_thread_wake_locked(&t);
    pthread_mutex_unlock(&t.mu);
    void *ret = (void *)2;
    pthread_join(t.id, &ret);
    assert_null(ret);
    pthread_cond_destroy(&t.cv);
    pthread_mutex_destroy(&t.mu);
}

/* A job handed over under mu, waited for with dfc_thread_wait_locked() on both sides. */
struct worker {
    struct dfc_thread t;
    int job, done;
};

static void *work_main(void *arg) {
    struct worker *w = arg;
    pthread_mutex_lock(&w->t.mu);
    for (;;) {
        while (w->job == 0 && !w->t.stop) {
            dfc_thread_wait_locked(&w->t, NULL);
        }
        if (w->job == 0) {
            break; /* stopped with nothing left to do */
        }
        w->done += w->job;
        w->job = 0;
        dfc_thread_wake_locked(&w->t);
    }
    pthread_mutex_unlock(&w->t.mu);
    return NULL;
}

static void test_jobs_and_timed_wait(void **state) {
    struct worker w = {0};
    assert_int_equal(dfc_thread_start(&w.t, work_main, &w), 0);
    for (int i = 1; i <= 50; i++) {
        pthread_mutex_lock(&w.t.mu);
        w.job = i;
        dfc_thread_wake_locked(&w.t);
        while (w.job != 0) {
            dfc_thread_wait_locked(&w.t, NULL);
        }
        pthread_mutex_unlock(&w.t.mu);
    }
    /* Nobody wakes this wait: the deadline ends it. */
    pthread_mutex_lock(&w.t.mu);
    struct timespec until = dfc_deadline_after(DFC_NS_PER_MS);
    int r;
    while ((r = dfc_thread_wait_locked(&w.t, &until)) == 0) {
    }
    pthread_mutex_unlock(&w.t.mu);
    assert_int_equal(r, -ETIMEDOUT);
    dfc_thread_stop(&w.t);
    assert_int_equal(w.done, 50 * 51 / 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_wakes_a_long_sleep),
        cmocka_unit_test(test_periodic_ticks_then_stops),
        cmocka_unit_test(test_sleep_after_stop),
        cmocka_unit_test(test_jobs_and_timed_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
