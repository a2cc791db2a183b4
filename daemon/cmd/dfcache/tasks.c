/*
 * dfcache stat, ls, rm - look at and remove the tasks of the node's daemon.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dfc/options.h"
#include "dfc/pbtime.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dfcache.h"

#define TIMEOUT_MS 30000

/* stat, ls and rm take only the common options; each reads its own endpoint variable. */
struct simple_opts {
    struct dfcache_common c;
};

static const struct dfc_config_row stat_rows[] = {
    DFCACHE_COMMON_ROWS(struct simple_opts, "DFCACHE_STAT_DFDAEMON_ENDPOINT")};
static const struct dfc_config_row ls_rows[] = {
    DFCACHE_COMMON_ROWS(struct simple_opts, "DFCACHE_LS_DFDAEMON_ENDPOINT")};
static const struct dfc_config_row rm_rows[] = {
    DFCACHE_COMMON_ROWS(struct simple_opts, "DFCACHE_RM_DFDAEMON_ENDPOINT")};

#define SCHEMA(name, rows)                                                                         \
    { name, rows, sizeof(rows) / sizeof((rows)[0]) }
static const struct dfc_config_schema stat_schema = SCHEMA("dfcache stat", stat_rows);
static const struct dfc_config_schema ls_schema = SCHEMA("dfcache ls", ls_rows);
static const struct dfc_config_schema rm_schema = SCHEMA("dfcache rm", rm_rows);

static const struct dfc_cli stat_cli = {.prog = "dfcache stat",
                                        .usage = "[options] <ID>",
                                        .schema = &stat_schema,
                                        .min_args = 1,
                                        .max_args = 1,
                                        .arg_name = "task ID"};
static const struct dfc_cli ls_cli = {
    .prog = "dfcache ls", .usage = "[options]", .schema = &ls_schema};
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

static void format_time(int64_t seconds, char *buf, size_t size) {
    time_t t = (time_t)seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    if (strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0 && size > 0) {
        buf[0] = '\0'; /* too small: the contents would be undefined */
    }
}

/* "1h", or "0s" when the daemon sent none. */
static void format_ttl(const Google__Protobuf__Duration *d, char *buf, size_t size) {
    int64_t ns = 0;
    if (d != NULL) {
        (void)dfc_pb_duration_to_ns(d, &ns); /* shown as sent, clamped */
    }
    dfc_format_duration(ns, buf, size);
}

int dfcache_stat(int argc, char **argv) {
    struct simple_opts o = {0};
    const char *id = NULL;
    int r = parse_simple(&stat_cli, argc, argv, &o, &id);
    if (r != DFC_CLI_RUN) {
        return r;
    }
    struct dfc_error err;
    struct dfc_rpc_client *client;
    r = dfcache_connect(o.c.endpoint, &client, &err);
    dfc_config_free(&stat_schema, &o);
    if (r < 0) {
        return dfcache_fail("stat", &err);
    }
    Dfdaemon__V2__StatPersistentCacheTaskRequest req =
        DFDAEMON__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)id;
    ProtobufCMessage *m = NULL;
    r = dfc_rpc_unary(client, &dfcache_m.stat, &req.base, TIMEOUT_MS, &m, &err);
    dfc_rpc_client_free(client);
    if (r < 0) {
        return dfcache_fail("stat", &err);
    }
    Common__V2__PersistentCacheTask *t = (void *)m;
    char ttl[32], created[32], updated[32], cl[32], pl[32];
    format_ttl(t->ttl, ttl, sizeof(ttl));
    format_time(t->created_at ? t->created_at->seconds : 0, created, sizeof(created));
    format_time(t->updated_at ? t->updated_at->seconds : 0, updated, sizeof(updated));
    dfc_format_size(t->content_length, cl, sizeof(cl));
    dfc_format_size(t->piece_length, pl, sizeof(pl));
    printf("ID:                   %s\n"
           "State:                %s\n"
           "Content length:       %llu (%s)\n"
           "Piece length:         %llu (%s)\n"
           "Piece count:          %u\n"
           "Persistent replicas:  %llu of %llu (replicas: %llu)\n"
           "Tag:                  %s\n"
           "Application:          %s\n"
           "TTL:                  %s\n"
           "Created at:           %s\n"
           "Updated at:           %s\n",
           t->id, t->state, (unsigned long long)t->content_length, cl,
           (unsigned long long)t->piece_length, pl, t->piece_count,
           (unsigned long long)t->current_persistent_replica_count,
           (unsigned long long)t->persistent_replica_count,
           (unsigned long long)t->current_replica_count, t->opt_tag_case ? t->tag : "",
           t->opt_application_case ? t->application : "", ttl, created, updated);
    dfc_rpc_msg_free(m);
    return DFCACHE_OK;
}

int dfcache_ls(int argc, char **argv) {
    struct simple_opts o = {0};
    int r = parse_simple(&ls_cli, argc, argv, &o, NULL);
    if (r != DFC_CLI_RUN) {
        return r;
    }
    struct dfc_error err;
    struct dfc_rpc_client *client;
    r = dfcache_connect(o.c.endpoint, &client, &err);
    dfc_config_free(&ls_schema, &o);
    if (r < 0) {
        return dfcache_fail("ls", &err);
    }
    Dfdaemon__V2__ListLocalPersistentCacheTasksRequest req =
        DFDAEMON__V2__LIST_LOCAL_PERSISTENT_CACHE_TASKS_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    r = dfc_rpc_unary(client, &dfcache_m.list_local, &req.base, TIMEOUT_MS, &m, &err);
    dfc_rpc_client_free(client);
    if (r < 0) {
        return dfcache_fail("ls", &err);
    }
    Dfdaemon__V2__ListLocalPersistentCacheTasksResponse *l = (void *)m;
    printf("%-64s  %14s  %10s  %-10s  %-8s  %s\n", "ID", "CONTENT", "PIECE", "PERSISTENT", "TTL",
           "CREATED");
    for (size_t i = 0; i < l->n_tasks; i++) {
        Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *t = l->tasks[i];
        char pl[32], ttl[32], created[32];
        dfc_format_size(t->piece_length, pl, sizeof(pl));
        format_ttl(t->ttl, ttl, sizeof(ttl));
        format_time(t->created_at ? t->created_at->seconds : 0, created, sizeof(created));
        printf("%-64s  %14llu  %10s  %-10s  %-8s  %s\n", t->task_id,
               (unsigned long long)t->content_length, pl, t->persistent ? "true" : "false", ttl,
               created);
    }
    dfc_rpc_msg_free(m);
    return DFCACHE_OK;
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
