/*
 * p2p_harness.h - a small peer-to-peer cluster for the integration tests: a real redis-server
 * (test/support/redis_harness.h), the real scheduler (scheduler_harness.h) and real dfdaemons
 * (daemon_harness.h), each dfdaemon on its own loopback address (127.0.0.11, .12, ...) with
 * host.ip, upload.server.ip and storage.server.ip all that address and free ports, its own
 * hostname and so its own host id. Every address is in 127.0.0.0/8.
 *
 * Loopback source addresses: Linux gives every unbound socket towards 127.0.0.0/8 the source
 * 127.0.0.1 (the local route's src), so whatever connects to a node (the scheduler, another
 * node, the test) is seen coming from 127.0.0.1; the scheduler runs there for that reason.
 *
 * Ownership: the structs are the caller's; p2p_node_destroy() stops the daemon and removes its
 * directory.
 */
#ifndef DFC_TEST_P2P_HARNESS_H
#define DFC_TEST_P2P_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon_harness.h"

struct redis_server;

struct p2p_node {
    struct harness h;
    char ip[16];
    char hostname[32];
    char host_id[320];
    char sched_addr[64]; /* scheduler.addrs[0] */
    int upload_port, vortex_port;
    char upload_target[64]; /* "<ip>:<upload port>": DfdaemonUpload on TCP */
    char tls_dir[256];      /* "" or the node's ca.crt, tls.crt, tls.key (p2p_node_start_tls) */
    char server_name[64];   /* "" or upload.client.serverName (p2p_node_start_tls) */
    char download_rate[32]; /* "" or download.rateLimit (p2p_node_start_limited) */
};

/* A free TCP port on ip (test_free_port_on; the daemon binds it right after). */
int p2p_free_port(const char *ip);

/* Starts a dfdaemon on ip named name, with scheduler.addrs [sched_addr], announce every 1 s,
 * GC every hour. With redis (may be NULL) it waits up to 30 s until the scheduler holds the
 * node's host, and aborts with the daemon's log otherwise. */
void p2p_node_start(struct p2p_node *n, const char *ip, const char *name, const char *sched_addr,
                    const struct redis_server *redis);

/* p2p_node_start() with mutual TLS: tls_dir's ca.crt, tls.crt and tls.key for every side
 * (upload.server, upload.client, scheduler; a certificate naming ip). tls_dir NULL: none.
 * server_name (NULL: none): upload.client.serverName, the name the other nodes' certificates
 * must hold instead of their IP. */
void p2p_node_start_tls(struct p2p_node *n, const char *ip, const char *name,
                        const char *sched_addr, const struct redis_server *redis,
                        const char *tls_dir, const char *server_name);

/* p2p_node_start() with download.rateLimit set to rate (e.g. "8MiB"): a node whose downloads
 * take long enough for others to fetch from it meanwhile. */
void p2p_node_start_limited(struct p2p_node *n, const char *ip, const char *name,
                            const char *sched_addr, const struct redis_server *redis,
                            const char *rate);

/* Stops the daemon (SIGTERM) and removes its directory; returns its exit code. */
int p2p_node_destroy(struct p2p_node *n);

/* Whether the scheduler's Redis holds host_id in its host set. */
bool p2p_host_announced(const struct redis_server *redis, const char *host_id);

/* The path of task id's content file in n's store. */
void p2p_content_path(const struct p2p_node *n, const char *id, char *buf, size_t size);

#endif /* DFC_TEST_P2P_HARNESS_H */
