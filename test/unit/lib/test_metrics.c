/* Tests for lib/src/metrics.c: declarations and their errors, the exact text format 0.0.4
 * (escaping, cumulative histogram buckets, +Inf, _sum, _count, parts of one family), a real
 * parser's reading of it, and lock-free updates from several threads summing exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/metrics.h"
#include "http_scrape.h"

static char *render(struct dfc_metrics *m) {
    char *out;
    size_t len;
    assert_int_equal(dfc_metrics_render(m, &out, &len), 0);
    assert_int_equal(strlen(out), len);
    return out;
}

static void test_counter_gauge_text(void **state) {
    struct dfc_metrics *m;
    struct dfc_error err;
    assert_int_equal(dfc_metrics_new(&m), 0);
    static const char *const modes[] = {"copy", "hard_link"};
    static const char *const odd[] = {"a\"b", "c\\d", "e\nf"};
    struct dfc_metric_label l2[] = {{"mode", modes, 2}, {"odd", odd, 3}};
    struct dfc_metric *c, *g, *plain;
    struct dfc_metric_desc dc = {.name = "t_bytes_total",
                                 .help = "Bytes \\ with\nnewline.",
                                 .type = DFC_METRIC_COUNTER,
                                 .labels = l2,
                                 .n_labels = 2};
    assert_int_equal(dfc_metrics_add(m, &dc, &c, &err), 0);
    struct dfc_metric_desc dg = {.name = "t_in_flight", .help = "Now.", .type = DFC_METRIC_GAUGE};
    assert_int_equal(dfc_metrics_add(m, &dg, &g, &err), 0);
    struct dfc_metric_desc dp = {.name = "t_total", .help = "Plain.", .type = DFC_METRIC_COUNTER};
    assert_int_equal(dfc_metrics_add(m, &dp, &plain, &err), 0);

    size_t v[2] = {1, 2}; /* hard_link, "e\nf" */
    dfc_metric_inc(c, dfc_metric_series(c, v), 7);
    dfc_metric_inc(c, 0, 1);
    dfc_metric_inc(c, 0, 2);
    dfc_metric_gauge_add(g, 0, 5);
    dfc_metric_gauge_add(g, 0, -8);
    dfc_metric_inc(NULL, 0, 1); /* metrics off: nothing */
    dfc_metric_inc(c, 6, 1);    /* out of range: ignored */
    assert_int_equal(dfc_metric_value(c, 0), 3);
    assert_int_equal(dfc_metric_value(c, 5), 7);

    char *out = render(m);
    const char *want = "# HELP t_bytes_total Bytes \\\\ with\\nnewline.\n"
                       "# TYPE t_bytes_total counter\n"
                       "t_bytes_total{mode=\"copy\",odd=\"a\\\"b\"} 3\n"
                       "t_bytes_total{mode=\"hard_link\",odd=\"a\\\"b\"} 0\n"
                       "t_bytes_total{mode=\"copy\",odd=\"c\\\\d\"} 0\n"
                       "t_bytes_total{mode=\"hard_link\",odd=\"c\\\\d\"} 0\n"
                       "t_bytes_total{mode=\"copy\",odd=\"e\\nf\"} 0\n"
                       "t_bytes_total{mode=\"hard_link\",odd=\"e\\nf\"} 7\n"
                       "# HELP t_in_flight Now.\n"
                       "# TYPE t_in_flight gauge\n"
                       "t_in_flight -3\n"
                       "# HELP t_total Plain.\n"
                       "# TYPE t_total counter\n"
                       "t_total 0\n";
    assert_string_equal(out, want);

    /* The parser reads the escaped values back to the original bytes. */
    char *flat;
    assert_int_equal(test_prom_parse(out, &flat), 0);
    assert_true(test_prom_value(flat, "t_bytes_total{mode=\"hard_link\",odd=\"e\\nf\"}") == 7);
    assert_true(test_prom_value(flat, "t_bytes_total{mode=\"copy\",odd=\"a\\\"b\"}") == 3);
    assert_true(test_prom_value(flat, "t_in_flight{}") == -3);
    free(flat);
    free(out);
    dfc_metrics_free(m);
}

static void test_histogram_text(void **state) {
    struct dfc_metrics *m;
    struct dfc_error err;
    assert_int_equal(dfc_metrics_new(&m), 0);
    static const double b[] = {0.005, 0.5, 1};
    static const char *const methods[] = {"/a.B/C"};
    struct dfc_metric_label l[] = {{"method", methods, 1}};
    struct dfc_metric *h;
    struct dfc_metric_desc d = {.name = "t_seconds",
                                .help = "Latency.",
                                .type = DFC_METRIC_HISTOGRAM,
                                .labels = l,
                                .n_labels = 1,
                                .buckets = b,
                                .n_buckets = 3};
    assert_int_equal(dfc_metrics_add(m, &d, &h, &err), 0);
    dfc_metric_observe(h, 0, 0.005); /* on a bound: in that bucket (le is <=) */
    dfc_metric_observe(h, 0, 0.25);
    dfc_metric_observe(h, 0, 0.75);
    dfc_metric_observe(h, 0, 2);
    dfc_metric_observe(h, 0, 100);
    char *out = render(m);
    const char *want = "# HELP t_seconds Latency.\n"
                       "# TYPE t_seconds histogram\n"
                       "t_seconds_bucket{method=\"/a.B/C\",le=\"0.005\"} 1\n"
                       "t_seconds_bucket{method=\"/a.B/C\",le=\"0.5\"} 2\n"
                       "t_seconds_bucket{method=\"/a.B/C\",le=\"1\"} 3\n"
                       "t_seconds_bucket{method=\"/a.B/C\",le=\"+Inf\"} 5\n"
                       "t_seconds_sum{method=\"/a.B/C\"} 103.005\n"
                       "t_seconds_count{method=\"/a.B/C\"} 5\n";
    assert_string_equal(out, want);
    char *flat;
    assert_int_equal(test_prom_parse(out, &flat), 0);
    assert_true(test_prom_value(flat, "t_seconds_bucket{le=\"+Inf\",method=\"/a.B/C\"}") == 5);
    assert_true(test_prom_value(flat, "t_seconds_count{method=\"/a.B/C\"}") == 5);
    free(flat);
    free(out);
    dfc_metrics_free(m);
}

static double read_twice(void *arg, size_t series) {
    return (double)(*(int *)arg) * (double)(series + 1) + 0.5;
}

/* Two declarations under one name are one family: one HELP/TYPE, both parts' series. */
static void test_parts_and_callbacks(void **state) {
    struct dfc_metrics *m;
    struct dfc_error err;
    assert_int_equal(dfc_metrics_new(&m), 0);
    static const char *const s1[] = {"a"}, *const s2[] = {"b"};
    struct dfc_metric_label la[] = {{"server", s1, 1}}, lb[] = {{"server", s2, 1}};
    struct dfc_metric *p1, *p2, *g;
    struct dfc_metric_desc d = {
        .name = "t_calls_total", .help = "Calls.", .type = DFC_METRIC_COUNTER, .n_labels = 1};
    d.labels = la;
    assert_int_equal(dfc_metrics_add(m, &d, &p1, &err), 0);
    d.labels = lb;
    assert_int_equal(dfc_metrics_add(m, &d, &p2, &err), 0);
    /* The same label values again would repeat a series. */
    assert_int_equal(dfc_metrics_add(m, &d, &p2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "same label values"));
    d.help = "Other.";
    assert_int_equal(dfc_metrics_add(m, &d, &p2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "declared again"));

    int k = 2;
    static const char *const disks[] = {"used", "total"};
    struct dfc_metric_label ld[] = {{"kind", disks, 2}};
    struct dfc_metric_desc dg = {.name = "t_disk",
                                 .help = "Disk.",
                                 .type = DFC_METRIC_GAUGE,
                                 .labels = ld,
                                 .n_labels = 1,
                                 .read = read_twice,
                                 .read_arg = &k};
    assert_int_equal(dfc_metrics_add(m, &dg, &g, &err), 0);
    dfc_metric_inc(p1, 0, 4);
    dfc_metric_inc(p2, 0, 9);
    char *out = render(m);
    assert_string_equal(out, "# HELP t_calls_total Calls.\n"
                             "# TYPE t_calls_total counter\n"
                             "t_calls_total{server=\"a\"} 4\n"
                             "t_calls_total{server=\"b\"} 9\n"
                             "# HELP t_disk Disk.\n"
                             "# TYPE t_disk gauge\n"
                             "t_disk{kind=\"used\"} 2.5\n"
                             "t_disk{kind=\"total\"} 4.5\n");
    char *flat;
    assert_int_equal(test_prom_parse(out, &flat), 0);
    free(flat);
    free(out);
    dfc_metrics_free(m);
}

static void test_bad_declarations(void **state) {
    struct dfc_metrics *m;
    struct dfc_error err;
    struct dfc_metric *f;
    assert_int_equal(dfc_metrics_new(&m), 0);
    static const char *const v[] = {"x"};
    static const double up[] = {1, 2}, down[] = {2, 1}, inf[] = {1, INFINITY};
    static const struct dfc_metric_label le[] = {{"le", v, 1}}, dunder[] = {{"__x", v, 1}},
                                         dash[] = {{"a-b", v, 1}}, none[] = {{"a", v, 0}},
                                         twice[] = {{"a", v, 1}, {"a", v, 1}};
    static const struct {
        struct dfc_metric_desc d;
        const char *msg;
    } bad[] = {
        {{.name = "1abc", .help = "h"}, "not a valid metric name"},
        {{.name = "a-b", .help = "h"}, "not a valid metric name"},
        {{.name = "", .help = "h"}, "not a valid metric name"},
        {{.name = "ok", .help = NULL}, "no help text"},
        {{.name = "ok", .help = "h", .labels = dunder, .n_labels = 1}, "label name `__x`"},
        {{.name = "ok", .help = "h", .labels = dash, .n_labels = 1}, "label name `a-b`"},
        {{.name = "ok", .help = "h", .labels = none, .n_labels = 1}, "has no values"},
        {{.name = "ok", .help = "h", .labels = twice, .n_labels = 2}, "label `a` twice"},
        {{.name = "ok",
          .help = "h",
          .type = DFC_METRIC_HISTOGRAM,
          .labels = le,
          .n_labels = 1,
          .buckets = up,
          .n_buckets = 2},
         "may not have label `le`"},
        {{.name = "ok", .help = "h", .type = DFC_METRIC_HISTOGRAM}, "needs 1 to"},
        {{.name = "ok", .help = "h", .type = DFC_METRIC_HISTOGRAM, .buckets = down, .n_buckets = 2},
         "strictly ascending"},
        {{.name = "ok", .help = "h", .type = DFC_METRIC_HISTOGRAM, .buckets = inf, .n_buckets = 2},
         "finite"},
        {{.name = "ok", .help = "h", .buckets = up, .n_buckets = 2}, "only a histogram"},
        {{.name = "ok", .help = "h", .read = read_twice}, "only a gauge"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dfc_error_clear(&err);
        assert_int_equal(dfc_metrics_add(m, &bad[i].d, &f, &err), -EINVAL);
        if (strstr(err.msg, bad[i].msg) == NULL) {
            fail_msg("case %zu: `%s` lacks `%s`", i, err.msg, bad[i].msg);
        }
    }
    /* Too many series: 100 x 100 > DFC_METRIC_MAX_SERIES. */
    const char *many[100];
    for (size_t i = 0; i < 100; i++) {
        many[i] = "v";
    }
    struct dfc_metric_label big[] = {{"a", many, 100}, {"b", many, 100}};
    struct dfc_metric_desc d = {.name = "big", .help = "h", .labels = big, .n_labels = 2};
    assert_int_equal(dfc_metrics_add(m, &d, &f, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "series"));
    /* Nothing of the failed declarations was kept. */
    char *out = render(m);
    assert_string_equal(out, "");
    free(out);
    dfc_metrics_free(m);
}

#define THREADS 4
#define ROUNDS  100000

struct race {
    struct dfc_metric *c, *h;
};

static void *hammer(void *arg) {
    struct race *r = arg;
    for (int i = 0; i < ROUNDS; i++) {
        dfc_metric_inc(r->c, (size_t)(i & 1), 1);
        dfc_metric_observe(r->h, 0, 0.5);
    }
    return NULL;
}

/* Updates from several threads, with a scrape in between, lose nothing. */
static void test_concurrent_updates(void **state) {
    struct dfc_metrics *m;
    struct dfc_error err;
    struct race r;
    assert_int_equal(dfc_metrics_new(&m), 0);
    static const char *const v[] = {"even", "odd"};
    static const double b[] = {1};
    struct dfc_metric_label l[] = {{"k", v, 2}};
    struct dfc_metric_desc dc = {
        .name = "t_total", .help = "h", .type = DFC_METRIC_COUNTER, .labels = l, .n_labels = 1};
    struct dfc_metric_desc dh = {.name = "t_seconds",
                                 .help = "h",
                                 .type = DFC_METRIC_HISTOGRAM,
                                 .buckets = b,
                                 .n_buckets = 1};
    assert_int_equal(dfc_metrics_add(m, &dc, &r.c, &err), 0);
    assert_int_equal(dfc_metrics_add(m, &dh, &r.h, &err), 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &r), 0);
    }
    char *mid = render(m);
    free(mid);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    assert_int_equal(dfc_metric_value(r.c, 0), THREADS * ROUNDS / 2);
    assert_int_equal(dfc_metric_value(r.c, 1), THREADS * ROUNDS / 2);
    char *out = render(m);
    char *flat;
    assert_int_equal(test_prom_parse(out, &flat), 0);
    assert_true(test_prom_value(flat, "t_seconds_count{}") == THREADS * ROUNDS);
    assert_true(test_prom_value(flat, "t_seconds_sum{}") == THREADS * ROUNDS * 0.5);
    assert_true(test_prom_value(flat, "t_seconds_bucket{le=\"1\"}") == THREADS * ROUNDS);
    free(flat);
    free(out);
    dfc_metrics_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_gauge_text),  cmocka_unit_test(test_histogram_text),
        cmocka_unit_test(test_parts_and_callbacks), cmocka_unit_test(test_bad_declarations),
        cmocka_unit_test(test_concurrent_updates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
