/*
 * daemon_harness.h - runs a real dfdaemon process on a temp dir and socket for integration
 * tests, and runs dfcache as a child process. Paths of the binaries come from the build
 * (DFDAEMON_BIN, DFCACHE_BIN). Also the dfdaemon client methods every integration test
 * shares, and clients of the daemon's socket.
 */
#ifndef DFC_TEST_DAEMON_HARNESS_H
#define DFC_TEST_DAEMON_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "dfc/rpc_client.h"

struct harness {
    char dir[256];    /* the test's temp dir (0755) */
    char store[320];  /* storage.dir */
    char socket[320]; /* download.server.socketPath */
    char config[320];
    char log[320];
    pid_t pid; /* the daemon, or 0 */
    /* metrics.server.port and health.server.port, passed as DFDAEMON_METRICS_PORT and
     * DFDAEMON_HEALTH_PORT (over the config file): 0 (the harness's default, so that daemons
     * of parallel tests never compete for 4002/4003) is off. Set after harness_start*() for
     * the next restart, or use harness_start_ports(). */
    unsigned metrics_port, health_port;
};

/* Creates the temp dir and a config (extra_yaml appended), starts the daemon, waits for it. */
void harness_start(struct harness *h, const char *extra_yaml);

/* Like harness_start(), but write(f, h, arg) writes the whole config: it must set
 * download.server.socketPath to h->socket and storage.dir to h->store (the P2P tests need
 * keys below download: and storage: too). */
void harness_start_config(struct harness *h,
                          void (*write)(FILE *f, const struct harness *h, void *arg), void *arg);

/* harness_start() with metrics.server.port and health.server.port set (0: off). */
void harness_start_ports(struct harness *h, const char *extra_yaml, unsigned metrics_port,
                         unsigned health_port);

/* Starts the daemon again on the same dir and config. */
void harness_restart(struct harness *h);

/* The same with one more command-line argument (NULL: none). */
void harness_restart_with(struct harness *h, const char *arg);

/* Runs the daemon on the same config (plus arg, NULL: none) in the foreground, for a start
 * that is expected to fail; its output goes to the log. Returns its exit code. */
int harness_run_daemon(struct harness *h, const char *arg);

/* Stops the daemon with sig (SIGTERM: clean, SIGKILL: crash) and waits for it. Returns its
 * exit code, or 128 + the signal that ended it. */
int harness_stop(struct harness *h, int sig);

/* Stops the daemon with SIGTERM and removes the temp dir. Returns the daemon's exit code: 0
 * after a clean shutdown (a sanitizer build exits non-zero on leaks). */
int harness_destroy(struct harness *h);

/* Runs dfcache with argv (NULL-terminated, without "dfcache"), -e pointing at the daemon
 * added. Captures stdout and stderr (NUL-terminated, truncated to size). Returns the exit
 * code. run_as_uid >= 0 runs it as that uid/gid (root only). */
int harness_dfcache(struct harness *h, int run_as_uid, char *out, size_t out_size, char *errbuf,
                    size_t err_size, const char *const *argv);

/* The dfdaemon methods the integration tests call, one table for all of them. Resolved by
 * harness_resolve_methods() at the start of main(), before any test runs. */
struct harness_methods {
    /* dfdaemon.v2.DfdaemonDownload */
    struct dfc_rpc_client_method upload, download, stat, stat_local, list_local, delete_host;
    /* dfdaemon.v2.DfdaemonUpload */
    struct dfc_rpc_client_method update, up_stat, delete_task;
    /* dfc.dfdaemon.v1.DfdaemonImport */
    struct dfc_rpc_client_method import;
};
extern struct harness_methods hm;

/* Resolves hm and the test's own rows (extra, n_extra; NULL, 0: none). On an unknown method
 * prints the error and returns -1, so main() exits before running a test. */
int harness_resolve_methods(const struct dfc_rpc_client_row *extra, size_t n_extra);

/* A client of the Unix socket at socket_path ("unix:" is added), opts as dfc_rpc_client_new. */
int harness_client_new(const char *socket_path, const struct dfc_rpc_client_opts *opts,
                       struct dfc_rpc_client **ret, struct dfc_error *err);

/* A client of h's socket with default options; aborts when none can be made. */
struct dfc_rpc_client *harness_client(struct harness *h);

/* The fixture most tests use: harness_start() with GC every hour (so it never runs by itself
 * during a test) and a client of the socket in *ret_client. */
void harness_open(struct harness *h, struct dfc_rpc_client **ret_client);

/* Undoes harness_open(): harness_destroy() first (a failed test may have left streams open on
 * c), then frees c. Returns harness_destroy()'s code: 0 after a clean shutdown without leaks. */
int harness_close(struct harness *h, struct dfc_rpc_client *c);

/* ---- the fixture of the tests on one daemon ---- */

/* What most integration tests hold: a daemon started by harness_open(), a client of its
 * socket, and the last DFCACHE() run's stdout and stderr. Owned by the test (cmocka's state). */
struct harness_fx {
    struct harness h;
    struct dfc_rpc_client *c;
    char out[16384], err[8192];
};

/* cmocka setup: a new struct harness_fx with harness_open() into *state. */
int harness_fx_setup(void **state);

/* cmocka teardown: harness_close() and the fixture freed; asserts that the daemon's code was 0
 * (a clean shutdown, and no leaks under a sanitizer). */
int harness_fx_teardown(void **state);

/* Runs dfcache (as this process) with the given arguments against f's daemon, f being any
 * fixture with a struct harness h and char arrays out and err: its exit code; its stdout and
 * stderr in f->out and f->err. */
#define DFCACHE(f, ...)                                                                            \
    harness_dfcache(&(f)->h, -1, (f)->out, sizeof((f)->out), (f)->err, sizeof((f)->err),           \
                    (const char *const[]){__VA_ARGS__, NULL})

/* dfcache import's "Done: <id>\n" -> id (asserts that out starts so). */
void harness_done_id(const char *out, char id[65]);

/* "<h->dir>/<name>" into buf. */
void harness_path(const struct harness *h, const char *name, char *buf, size_t size);

/* Writes len bytes of a deterministic pattern (seed) to path. */
void harness_write_file(const char *path, size_t len, unsigned seed);

/* True when the files have the same bytes. */
bool harness_same_file(const char *a, const char *b);

/* Number of entries below dir (recursive). */
size_t harness_count(const char *dir);

/* True when the daemon's log contains text. */
bool harness_log_has(struct harness *h, const char *text);

#endif
