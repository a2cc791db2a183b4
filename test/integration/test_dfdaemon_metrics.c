/*
 * Integration tests of dfdaemon's HTTP endpoints against a real daemon: /metrics scraped before
 * and after an import, a streamed import, an export, a failed import and a GC expiry, every
 * scrape read by a real Prometheus text-format parser (python3-prometheus-client) and the
 * counter deltas asserted exactly; /readyz going 503 while the store dir is immutable (root:
 * chattr +i) and 200 again after; the endpoints off with port 0, and one endpoint when metrics
 * and health share an address.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "dfc/rpc_client.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "http_scrape.h"
#include "test_support.h"

#define MiB (1024 * 1024)

#define P         "dragonfly_dfdaemon_"
#define M_UPLOAD  "/dfdaemon.v2.DfdaemonDownload/UploadPersistentCacheTask"
#define M_EXPORT  "/dfdaemon.v2.DfdaemonDownload/DownloadPersistentCacheTask"
#define M_IMPORT  "/dfc.dfdaemon.v1.DfdaemonImport/ImportPersistentCacheTask"
#define HANDLED   P "grpc_server_handled_total{code=\"%s\",method=\"%s\",server=\"dfdaemon\"}"
#define HCOUNT    P "grpc_server_handling_seconds_count{method=\"%s\",server=\"dfdaemon\"}"
#define GC_CONFIG "gc:\n  interval: 1s\n"

struct fx {
    struct harness h;
    struct dfc_rpc_client *c;
    unsigned mport, hport;
    char out[8192], err[8192];
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    f->mport = test_free_port();
    f->hport = test_free_port();
    harness_start_ports(&f->h, GC_CONFIG, f->mport, f->hport);
    f->c = harness_client(&f->h);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    int r = harness_close(&f->h, f->c);
    free(f);
    return r == 0 ? 0 : -1;
}

/* The delta of series between two scrapes, exactly as the parser read them. */
#define DELTA(a, b, ...) (test_prom_sample((b), __VA_ARGS__) - test_prom_sample((a), __VA_ARGS__))

static double tasks(const char *flat) {
    return test_prom_sample(flat, P "persistent_cache_tasks{persistent=\"false\"}") +
           test_prom_sample(flat, P "persistent_cache_tasks{persistent=\"true\"}");
}

static double import_bytes(const char *flat) {
    return test_prom_sample(flat, P "import_bytes_total{mode=\"copy\"}") +
           test_prom_sample(flat, P "import_bytes_total{mode=\"reflink\"}") +
           test_prom_sample(flat, P "import_bytes_total{mode=\"hard_link\"}");
}

struct want_tasks {
    struct fx *f;
    double n;
};

/* The store's gauges are refreshed in the background (at most 2 s late): wait for them. */
static bool tasks_are(void *arg) {
    struct want_tasks *w = arg;
    char *flat = test_prom_scrape(w->f->mport);
    bool ok = tasks(flat) == w->n;
    free(flat);
    return ok;
}

static void test_counter_deltas(void **state) {
    struct fx *f = *state;
    char src[400], out[400], id[65];
    snprintf(src, sizeof(src), "%s/m.bin", f->h.dir);
    snprintf(out, sizeof(out), "%s/m-out.bin", f->h.dir);
    harness_write_file(src, 3 * MiB + 17, 41);

    /* An import by path. */
    char *s0 = test_prom_scrape(f->mport);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", src), 0);
    harness_done_id(f->out, id);
    char *s1 = test_prom_scrape(f->mport);
    assert_true(DELTA(s0, s1, P "upload_task_total{source=\"path\"}") == 1);
    assert_true(DELTA(s0, s1, P "upload_task_failure_total{source=\"path\"}") == 0);
    assert_true(import_bytes(s1) - import_bytes(s0) == 3 * MiB + 17);
    assert_true(DELTA(s0, s1, HANDLED, "OK", M_UPLOAD) == 1);
    assert_true(DELTA(s0, s1, HCOUNT, M_UPLOAD) == 1);
    struct want_tasks w = {f, tasks(s0) + 1};
    assert_true(test_wait_for(tasks_are, &w, 20000));

    /* An export by path: a hard link or a copy, the task's bytes either way. */
    assert_int_equal(DFCACHE(f, "export", "--no-progress", "-O", out, id), 0);
    assert_true(harness_same_file(src, out));
    char *s2 = test_prom_scrape(f->mport);
    assert_true(DELTA(s1, s2, P "download_task_total{source=\"local\"}") == 1);
    assert_true(DELTA(s1, s2, P "download_task_total{source=\"peers\"}") == 0);
    assert_true(DELTA(s1, s2, P "download_task_failure_total{}") == 0);
    assert_true(DELTA(s1, s2, P "export_bytes_total{mode=\"hard_link\"}") +
                    DELTA(s1, s2, P "export_bytes_total{mode=\"copy\"}") ==
                3 * MiB + 17);
    assert_true(DELTA(s1, s2, P "export_bytes_total{mode=\"stream\"}") == 0);
    assert_true(DELTA(s1, s2, HANDLED, "OK", M_EXPORT) == 1);
    assert_true(DELTA(s1, s2, P "upload_task_total{source=\"path\"}") == 0);

    /* A streamed export of the same task: the piece bytes over the socket. */
    (void)unlink(out);
    assert_int_equal(
        DFCACHE(f, "export", "--no-progress", "--transfer-from-dfdaemon", "-O", out, id), 0);
    char *s3 = test_prom_scrape(f->mport);
    assert_true(DELTA(s2, s3, P "export_bytes_total{mode=\"stream\"}") == 3 * MiB + 17);
    assert_true(DELTA(s2, s3, P "download_task_total{source=\"local\"}") == 1);

    /* A failed import: a path that does not exist, refused by the daemon. */
    Dfdaemon__V2__UploadPersistentCacheTaskRequest req =
        DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.path = "/no/such/file";
    req.persistent_replica_count = 1;
    ProtobufCMessage *resp = NULL;
    struct dfc_error err;
    int r = dfc_rpc_unary(f->c, &hm.upload, &req.base, 10000, &resp, &err);
    dfc_rpc_msg_free(resp);
    assert_true(r < 0);
    const char *code = dfc_grpc_code_name(dfc_error_to_grpc(r));
    char *s4 = test_prom_scrape(f->mport);
    assert_true(DELTA(s3, s4, P "upload_task_failure_total{source=\"path\"}") == 1);
    assert_true(DELTA(s3, s4, P "upload_task_total{source=\"path\"}") == 0);
    assert_true(import_bytes(s4) - import_bytes(s3) == 0);
    assert_true(DELTA(s3, s4, HANDLED, code, M_UPLOAD) == 1);
    assert_true(DELTA(s3, s4, HANDLED, "OK", M_UPLOAD) == 0);

    /* A failed export: an unknown task (to a fresh path: dfcache itself refuses an existing
     * one). */
    (void)unlink(out);
    assert_int_equal(DFCACHE(f, "export", "--no-progress", "-O", out,
                             "0000000000000000000000000000000000000000000000000000000000000000"),
                     1);
    char *s5 = test_prom_scrape(f->mport);
    assert_true(DELTA(s4, s5, P "download_task_failure_total{}") == 1);
    assert_true(DELTA(s4, s5, HANDLED, "NOT_FOUND", M_EXPORT) == 1);

    /* A streamed import. */
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--transfer", "stream", "--ttl", "5m",
                             "--content-for-calculating-task-id", "metrics-stream", src),
                     0);
    char stream_id[65];
    harness_done_id(f->out, stream_id);
    char *s6 = test_prom_scrape(f->mport);
    assert_true(DELTA(s5, s6, P "upload_task_total{source=\"stream\"}") == 1);
    assert_true(DELTA(s5, s6, P "import_bytes_total{mode=\"stream\"}") == 3 * MiB + 17);
    assert_true(DELTA(s5, s6, HANDLED, "OK", M_IMPORT) == 1);
    w.n = tasks(s0) + 2;
    assert_true(test_wait_for(tasks_are, &w, 20000));
    char *s7 = test_prom_scrape(f->mport);

    /* A GC expiry: the stream task's created_at moved 6 minutes back (past its 5 minute TTL)
     * in the running daemon's database; the next pass (every second) deletes it. */
    if (system("command -v sqlite3 >/dev/null 2>&1") == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof(cmd),
                 "sqlite3 -cmd '.timeout 10000' '%s/metadata/pcache.db' \"UPDATE tasks SET "
                 "created_at_ns = created_at_ns - 360000000000 WHERE id = '%s'\"",
                 f->h.store, stream_id);
        assert_int_equal(system(cmd), 0);
        w.n = tasks(s0) + 1;
        assert_true(test_wait_for(tasks_are, &w, 20000));
        char *s8 = test_prom_scrape(f->mport);
        assert_true(DELTA(s7, s8, P "gc_expired_tasks_total{}") == 1);
        assert_true(DELTA(s7, s8, P "gc_evicted_tasks_total{}") == 0);
        assert_int_equal(DFCACHE(f, "stat", stream_id), 1);
        free(s8);
    } else {
        print_message("skipping the GC expiry: no sqlite3 command-line shell\n");
    }

    /* The disk gauges: the filesystem's capacity and usage, the watermarks at 80% and 60%. */
    double total = test_prom_sample(s7, P "disk_space_total{}");
    assert_true(total > 0);
    assert_true(test_prom_sample(s7, P "disk_usage_space_total{}") <= total);
    uint64_t capacity = (uint64_t)total;
    uint64_t high = capacity / 100 * 80; /* the daemon's own integer arithmetic */
    assert_true(test_prom_sample(s7, P "disk_threshold_bytes{watermark=\"high\"}") == (double)high);
    free(s0);
    free(s1);
    free(s2);
    free(s3);
    free(s4);
    free(s5);
    free(s6);
    free(s7);
}

static int ready_status(struct fx *f, char **body) {
    return test_http_get(f->hport, "/readyz", body);
}

/* The socket appears once it listens, a moment before the server serves (/readyz 503 until
 * then): a start is complete once /readyz on port says 200. */
static bool port_ready(void *arg) {
    char *body;
    int code = test_http_get(*(unsigned *)arg, "/readyz", &body);
    free(body);
    return code == 200;
}

/* /readyz follows the store dir's writability; /healthz stays 200. */
static void test_readyz_follows_the_store(void **state) {
    struct fx *f = *state;
    char *body;
    assert_int_equal(test_http_get(f->hport, "/healthz", &body), 200);
    free(body);
    assert_true(test_wait_for(port_ready, &f->hport, 10000));
    if (geteuid() != 0) {
        test_skip("the unwritable store: chattr +i needs root");
    }
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "chattr +i '%s' 2>/dev/null", f->h.store);
    if (system(cmd) != 0) {
        test_skip("the unwritable store: chattr +i is not supported here");
    }
    int st = ready_status(f, &body);
    snprintf(cmd, sizeof(cmd), "chattr -i '%s'", f->h.store);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(st, 503);
    char want[400];
    snprintf(want, sizeof(want), "not ready: store directory `%s` is not writable", f->h.store);
    assert_non_null(strstr(body, want));
    free(body);
    assert_int_equal(test_http_get(f->hport, "/healthz", &body), 200);
    free(body);
    assert_int_equal(ready_status(f, &body), 200);
    assert_string_equal(body, "ok\n");
    free(body);
    /* The metrics endpoint answers the probes too. */
    assert_int_equal(test_http_get(f->mport, "/readyz", &body), 200);
    free(body);
}

/* Port 0: nothing listens; both on one address: one endpoint serves every route. */
/* 40 slow HTTP clients do not starve a node's /healthz on its health port (before, they held
 * every slot and the probes timed out, so the kubelet would restart the node's daemon). */
static void test_slow_clients_do_not_starve_healthz(void **state) {
    struct fx *f = *state;
    assert_int_equal(test_http_probes_under_slowloris(f->hport), 5);
}

static void test_ports(void **state) {
    struct harness h;
    unsigned port = test_free_port();
    harness_start_ports(&h, NULL, 0, port);
    char *body;
    assert_true(test_wait_for(port_ready, &port, 10000));
    assert_int_equal(test_http_get(port, "/metrics", &body), 404); /* metrics are off */
    free(body);
    assert_int_equal(harness_destroy(&h), 0);
    harness_start_ports(&h, NULL, port, port);
    assert_true(test_wait_for(port_ready, &port, 10000));
    assert_int_equal(test_http_get(port, "/metrics", &body), 200);
    assert_non_null(strstr(body, "# TYPE " P "upload_task_total counter\n"));
    free(body);
    assert_int_equal(harness_destroy(&h), 0);
    /* A taken port stops the start with the key and the address. */
    harness_start_ports(&h, NULL, port, port);
    struct harness h2;
    harness_start_ports(&h2, NULL, 0, 0);
    assert_int_equal(harness_stop(&h2, SIGTERM), 0);
    h2.metrics_port = port;
    assert_int_equal(harness_run_daemon(&h2, NULL), 1);
    char want[120];
    snprintf(want, sizeof(want), "metrics.server: cannot listen on 127.0.0.1:%u", port);
    assert_true(harness_log_has(&h2, want));
    assert_int_equal(harness_destroy(&h2), 0);
    assert_int_equal(harness_destroy(&h), 0);
}

int main(void) {
    if (harness_resolve_methods(NULL, 0) < 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_counter_deltas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readyz_follows_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_clients_do_not_starve_healthz, setup, teardown),
        cmocka_unit_test(test_ports),
    };
    return test_run_group(tests, NULL, NULL);
}
