/*
 * gc.h - TTL expiry and disk-pressure eviction of persistent-cache tasks (Dragonfly's
 * gc/mod.rs: evict_persistent_cache_task_by_ttl and _by_disk_usage).
 *
 * Every interval: (1) delete every task with created_at + ttl < now, persistent or not;
 * (2) when disk usage >= high%, delete the least recently used non-persistent tasks until
 * usage is back at low%. Persistent replicas are never evicted for space. A task a content
 * volume pins (storage/pins.h) is never deleted by either.
 *
 * The clock is injected: dfd_gc_run_once() takes "now", and the background thread reads it
 * through a struct dfc_clock (dfc/clock.h), so tests move time instead of waiting.
 */
#ifndef DFD_GC_H
#define DFD_GC_H

#include <stdint.h>

#include "dfc/clock.h"
#include "dfc/error.h"
#include "storage/storage.h"

struct dfd_gc_policy {
    int64_t interval_ns;
    uint64_t high_percent;   /* diskHighThresholdPercent */
    uint64_t low_percent;    /* diskLowThresholdPercent */
    uint64_t disk_threshold; /* diskThreshold: when set, the capacity that usage is measured
                                against, with usage = bytes of cached content */
    /* Told about each task this pass deleted (expired or evicted), once it is gone; t is
     * borrowed for the call. Runs on the GC thread (or dfd_gc_run_once()'s caller). The
     * daemon withdraws the copy from the scheduler here. NULL: nobody is told. */
    void (*on_delete)(void *arg, const struct dfd_task_meta *t);
    void *on_delete_arg;
};

struct dfd_gc_report {
    unsigned expired;
    unsigned evicted;
    uint64_t evicted_bytes;
    unsigned usage_percent; /* before eviction */
};

/* Capacity and usage in bytes, as the policy measures them: diskThreshold and the content's
 * bytes when diskThreshold is set, else the filesystem of the store (statvfs). */
int dfd_gc_disk_usage(struct dfd_storage *s, const struct dfd_gc_policy *p, uint64_t *ret_total,
                      uint64_t *ret_used, struct dfc_error *err);

/* Told what each background pass did (the thread's, not dfd_gc_run_once()'s), on the GC
 * thread; a pass that failed midway reports what it deleted before the failure. */
typedef void (*dfd_gc_pass_fn)(void *arg, const struct dfd_gc_report *rep);

/* One pass at time now. */
int dfd_gc_run_once(struct dfd_storage *s, const struct dfd_gc_policy *p, int64_t now_ns,
                    struct dfd_gc_report *ret, struct dfc_error *err);

struct dfd_gc;

/* Starts a thread that runs a pass every interval, logs what it did and tells on_pass (NULL:
 * nobody) with on_pass_arg. Borrowed: s, clock, on_pass_arg. */
int dfd_gc_start(struct dfd_storage *s, const struct dfd_gc_policy *p,
                 const struct dfc_clock *clock, dfd_gc_pass_fn on_pass, void *on_pass_arg,
                 struct dfd_gc **ret, struct dfc_error *err);

/* Stops and joins the thread. NULL is fine. */
void dfd_gc_stop(struct dfd_gc *g);

#endif /* DFD_GC_H */
