/*
 * dfcache rm - remove a task from the node's daemon (stat and ls: show.c).
 */
#include <stdio.h>
#include <string.h>

#include "dfc/options.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dfcache.h"

#define TIMEOUT_MS 30000

/* rm takes only the common options and reads its own endpoint variable. */
struct simple_opts {
    struct dfcache_common c;
};

static const struct dfc_config_row rm_rows[] = {
    DFCACHE_COMMON_ROWS(struct simple_opts, "DFCACHE_RM_DFDAEMON_ENDPOINT")};

#define SCHEMA(name, rows)                                                                         \
    { name, rows, sizeof(rows) / sizeof((rows)[0]) }
static const struct dfc_config_schema rm_schema = SCHEMA("dfcache rm", rm_rows);

static const struct dfc_cli rm_cli = {.prog = "dfcache rm",
                                      .usage = "[options] <ID>",
                                      .schema = &rm_schema,
                                      .min_args = 1,
                                      .max_args = 1,
                                      .arg_name = "task ID"};

/* Parses a command line of cli into o; returns DFC_CLI_RUN, or the exit code (o released). */
static int parse_simple(const struct dfc_cli *cli, int argc, char **argv, struct simple_opts *o,
                        const char **ret_id) {
    struct dfc_cli_args args;
    int code = dfc_cli_main(cli, o, argc, argv, &args);
    if (code != DFC_CLI_RUN) {
        dfc_config_free(cli->schema, o);
        return code;
    }
    if (ret_id != NULL) {
        *ret_id = args.args[0];
    }
    return DFC_CLI_RUN;
}

int dfcache_rm(int argc, char **argv) {
    struct simple_opts o = {0};
    const char *id = NULL;
    int r = parse_simple(&rm_cli, argc, argv, &o, &id);
    if (r != DFC_CLI_RUN) {
        return r;
    }
    struct dfc_error err;
    struct dfc_rpc_client *client;
    r = dfcache_connect(o.c.endpoint, &client, &err);
    dfc_config_free(&rm_schema, &o);
    if (r < 0) {
        return dfcache_fail("rm", &err);
    }
    /* A missing task is reported, as rm(1) does; upstream's delete itself is idempotent. */
    Dfdaemon__V2__StatLocalPersistentCacheTaskRequest sreq =
        DFDAEMON__V2__STAT_LOCAL_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    sreq.task_id = (char *)id;
    ProtobufCMessage *m = NULL;
    r = dfc_rpc_unary(client, &dfcache_m.stat_local, &sreq.base, TIMEOUT_MS, &m, &err);
    dfc_rpc_msg_free(m);
    m = NULL;
    if (r == 0) {
        Dfdaemon__V2__DeletePersistentCacheTaskRequest req =
            DFDAEMON__V2__DELETE_PERSISTENT_CACHE_TASK_REQUEST__INIT;
        req.task_id = (char *)id;
        r = dfc_rpc_unary(client, &dfcache_m.delete_task, &req.base, TIMEOUT_MS, &m, &err);
        dfc_rpc_msg_free(m);
    }
    dfc_rpc_client_free(client);
    if (r < 0) {
        return dfcache_fail("rm", &err);
    }
    printf("Removed: %s\n", id);
    return DFCACHE_OK;
}
