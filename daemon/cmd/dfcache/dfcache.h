/*
 * dfcache.h - what the dfcache subcommands share: the command table, option parsing with
 * environment fallbacks, the client connection, error reporting and the progress bar.
 *
 * Exit codes: 0 success, 1 the operation failed, 2 usage error.
 */
#ifndef DFCACHE_H
#define DFCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/rpc_client.h"

#define DFCACHE_DEFAULT_ENDPOINT "/var/run/dragonfly/dfdaemon.sock"

enum { DFCACHE_OK = 0, DFCACHE_FAILED = 1, DFCACHE_USAGE = 2 };

/* The daemon methods dfcache calls, resolved by main() before any command runs. */
struct dfcache_methods {
    struct dfc_rpc_client_method upload, download, stat, stat_local, list_local, delete_task,
        import;
};
extern struct dfcache_methods dfcache_m;

/* Options every subcommand takes. */
struct dfcache_common {
    const char *endpoint;
    bool no_progress;
    const char *log_level;
    bool console;
};

/* The long options every subcommand takes, for its struct option table. */
enum { DFCACHE_OPT_NO_PROGRESS = 1000, DFCACHE_OPT_CONSOLE };
#define DFCACHE_COMMON_OPTIONS                                                                     \
    {"endpoint", required_argument, NULL, 'e'},                                                    \
        {"no-progress", no_argument, NULL, DFCACHE_OPT_NO_PROGRESS},                               \
        {"log-level", required_argument, NULL, 'l'}, {                                             \
        "console", no_argument, NULL, DFCACHE_OPT_CONSOLE                                          \
    }
#define DFCACHE_COMMON_SHORT "e:l:"

/* Applies opt when it is one of DFCACHE_COMMON_OPTIONS; returns whether it was. */
bool dfcache_common_option(int opt, const char *arg, struct dfcache_common *c);

int dfcache_import(int argc, char **argv);
int dfcache_export(int argc, char **argv);
int dfcache_stat(int argc, char **argv);
int dfcache_ls(int argc, char **argv);
int dfcache_rm(int argc, char **argv);

/* getenv(name), or def when unset or empty. */
const char *dfcache_env(const char *name, const char *def);

/* Connects to the daemon at endpoint (a socket path or a unix: target). */
int dfcache_connect(const char *endpoint, struct dfc_rpc_client **ret, struct dfc_error *err);

/* Prints "dfcache <cmd>: <message> (<GRPC_CODE>)" on stderr; returns DFCACHE_FAILED. */
int dfcache_fail(const char *cmd, const struct dfc_error *err);

/* Prints "dfcache <cmd>: <message>" and a hint on stderr; returns DFCACHE_USAGE. */
int dfcache_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The progress bar: drawn on stderr when it is a terminal and enabled, else silent. */
struct dfcache_progress {
    bool on;
    uint64_t total, done;
    double started, last_draw;
    const char *label;
};

void dfcache_progress_init(struct dfcache_progress *p, const char *label, uint64_t total,
                           bool enabled);
void dfcache_progress_add(struct dfcache_progress *p, uint64_t n);
/* Draws the final state and ends the line. */
void dfcache_progress_done(struct dfcache_progress *p);

#endif /* DFCACHE_H */
