/*
 * redis_bounds.c - bounds on what the scheduler reads from Redis, whatever Redis holds.
 *
 * hiredis 0.14's reader builds any reply the server sends: an array of millions of junk
 * members, a string of hundreds of MiB (Redis allows 512 MiB). So each connection's reader
 * builds its objects through functions that refuse an array of more than
 * SCHED_REDIS_MAX_ELEMENTS elements (checked from the array's header, before any element is
 * read) and a string of more than SCHED_REDIS_MAX_STRING bytes. A refusal is the reader's
 * out-of-memory error: it frees what it built and its buffer, the command fails -ENOMEM and the
 * pool drops the connection (redis_conn.c), so nothing of such a reply stays. What the bounds
 * leave: one string up to Redis's own limit is buffered before it is refused (hiredis reads a
 * bulk whole before building it).
 *
 * The default functions are the same table for every context; the first install copies it.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>

#include "redis_internal.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static bool ready; /* under mu, then read-only */
static redisReplyObjectFunctions defaults, bounded;

static void *create_string(const redisReadTask *task, char *str, size_t len) {
    return len > SCHED_REDIS_MAX_STRING ? NULL : defaults.createString(task, str, len);
}

static void *create_array(const redisReadTask *task, int elements) {
    return elements > SCHED_REDIS_MAX_ELEMENTS ? NULL : defaults.createArray(task, elements);
}

void sched__redis_bound_replies(redisReader *reader) {
    if (reader == NULL || reader->fn == NULL || reader->fn == &bounded) {
        return;
    }
    pthread_mutex_lock(&mu);
    if (!ready) {
        defaults = *reader->fn;
        bounded = defaults;
        bounded.createString = create_string;
        bounded.createArray = create_array;
        ready = true;
    }
    pthread_mutex_unlock(&mu);
    reader->fn = &bounded;
}
