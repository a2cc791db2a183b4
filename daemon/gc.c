/*
 * gc.c - the garbage collector of the persistent cache.
 */
#include "gc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/statvfs.h>

#include "dfc/log.h"
#include "dfc/thread.h"

int dfd_gc_disk_usage(struct dfd_storage *s, const struct dfd_gc_policy *p, uint64_t *ret_total,
                      uint64_t *ret_used, struct dfc_error *err) {
    if (p->disk_threshold > 0) {
        *ret_total = p->disk_threshold;
        return dfd_storage_content_bytes(s, ret_used, err);
    }
    struct statvfs v;
    if (statvfs(dfd_storage_dir(s), &v) < 0) {
        return dfc_error_errno(err, -errno, "statvfs `%s`", dfd_storage_dir(s));
    }
    *ret_total = (uint64_t)v.f_blocks * v.f_frsize;
    *ret_used = *ret_total - (uint64_t)v.f_bavail * v.f_frsize;
    return 0;
}

int dfd_gc_run_once(struct dfd_storage *s, const struct dfd_gc_policy *p, int64_t now_ns,
                    struct dfd_gc_report *ret, struct dfc_error *err) {
    struct dfd_gc_report rep = {0};
    struct dfd_task_meta *tasks;
    size_t n;
    dfd_storage_ensure_reserve(s); /* in case a delete on a full disk used it up */
    int r = dfd_storage_list(s, &tasks, &n, err);
    if (r < 0) {
        return r;
    }
    /* TTL first, regardless of the persistent flag. */
    for (size_t i = 0; i < n && r == 0; i++) {
        struct dfd_task_meta *t = &tasks[i];
        if (t->created_at_ns + t->ttl_ns < now_ns) {
            bool deleted; /* not when it was imported again since the list was read */
            r = dfd_storage_evict_task(s, t, false, &deleted, err);
            if (deleted && p->on_delete != NULL) {
                p->on_delete(p->on_delete_arg, t);
            }
            t->id[0] = '\0'; /* gone, or new: not an eviction candidate */
            rep.expired += deleted;
        }
    }
    uint64_t total = 0, used = 0;
    if (r == 0) {
        r = dfd_gc_disk_usage(s, p, &total, &used, err);
    }
    if (r == 0 && total > 0) {
        rep.usage_percent = (unsigned)(used * 100 / total);
        if (rep.usage_percent >= p->high_percent) {
            uint64_t target = total / 100 * p->low_percent;
            uint64_t need = used > target ? used - target : 0;
            /* The list is ordered by updated_at: least recently used first. */
            for (size_t i = 0; i < n && r == 0 && rep.evicted_bytes < need; i++) {
                struct dfd_task_meta *t = &tasks[i];
                if (t->id[0] == '\0' || t->persistent) {
                    continue;
                }
                bool deleted; /* not when it was used, made persistent or imported again */
                r = dfd_storage_evict_task(s, t, true, &deleted, err);
                if (deleted && p->on_delete != NULL) {
                    p->on_delete(p->on_delete_arg, t);
                }
                rep.evicted += deleted;
                rep.evicted_bytes += deleted ? t->content_length : 0;
            }
        }
    }
    dfd_task_meta_list_free(tasks, n);
    if (ret != NULL) {
        *ret = rep;
    }
    return r;
}

struct dfd_gc {
    struct dfd_storage *s;
    struct dfd_gc_policy policy;
    struct dfc_clock clock;
    dfd_gc_pass_fn on_pass;
    void *on_pass_arg;
    struct dfc_thread thread;
};

static void *gc_main(void *arg) {
    struct dfd_gc *g = arg;
    while (dfc_thread_sleep(&g->thread, g->policy.interval_ns)) {
        struct dfd_gc_report rep = {0};
        struct dfc_error err;
        int r = dfd_gc_run_once(g->s, &g->policy, dfc_clock_now(&g->clock), &rep, &err);
        if (g->on_pass != NULL) { /* a failed pass reports what it deleted before failing */
            g->on_pass(g->on_pass_arg, &rep);
        }
        if (r < 0) {
            DFC_LOG(DFC_LOG_WARN, "gc.failed", "error=\"%s\"", dfc_error_msg(&err));
        } else if (rep.expired || rep.evicted) {
            DFC_LOG(DFC_LOG_INFO, "gc.done", "expired=%u evicted=%u evicted_bytes=%llu usage=%u%%",
                    rep.expired, rep.evicted, (unsigned long long)rep.evicted_bytes,
                    rep.usage_percent);
        }
    }
    return NULL;
}

int dfd_gc_start(struct dfd_storage *s, const struct dfd_gc_policy *p,
                 const struct dfc_clock *clock, dfd_gc_pass_fn on_pass, void *on_pass_arg,
                 struct dfd_gc **ret, struct dfc_error *err) {
    if (p->interval_ns <= 0) {
        return dfc_error_set(err, -EINVAL, "gc.interval must be positive");
    }
    struct dfd_gc *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    g->s = s;
    g->policy = *p;
    g->clock = *clock;
    g->on_pass = on_pass;
    g->on_pass_arg = on_pass_arg;
    if (dfc_thread_start(&g->thread, gc_main, g) < 0) {
        free(g);
        return dfc_error_set(err, -EAGAIN, "cannot start the gc thread");
    }
    *ret = g;
    return 0;
}

void dfd_gc_stop(struct dfd_gc *g) {
    if (g == NULL) {
        return;
    }
    dfc_thread_stop(&g->thread);
    free(g);
}
