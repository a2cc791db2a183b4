/*
 * dfcache - import, export, stat, list and remove persistent cache tasks through the node's
 * dfdaemon socket. main() dispatches to one file per subcommand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dfc/import.pb-c.h"
#include "dfc/inspect.pb-c.h"
#include "dfcache.h"
#include "dragonfly/dfdaemon.pb-c.h"

#ifndef DFC_VERSION
#define DFC_VERSION "0.0.0"
#endif

struct dfcache_methods dfcache_m;

static const struct dfc_rpc_client_row methods[] = {
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "UploadPersistentCacheTask",
                          &dfcache_m.upload),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "DownloadPersistentCacheTask",
                          &dfcache_m.download),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "StatPersistentCacheTask",
                          &dfcache_m.stat),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "StatLocalPersistentCacheTask",
                          &dfcache_m.stat_local),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "ListLocalPersistentCacheTasks",
                          &dfcache_m.list_local),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "DeletePersistentCacheTask",
                          &dfcache_m.delete_task),
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_import, "ImportPersistentCacheTask",
                          &dfcache_m.import),
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_inspect, "InspectPersistentCacheTask",
                          &dfcache_m.inspect),
};

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"import", dfcache_import, "Import a file into the persistent cache"},
    {"export", dfcache_export, "Export a persistent cache task to a file"},
    {"stat", dfcache_stat, "Show a persistent cache task"},
    {"ls", dfcache_ls, "List the persistent cache tasks on this node"},
    {"rm", dfcache_rm, "Remove a persistent cache task from this node"},
};

static void usage(FILE *out) {
    fprintf(out, "Usage: dfcache <command> [options]\n\nCommands:\n");
    for (size_t i = 0; i < DFC_RPC_N(commands); i++) {
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(out, "\nRun `dfcache <command> --help` for a command's options.\n");
}

int main(int argc, char **argv) {
    struct dfc_error err;
    if (dfc_rpc_client_resolve(methods, DFC_RPC_N(methods), &err) < 0) {
        fprintf(stderr, "dfcache: %s\n", err.msg);
        return DFCACHE_FAILED;
    }
    if (argc < 2) {
        usage(stderr);
        return DFCACHE_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return DFCACHE_OK;
    }
    if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("dfcache %s\n", DFC_VERSION);
        return DFCACHE_OK;
    }
    for (size_t i = 0; i < DFC_RPC_N(commands); i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            return commands[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "dfcache: unknown command `%s`\n\n", argv[1]);
    usage(stderr);
    return DFCACHE_USAGE;
}

int dfcache_connect(const char *endpoint, struct dfc_rpc_client **ret, struct dfc_error *err) {
    char target[4200];
    if (strncmp(endpoint, "unix:", 5) == 0) {
        snprintf(target, sizeof(target), "%s", endpoint);
    } else {
        snprintf(target, sizeof(target), "unix:%s", endpoint);
    }
    if (access(strncmp(endpoint, "unix:", 5) == 0 ? endpoint + 5 : endpoint, F_OK) < 0) {
        return dfc_error_set(err, -ECONNREFUSED,
                             "no dfdaemon socket at `%s` (is dfdaemon running? set it with -e)",
                             endpoint);
    }
    /* The largest answer is `ls`'s, one message: at most 65536 tasks (storage.maxTasks'
     * ceiling), each at most ~2.3 KiB (a 64-byte id, a 1 KiB tag, a 1 KiB application and
     * their numbers and times), ~150 MiB; an export piece is at most 64 MiB. */
    struct dfc_rpc_client_opts o = {.max_recv_msg = (size_t)192 << 20};
    return dfc_rpc_client_new(target, &o, ret, err);
}

int dfcache_fail(const char *cmd, const struct dfc_error *err) {
    fprintf(stderr, "dfcache %s: %s (%s)\n", cmd, dfc_error_msg(err),
            dfc_grpc_code_name(dfc_error_to_grpc(err->code)));
    return DFCACHE_FAILED;
}

/* ---- progress ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void dfcache_progress_init(struct dfcache_progress *p, const char *label, uint64_t total,
                           bool enabled) {
    p->on = enabled && isatty(STDERR_FILENO);
    p->total = total;
    p->done = 0;
    p->started = now_s();
    p->last_draw = 0;
    p->label = label;
}

/* "1.5GiB": one decimal, for people. */
static void human(double v, char *buf, size_t size) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, size, u == 0 ? "%.0f%s" : "%.1f%s", v, units[u]);
}

static void draw(struct dfcache_progress *p, double now) {
    char done[32], total[32], rate[40], rate_s[48];
    double secs = now - p->started;
    double bps = secs > 0 ? (double)p->done / secs : 0;
    human((double)p->done, done, sizeof(done));
    human((double)p->total, total, sizeof(total));
    human(bps, rate, sizeof(rate));
    snprintf(rate_s, sizeof(rate_s), "%s/s", rate);
    if (p->total == 0 && p->done > 0) { /* the length is unknown (standard input) */
        fprintf(stderr, "\r%s %s %s  ", p->label, done, rate_s);
        fflush(stderr);
        p->last_draw = now;
        return;
    }
    int pct = p->total ? (int)(p->done * 100 / p->total) : 100;
    int width = 30, fill = pct * width / 100;
    char bar[64];
    for (int i = 0; i < width; i++) {
        bar[i] = (char)(i < fill ? '=' : (i == fill ? '>' : ' '));
    }
    bar[width] = '\0';
    double eta = bps > 0 && p->total > p->done ? (double)(p->total - p->done) / bps : 0;
    fprintf(stderr, "\r%s [%s] %3d%% %s/%s %s ETA %.0fs  ", p->label, bar, pct, done, total, rate_s,
            eta);
    fflush(stderr);
    p->last_draw = now;
}

void dfcache_progress_add(struct dfcache_progress *p, uint64_t n) {
    p->done += n;
    if (!p->on) {
        return;
    }
    double now = now_s();
    if (now - p->last_draw >= 0.1) {
        draw(p, now);
    }
}

void dfcache_progress_done(struct dfcache_progress *p) {
    if (p->on) {
        draw(p, now_s());
        fputc('\n', stderr);
    }
}
