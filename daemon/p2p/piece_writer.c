/*
 * piece_writer.c - one writer thread per download over a pool of chunk buffers (see
 * piece_writer.h).
 *
 * DESIGN: the dfc_thread's mutex guards everything below. The pool is one anonymous mapping
 * (unmapped when the writer is freed, so an idle daemon gives it back: from malloc, a
 * multi-MiB pool freed once raises glibc's mmap threshold and stays on the heap) cut into
 * n_bufs buffers, with a stack of the free ones; the queue is a ring of n_bufs chunks
 * (a queued chunk holds a buffer, so it never overflows). Three condition variables, so a
 * change wakes only who waits for it: the thread's own (a chunk was queued, or stop), `freed`
 * (a buffer came back: one waiter), `done` (a job's last chunk was written: its waiter).
 */
#include "p2p/piece_writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dfc/thread.h"

struct chunk {
    struct dfd_piece_job *job;
    uint64_t at;
    void *buf;
    size_t n;
};

struct dfd_piece_writer {
    struct dfc_thread t; /* t.mu guards the fields below and every job's queued and result */
    pthread_cond_t freed;
    pthread_cond_t done;
    struct dfd_replica *rep;
    size_t buf_len, n_bufs;
    uint8_t *mem; /* the pool: n_bufs * buf_len bytes mapped, or NULL */
    void **free_bufs;
    size_t n_free;
    struct chunk *ring;
    size_t head, count;
};

/* The writer is the pipeline's one serial stage: at the same priority the eight receivers
 * (and, on a small node, the senders) take turns on its core, and they wait for its buffers
 * anyway. Raised where the daemon may (CAP_SYS_NICE; else it stays as it is): a 1 GiB fetch
 * in hack/bench/p2p.sh, 12 runs each, 1.33 s median instead of 1.44 s. It writes only what
 * was received, so it cannot take a core for longer than the transfer. */
#define WRITER_NICE (-10)

static void *writer_main(void *arg) {
    struct dfd_piece_writer *w = arg;
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), WRITER_NICE);
    pthread_mutex_lock(&w->t.mu);
    for (;;) {
        while (w->count == 0 && !w->t.stop) {
            (void)dfc_thread_wait_locked(&w->t, NULL);
        }
        if (w->count == 0) {
            break; /* stopped, and nothing left to write */
        }
        struct chunk c = w->ring[w->head];
        w->head = (w->head + 1) % w->n_bufs;
        w->count--;
        struct dfd_piece_job *j = c.job;
        bool skip = j->result < 0;
        pthread_mutex_unlock(&w->t.mu);
        struct dfc_error e;
        int r = skip ? 0 : dfd_replica_pwrite(w->rep, j->number, c.at, c.buf, c.n, &e);
        pthread_mutex_lock(&w->t.mu);
        if (r < 0 && j->result == 0) {
            j->result = r;
            j->err = e;
        }
        w->free_bufs[w->n_free++] = c.buf;
        pthread_cond_signal(&w->freed);
        if (--j->queued == 0) {
            pthread_cond_broadcast(&w->done);
        }
    }
    pthread_mutex_unlock(&w->t.mu);
    return NULL;
}

static void free_parts(struct dfd_piece_writer *w) {
    if (w->mem != NULL) {
        munmap(w->mem, w->n_bufs * w->buf_len);
    }
    free(w->free_bufs);
    free(w->ring);
    free(w);
}

int dfd_piece_writer_new(struct dfd_replica *rep, size_t n_bufs, size_t buf_len,
                         struct dfd_piece_writer **ret, struct dfc_error *err) {
    if (rep == NULL || n_bufs == 0 || buf_len == 0 || n_bufs > SIZE_MAX / buf_len) {
        return dfc_error_set(err, -EINVAL, "a piece writer needs a replica and n_bufs x buf_len");
    }
    struct dfd_piece_writer *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    w->rep = rep;
    w->n_bufs = n_bufs;
    w->buf_len = buf_len;
    /* Populated at once: every buffer is written within the download's first chunks anyway, and
     * one batch costs the kernel less than a fault per page (16 MiB on the 2-core VM: 31-35 ms
     * of CPU time instead of 56-77 ms; a VM that hands freed pages back to its host pays
     * that on every download). */
    void *mem = mmap(NULL, n_bufs * buf_len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    w->mem = mem != MAP_FAILED ? mem : NULL;
    w->free_bufs = calloc(n_bufs, sizeof(*w->free_bufs));
    w->ring = calloc(n_bufs, sizeof(*w->ring));
    if (w->mem == NULL || w->free_bufs == NULL || w->ring == NULL) {
        free_parts(w);
        return dfc_error_set(err, -ENOMEM, "out of memory for %zu piece buffers of %zu bytes",
                             n_bufs, buf_len);
    }
    for (size_t i = 0; i < n_bufs; i++) {
        w->free_bufs[i] = w->mem + i * buf_len;
    }
    w->n_free = n_bufs;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->freed, &ca);
    pthread_cond_init(&w->done, &ca);
    pthread_condattr_destroy(&ca);
    if (dfc_thread_start(&w->t, writer_main, w) < 0) {
        pthread_cond_destroy(&w->freed);
        pthread_cond_destroy(&w->done);
        free_parts(w);
        return dfc_error_set(err, -EAGAIN, "no thread for the piece writer");
    }
    *ret = w;
    return 0;
}

void dfd_piece_writer_free(struct dfd_piece_writer *w) {
    if (w == NULL) {
        return;
    }
    dfc_thread_stop(&w->t); /* the thread writes what is still queued, then returns */
    pthread_cond_destroy(&w->freed);
    pthread_cond_destroy(&w->done);
    free_parts(w);
}

void *dfd_piece_writer_buffer(struct dfd_piece_writer *w) {
    pthread_mutex_lock(&w->t.mu);
    while (w->n_free == 0) {
        pthread_cond_wait(&w->freed, &w->t.mu);
    }
    void *buf = w->free_bufs[--w->n_free];
    pthread_mutex_unlock(&w->t.mu);
    return buf;
}

void dfd_piece_writer_release(struct dfd_piece_writer *w, void *buf) {
    pthread_mutex_lock(&w->t.mu);
    w->free_bufs[w->n_free++] = buf;
    pthread_cond_signal(&w->freed);
    pthread_mutex_unlock(&w->t.mu);
}

void dfd_piece_job_init(struct dfd_piece_job *j, struct dfd_piece_writer *w, uint32_t number) {
    *j = (struct dfd_piece_job){.w = w, .number = number};
}

void dfd_piece_writer_put(struct dfd_piece_job *j, uint64_t at, void *buf, size_t n) {
    struct dfd_piece_writer *w = j->w;
    pthread_mutex_lock(&w->t.mu);
    if (n > w->buf_len && j->result == 0) {
        j->result =
            dfc_error_set(&j->err, -EINVAL, "piece %u: a chunk of %zu bytes in a buffer of %zu",
                          j->number, n, w->buf_len);
    }
    w->ring[(w->head + w->count) % w->n_bufs] =
        (struct chunk){.job = j, .at = at, .buf = buf, .n = n};
    w->count++;
    j->queued++;
    dfc_thread_wake_locked(&w->t);
    pthread_mutex_unlock(&w->t.mu);
}

int dfd_piece_job_wait(struct dfd_piece_job *j, struct dfc_error *err) {
    struct dfd_piece_writer *w = j->w;
    pthread_mutex_lock(&w->t.mu);
    while (j->queued > 0) {
        pthread_cond_wait(&w->done, &w->t.mu);
    }
    int r = j->result;
    if (r < 0 && err != NULL) {
        *err = j->err;
    }
    pthread_mutex_unlock(&w->t.mu);
    return r;
}
