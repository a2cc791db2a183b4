/*
 * download_parents.c - a P2P download's parents (download_internal.h): taken from the
 * scheduler's answers (checked, deduplicated, at most DFD_P2P_MAX_PARENTS), their cool-downs,
 * and each parent's piece list read on a thread of its own as it grows
 * (SyncPersistentCachePieces: a parent still downloading the task reports each piece as it
 * lands). Used by the swarm (download_round.c) and the leader's watch (download_watch.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/rpc_client.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "p2p/download_internal.h"

static bool valid_ip(const char *ip) {
    return ip != NULL && strlen(ip) < IP_MAX && dfc_addr_is_ip(ip);
}

bool dfd__excluded_host(const struct run *rd, const char *host_id) {
    for (size_t x = 0; x < rd->n_excluded; x++) {
        if (strcmp(rd->excluded[x], host_id) == 0) {
            return true;
        }
    }
    return false;
}

size_t dfd__take_parents(struct run *rd,
                         const Scheduler__V2__NormalPersistentCacheTaskResponse *n) {
    size_t added = 0;
    for (size_t i = 0; i < n->n_candidate_cache_parents && rd->n_parents < DFD_P2P_MAX_PARENTS;
         i++) {
        const Common__V2__PersistentCachePeer *pe = n->candidate_cache_parents[i];
        const Common__V2__Host *h = pe != NULL ? pe->host : NULL;
        if (h == NULL || pe->id == NULL || pe->id[0] == '\0' || strlen(pe->id) >= DFD_PEER_ID_MAX ||
            !valid_ip(h->ip) || h->port <= 0 || h->port > 65535 ||
            (h->id != NULL && strlen(h->id) >= DFD_PEER_ID_MAX) ||
            (h->id != NULL && strcmp(h->id, rd->p->host_id) == 0)) {
            DFC_LOG(DFC_LOG_WARN, "p2p.parent_skipped", "task_id=%s parent=%s, ignoring",
                    rd->req->task_id, pe != NULL && pe->id != NULL ? pe->id : "-");
            continue;
        }
        const char *hid = h->id != NULL && h->id[0] != '\0' ? h->id : pe->id;
        bool known = dfd__excluded_host(rd, hid); /* it served bytes that failed verification */
        for (size_t k = 0; k < rd->n_parents && !known; k++) {
            known =
                strcmp(rd->parents[k].id, pe->id) == 0 || strcmp(rd->parents[k].host_id, hid) == 0;
        }
        if (known) {
            continue;
        }
        struct parent *pa = &rd->parents[rd->n_parents];
        memset(pa, 0, sizeof(*pa));
        snprintf(pa->id, sizeof(pa->id), "%s", pe->id);
        snprintf(pa->host_id, sizeof(pa->host_id), "%s", hid);
        snprintf(pa->host_ip, sizeof(pa->host_ip), "%s", h->ip);
        pa->host_port = (uint16_t)h->port;
        pa->pe = (Common__V2__PersistentCachePeer *)pe; /* in the answer dfd__keep_answer keeps */
        rd->n_parents++;
        added++;
    }
    return added;
}

void dfd__keep_answer(struct run *rd, ProtobufCMessage *msg, size_t added) {
    if (added > 0 && rd->n_answers < DFD_P2P_MAX_PARENTS) {
        rd->answers[rd->n_answers++] = msg; /* each adds a parent: never more than there are */
    } else {
        dfc_rpc_msg_free(msg);
    }
}

void dfd__drop_answers(struct run *rd) {
    rd->n_parents = 0;
    for (size_t i = 0; i < rd->n_answers; i++) {
        dfc_rpc_msg_free(rd->answers[i]);
        rd->answers[i] = NULL;
    }
    rd->n_answers = 0;
}

/* Parent pa failed (a piece, or its sync) for the n-th time in a row: no new piece goes to it
 * for a while, 1 s doubling up to 8 s. */
void dfd__cool_down(struct parent *pa, unsigned n, int64_t now) {
    int64_t d = COOLDOWN_NS;
    for (unsigned i = 1; i < n && d < COOLDOWN_MAX_NS; i++) {
        d *= 2;
    }
    pa->cooldown_until = now + (d < COOLDOWN_MAX_NS ? d : COOLDOWN_MAX_NS);
}

/* Asks parent k which missing pieces it has, and keeps reading as it reports more (a parent
 * still downloading the task reports each piece as it lands); marks them in rd->have under
 * rd->mu (with pa->vortex_*, which are set before the first bit and never change after).
 * The stream lasts at most scheduler.scheduleTimeout, and ends early when the swarm ends
 * (cancelled). Ends with pa->syncing false. */
static void sync_parent(struct run *rd, size_t k) {
    struct parent *pa = &rd->parents[k];
    char target[IP_MAX + 16];
    dfc_addr_format(pa->host_ip, pa->host_port, target, sizeof(target));
    struct dfc_error err;
    struct dfc_rpc_client *c = NULL;
    struct dfc_rpc_stream *st = NULL;
    /* The pieces still missing when the sync starts: those are the ones worth hearing of. */
    uint32_t *want = calloc(rd->piece_count ? rd->piece_count : 1, sizeof(*want));
    size_t n_want = 0;
    pthread_mutex_lock(&rd->mu);
    for (uint32_t i = 0; want != NULL && i < rd->piece_count; i++) {
        if (rd->state[i] != PIECE_WRITTEN && (rd->have[i] & (UINT32_C(1) << k)) == 0) {
            want[n_want++] = i;
        }
    }
    pthread_mutex_unlock(&rd->mu);
    Dfdaemon__V2__SyncPersistentCachePiecesRequest req =
        DFDAEMON__V2__SYNC_PERSISTENT_CACHE_PIECES_REQUEST__INIT;
    req.host_id = rd->p->host_id;
    req.task_id = (char *)rd->req->task_id;
    req.interested_piece_numbers = want;
    req.n_interested_piece_numbers = n_want;
    struct dfc_rpc_client_opts co = {.tls = rd->p->o.tls, .tls_files = rd->p->o.tls_files};
    int r = want == NULL ? dfc_error_set(&err, -ENOMEM, "out of memory") : 0;
    if (r == 0 && n_want > 0) {
        r = dfc_rpc_client_new(target, &co, &c, &err);
    }
    if (r == 0 && n_want > 0) {
        r = dfc_rpc_stream_open(c, &rd->p->sync_pieces,
                                rd->p->o.schedule_timeout_ns / DFC_NS_PER_MS, &st, &err);
    }
    if (st != NULL) {
        pthread_mutex_lock(&rd->mu);
        pa->sync_st = st;
        if (rd->over) {
            dfc_rpc_stream_cancel(st);
        }
        pthread_mutex_unlock(&rd->mu);
    }
    if (r == 0 && st != NULL && (r = dfc_rpc_stream_send(st, &req.base, &err)) == 0) {
        r = dfc_rpc_stream_close_send(st, &err);
    }
    /* At most one answer per piece asked for: a parent cannot keep us reading. */
    for (size_t got = 0; r == 0 && st != NULL && got < n_want; got++) {
        ProtobufCMessage *msg = NULL;
        r = dfc_rpc_stream_recv(st, rd->p->sync_pieces.resp, &msg, &err);
        if (r <= 0) {
            break;
        }
        r = 0;
        const Dfdaemon__V2__SyncPersistentCachePiecesResponse *m = (const void *)msg;
        if (m->number >= rd->piece_count || m->offset != dfd__piece_offset(rd, m->number) ||
            m->length != dfd__piece_len(rd, m->number) || !valid_ip(m->ip) ||
            m->opt_tcp_port_case == 0 || m->tcp_port <= 0 || m->tcp_port > 65535) {
            DFC_LOG(DFC_LOG_WARN, "p2p.sync_bad_piece",
                    "task_id=%s parent=%s piece=%u offset=%" PRIu64 " length=%" PRIu64 ", ignoring",
                    rd->req->task_id, pa->id, (unsigned)m->number, m->offset, m->length);
            dfc_rpc_msg_free(msg);
            continue;
        }
        pthread_mutex_lock(&rd->mu);
        if (pa->vortex_ip[0] == '\0') {
            snprintf(pa->vortex_ip, sizeof(pa->vortex_ip), "%s", m->ip);
            pa->vortex_port = (uint16_t)m->tcp_port;
        }
        uint32_t bit = UINT32_C(1) << k;
        if (strcmp(pa->vortex_ip, m->ip) == 0 && pa->vortex_port == m->tcp_port &&
            (rd->have[m->number] & bit) == 0) {
            rd->have[m->number] |= bit;
            pa->n_have++;
            rd->progress_ns = dfc_mono_ns();
            pthread_cond_signal(&rd->synced); /* one idle worker may take it */
        }
        pthread_mutex_unlock(&rd->mu);
        dfc_rpc_msg_free(msg);
    }
    pthread_mutex_lock(&rd->mu);
    bool over = rd->over;
    pa->sync_st = NULL;
    pthread_mutex_unlock(&rd->mu);
    dfc_rpc_stream_free(st);
    dfc_rpc_client_free(c);
    free(want);
    if (r < 0 && !over) {
        DFC_LOG(DFC_LOG_WARN, "p2p.sync_failed", "task_id=%s parent=%s addr=%s error=\"%s\"",
                rd->req->task_id, pa->id, target, dfc_error_msg(&err));
    }
    pthread_mutex_lock(&rd->mu);
    if (r < 0 && !over) {
        pa->sync_failures++;
        dfd__cool_down(pa, pa->sync_failures, dfc_mono_ns());
    } else if (r >= 0) {
        pa->sync_failures = 0; /* "in a row" */
    }
    pa->syncing = false;
    pthread_cond_broadcast(&rd->synced);
    pthread_mutex_unlock(&rd->mu);
}

static void *sync_main(void *arg) {
    struct parent *pa = arg;
    sync_parent(pa->rd, (size_t)(pa - pa->rd->parents));
    return NULL;
}

/* rd->mu held: starts parent k's sync on a thread (or here, when none can be made). */
void dfd__start_sync(struct run *rd, size_t k) {
    struct parent *pa = &rd->parents[k];
    if (pa->sync_started) {
        pthread_join(pa->sync_th, NULL); /* the last sync ended: it only returns now */
    }
    pa->rd = rd;
    pa->syncing = true;
    pa->sync_started = pthread_create(&pa->sync_th, NULL, sync_main, pa) == 0;
    if (!pa->sync_started) {
        pthread_mutex_unlock(&rd->mu);
        sync_parent(rd, k);
        pthread_mutex_lock(&rd->mu);
    }
}
