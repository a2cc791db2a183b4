/*
 * thread.h - one helper thread with a stop flag: start, wake, timed sleep, stop and join.
 *
 *   struct dfc_thread t;                       the owner embeds it
 *   dfc_thread_start(&t, main_fn, arg)         mutex + CLOCK_MONOTONIC condvar + pthread
 *   in main_fn:  while (dfc_thread_sleep(&t, interval_ns)) { ...periodic work... }
 *           or:  lock t.mu; while (!t.stop && !have_work) dfc_thread_wait_locked(&t, NULL);
 *   dfc_thread_stop(&t)                        sets stop, wakes, joins, destroys
 *
 * t.mu guards t.stop and whatever state the owner shares with the thread (a queue, a job);
 * t.cv is broadcast on stop and by dfc_thread_wake_locked(), and the owner may wait on it for
 * its own conditions too. Timed waits use CLOCK_MONOTONIC, so wall-clock steps change nothing.
 * The struct is the owner's; it holds no heap memory.
 */
#ifndef DFC_THREAD_H
#define DFC_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct dfc_thread {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* under mu: the owner asked the thread to return */
    pthread_t id;
};

/* Initialises t and starts fn(arg) on a new thread. -EAGAIN when no thread can be made (t is
 * then left destroyed: nothing to stop). */
int dfc_thread_start(struct dfc_thread *t, void *(*fn)(void *), void *arg);

/* With t->mu held: waits for a broadcast on t->cv or until *deadline (CLOCK_MONOTONIC; NULL:
 * no deadline). Returns 0 when woken (spuriously too: callers loop on their condition),
 * -ETIMEDOUT when the deadline passed. */
int dfc_thread_wait_locked(struct dfc_thread *t, const struct timespec *deadline);

/* With t->mu held: wakes every waiter on t->cv. */
void dfc_thread_wake_locked(struct dfc_thread *t);

/* Sleeps for ns or until stopped. Returns true when the whole time passed without a stop,
 * false once a stop was asked (at once when it already was). Called without t->mu. */
bool dfc_thread_sleep(struct dfc_thread *t, int64_t ns);

/* The monotonic time ns from now, for dfc_thread_wait_locked() and other monotonic waits. */
struct timespec dfc_deadline_after(int64_t ns);

/* Sets stop, wakes the thread, joins it and destroys mu and cv. Called without t->mu, once,
 * by the owner (never by the thread itself). */
void dfc_thread_stop(struct dfc_thread *t);

#endif /* DFC_THREAD_H */
