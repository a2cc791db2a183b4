/*
 * stream_cap.h - per-remote caps on long-lived streams: at most max streams of one method open
 * at once per remote, so that one host cannot block everyone else's with streams that each
 * hold a worker for their life. A handler enters at its start and leaves at its end; a stream
 * beyond the cap is refused RESOURCE_EXHAUSTED (-EUSERS) naming the limit, with a rate-limited
 * warning.
 *
 * The remote is dfc_rpc_call_remote()'s key (the peer address today; a certificate's identity
 * with TLS), so the cap follows whatever that function decides.
 *
 * Thread-safe: a mutex of its own guards the counts. Ownership: method and option are borrowed
 * (string literals) and must outlive the cap.
 */
#ifndef DFC_STREAM_CAP_H
#define DFC_STREAM_CAP_H

#include <pthread.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/keycount.h"
#include "dfc/rpc_server.h"

struct dfc_stream_cap {
    pthread_mutex_t mu;
    struct dfc_keycount open; /* under mu */
    unsigned max;             /* 0: no cap */
    const char *method;       /* "AnnouncePersistentCachePeer", in messages */
    const char *option;       /* the config key of max, in messages */
    int64_t last_log_ms;      /* under mu */
    unsigned refused;         /* under mu: since the last warning */
};

void dfc_stream_cap_init(struct dfc_stream_cap *c, unsigned max, const char *method,
                         const char *option);
void dfc_stream_cap_destroy(struct dfc_stream_cap *c);

/* Counts call's stream against its remote: 0 with the remote's key in key (pass it to
 * dfc_stream_cap_leave), or -EUSERS "<method>: <n> streams from <remote> already open
 * (<option>)" and nothing counted. */
int dfc_stream_cap_enter(struct dfc_stream_cap *c, struct dfc_rpc_call *call,
                         char key[DFC_RPC_REMOTE_MAX], struct dfc_error *err);

/* Ends a stream counted by dfc_stream_cap_enter. */
void dfc_stream_cap_leave(struct dfc_stream_cap *c, const char *key);

#endif /* DFC_STREAM_CAP_H */
