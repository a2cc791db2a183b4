/*
 * announcer.c - the AnnounceHost loop (see announcer.h).
 *
 * The figures are taken again for every announce (hostinfo.c keeps the previous CPU and
 * network sample, so percents and rates cover the time since the last announce). An outage is
 * one warning when it starts and one info line when a scheduler takes an announce again, never
 * a line per retry.
 */
#include "announcer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/log.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "hostinfo.h"
#include "rejoin.h"
#include "scheduler_client.h"

#define BACKOFF_MIN_NS DFC_NS_PER_SEC

struct dfd_announcer {
    struct dfc_thread thread;
    struct dfd_sched *sched;
    const struct dfd_config *cfg;
    char *host_id;
    struct dfd_rejoin *rejoin; /* ours; NULL: none */
};

/* One announce; true when a scheduler took it. err holds the failure. */
static bool announce_once(struct dfd_announcer *a, struct dfc_error *err) {
    Common__V2__Host *host = NULL;
    if (dfd_hostinfo_fill(a->cfg, a->host_id, &host, err) < 0) {
        return false;
    }
    int r = dfd_sched_announce_host(a->sched, host, a->cfg->announce_interval, err);
    dfd_hostinfo_free(host);
    return r == 0;
}

static void *announcer_main(void *arg) {
    struct dfd_announcer *a = arg;
    int64_t interval = a->cfg->announce_interval, backoff = BACKOFF_MIN_NS, delay = 0;
    bool away = false, ever = false;
    while (dfc_thread_sleep(&a->thread, delay)) {
        struct dfc_error err;
        if (announce_once(a, &err)) {
            if (away || !ever) {
                DFC_LOG(DFC_LOG_INFO, "scheduler.announced", "host_id=%s%s", a->host_id,
                        away ? " after an outage" : "");
            }
            /* After a start or an outage it may have dropped this host's peers; an import kept
             * without a peer meanwhile wants registering. */
            if (dfd_sched_take_unregistered(a->sched) || away || !ever) {
                dfd_rejoin_kick(a->rejoin);
            }
            away = false;
            ever = true;
            backoff = BACKOFF_MIN_NS;
            delay = interval;
            continue;
        }
        if (!away) {
            DFC_LOG(DFC_LOG_WARN, "scheduler.announce_failed",
                    "host_id=%s error=\"%s\": retrying every %llds at most, local imports and "
                    "exports keep working",
                    a->host_id, dfc_error_msg(&err), (long long)(interval / DFC_NS_PER_SEC));
            away = true;
        }
        delay = backoff;
        backoff = backoff > interval / 2 ? interval : backoff * 2;
    }
    return NULL;
}

int dfd_announcer_start(struct dfd_sched *sched, const struct dfd_config *cfg, const char *host_id,
                        struct dfd_rejoin *rejoin, struct dfd_announcer **ret,
                        struct dfc_error *err) {
    struct dfd_announcer *a = calloc(1, sizeof(*a));
    if (a == NULL || (a->host_id = strdup(host_id)) == NULL) {
        free(a);
        dfd_rejoin_stop(rejoin);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    a->sched = sched;
    a->cfg = cfg;
    a->rejoin = rejoin;
    int r = dfc_thread_start(&a->thread, announcer_main, a);
    if (r < 0) {
        dfd_rejoin_stop(rejoin);
        free(a->host_id);
        free(a);
        return dfc_error_errno(err, r, "start the scheduler announcer");
    }
    *ret = a;
    return 0;
}

void dfd_announcer_stop(struct dfd_announcer *a) {
    if (a == NULL) {
        return;
    }
    dfc_thread_stop(&a->thread);
    dfd_rejoin_stop(a->rejoin); /* before DeleteHost: no peer is registered after it */
    dfd_sched_delete_host(a->sched);
    free(a->host_id);
    free(a);
}
