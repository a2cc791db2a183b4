/*
 * rpc_fetch.h - the DownloadPersistentCacheTask stream, shared by the Unix-socket export
 * (rpc_download.c) and the TCP replication pull (rpc_upload.c): the Started response and one
 * DownloadPieceFinishedResponse per piece, each piece sent exactly once, whether it came from
 * peers through the P2P engine (REMOTE_PEER, as it is written) or from the local store
 * (LOCAL_PEER).
 *
 * Ownership: a struct dfd_fetch is the handler's (on its stack); svc and call are borrowed for
 * the call; dfd__fetch_done() frees what it holds.
 */
#ifndef DFD_RPC_FETCH_H
#define DFD_RPC_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "storage/task.h"

struct dfc_rpc_call;
struct dfd_service;

struct dfd_fetch {
    struct dfd_service *svc;
    struct dfc_rpc_call *call;
    const char *task_id; /* borrowed: the request's */
    char peer_id[DFD_PEER_ID_MAX];
    bool with_content; /* need_piece_content: each piece carries its bytes */
    bool started;      /* the Started response went out */
    uint8_t *sent;     /* a bit per piece number sent (grown on demand) */
    size_t sent_bytes;
    uint32_t n_sent;
};

/* Fills f (a fresh peer id for the responses). */
int dfd__fetch_init(struct dfd_fetch *f, struct dfd_service *svc, struct dfc_rpc_call *call,
                    const char *task_id, bool with_content, struct dfc_error *err);
void dfd__fetch_done(struct dfd_fetch *f);

/* Sends the Started response once (later calls do nothing). */
int dfd__fetch_started(struct dfd_fetch *f, uint64_t content_length, struct dfc_error *err);

/* Makes the task local through the P2P engine (svc->p2p must be set), streaming Started and
 * each piece as it is written; *ret is the committed task (dfd_task_meta_done). */
int dfd__fetch_remote(struct dfd_fetch *f, bool persistent, const char *tag,
                      const char *application, struct dfd_task_meta *ret, struct dfc_error *err);

/* Sends, from the store (content_fd from dfd_storage_open_content), every piece of t not sent
 * yet; with content, each read and CRC-checked into its own bulk buffer. */
int dfd__fetch_send_stored(struct dfd_fetch *f, int content_fd, const struct dfd_task_meta *t,
                           struct dfc_error *err);

#endif /* DFD_RPC_FETCH_H */
