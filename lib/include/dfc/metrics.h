/*
 * metrics.h - a small registry of Prometheus counters, gauges and histograms, and their
 * exposition in the Prometheus text format 0.0.4.
 *
 * Every metric is declared up front with a fixed, bounded label set: each label dimension names
 * every value it may take (a method path, a gRPC code name, a transfer mode), so a series is an
 * index, not a string, and nothing a caller sends (a task id, a path) can become a label.
 * Series index of values (v0, v1, v2) of dimensions with n0, n1 values: v0 + n0 * (v1 + n1 * v2);
 * dfc_metric_series() computes it.
 *
 * Updates are lock-free: one relaxed atomic add per counter or gauge update, and for a
 * histogram a bucket add, a count add and a compare-and-swap on the sum. A scrape takes the
 * registry's mutex, which only declarations and other scrapes contend for. Gauges may instead be
 * read at scrape time through a callback, which must be cheap and must not block (it runs on the
 * HTTP thread): it should read numbers the owner keeps up to date.
 *
 * Counters never reset while the registry lives. Several declarations under one name (two RPC
 * servers in one process, each with its own method list) are parts of one family: they must
 * agree on type, help, label names and buckets, and are written under one HELP/TYPE block.
 *
 * Update functions accept a NULL metric and do nothing, so code instruments unconditionally and
 * a binary with metrics off pays one branch. Ownership: the registry copies every string of a
 * description; a struct dfc_metric belongs to its registry and is freed with it.
 */
#ifndef DFC_METRICS_H
#define DFC_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"

#define DFC_METRIC_MAX_LABELS  3
#define DFC_METRIC_MAX_BUCKETS 32
#define DFC_METRIC_MAX_SERIES  4096 /* per declaration, the product of the label value counts */

enum dfc_metric_type {
    DFC_METRIC_COUNTER,
    DFC_METRIC_GAUGE,
    DFC_METRIC_HISTOGRAM,
};

/* A label dimension: its name and every value it may take. */
struct dfc_metric_label {
    const char *name;
    const char *const *values;
    size_t n_values;
};

struct dfc_metric_desc {
    const char *name; /* the full name: "dragonfly_dfdaemon_import_bytes_total" */
    const char *help;
    enum dfc_metric_type type;
    const struct dfc_metric_label *labels;
    size_t n_labels;
    /* Histograms: the upper bounds, finite and strictly ascending, without +Inf. */
    const double *buckets;
    size_t n_buckets;
    /* Gauges only, optional: the value of series i, read at scrape time (HTTP thread). */
    double (*read)(void *arg, size_t series);
    void *read_arg;
};

struct dfc_metrics;
struct dfc_metric;

/* A new empty registry. -ENOMEM. Free with dfc_metrics_free(). */
int dfc_metrics_new(struct dfc_metrics **ret);

/* Frees the registry and every metric in it. NULL is fine. Nothing may update or scrape it
 * any more. */
void dfc_metrics_free(struct dfc_metrics *m);

/* Declares a metric. -EINVAL (err names the metric and the fault) for a bad name, label name
 * ("le" on a histogram, a leading "__"), unsorted buckets, too many series, a read callback on
 * anything but a gauge, or a part that disagrees with an earlier declaration of its name; a
 * part may not repeat a series an earlier part has (its label values must differ somewhere).
 * Thread-safe; *ret stays valid until dfc_metrics_free(). */
int dfc_metrics_add(struct dfc_metrics *m, const struct dfc_metric_desc *d, struct dfc_metric **ret,
                    struct dfc_error *err);

/* The series index of label value indexes v (one per dimension, n_labels of them). */
size_t dfc_metric_series(const struct dfc_metric *f, const size_t *v);

/* Adds n to a counter's series. */
void dfc_metric_inc(struct dfc_metric *f, size_t series, uint64_t n);

/* Adds delta to, or sets, a gauge's series. */
void dfc_metric_gauge_add(struct dfc_metric *f, size_t series, int64_t delta);
void dfc_metric_gauge_set(struct dfc_metric *f, size_t series, int64_t v);

/* Records one observation of a histogram's series. */
void dfc_metric_observe(struct dfc_metric *f, size_t series, double v);

/* A counter's or a gauge's current value (a histogram's count); for tests and callbacks. */
int64_t dfc_metric_value(const struct dfc_metric *f, size_t series);

/* Writes every family in the text format 0.0.4 into a malloc'ed, NUL-terminated buffer
 * (*ret, *ret_len without the NUL; the caller frees it). -ENOMEM. */
int dfc_metrics_render(struct dfc_metrics *m, char **ret, size_t *ret_len);

/* The Content-Type of dfc_metrics_render()'s output. */
#define DFC_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif /* DFC_METRICS_H */
