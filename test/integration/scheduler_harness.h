/*
 * scheduler_harness.h - runs real scheduler processes (build/scheduler/scheduler, SCHEDULER_BIN)
 * on 127.0.0.1 for the integration tests: any free port (server.port 0, read back from the
 * ready log line), a temp dir with its config and log, and the process killed with the test
 * (PR_SET_PDEATHSIG).
 */
#ifndef DFC_TEST_SCHEDULER_HARNESS_H
#define DFC_TEST_SCHEDULER_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sched_harness {
    char dir[256];
    char config[320];
    char log[320];
    char target[64]; /* "127.0.0.1:<port>", for dfc_rpc_client_new */
    int port;
    pid_t pid; /* 0 when not running */
    /* metrics.server.port, passed as SCHEDULER_METRICS_SERVER_PORT (over the config): 0 (the
     * default after sched_harness_start, so parallel tests never compete for 8000) is off;
     * set it before sched_harness_restart() to serve the endpoint. */
    unsigned metrics_port;
    /* With sched_harness_start_tls: the directory of its ca.crt, tls.crt and tls.key. */
    char server_tls_dir[256];
};

/* Writes a config (server on 127.0.0.1, advertiseIP 127.0.0.1, database.redis.addrs
 * [redis_addr] unless NULL, log.level debug, then extra_yaml), starts the scheduler and waits
 * for its ready line. Aborts with the log on stderr when it does not come up. */
void sched_harness_start(struct sched_harness *h, const char *redis_addr, const char *extra_yaml);

/* sched_harness_start() with mutual TLS (security.tlsPolicy mutual) on its gRPC port and to the
 * nodes, both with tls_dir's ca.crt, tls.crt and tls.key (a certificate naming 127.0.0.1). The
 * caller zeroes *h first. */
void sched_harness_start_tls(struct sched_harness *h, const char *redis_addr, const char *tls_dir);
/* sched_harness_start_tls() with peer.tls.serverName server_name: the name the nodes'
 * certificates must hold instead of their IP. */
void sched_harness_start_tls_named(struct sched_harness *h, const char *redis_addr,
                                   const char *tls_dir, const char *server_name);
/* sched_harness_start_tls_named() with security_yaml (NULL: none) added under security:, each
 * line indented two spaces ("  operatorIdentities: [ops.test]\n"). */
void sched_harness_start_tls_with(struct sched_harness *h, const char *redis_addr,
                                  const char *tls_dir, const char *server_name,
                                  const char *security_yaml);

/* sched_harness_start() with metrics.server.port (0: off). */
void sched_harness_start_metrics(struct sched_harness *h, const char *redis_addr,
                                 const char *extra_yaml, unsigned metrics_port);

/* Starts the scheduler again (stopping it first when it runs) on the same config and port, and
 * waits for its ready line. */
void sched_harness_restart(struct sched_harness *h);

/* Sends sig and waits; returns the exit code, or 128 + the signal that ended it. */
int sched_harness_stop(struct sched_harness *h, int sig);

/* SIGTERM, wait, remove the temp dir (kept when DFC_TEST_KEEP is set); returns the exit code
 * (printing the log's tail when it is not 0). */
int sched_harness_destroy(struct sched_harness *h);

/* Runs the scheduler binary with argv (NULL-terminated, without argv[0]) in the foreground and
 * captures stdout and stderr (NUL-terminated, truncated). Returns its exit code. */
int sched_harness_run(const char *const *argv, char *out, size_t out_size, char *errbuf,
                      size_t err_size);

/* True when the log contains text. */
bool sched_harness_log_has(const struct sched_harness *h, const char *text);

#endif
