/*
 * piece_writer.h - one thread that writes the pieces a download's workers receive into its
 * replica, fed through a small pool of chunk buffers.
 *
 * Why: eight workers writing one spool each take the file's inode lock for every chunk; on
 * tmpfs the waiters spin on it (a fifth of both cores in the P2P benchmark). Here each worker
 * receives (and CRCs) into a buffer of the pool, hands it to the writer and goes on receiving
 * into the next one; the writer alone calls dfd_replica_pwrite(), so the lock is never
 * contended and receiving overlaps writing.
 *
 * Ownership: the writer borrows the replica (it must outlive dfd_piece_writer_free()) and
 * owns the pool. A buffer taken with dfd_piece_writer_buffer() is the caller's until it is
 * given back, written (dfd_piece_writer_put) or not (dfd_piece_writer_release). A job lives
 * on its worker's stack; every chunk put under it must be waited for (dfd_piece_job_wait)
 * before the job goes away or the piece is finished: until then the writer may still write
 * into the piece's range. A worker holds at most one buffer it has not put, so the pool never
 * runs dry for good: the writer returns each buffer once its chunk is written.
 */
#ifndef DFD_P2P_PIECE_WRITER_H
#define DFD_P2P_PIECE_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "storage/storage.h"

struct dfd_piece_writer;

/* One piece's chunks: on the worker's stack, initialised by dfd_piece_job_init(). */
struct dfd_piece_job {
    struct dfd_piece_writer *w;
    uint32_t number;
    unsigned queued;      /* chunks put and not yet written (the writer's mutex) */
    int result;           /* the first write error of the piece, or 0 (the writer's mutex) */
    struct dfc_error err; /* with result */
};

/* Starts the writer over rep with n_bufs buffers (>= 1) of buf_len bytes (> 0). -EINVAL,
 * -ENOMEM, or -EAGAIN when no thread could be made; nothing is left started on error. */
int dfd_piece_writer_new(struct dfd_replica *rep, size_t n_bufs, size_t buf_len,
                         struct dfd_piece_writer **ret, struct dfc_error *err);

/* Stops the thread (every job must have been waited for) and frees the pool. NULL is fine. */
void dfd_piece_writer_free(struct dfd_piece_writer *w);

/* A free buffer of the pool (buf_len bytes), waiting until one is free. Never NULL. */
void *dfd_piece_writer_buffer(struct dfd_piece_writer *w);

/* Gives back a buffer taken and not put. */
void dfd_piece_writer_release(struct dfd_piece_writer *w, void *buf);

void dfd_piece_job_init(struct dfd_piece_job *j, struct dfd_piece_writer *w, uint32_t number);

/* Queues n bytes (n <= buf_len) of buf, the chunk at byte at of j's piece; buf is the
 * writer's from here on and returns to the pool once written. After a write error of the
 * job the chunk is not written (the job already failed). */
void dfd_piece_writer_put(struct dfd_piece_job *j, uint64_t at, void *buf, size_t n);

/* Waits until every chunk put under j is written. 0, or the job's first write error (with
 * err set: "no space left ... while writing piece N" and the like, dfd_replica_pwrite's). */
int dfd_piece_job_wait(struct dfd_piece_job *j, struct dfc_error *err);

#endif /* DFD_P2P_PIECE_WRITER_H */
