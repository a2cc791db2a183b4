/*
 * stream_cap.c - per-remote caps on long-lived streams (dfc/stream_cap.h).
 */
#include "dfc/stream_cap.h"

#include <errno.h>
#include <stdio.h>

#include "dfc/clock.h"
#include "dfc/log.h"

#define LOG_EVERY_MS 10000

void dfc_stream_cap_init(struct dfc_stream_cap *c, unsigned max, const char *method,
                         const char *option) {
    *c = (struct dfc_stream_cap){.max = max, .method = method, .option = option};
    pthread_mutex_init(&c->mu, NULL);
}

void dfc_stream_cap_destroy(struct dfc_stream_cap *c) {
    dfc_keycount_free(&c->open);
    pthread_mutex_destroy(&c->mu);
}

int dfc_stream_cap_enter(struct dfc_stream_cap *c, struct dfc_rpc_call *call,
                         char key[DFC_RPC_REMOTE_MAX], struct dfc_error *err) {
    if (dfc_rpc_call_remote(call, key, DFC_RPC_REMOTE_MAX) < 0) {
        key[0] = '\0';
    }
    pthread_mutex_lock(&c->mu);
    int r = dfc_keycount_take(&c->open, key, c->max);
    bool log = false;
    unsigned refused = 0;
    if (r < 0) {
        c->refused++;
        int64_t now = dfc_mono_ms();
        if (c->last_log_ms == 0 || now - c->last_log_ms >= LOG_EVERY_MS) {
            log = true;
            refused = c->refused;
            c->refused = 0;
            c->last_log_ms = now;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (r >= 0) {
        return 0;
    }
    const char *who = key[0] != '\0' ? key : "an unknown remote";
    if (log) {
        DFC_LOG(DFC_LOG_WARN, "rpc.stream_refused", "method=%s last_remote=\"%s\" refused=%u %s=%u",
                c->method, who, refused, c->option, c->max);
    }
    if (r == -EBUSY) {
        return dfc_error_set(err, -EUSERS, "%s: %u streams from %s already open (%s)", c->method,
                             c->max, who, c->option);
    }
    return dfc_error_set(err, r, "%s: out of memory", c->method);
}

void dfc_stream_cap_leave(struct dfc_stream_cap *c, const char *key) {
    pthread_mutex_lock(&c->mu);
    dfc_keycount_put(&c->open, key);
    pthread_mutex_unlock(&c->mu);
}
