/*
 * p2p_harness.c - dfdaemons of a small P2P cluster on their own loopback addresses (see
 * p2p_harness.h).
 */
#include "p2p_harness.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dfc/id.h"
#include "redis_harness.h"
#include "test_support.h"

#define HOSTS_KEY "scheduler:scheduler-clusters:1:persistent-cache-hosts"

int p2p_free_port(const char *ip) {
    return (int)test_free_port_on(ip);
}

static void write_config(FILE *f, const struct harness *h, void *arg) {
    const struct p2p_node *n = arg;
    const char *d = n->tls_dir;
    fprintf(f, "download:\n");
    if (n->download_rate[0] != '\0') {
        fprintf(f, "  rateLimit: %s\n", n->download_rate);
    }
    fprintf(f,
            "  server:\n    socketPath: %s\n"
            "storage:\n  dir: %s\n  server:\n    ip: %s\n    tcpPort: %d\n"
            "log:\n  level: info\n"
            "gc:\n  interval: 1h\n"
            "host:\n  ip: %s\n  hostname: %s\n"
            "scheduler:\n  addrs:\n    - %s\n  announceInterval: 1s\n",
            h->socket, h->store, n->ip, n->vortex_port, n->ip, n->hostname, n->sched_addr);
    if (d[0] != '\0') { /* one identity for every side, as the local cluster does */
        fprintf(f, "  caCert: %s/ca.crt\n  cert: %s/tls.crt\n  key: %s/tls.key\n", d, d, d);
    }
    fprintf(f, "upload:\n  server:\n    ip: %s\n    port: %d\n", n->ip, n->upload_port);
    if (d[0] != '\0') {
        fprintf(f,
                "    caCert: %s/ca.crt\n    cert: %s/tls.crt\n    key: %s/tls.key\n"
                "  client:\n    caCert: %s/ca.crt\n    cert: %s/tls.crt\n    key: %s/tls.key\n"
                "    serverName: \"%s\"\n"
                "security:\n  tlsPolicy: mutual\n",
                d, d, d, d, d, d, n->server_name);
    }
}

bool p2p_host_announced(const struct redis_server *redis, const char *host_id) {
    redisReply *r = redis_server_command(redis, "SISMEMBER %s %s", HOSTS_KEY, host_id);
    bool yes = r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return yes;
}

void p2p_node_start(struct p2p_node *n, const char *ip, const char *name, const char *sched_addr,
                    const struct redis_server *redis) {
    p2p_node_start_tls(n, ip, name, sched_addr, redis, NULL, NULL);
}

static void start(struct p2p_node *n, const char *ip, const char *name, const char *sched_addr,
                  const struct redis_server *redis, const char *tls_dir, const char *server_name,
                  const char *rate);

void p2p_node_start_tls(struct p2p_node *n, const char *ip, const char *name,
                        const char *sched_addr, const struct redis_server *redis,
                        const char *tls_dir, const char *server_name) {
    start(n, ip, name, sched_addr, redis, tls_dir, server_name, NULL);
}

void p2p_node_start_limited(struct p2p_node *n, const char *ip, const char *name,
                            const char *sched_addr, const struct redis_server *redis,
                            const char *rate) {
    start(n, ip, name, sched_addr, redis, NULL, NULL, rate);
}

static void start(struct p2p_node *n, const char *ip, const char *name, const char *sched_addr,
                  const struct redis_server *redis, const char *tls_dir, const char *server_name,
                  const char *rate) {
    memset(n, 0, sizeof(*n));
    snprintf(n->download_rate, sizeof(n->download_rate), "%s", rate != NULL ? rate : "");
    snprintf(n->tls_dir, sizeof(n->tls_dir), "%s", tls_dir != NULL ? tls_dir : "");
    snprintf(n->server_name, sizeof(n->server_name), "%s", server_name != NULL ? server_name : "");
    snprintf(n->ip, sizeof(n->ip), "%s", ip);
    snprintf(n->hostname, sizeof(n->hostname), "%s", name);
    snprintf(n->sched_addr, sizeof(n->sched_addr), "%s", sched_addr);
    n->upload_port = p2p_free_port(ip);
    do {
        n->vortex_port = p2p_free_port(ip);
    } while (n->vortex_port == n->upload_port);
    snprintf(n->upload_target, sizeof(n->upload_target), "%s:%d", ip, n->upload_port);
    if (dfc_host_id(ip, name, n->host_id, sizeof(n->host_id)) < 0) {
        abort();
    }
    harness_start_config(&n->h, write_config, n);
    if (redis == NULL) {
        return;
    }
    double until = test_now_ms() + 30000;
    while (!p2p_host_announced(redis, n->host_id)) {
        if (test_now_ms() > until) {
            fprintf(stderr, "p2p_harness: %s never announced; its log:\n", n->host_id);
            char cmd[400];
            snprintf(cmd, sizeof(cmd), "tail -30 '%s' >&2", n->h.log);
            (void)system(cmd);
            abort();
        }
        usleep(20000);
    }
}

int p2p_node_destroy(struct p2p_node *n) {
    return harness_destroy(&n->h);
}

void p2p_content_path(const struct p2p_node *n, const char *id, char *buf, size_t size) {
    snprintf(buf, size, "%s/content/persistent-cache-tasks/%.3s/%s", n->h.store, id, id);
}
