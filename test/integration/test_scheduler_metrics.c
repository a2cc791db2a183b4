/*
 * Integration tests of the scheduler's HTTP endpoint against a real scheduler on a real Redis:
 * /metrics parsed by a real Prometheus text-format parser, the per-RPC counter's exact delta
 * for a call, Redis round trips and errors counted; /readyz 503 while Redis is stopped and 200
 * again once it is back; /healthz throughout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/rpc_client.h"
#include "dragonfly/scheduler.pb-c.h"
#include "http_scrape.h"
#include "redis_harness.h"
#include "scheduler_harness.h"
#include "test_support.h"

#define P "dragonfly_scheduler_"
#define HANDLED                                                                                    \
    P "grpc_server_handled_total{code=\"%s\",method=\"/scheduler.v2.Scheduler/ListHosts\","        \
      "server=\"scheduler\"}"

static struct dfc_rpc_client_method list_hosts_m;
static const struct dfc_rpc_client_row rows[] = {
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "ListHosts", &list_hosts_m),
};

struct fx {
    struct redis_server redis;
    struct sched_harness s;
    unsigned port;
};

static int ready_code(struct fx *f, char **body) {
    return test_http_get(f->port, "/readyz", body);
}

static bool is_ready(void *arg) {
    char *body;
    int code = ready_code(arg, &body);
    free(body);
    return code == 200;
}

static bool is_not_ready(void *arg) {
    char *body;
    int code = ready_code(arg, &body);
    free(body);
    return code == 503;
}

/* How many PINGs Redis has served (INFO commandstats). */
static long redis_pings(struct fx *f) {
    struct redisReply *rep = redis_server_command(&f->redis, "INFO commandstats");
    assert_int_equal(rep->type, REDIS_REPLY_STRING);
    const char *at = strstr(rep->str, "cmdstat_ping:calls=");
    long n = at != NULL ? strtol(at + strlen("cmdstat_ping:calls="), NULL, 10) : 0;
    freeReplyObject(rep);
    return n;
}

static void test_scheduler_endpoint(void **state) {
    REDIS_HARNESS_REQUIRE();
    struct fx *f = calloc(1, sizeof(*f));
    redis_server_start(&f->redis, NULL);
    f->port = test_free_port();
    sched_harness_start_metrics(&f->s, f->redis.addr, NULL, f->port);
    struct dfc_rpc_client *c = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_client_new(f->s.target, NULL, &c, &err), 0);

    char *s0 = test_prom_scrape(f->port);
    Scheduler__V2__ListHostsRequest r = SCHEDULER__V2__LIST_HOSTS_REQUEST__INIT;
    ProtobufCMessage *out = NULL;
    assert_int_equal(dfc_rpc_unary(c, &list_hosts_m, &r.base, 10000, &out, &err), 0);
    dfc_rpc_msg_free(out);
    char *s1 = test_prom_scrape(f->port);
    assert_true(test_prom_sample(s1, HANDLED, "OK") - test_prom_sample(s0, HANDLED, "OK") == 1);
    /* ListHosts reads Redis: at least one round trip was timed. */
    assert_true(
        test_prom_sample(s1, P "redis_command_duration_seconds_count{kind=\"command\"}") +
            test_prom_sample(s1, P "redis_command_duration_seconds_count{kind=\"script\"}") +
            test_prom_sample(s1, P "redis_command_duration_seconds_count{kind=\"pipeline\"}") >
        test_prom_sample(s0, P "redis_command_duration_seconds_count{kind=\"command\"}") +
            test_prom_sample(s0, P "redis_command_duration_seconds_count{kind=\"script\"}") +
            test_prom_sample(s0, P "redis_command_duration_seconds_count{kind=\"pipeline\"}"));
    assert_true(test_prom_sample(s1, P "redis_errors_total{kind=\"command\"}") ==
                test_prom_sample(s0, P "redis_errors_total{kind=\"command\"}"));

    char *body;
    assert_int_equal(ready_code(f, &body), 200);
    free(body);
    /* /readyz answers from the check thread's last PING: requests do not each wait for Redis
     * (each did, and with a hung Redis held the endpoint's one thread, /healthz behind it,
     * for up to a second: 20 requests here were 20 PINGs). */
    long pings = redis_pings(f);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(ready_code(f, &body), 200);
        free(body);
    }
    assert_true(redis_pings(f) - pings <= 5);
    redis_server_stop(&f->redis, SIGKILL);
    /* the check thread pings every second (SCHED_READY_CHECK_MS): its next result says so */
    assert_true(test_wait_for(is_not_ready, f, 5000));
    assert_int_equal(ready_code(f, &body), 503);
    assert_non_null(strstr(body, "not ready: redis does not answer PING"));
    free(body);
    assert_int_equal(test_http_get(f->port, "/healthz", &body), 200); /* alive all the same */
    free(body);
    char *s2 = test_prom_scrape(f->port);
    assert_true(test_prom_sample(s2, P "redis_errors_total{kind=\"command\"}") >
                test_prom_sample(s1, P "redis_errors_total{kind=\"command\"}"));
    redis_server_restart(&f->redis);
    assert_true(test_wait_for(is_ready, f, 30000)); /* the pool reconnects after its back-off */

    assert_int_equal(test_http_get(f->port, "/nope", &body), 404);
    free(body);
    free(s0);
    free(s1);
    free(s2);
    dfc_rpc_client_free(c);
    assert_int_equal(sched_harness_destroy(&f->s), 0);
    redis_server_destroy(&f->redis);
    free(f);
}

/* 40 slow HTTP clients do not starve the scheduler's /healthz (before, they held every slot of
 * the endpoint and the probes timed out, so the kubelet would restart the scheduler). */
static void test_slow_clients_do_not_starve_healthz(void **state) {
    struct sched_harness s;
    unsigned port = test_free_port();
    sched_harness_start_metrics(&s, NULL, NULL, port);
    assert_int_equal(test_http_probes_under_slowloris(port), 5);
    assert_int_equal(sched_harness_destroy(&s), 0);
}

int main(void) {
    struct dfc_error err;
    if (dfc_rpc_client_resolve(rows, DFC_RPC_N(rows), &err) < 0) {
        fprintf(stderr, "%s\n", dfc_error_msg(&err));
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheduler_endpoint),
        cmocka_unit_test(test_slow_clients_do_not_starve_healthz),
    };
    return test_run_group(tests, NULL, NULL);
}
