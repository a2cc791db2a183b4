/*
 * metrics.c - the metric registry and its Prometheus text exposition (dfc/metrics.h).
 *
 * DESIGN
 * A family is a name with its type, help, label names and buckets; it holds one or more parts,
 * each a declaration with its own label values and its own array of atomics, one slot per
 * series. Updates touch only a part's atomics (relaxed order: a scrape needs each number, not
 * an order between them), so the hot path takes no lock. A histogram keeps per-bucket counts
 * (not cumulative, so an observation is one add), a count and a sum (a double's bits, updated
 * by compare-and-swap); the scrape accumulates the buckets into the cumulative `le` series.
 * The registry's mutex guards the family list: declarations and scrapes only.
 */
#include "dfc/metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct family;

struct dfc_metric {
    struct family *fam;
    struct dfc_metric *next; /* the family's next part */
    char **values[DFC_METRIC_MAX_LABELS];
    size_t n_values[DFC_METRIC_MAX_LABELS];
    size_t n_series;
    _Atomic int64_t *vals;     /* counters and gauges: one per series; histograms: counts */
    _Atomic uint64_t *buckets; /* histograms: (n_buckets + 1) per series, the last is +Inf */
    _Atomic uint64_t *sums;    /* histograms: a double's bits per series */
    double (*read)(void *arg, size_t series);
    void *read_arg;
};

struct family {
    char *name;
    char *help;
    enum dfc_metric_type type;
    size_t n_labels;
    char *label_names[DFC_METRIC_MAX_LABELS];
    double buckets[DFC_METRIC_MAX_BUCKETS];
    size_t n_buckets;
    struct dfc_metric *parts, **parts_tail;
    struct family *next;
};

struct dfc_metrics {
    pthread_mutex_t mu;
    struct family *head, **tail;
};

/* ---- registry ---- */

int dfc_metrics_new(struct dfc_metrics **ret) {
    struct dfc_metrics *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->tail = &m->head;
    *ret = m;
    return 0;
}

static void part_free(struct dfc_metric *p) {
    for (size_t d = 0; d < DFC_METRIC_MAX_LABELS; d++) {
        if (p->values[d] != NULL) {
            for (size_t i = 0; i < p->n_values[d]; i++) {
                free(p->values[d][i]);
            }
            free(p->values[d]);
        }
    }
    free(p->vals);
    free(p->buckets);
    free(p->sums);
    free(p);
}

static void family_free(struct family *f) {
    struct dfc_metric *p = f->parts;
    while (p != NULL) {
        struct dfc_metric *next = p->next;
        part_free(p);
        p = next;
    }
    for (size_t i = 0; i < f->n_labels; i++) {
        free(f->label_names[i]);
    }
    free(f->name);
    free(f->help);
    free(f);
}

void dfc_metrics_free(struct dfc_metrics *m) {
    if (m == NULL) {
        return;
    }
    struct family *f = m->head;
    while (f != NULL) {
        struct family *next = f->next;
        family_free(f);
        f = next;
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* ---- declaration ---- */

static bool valid_name(const char *s, bool colon) {
    if (s == NULL || s[0] == '\0' || (s[0] >= '0' && s[0] <= '9')) {
        return false;
    }
    for (const char *p = s; *p != '\0'; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || (colon && c == ':');
        if (!ok) {
            return false;
        }
    }
    return true;
}

static int check_desc(const struct dfc_metric_desc *d, size_t *ret_series, struct dfc_error *err) {
    const char *name = d->name != NULL ? d->name : "(null)";
    if (!valid_name(d->name, true)) {
        return dfc_error_set(err, -EINVAL, "metric `%s`: not a valid metric name", name);
    }
    if (d->help == NULL) {
        return dfc_error_set(err, -EINVAL, "metric `%s`: no help text", name);
    }
    if (d->type != DFC_METRIC_COUNTER && d->type != DFC_METRIC_GAUGE &&
        d->type != DFC_METRIC_HISTOGRAM) {
        return dfc_error_set(err, -EINVAL, "metric `%s`: unknown type", name);
    }
    if (d->read != NULL && d->type != DFC_METRIC_GAUGE) {
        return dfc_error_set(err, -EINVAL, "metric `%s`: only a gauge may be read by a callback",
                             name);
    }
    if (d->n_labels > DFC_METRIC_MAX_LABELS) {
        return dfc_error_set(err, -EINVAL, "metric `%s`: more than %d labels", name,
                             DFC_METRIC_MAX_LABELS);
    }
    size_t series = 1;
    for (size_t i = 0; i < d->n_labels; i++) {
        const struct dfc_metric_label *l = &d->labels[i];
        if (!valid_name(l->name, false) || strncmp(l->name, "__", 2) == 0) {
            return dfc_error_set(err, -EINVAL, "metric `%s`: label name `%s` is not valid", name,
                                 l->name != NULL ? l->name : "(null)");
        }
        if (d->type == DFC_METRIC_HISTOGRAM && strcmp(l->name, "le") == 0) {
            return dfc_error_set(err, -EINVAL, "metric `%s`: a histogram may not have label `le`",
                                 name);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(d->labels[j].name, l->name) == 0) {
                return dfc_error_set(err, -EINVAL, "metric `%s`: label `%s` twice", name, l->name);
            }
        }
        if (l->n_values == 0 || l->values == NULL) {
            return dfc_error_set(err, -EINVAL, "metric `%s`: label `%s` has no values", name,
                                 l->name);
        }
        for (size_t k = 0; k < l->n_values; k++) {
            if (l->values[k] == NULL) {
                return dfc_error_set(err, -EINVAL, "metric `%s`: label `%s` value %zu is NULL",
                                     name, l->name, k);
            }
        }
        series *= l->n_values;
        if (series > DFC_METRIC_MAX_SERIES) {
            return dfc_error_set(err, -EINVAL, "metric `%s`: more than %d series", name,
                                 DFC_METRIC_MAX_SERIES);
        }
    }
    if (d->type == DFC_METRIC_HISTOGRAM) {
        if (d->n_buckets == 0 || d->n_buckets > DFC_METRIC_MAX_BUCKETS || d->buckets == NULL) {
            return dfc_error_set(err, -EINVAL, "metric `%s`: a histogram needs 1 to %d buckets",
                                 name, DFC_METRIC_MAX_BUCKETS);
        }
        for (size_t i = 0; i < d->n_buckets; i++) {
            if (!isfinite(d->buckets[i]) || (i > 0 && !(d->buckets[i] > d->buckets[i - 1]))) {
                return dfc_error_set(err, -EINVAL,
                                     "metric `%s`: buckets must be finite and strictly ascending",
                                     name);
            }
        }
    } else if (d->n_buckets != 0) {
        return dfc_error_set(err, -EINVAL, "metric `%s`: only a histogram has buckets", name);
    }
    *ret_series = series;
    return 0;
}

/* True when a part of f's family and the description agree on everything but label values. */
static bool same_shape(const struct family *f, const struct dfc_metric_desc *d) {
    if (f->type != d->type || strcmp(f->help, d->help) != 0 || f->n_labels != d->n_labels ||
        f->n_buckets != d->n_buckets) {
        return false;
    }
    for (size_t i = 0; i < f->n_labels; i++) {
        if (strcmp(f->label_names[i], d->labels[i].name) != 0) {
            return false;
        }
    }
    for (size_t i = 0; i < f->n_buckets; i++) {
        if (f->buckets[i] != d->buckets[i]) {
            return false;
        }
    }
    return true;
}

/* The value of dimension dim in series s of part p. */
static const char *series_value(const struct dfc_metric *p, size_t s, size_t dim) {
    for (size_t d = 0; d < dim; d++) {
        s /= p->n_values[d];
    }
    return p->values[dim][s % p->n_values[dim]];
}

/* True when series s of the new description equals some series of an existing part. */
static bool repeats_series(const struct family *f, const struct dfc_metric_desc *d,
                           size_t n_series) {
    for (const struct dfc_metric *p = f->parts; p != NULL; p = p->next) {
        for (size_t s = 0; s < n_series; s++) {
            for (size_t t = 0; t < p->n_series; t++) {
                size_t rest = s;
                bool equal = true;
                for (size_t dim = 0; dim < f->n_labels && equal; dim++) {
                    const char *mine = d->labels[dim].values[rest % d->labels[dim].n_values];
                    rest /= d->labels[dim].n_values;
                    equal = strcmp(mine, series_value(p, t, dim)) == 0;
                }
                if (equal) {
                    return true;
                }
            }
        }
    }
    return false;
}

static struct dfc_metric *part_new(const struct dfc_metric_desc *d, size_t n_series) {
    struct dfc_metric *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    p->n_series = n_series;
    p->read = d->read;
    p->read_arg = d->read_arg;
    for (size_t i = 0; i < d->n_labels; i++) {
        p->n_values[i] = d->labels[i].n_values;
        p->values[i] = calloc(d->labels[i].n_values, sizeof(char *));
        if (p->values[i] == NULL) {
            goto fail;
        }
        for (size_t k = 0; k < d->labels[i].n_values; k++) {
            if ((p->values[i][k] = strdup(d->labels[i].values[k])) == NULL) {
                goto fail;
            }
        }
    }
    p->vals = calloc(n_series, sizeof(*p->vals));
    if (p->vals == NULL) {
        goto fail;
    }
    if (d->type == DFC_METRIC_HISTOGRAM) {
        p->buckets = calloc(n_series * (d->n_buckets + 1), sizeof(*p->buckets));
        p->sums = calloc(n_series, sizeof(*p->sums));
        if (p->buckets == NULL || p->sums == NULL) {
            goto fail;
        }
    }
    return p;
fail:
    part_free(p);
    return NULL;
}

static struct family *family_new(const struct dfc_metric_desc *d) {
    struct family *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return NULL;
    }
    f->type = d->type;
    f->n_labels = d->n_labels;
    f->n_buckets = d->n_buckets;
    f->parts_tail = &f->parts;
    if (d->n_buckets > 0) {
        memcpy(f->buckets, d->buckets, d->n_buckets * sizeof(double));
    }
    bool ok = (f->name = strdup(d->name)) != NULL && (f->help = strdup(d->help)) != NULL;
    for (size_t i = 0; ok && i < d->n_labels; i++) {
        ok = (f->label_names[i] = strdup(d->labels[i].name)) != NULL;
    }
    if (!ok) {
        family_free(f);
        return NULL;
    }
    return f;
}

int dfc_metrics_add(struct dfc_metrics *m, const struct dfc_metric_desc *d, struct dfc_metric **ret,
                    struct dfc_error *err) {
    size_t n_series = 0;
    int r = check_desc(d, &n_series, err);
    if (r < 0) {
        return r;
    }
    pthread_mutex_lock(&m->mu);
    struct family *f = m->head;
    while (f != NULL && strcmp(f->name, d->name) != 0) {
        f = f->next;
    }
    bool fresh = f == NULL;
    if (!fresh && !same_shape(f, d)) {
        r = dfc_error_set(err, -EINVAL,
                          "metric `%s`: declared again with another type, help, labels or buckets",
                          d->name);
    } else if (!fresh && repeats_series(f, d, n_series)) {
        r = dfc_error_set(err, -EINVAL, "metric `%s`: declared again with the same label values",
                          d->name);
    } else if (fresh && (f = family_new(d)) == NULL) {
        r = dfc_error_set(err, -ENOMEM, "metric `%s`: out of memory", d->name);
    }
    struct dfc_metric *p = r == 0 ? part_new(d, n_series) : NULL;
    if (r == 0 && p == NULL) {
        r = dfc_error_set(err, -ENOMEM, "metric `%s`: out of memory", d->name);
    }
    if (r < 0 || p == NULL) {
        if (fresh && f != NULL) {
            family_free(f);
        }
        pthread_mutex_unlock(&m->mu);
        return r;
    }
    p->fam = f;
    *f->parts_tail = p;
    f->parts_tail = &p->next;
    if (fresh) {
        *m->tail = f;
        m->tail = &f->next;
    }
    pthread_mutex_unlock(&m->mu);
    *ret = p;
    return 0;
}

/* ---- updates (lock-free) ---- */

size_t dfc_metric_series(const struct dfc_metric *f, const size_t *v) {
    if (f == NULL) {
        return 0;
    }
    size_t s = 0, mul = 1;
    for (size_t d = 0; d < f->fam->n_labels; d++) {
        s += v[d] * mul;
        mul *= f->n_values[d];
    }
    return s;
}

void dfc_metric_inc(struct dfc_metric *f, size_t series, uint64_t n) {
    if (f != NULL && series < f->n_series) {
        atomic_fetch_add_explicit(&f->vals[series], (int64_t)n, memory_order_relaxed);
    }
}

void dfc_metric_gauge_add(struct dfc_metric *f, size_t series, int64_t delta) {
    if (f != NULL && series < f->n_series) {
        atomic_fetch_add_explicit(&f->vals[series], delta, memory_order_relaxed);
    }
}

void dfc_metric_gauge_set(struct dfc_metric *f, size_t series, int64_t v) {
    if (f != NULL && series < f->n_series) {
        atomic_store_explicit(&f->vals[series], v, memory_order_relaxed);
    }
}

static double bits_to_double(uint64_t b) {
    double d;
    memcpy(&d, &b, sizeof(d));
    return d;
}

static uint64_t double_to_bits(double d) {
    uint64_t b;
    memcpy(&b, &d, sizeof(b));
    return b;
}

void dfc_metric_observe(struct dfc_metric *f, size_t series, double v) {
    if (f == NULL || series >= f->n_series || f->buckets == NULL) {
        return;
    }
    const struct family *fam = f->fam;
    size_t b = 0;
    while (b < fam->n_buckets && !(v <= fam->buckets[b])) {
        b++;
    }
    atomic_fetch_add_explicit(&f->buckets[series * (fam->n_buckets + 1) + b], 1,
                              memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&f->sums[series], memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&f->sums[series], &old,
                                                  double_to_bits(bits_to_double(old) + v),
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    atomic_fetch_add_explicit(&f->vals[series], 1, memory_order_relaxed);
}

int64_t dfc_metric_value(const struct dfc_metric *f, size_t series) {
    if (f == NULL || series >= f->n_series) {
        return 0;
    }
    return atomic_load_explicit(&f->vals[series], memory_order_relaxed);
}

/* ---- exposition ---- */

/* A double the way Prometheus writes one: the shortest of %.15g / %.17g that reads back. */
static void put_double(FILE *out, double v) {
    if (isnan(v)) {
        fputs("NaN", out);
    } else if (isinf(v)) {
        fputs(v > 0 ? "+Inf" : "-Inf", out);
    } else {
        char buf[40];
        snprintf(buf, sizeof(buf), "%.15g", v);
        if (strtod(buf, NULL) != v) {
            snprintf(buf, sizeof(buf), "%.17g", v);
        }
        fputs(buf, out);
    }
}

/* HELP text escapes backslash and newline; label values also the double quote. */
static void put_escaped(FILE *out, const char *s, bool quote) {
    for (; *s != '\0'; s++) {
        if (*s == '\\') {
            fputs("\\\\", out);
        } else if (*s == '\n') {
            fputs("\\n", out);
        } else if (quote && *s == '"') {
            fputs("\\\"", out);
        } else {
            fputc(*s, out);
        }
    }
}

/* name{labels of series s[,le="..."]} */
static void put_series_name(FILE *out, const struct dfc_metric *p, size_t s, const char *suffix,
                            const char *le) {
    const struct family *f = p->fam;
    fputs(f->name, out);
    fputs(suffix, out);
    if (f->n_labels == 0 && le == NULL) {
        return;
    }
    fputc('{', out);
    for (size_t d = 0; d < f->n_labels; d++) {
        fprintf(out, "%s%s=\"", d > 0 ? "," : "", f->label_names[d]);
        put_escaped(out, series_value(p, s, d), true);
        fputc('"', out);
    }
    if (le != NULL) {
        fprintf(out, "%sle=\"%s\"", f->n_labels > 0 ? "," : "", le);
    }
    fputc('}', out);
}

static void put_histogram(FILE *out, const struct dfc_metric *p, size_t s) {
    const struct family *f = p->fam;
    uint64_t cum = 0;
    const _Atomic uint64_t *b = &p->buckets[s * (f->n_buckets + 1)];
    for (size_t i = 0; i <= f->n_buckets; i++) {
        cum += atomic_load_explicit(&b[i], memory_order_relaxed);
        char le[40];
        if (i == f->n_buckets) {
            snprintf(le, sizeof(le), "+Inf");
        } else {
            FILE *lf = fmemopen(le, sizeof(le), "w");
            if (lf == NULL) {
                continue;
            }
            put_double(lf, f->buckets[i]);
            fputc('\0', lf);
            fclose(lf);
        }
        put_series_name(out, p, s, "_bucket", le);
        fprintf(out, " %llu\n", (unsigned long long)cum);
    }
    put_series_name(out, p, s, "_sum", NULL);
    fputc(' ', out);
    put_double(out, bits_to_double(atomic_load_explicit(&p->sums[s], memory_order_relaxed)));
    fputc('\n', out);
    /* The count is the +Inf bucket's value, so the two always agree in one scrape even while
     * observations race the scrape. */
    put_series_name(out, p, s, "_count", NULL);
    fprintf(out, " %llu\n", (unsigned long long)cum);
}

static const char *type_name(enum dfc_metric_type t) {
    switch (t) {
    case DFC_METRIC_COUNTER:
        return "counter";
    case DFC_METRIC_GAUGE:
        return "gauge";
    case DFC_METRIC_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

int dfc_metrics_render(struct dfc_metrics *m, char **ret, size_t *ret_len) {
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (out == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_lock(&m->mu);
    for (const struct family *f = m->head; f != NULL; f = f->next) {
        fprintf(out, "# HELP %s ", f->name);
        put_escaped(out, f->help, false);
        fprintf(out, "\n# TYPE %s %s\n", f->name, type_name(f->type));
        for (const struct dfc_metric *p = f->parts; p != NULL; p = p->next) {
            for (size_t s = 0; s < p->n_series; s++) {
                if (f->type == DFC_METRIC_HISTOGRAM) {
                    put_histogram(out, p, s);
                    continue;
                }
                put_series_name(out, p, s, "", NULL);
                if (p->read != NULL) {
                    fputc(' ', out);
                    put_double(out, p->read(p->read_arg, s));
                    fputc('\n', out);
                } else {
                    fprintf(out, " %lld\n",
                            (long long)atomic_load_explicit(&p->vals[s], memory_order_relaxed));
                }
            }
        }
    }
    pthread_mutex_unlock(&m->mu);
    bool failed = ferror(out) != 0;
    if (fclose(out) != 0 || failed) {
        free(buf);
        return -ENOMEM;
    }
    *ret = buf;
    *ret_len = len;
    return 0;
}
