/*
 * dfcache.h - what the dfcache subcommands share: the options every one takes (schema rows for
 * dfc/options.h), the client connection, error reporting and the progress bar.
 *
 * Exit codes: 0 success, 1 the operation failed, 2 usage error.
 */
#ifndef DFCACHE_H
#define DFCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/config.h"
#include "dfc/error.h"
#include "dfc/rpc_client.h"

#define DFCACHE_DEFAULT_ENDPOINT "/var/run/dragonfly/dfdaemon.sock"

enum { DFCACHE_OK = 0, DFCACHE_FAILED = 1, DFCACHE_USAGE = 2 };

/* The daemon methods dfcache calls, resolved by main() before any command runs. */
struct dfcache_methods {
    struct dfc_rpc_client_method upload, download, stat, stat_local, list_local, delete_task,
        import, inspect;
};
extern struct dfcache_methods dfcache_m;

/* Options every subcommand takes. Strings belong to the options struct (dfc_config_free). */
struct dfcache_common {
    char *endpoint;
    bool no_progress;
    char *log_level; /* accepted for compatibility: dfcache prints only results and errors */
    bool console;
};

/* The schema rows of struct dfcache_common, for an options struct T holding it as member c;
 * env is the subcommand's endpoint variable (DFCACHE_<CMD>_DFDAEMON_ENDPOINT). */
#define DFCACHE_COMMON_ROWS(T, env_name)                                                           \
    {.type = DFC_CFG_STRING,                                                                       \
     .offset = offsetof(T, c.endpoint),                                                            \
     .def = DFCACHE_DEFAULT_ENDPOINT,                                                              \
     .env = (env_name),                                                                            \
     .flag = "endpoint",                                                                           \
     .short_flag = 'e',                                                                            \
     .metavar = "PATH",                                                                            \
     .help = "dfdaemon socket"},                                                                   \
        {.type = DFC_CFG_BOOL,                                                                     \
         .offset = offsetof(T, c.no_progress),                                                     \
         .flag = "no-progress",                                                                    \
         .help = "no progress bar"},                                                               \
        {.type = DFC_CFG_STRING,                                                                   \
         .offset = offsetof(T, c.log_level),                                                       \
         .def = "info",                                                                            \
         .flag = "log-level",                                                                      \
         .short_flag = 'l',                                                                        \
         .metavar = "LEVEL",                                                                       \
         .help = "accepted for compatibility"},                                                    \
    {                                                                                              \
        .type = DFC_CFG_BOOL, .offset = offsetof(T, c.console), .flag = "console",                 \
        .help = "accepted for compatibility"                                                       \
    }

int dfcache_import(int argc, char **argv);
int dfcache_export(int argc, char **argv);
int dfcache_stat(int argc, char **argv);
int dfcache_ls(int argc, char **argv);
int dfcache_rm(int argc, char **argv);

/* Connects to the daemon at endpoint (a socket path or a unix: target). */
int dfcache_connect(const char *endpoint, struct dfc_rpc_client **ret, struct dfc_error *err);

/* Prints "dfcache <cmd>: <message> (<GRPC_CODE>)" on stderr; returns DFCACHE_FAILED. */
int dfcache_fail(const char *cmd, const struct dfc_error *err);

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
