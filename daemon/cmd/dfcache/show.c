/*
 * dfcache stat, ls - a task and the node's tasks, for people (sizes in IEC units, times relative
 * to now, a table for ls) or, with --json, for scripts (exact numbers, RFC 3339 times, the field
 * names listed in --help, which are kept stable).
 *
 * stat asks the daemon's DfdaemonInspect (proto/dfc/inspect.proto), which says whether the
 * replica counts are the scheduler's; a daemon without it (upstream's) is asked
 * StatPersistentCacheTask instead, whose counts are shown as the scheduler's (upstream's daemon
 * always forwards to one). ls lists this node's copies (ListLocalPersistentCacheTasks): replica
 * counts would cost a scheduler round trip per task, so they are stat's.
 *
 * Full task ids everywhere: the other commands take only a full id, so a shortened one could
 * not be pasted back.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/inspect.pb-c.h"
#include "dfc/json.h"
#include "dfc/options.h"
#include "dfc/pbtime.h"
#include "dfc/units.h"
#include "dfcache.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"

#define TIMEOUT_MS 30000

struct show_opts {
    struct dfcache_common c;
    bool json;
    bool bytes;
};

#define SHOW_ROWS(env_name)                                                                        \
    DFCACHE_COMMON_ROWS(struct show_opts, env_name),                                               \
        {.type = DFC_CFG_BOOL,                                                                     \
         .offset = offsetof(struct show_opts, json),                                               \
         .flag = "json",                                                                           \
         .help = "machine output (JSON, the fields above)"},                                       \
    {                                                                                              \
        .type = DFC_CFG_BOOL, .offset = offsetof(struct show_opts, bytes), .flag = "bytes",        \
        .help = "sizes in exact bytes instead of KiB/MiB/GiB"                                      \
    }

static const struct dfc_config_row stat_rows[] = {SHOW_ROWS("DFCACHE_STAT_DFDAEMON_ENDPOINT")};
static const struct dfc_config_row ls_rows[] = {SHOW_ROWS("DFCACHE_LS_DFDAEMON_ENDPOINT")};
static const struct dfc_config_schema stat_schema = {"dfcache stat", stat_rows,
                                                     sizeof(stat_rows) / sizeof(stat_rows[0])};
static const struct dfc_config_schema ls_schema = {"dfcache ls", ls_rows,
                                                   sizeof(ls_rows) / sizeof(ls_rows[0])};

static const struct dfc_cli stat_cli = {
    .prog = "dfcache stat",
    .usage = "[options] <ID>",
    .about = "Show a persistent cache task: the scheduler's view of it (replica counts \"-\"\n"
             "when no scheduler answered) and this node's copy (Persistent: \"-\" when none\n"
             "is stored here). TTL and expiry are this node's copy's when there is one.\n"
             "\n"
             "--json prints one object with these fields (times RFC 3339 in UTC):\n"
             "  id, state, content_length, piece_length, piece_count, tag, application,\n"
             "  persistent_replica_count (wanted), current_persistent_replica_count and\n"
             "  current_replica_count (null when no scheduler answered), ttl_seconds,\n"
             "  created_at, updated_at, expires_at, expired,\n"
             "  scheduler: {configured (null: unknown), answered, error (or null)},\n"
             "  pins (the ids of the content volumes that pin it on this node),\n"
             "  local: null (no copy here) or {persistent, ttl_seconds, created_at,\n"
             "    updated_at, finished_at, expires_at, expired}.",
    .schema = &stat_schema,
    .min_args = 1,
    .max_args = 1,
    .arg_name = "task ID"};

static const struct dfc_cli ls_cli = {
    .prog = "dfcache ls",
    .usage = "[options]",
    .about = "List the persistent cache tasks stored on this node, one row each: ID,\n"
             "SIZE, PERSISTENT (yes: a persistent replica; no: a cached copy the GC may\n"
             "evict), TTL, EXPIRES (\"in 42m\"; \"expired\": the GC deletes it at its next\n"
             "run) and CREATED. Full task ids, as stat, export and rm take them.\n"
             "\n"
             "--json prints an array of objects with these fields (times RFC 3339 in UTC):\n"
             "  id, content_length, piece_length, persistent, ttl_seconds, created_at,\n"
             "  updated_at, finished_at, expires_at, expired.",
    .schema = &ls_schema};

/* ---- formatting ---- */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * DFC_NS_PER_SEC + ts.tv_nsec;
}

static int64_t ts_ns(const Google__Protobuf__Timestamp *t) {
    int64_t ns = 0;
    if (t != NULL && dfc_pb_timestamp_to_ns(t, &ns) < 0) {
        ns = 0;
    }
    return ns;
}

static int64_t dur_ns(const Google__Protobuf__Duration *d) {
    int64_t ns = 0;
    if (d != NULL && dfc_pb_duration_to_ns(d, &ns) < 0) {
        ns = 0;
    }
    return ns;
}

/* "1.5 GiB", "512 B"; exact bytes with --bytes. */
static void size_str(uint64_t v, bool exact, char *buf, size_t size) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (exact || v < 1024) {
        snprintf(buf, size, exact ? "%" PRIu64 : "%" PRIu64 " B", v);
        return;
    }
    double d = (double)v;
    int u = 0;
    while (d >= 1024 * 0.99995 && u < 6) { /* 1023.96 KiB shows as "1.0 MiB" */
        d /= 1024;
        u++;
    }
    snprintf(buf, size, "%.1f %s", d, units[u]);
}

/* The two largest units of ns: "45s", "42m", "42m10s", "3h5m", "2d3h". */
static void span_str(int64_t ns, char *buf, size_t size) {
    int64_t s = ns / DFC_NS_PER_SEC;
    static const struct {
        int64_t secs;
        char unit;
    } u[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
    for (size_t i = 0; i < 4; i++) {
        if (s >= u[i].secs || i == 3) {
            int64_t hi = s / u[i].secs;
            int64_t lo = i < 3 ? (s % u[i].secs) / u[i + 1].secs : 0;
            if (lo > 0) {
                snprintf(buf, size, "%" PRId64 "%c%" PRId64 "%c", hi, u[i].unit, lo, u[i + 1].unit);
            } else {
                snprintf(buf, size, "%" PRId64 "%c", hi, u[i].unit);
            }
            return;
        }
    }
}

/* "3h ago", "just now" (also for a time ahead of this clock). */
static void ago_str(int64_t at, int64_t now, char *buf, size_t size) {
    if (now - at < DFC_NS_PER_SEC) {
        snprintf(buf, size, "just now");
        return;
    }
    char s[48];
    span_str(now - at, s, sizeof(s));
    snprintf(buf, size, "%s ago", s);
}

/* "in 42m", or "expired" once created + ttl has passed (the GC's rule, daemon/gc.c). */
static void expires_str(int64_t created, int64_t ttl, int64_t now, char *buf, size_t size) {
    if (created + ttl < now) {
        snprintf(buf, size, "expired");
        return;
    }
    char s[48];
    span_str(created + ttl - now, s, sizeof(s));
    snprintf(buf, size, "in %s", s);
}

/* Local time for people: "2026-12-01 19:20:01 UTC". */
static void local_time_str(int64_t ns, char *buf, size_t size) {
    time_t t = (time_t)(ns / DFC_NS_PER_SEC);
    struct tm tm;
    if (localtime_r(&t, &tm) == NULL || strftime(buf, size, "%Y-%m-%d %H:%M:%S %Z", &tm) == 0) {
        snprintf(buf, size, "-");
    }
}

/* RFC 3339 in UTC, with 3, 6 or 9 fraction digits when not whole seconds (as protobuf's JSON). */
static void rfc3339(int64_t ns, char *buf, size_t size) {
    int64_t sec = ns / DFC_NS_PER_SEC, frac = ns % DFC_NS_PER_SEC;
    if (frac < 0) {
        sec--;
        frac += DFC_NS_PER_SEC;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    char base[32] = "";
    if (gmtime_r(&t, &tm) == NULL || strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        base[0] = '\0';
    }
    if (frac == 0) {
        snprintf(buf, size, "%sZ", base);
    } else if (frac % 1000000 == 0) {
        snprintf(buf, size, "%s.%03dZ", base, (int)(frac / 1000000));
    } else if (frac % 1000 == 0) {
        snprintf(buf, size, "%s.%06dZ", base, (int)(frac / 1000));
    } else {
        snprintf(buf, size, "%s.%09dZ", base, (int)frac);
    }
}

/* A duration as exact seconds: 3600, 300.5. */
static void json_seconds(struct dfc_json *j, int64_t ns) {
    dfc_json_decimal(j, ns, 9);
}

static void json_time(struct dfc_json *j, const char *key, const Google__Protobuf__Timestamp *t) {
    dfc_json_key(j, key);
    if (t == NULL) {
        dfc_json_null(j);
        return;
    }
    char b[48];
    rfc3339(ts_ns(t), b, sizeof(b));
    dfc_json_string(j, b);
}

static void json_expiry(struct dfc_json *j, int64_t created, int64_t ttl, int64_t now) {
    char b[48];
    rfc3339(created + ttl, b, sizeof(b));
    dfc_json_key(j, "expires_at");
    dfc_json_string(j, b);
    dfc_json_key(j, "expired");
    dfc_json_bool(j, created + ttl < now);
}

static int json_done(struct dfc_json *j, const char *cmd) {
    int r = dfc_json_end(j);
    if (r < 0) {
        struct dfc_error e;
        dfc_error_set(&e, r, "writing the JSON output: %s", r == -EIO ? "write error" : "bug");
        return dfcache_fail(cmd, &e);
    }
    return DFCACHE_OK;
}

/* ---- stat ---- */

struct stat_view {
    const Common__V2__PersistentCacheTask *task;
    const Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *local; /* NULL: none here */
    bool answered;                                                   /* replica counts real */
    int configured;        /* a scheduler is configured: 1, 0, -1 unknown */
    const char *sched_err; /* NULL: none */
    char **pin_ids;        /* the content volumes pinning it here */
    size_t n_pins;
};

static int stat_json(const struct stat_view *v, int64_t now) {
    const Common__V2__PersistentCacheTask *t = v->task;
    const Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *l = v->local;
    struct dfc_json j;
    dfc_json_init(&j, stdout);
    dfc_json_object_begin(&j);
    dfc_json_key(&j, "id");
    dfc_json_string(&j, t->id);
    dfc_json_key(&j, "state");
    dfc_json_string(&j, t->state);
    dfc_json_key(&j, "content_length");
    dfc_json_u64(&j, t->content_length);
    dfc_json_key(&j, "piece_length");
    dfc_json_u64(&j, t->piece_length);
    dfc_json_key(&j, "piece_count");
    dfc_json_u64(&j, t->piece_count);
    dfc_json_key(&j, "tag");
    dfc_json_string(&j, t->opt_tag_case ? t->tag : "");
    dfc_json_key(&j, "application");
    dfc_json_string(&j, t->opt_application_case ? t->application : "");
    dfc_json_key(&j, "persistent_replica_count");
    dfc_json_u64(&j, t->persistent_replica_count);
    dfc_json_key(&j, "current_persistent_replica_count");
    if (v->answered) {
        dfc_json_u64(&j, t->current_persistent_replica_count);
    } else {
        dfc_json_null(&j);
    }
    dfc_json_key(&j, "current_replica_count");
    if (v->answered) {
        dfc_json_u64(&j, t->current_replica_count);
    } else {
        dfc_json_null(&j);
    }
    dfc_json_key(&j, "ttl_seconds");
    json_seconds(&j, dur_ns(t->ttl));
    json_time(&j, "created_at", t->created_at);
    json_time(&j, "updated_at", t->updated_at);
    json_expiry(&j, ts_ns(t->created_at), dur_ns(t->ttl), now);
    dfc_json_key(&j, "scheduler");
    dfc_json_object_begin(&j);
    dfc_json_key(&j, "configured");
    if (v->configured < 0) {
        dfc_json_null(&j);
    } else {
        dfc_json_bool(&j, v->configured == 1);
    }
    dfc_json_key(&j, "answered");
    dfc_json_bool(&j, v->answered);
    dfc_json_key(&j, "error");
    dfc_json_string(&j, v->sched_err);
    dfc_json_object_end(&j);
    dfc_json_key(&j, "pins");
    dfc_json_array_begin(&j);
    for (size_t i = 0; i < v->n_pins; i++) {
        dfc_json_string(&j, v->pin_ids[i]);
    }
    dfc_json_array_end(&j);
    dfc_json_key(&j, "local");
    if (l == NULL) {
        dfc_json_null(&j);
    } else {
        dfc_json_object_begin(&j);
        dfc_json_key(&j, "persistent");
        dfc_json_bool(&j, l->persistent);
        dfc_json_key(&j, "ttl_seconds");
        json_seconds(&j, dur_ns(l->ttl));
        json_time(&j, "created_at", l->created_at);
        json_time(&j, "updated_at", l->updated_at);
        json_time(&j, "finished_at", l->finished_at);
        json_expiry(&j, ts_ns(l->created_at), dur_ns(l->ttl), now);
        dfc_json_object_end(&j);
    }
    dfc_json_object_end(&j);
    return json_done(&j, "stat");
}

/* A copy of s for a terminal: its control bytes (C0 and DEL: escape sequences, carriage
 * returns) as `?`. Tags and applications are any importer's text. NULL when out of memory. */
static char *shown(const char *s) {
    char *c = strdup(s != NULL ? s : "");
    for (char *p = c; p != NULL && *p != '\0'; p++) {
        unsigned char b = (unsigned char)*p;
        if (b < 0x20 || b == 0x7f) {
            *p = '?';
        }
    }
    return c;
}

static void stat_human(const struct stat_view *v, bool exact, int64_t now) {
    const Common__V2__PersistentCacheTask *t = v->task;
    const Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *l = v->local;
    char cl[32], pl[32], ttl[32], exp[64], created[64], cago[64], updated[64], uago[64];
    char cur_p[24] = "-", cur[24] = "-", sched[400];
    size_str(t->content_length, exact, cl, sizeof(cl));
    size_str(t->piece_length, exact, pl, sizeof(pl));
    /* The expiry this node's GC acts on: its own copy's, else the task's. */
    int64_t ttl_ns = l ? dur_ns(l->ttl) : dur_ns(t->ttl);
    int64_t created_ns = l ? ts_ns(l->created_at) : ts_ns(t->created_at);
    dfc_format_duration(ttl_ns, ttl, sizeof(ttl));
    expires_str(created_ns, ttl_ns, now, exp, sizeof(exp));
    local_time_str(ts_ns(t->created_at), created, sizeof(created));
    ago_str(ts_ns(t->created_at), now, cago, sizeof(cago));
    local_time_str(ts_ns(t->updated_at), updated, sizeof(updated));
    ago_str(ts_ns(t->updated_at), now, uago, sizeof(uago));
    if (v->answered) {
        snprintf(cur_p, sizeof(cur_p), "%" PRIu64, t->current_persistent_replica_count);
        snprintf(cur, sizeof(cur), "%" PRIu64, t->current_replica_count);
        snprintf(sched, sizeof(sched), "answered");
    } else if (v->configured == 0) {
        snprintf(sched, sizeof(sched), "none (the daemon runs without a scheduler)");
    } else {
        snprintf(sched, sizeof(sched), "no answer: %s", v->sched_err ? v->sched_err : "unknown");
    }
    char *tag = shown(t->opt_tag_case ? t->tag : ""),
         *app = shown(t->opt_application_case ? t->application : "");
    char *sched_shown = shown(sched);
    printf("ID:                   %s\n"
           "State:                %s\n"
           "Content length:       %s\n"
           "Piece length:         %s\n"
           "Piece count:          %u\n"
           "Persistent:           %s\n"
           "Persistent replicas:  %s of %" PRIu64 "\n"
           "Replicas:             %s\n"
           "Tag:                  %s\n"
           "Application:          %s\n"
           "TTL:                  %s (%s%s)\n"
           "Created:              %s (%s)\n"
           "Updated:              %s (%s)\n"
           "Scheduler:            %s\n",
           t->id, t->state, cl, pl, t->piece_count,
           l == NULL       ? "- (no copy on this node)"
           : l->persistent ? "yes"
                           : "no",
           cur_p, t->persistent_replica_count, cur, tag ? tag : "?", app ? app : "?", ttl,
           strcmp(exp, "expired") == 0 ? "" : "expires ", exp, created, cago, updated, uago,
           sched_shown ? sched_shown : "?");
    free(tag);
    free(app);
    free(sched_shown);
    if (v->n_pins == 0) {
        printf("Pins:                 none\n");
        return;
    }
    printf("Pins:                 %zu (", v->n_pins);
    for (size_t i = 0; i < v->n_pins; i++) {
        char *p = shown(v->pin_ids[i]);
        printf("%s%s", i ? ", " : "", p ? p : "?");
        free(p);
    }
    printf(")\n");
}

int dfcache_stat(int argc, char **argv) {
    struct show_opts o = {0};
    struct dfc_cli_args args;
    int r = dfc_cli_main(&stat_cli, &o, argc, argv, &args);
    if (r != DFC_CLI_RUN) {
        dfc_config_free(&stat_schema, &o);
        return r;
    }
    const char *id = args.args[0];
    bool json = o.json, exact = o.bytes;
    struct dfc_error err;
    struct dfc_rpc_client *client;
    r = dfcache_connect(o.c.endpoint, &client, &err);
    dfc_config_free(&stat_schema, &o);
    if (r < 0) {
        return dfcache_fail("stat", &err);
    }
    Dfc__Dfdaemon__V1__InspectPersistentCacheTaskRequest req =
        DFC__DFDAEMON__V1__INSPECT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.task_id = (char *)id;
    ProtobufCMessage *m = NULL;
    struct stat_view v = {0};
    r = dfc_rpc_unary(client, &dfcache_m.inspect, &req.base, TIMEOUT_MS, &m, &err);
    if (r == 0) {
        Dfc__Dfdaemon__V1__InspectPersistentCacheTaskResponse *resp = (void *)m;
        v.task = resp->task;
        v.local = resp->local;
        v.answered = resp->scheduler_answered;
        v.configured = resp->has_scheduler ? 1 : 0;
        v.sched_err =
            resp->scheduler_error && resp->scheduler_error[0] ? resp->scheduler_error : NULL;
        v.pin_ids = resp->pin_ids;
        v.n_pins = resp->n_pin_ids;
        if (v.task == NULL) {
            r = dfc_error_set(&err, -EPROTO, "the daemon's answer has no task");
        }
    } else if (dfc_error_to_grpc(r) == DFC_GRPC_UNIMPLEMENTED) {
        /* A daemon without DfdaemonInspect (upstream's): its stat is the scheduler's. */
        Dfdaemon__V2__StatPersistentCacheTaskRequest sreq =
            DFDAEMON__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
        sreq.task_id = (char *)id;
        r = dfc_rpc_unary(client, &dfcache_m.stat, &sreq.base, TIMEOUT_MS, &m, &err);
        v.task = (const void *)m;
        v.answered = true;
        v.configured = -1;
    }
    dfc_rpc_client_free(client);
    if (r == 0) {
        int64_t now = now_ns();
        if (json) {
            r = stat_json(&v, now);
        } else {
            stat_human(&v, exact, now);
        }
    } else {
        r = dfcache_fail("stat", &err);
    }
    dfc_rpc_msg_free(m);
    return r;
}

/* ---- ls ---- */

struct ls_row {
    char id[160], size[32], persistent[16], ttl[32], expires[64], created[64];
};

static int ls_json(const Dfdaemon__V2__ListLocalPersistentCacheTasksResponse *l, int64_t now) {
    struct dfc_json j;
    dfc_json_init(&j, stdout);
    dfc_json_array_begin(&j);
    for (size_t i = 0; i < l->n_tasks; i++) {
        const Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *t = l->tasks[i];
        dfc_json_object_begin(&j);
        dfc_json_key(&j, "id");
        dfc_json_string(&j, t->task_id);
        dfc_json_key(&j, "content_length");
        if (t->opt_content_length_case != 0) {
            dfc_json_u64(&j, t->content_length);
        } else {
            dfc_json_null(&j);
        }
        dfc_json_key(&j, "piece_length");
        if (t->opt_piece_length_case != 0) {
            dfc_json_u64(&j, t->piece_length);
        } else {
            dfc_json_null(&j);
        }
        dfc_json_key(&j, "persistent");
        dfc_json_bool(&j, t->persistent);
        dfc_json_key(&j, "ttl_seconds");
        json_seconds(&j, dur_ns(t->ttl));
        json_time(&j, "created_at", t->created_at);
        json_time(&j, "updated_at", t->updated_at);
        json_time(&j, "finished_at", t->finished_at);
        json_expiry(&j, ts_ns(t->created_at), dur_ns(t->ttl), now);
        dfc_json_object_end(&j);
    }
    dfc_json_array_end(&j);
    return json_done(&j, "ls");
}

static int ls_human(const Dfdaemon__V2__ListLocalPersistentCacheTasksResponse *l, bool exact,
                    int64_t now) {
    struct ls_row *rows = calloc(l->n_tasks + 1, sizeof(*rows));
    if (rows == NULL) {
        struct dfc_error e;
        dfc_error_set(&e, -ENOMEM, "out of memory");
        return dfcache_fail("ls", &e);
    }
    struct ls_row *h = &rows[0];
    snprintf(h->id, sizeof(h->id), "ID");
    snprintf(h->size, sizeof(h->size), "SIZE");
    snprintf(h->persistent, sizeof(h->persistent), "PERSISTENT");
    snprintf(h->ttl, sizeof(h->ttl), "TTL");
    snprintf(h->expires, sizeof(h->expires), "EXPIRES");
    snprintf(h->created, sizeof(h->created), "CREATED");
    int w_id = 2, w_size = 4, w_pers = 10, w_ttl = 3, w_exp = 7;
    for (size_t i = 0; i < l->n_tasks; i++) {
        const Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *t = l->tasks[i];
        struct ls_row *row = &rows[i + 1];
        int64_t created = ts_ns(t->created_at), ttl = dur_ns(t->ttl);
        snprintf(row->id, sizeof(row->id), "%s", t->task_id);
        if (t->opt_content_length_case != 0) {
            size_str(t->content_length, exact, row->size, sizeof(row->size));
        } else {
            snprintf(row->size, sizeof(row->size), "-");
        }
        snprintf(row->persistent, sizeof(row->persistent), "%s", t->persistent ? "yes" : "no");
        dfc_format_duration(ttl, row->ttl, sizeof(row->ttl));
        expires_str(created, ttl, now, row->expires, sizeof(row->expires));
        ago_str(created, now, row->created, sizeof(row->created));
#define WIDEN(w, s) w = (int)strlen(s) > (w) ? (int)strlen(s) : (w)
        WIDEN(w_id, row->id);
        WIDEN(w_size, row->size);
        WIDEN(w_pers, row->persistent);
        WIDEN(w_ttl, row->ttl);
        WIDEN(w_exp, row->expires);
#undef WIDEN
    }
    /* The header's SIZE is right-aligned with the sizes, the rest left-aligned. */
    for (size_t i = 0; i <= l->n_tasks; i++) {
        const struct ls_row *row = &rows[i];
        printf("%-*s  %*s  %-*s  %-*s  %-*s  %s\n", w_id, row->id, w_size, row->size, w_pers,
               row->persistent, w_ttl, row->ttl, w_exp, row->expires, row->created);
    }
    free(rows);
    return DFCACHE_OK;
}

int dfcache_ls(int argc, char **argv) {
    struct show_opts o = {0};
    struct dfc_cli_args args;
    int r = dfc_cli_main(&ls_cli, &o, argc, argv, &args);
    if (r != DFC_CLI_RUN) {
        dfc_config_free(&ls_schema, &o);
        return r;
    }
    bool json = o.json, exact = o.bytes;
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
    const Dfdaemon__V2__ListLocalPersistentCacheTasksResponse *l = (const void *)m;
    int64_t now = now_ns();
    r = json ? ls_json(l, now) : ls_human(l, exact, now);
    dfc_rpc_msg_free(m);
    return r;
}
