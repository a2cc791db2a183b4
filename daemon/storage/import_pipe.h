/*
 * import_pipe.h - the two-stage pipeline of an import: the bytes one thread receives (or
 * reads) are hashed (SHA-256) on a second thread while a third writes them to the spool and
 * CRCs them, through a bounded queue of slices. Private to daemon/storage (import.c).
 *
 * Ownership: a slice's bytes stay the pusher's until both stages are done with them; then
 * the stage that finished last calls its release(arg) (no copy is ever made). The pipe owns
 * the slices it holds: dfd__pipe_stop() releases whatever is still queued. The digester and
 * the spool fd are borrowed from the import and must outlive the pipe; while it runs, only
 * the pipe touches them.
 */
#ifndef DFD_STORAGE_IMPORT_PIPE_H
#define DFD_STORAGE_IMPORT_PIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "piece.h"

struct dfd__pipe;

/* Starts both stages over dg (SHA only when dg->p.hash_content) and fd (-1: CRC only, the
 * spool already holds the bytes). -ENOMEM or -EAGAIN (no thread: nothing was started). */
int dfd__pipe_start(struct dfd_digester *dg, int fd, struct dfd__pipe **ret);

/* Queues the slice of n buffers iov (len bytes in all) and returns its sequence number (>= 0),
 * waiting while the queue is full (at most DFD__PIPE_SLOTS slices or DFD__PIPE_BYTES bytes
 * queued, at least one slice). On a stage's earlier error returns that error (negative errno)
 * and queues nothing. Either way the buffers are the pipe's from the call on, and so is the
 * array iov when n > 1 (one iovec is copied): release(arg) (NULL: nothing to call) runs once
 * both stages are done with them, or at once when they were not queued. */
int64_t dfd__pipe_push(struct dfd__pipe *p, const struct iovec *iov, int n, size_t len,
                       void (*release)(void *arg), void *arg);

/* Waits until both stages are done with slice seq (and every one before it), or one failed.
 * 0 or the first stage error. */
int dfd__pipe_wait(struct dfd__pipe *p, int64_t seq);

/* Waits until every queued slice is done (or a stage failed), stops and joins both stages,
 * releases what is still queued and frees p. Returns the first stage error, or 0. With
 * drain false it does not wait: queued slices are dropped (an abort). NULL is fine. */
int dfd__pipe_stop(struct dfd__pipe *p, bool drain);

#define DFD__PIPE_SLOTS 8
#define DFD__PIPE_BYTES ((size_t)12 << 20)

#endif /* DFD_STORAGE_IMPORT_PIPE_H */
