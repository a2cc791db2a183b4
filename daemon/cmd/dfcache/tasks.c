/*
 * dfcache stat, ls, rm - look at and remove the tasks of the node's daemon.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dfc/pbtime.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dfcache.h"

#define TIMEOUT_MS 30000

/* Parses the options every one of these takes: -e, -l, --console, -h. want_id: one ID. */
static int parse_simple(const char *cmd, const char *env, int argc, char **argv, bool want_id,
                        struct dfcache_common *c, const char **ret_id) {
    static const struct option longopts[] = {
        DFCACHE_COMMON_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    c->endpoint = dfcache_env(env, DFCACHE_DEFAULT_ENDPOINT);
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, DFCACHE_COMMON_SHORT "h", longopts, NULL)) != -1) {
        if (dfcache_common_option(opt, optarg, c)) {
            continue;
        }
        switch (opt) {
        case 'h':
            printf("Usage: dfcache %s [options]%s\n\n"
                   "Options:\n"
                   "  -e, --endpoint PATH    dfdaemon socket [" DFCACHE_DEFAULT_ENDPOINT "] [%s]\n"
                   "  -l, --log-level LEVEL  accepted for compatibility\n"
                   "      --console          accepted for compatibility\n"
                   "  -h, --help             this help\n",
                   cmd, want_id ? " <ID>" : "", env);
            return 1;
        default:
            return dfcache_usage_error(cmd, "bad option");
        }
    }
    if (want_id) {
        if (optind != argc - 1) {
            return dfcache_usage_error(cmd, "expects exactly one task ID");
        }
        *ret_id = argv[optind];
    } else if (optind != argc) {
        return dfcache_usage_error(cmd, "takes no arguments");
    }
    return 0;
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
    struct dfcache_common c = {0};
    const char *id = NULL;
    int r = parse_simple("stat", "DFCACHE_STAT_DFDAEMON_ENDPOINT", argc, argv, true, &c, &id);
    if (r != 0) {
        return r == 1 ? DFCACHE_OK : r;
    }
    struct dfc_error err;
    struct dfc_rpc_client *client;
    if (dfcache_connect(c.endpoint, &client, &err) < 0) {
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
    struct dfcache_common c = {0};
    int r = parse_simple("ls", "DFCACHE_LS_DFDAEMON_ENDPOINT", argc, argv, false, &c, NULL);
    if (r != 0) {
        return r == 1 ? DFCACHE_OK : r;
    }
    struct dfc_error err;
    struct dfc_rpc_client *client;
    if (dfcache_connect(c.endpoint, &client, &err) < 0) {
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
    struct dfcache_common c = {0};
    const char *id = NULL;
    int r = parse_simple("rm", "DFCACHE_RM_DFDAEMON_ENDPOINT", argc, argv, true, &c, &id);
    if (r != 0) {
        return r == 1 ? DFCACHE_OK : r;
    }
    struct dfc_error err;
    struct dfc_rpc_client *client;
    if (dfcache_connect(c.endpoint, &client, &err) < 0) {
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
