/*
 * CLI integration tests: the real dfdaemon, dfcache and csi-plugin binaries, their command
 * lines read through one option schema each (dfc/options.h). A usage error is one line on
 * stderr naming the flag, the environment variable or file:line:column, and exit code 2; the
 * precedence flags > environment > file > defaults holds in the real binary; --help lists
 * every flag and variable the README documents; every TLS file setting is read at start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_support.h"

struct fx {
    char dir[256];
    char out[300], err[300], yaml[300];
    char out_text[16384], err_text[4096];
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "cli");
    snprintf(f->out, sizeof(f->out), "%s/out", f->dir);
    snprintf(f->err, sizeof(f->err), "%s/err", f->dir);
    snprintf(f->yaml, sizeof(f->yaml), "%s/c.yaml", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    test_rmtree(f->dir);
    free(f);
    return 0;
}

static void slurp(const char *path, char *buf, size_t size) {
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, size - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

/* Runs "env -u <every variable the binaries read> <env> <bin> <args>" with a 10 s limit (an
 * old binary that ignored a bad value would go on serving); returns its exit code. */
static int run(struct fx *f, const char *env, const char *bin, const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "env -u CSI_ENDPOINT -u CSI_NODE_ID -u NODE_NAME -u DFDAEMON_LOG_LEVEL "
             "-u DFDAEMON_STORAGE_DIR -u DFDAEMON_SOCKET_PATH %s timeout 10 %s %s >%s 2>%s",
             env, bin, args, f->out, f->err);
    int status = system(cmd);
    slurp(f->out, f->out_text, sizeof(f->out_text));
    slurp(f->err, f->err_text, sizeof(f->err_text));
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const struct {
    const char *env, *bin, *args;
    int code;
    const char *err; /* the whole of stderr; "%s" stands for the config file */
} usage_cases[] = {
    /* dfdaemon */
    {"", DFDAEMON_BIN, "--bogus", 2,
     "dfdaemon: unknown flag `--bogus`\n"
     "Usage: dfdaemon [options] (`dfdaemon --help` lists the options)\n"},
    {"", DFDAEMON_BIN, "--print-config -l", 2,
     "dfdaemon: -l needs a value\n"
     "Usage: dfdaemon [options] (`dfdaemon --help` lists the options)\n"},
    {"DFDAEMON_LOG_LEVEL=loud", DFDAEMON_BIN, "--print-config", 2,
     "dfdaemon: bad DFDAEMON_LOG_LEVEL `loud`: must be debug, info, warn, error, off or "
     "warning\n"},
    {"", DFDAEMON_BIN, "--print-config --set download.server.maxWorkers=2000", 2,
     "dfdaemon: download.server.maxWorkers must be between 1 and 1024, got `2000`\n"},
    {"", DFDAEMON_BIN, "--print-config --config %s", 2,
     "dfdaemon: %s:3:3: unknown key `storage.kepp`\n"},
    {"", DFDAEMON_BIN, "--print-config --set download.server.shutdownGrace=0s", 2,
     "dfdaemon: download.server.shutdownGrace must be between 1ms and 24h, got `0s`\n"},
    {"DFDAEMON_SHUTDOWN_GRACE=soon", DFDAEMON_BIN, "--print-config", 2,
     "dfdaemon: DFDAEMON_SHUTDOWN_GRACE: `soon` is not a duration such as 1h30m\n"},
    /* the rate limits and the cap on uploads at once */
    {"", DFDAEMON_BIN, "--print-config --set upload.rateLimit=100KiB", 2,
     "dfdaemon: upload.rateLimit must be at least 1MiB, got `100KiB`\n"},
    {"", DFDAEMON_BIN, "--print-config --set download.rateLimit=fast", 2,
     "dfdaemon: download.rateLimit: `fast` is not a size such as 4MiB\n"},
    {"", DFDAEMON_BIN, "--print-config --set storage.server.maxConcurrentUploads=200", 2,
     "dfdaemon: storage.server.maxConcurrentUploads (200) must not exceed "
     "storage.server.maxConnections (128)\n"},
    /* dfcache */
    {"", DFCACHE_BIN, "import --ttl 1m /etc/hostname", 2,
     "dfcache import: --ttl must be between 5m and 168h, got `1m`\n"},
    {"DFCACHE_IMPORT_PERSISTENT_REPLICA_COUNT=9", DFCACHE_BIN, "import /etc/hostname", 2,
     "dfcache import: DFCACHE_IMPORT_PERSISTENT_REPLICA_COUNT must be between 1 and 5, got "
     "`9`\n"},
    {"DFCACHE_EXPORT_OVERWRITE=maybe", DFCACHE_BIN, "export -O /tmp/x abc", 2,
     "dfcache export: DFCACHE_EXPORT_OVERWRITE: `maybe` is not true or false\n"},
    {"", DFCACHE_BIN, "stat --bogus", 2,
     "dfcache stat: unknown flag `--bogus`\n"
     "Usage: dfcache stat [options] <ID> (`dfcache stat --help` lists the options)\n"},
    /* csi-plugin */
    {"", CSI_PLUGIN_BIN, "--bogus", 2,
     "csi-plugin: unknown flag `--bogus`\n"
     "Usage: csi-plugin [options] (`csi-plugin --help` lists the options)\n"},
    {"", CSI_PLUGIN_BIN, "", 2,
     "csi-plugin: --endpoint or CSI_ENDPOINT is required\n"
     "Usage: csi-plugin [options] (`csi-plugin --help` lists the options)\n"},
    {"CSI_REQUIRE_READONLY=maybe", CSI_PLUGIN_BIN, "--endpoint /nonexistent/csi.sock", 2,
     "csi-plugin: CSI_REQUIRE_READONLY: `maybe` is not true or false\n"},
    {"", CSI_PLUGIN_BIN, "--endpoint /nonexistent/csi.sock --shutdown-grace 25h", 2,
     "csi-plugin: --shutdown-grace must be between 1ms and 24h, got `25h`\n"},
    {"CSI_SHUTDOWN_GRACE=x", CSI_PLUGIN_BIN, "--endpoint /nonexistent/csi.sock", 2,
     "csi-plugin: CSI_SHUTDOWN_GRACE: `x` is not a duration such as 1h30m\n"},
    {"", CSI_PLUGIN_BIN, "--endpoint /nonexistent/csi.sock --metrics-address localhost:9", 2,
     "csi-plugin: --metrics-address: `localhost:9` is not IP:PORT (an IP address and a port "
     "1-65535; [IPv6]:PORT; empty = off)\n"},
    {"CSI_HEALTH_ADDRESS=127.0.0.1:0", CSI_PLUGIN_BIN, "--endpoint /nonexistent/csi.sock", 2,
     "csi-plugin: CSI_HEALTH_ADDRESS: `127.0.0.1:0` is not IP:PORT (an IP address and a port "
     "1-65535; [IPv6]:PORT; empty = off)\n"},
    /* the HTTP endpoints' ports */
    {"", DFDAEMON_BIN, "--print-config --set metrics.server.port=70000", 2,
     "dfdaemon: metrics.server.port must be between 0 and 65535, got `70000`\n"},
    {"DFDAEMON_HEALTH_IP=localhost", DFDAEMON_BIN, "--print-config", 2,
     "dfdaemon: health.server.ip: `localhost` is not an IP address\n"},
};

/* text with its "%s" (if any) replaced by path. */
static void with_file(const char *text, const char *path, char *buf, size_t size) {
    const char *p = strstr(text, "%s");
    snprintf(buf, size, "%.*s%s%s", p ? (int)(p - text) : (int)strlen(text), text, p ? path : "",
             p ? p + 2 : "");
}

static void test_usage_errors_exit_2(void **state) {
    struct fx *f = *state;
    FILE *fp = fopen(f->yaml, "w");
    fputs("storage:\n  dir: /tmp/x\n  kepp: true\n", fp);
    fclose(fp);
    for (size_t i = 0; i < sizeof(usage_cases) / sizeof(usage_cases[0]); i++) {
        char args[600], want[1200];
        with_file(usage_cases[i].args, f->yaml, args, sizeof(args));
        with_file(usage_cases[i].err, f->yaml, want, sizeof(want));
        int code = run(f, usage_cases[i].env, usage_cases[i].bin, args);
        if (code != usage_cases[i].code || strcmp(f->err_text, want) != 0) {
            fprintf(stderr, "case %zu (%s %s): exit %d, stderr:\n%s", i, usage_cases[i].env, args,
                    code, f->err_text);
        }
        assert_int_equal(code, usage_cases[i].code);
        assert_string_equal(f->err_text, want);
    }
}

/* flags > environment > file > defaults, in the real dfdaemon. */
static void test_dfdaemon_precedence(void **state) {
    struct fx *f = *state;
    FILE *fp = fopen(f->yaml, "w");
    fputs("storage:\n  dir: /from/file\nlog:\n  level: error\n", fp);
    fclose(fp);
    char args[600];
    assert_int_equal(run(f, "", DFDAEMON_BIN, "--print-config"), 0);
    assert_non_null(strstr(f->out_text, "  dir: \"/var/lib/dragonfly\"\n"));
    snprintf(args, sizeof(args), "--print-config -c %s", f->yaml);
    assert_int_equal(run(f, "", DFDAEMON_BIN, args), 0);
    assert_non_null(strstr(f->out_text, "  dir: \"/from/file\"\n"));
    assert_non_null(strstr(f->out_text, "  level: \"error\"\n"));
    assert_int_equal(run(f, "DFDAEMON_STORAGE_DIR=/from/env", DFDAEMON_BIN, args), 0);
    assert_non_null(strstr(f->out_text, "  dir: \"/from/env\"\n"));
    snprintf(args, sizeof(args), "--storage-dir=/from/flag --print-config -c %s -l debug", f->yaml);
    assert_int_equal(run(f, "DFDAEMON_STORAGE_DIR=/from/env", DFDAEMON_BIN, args), 0);
    assert_non_null(strstr(f->out_text, "  dir: \"/from/flag\"\n"));
    assert_non_null(strstr(f->out_text, "  level: \"debug\"\n"));
    /* A bad value that a flag overrides is never read. */
    assert_int_equal(run(f, "DFDAEMON_LOG_LEVEL=loud", DFDAEMON_BIN, args), 0);
}

/* download.server.shutdownGrace: 10s (the drain time dfdaemon always had), else the file's,
 * else the environment's. */
static void test_dfdaemon_shutdown_grace(void **state) {
    struct fx *f = *state;
    assert_int_equal(run(f, "", DFDAEMON_BIN, "--print-config"), 0);
    assert_non_null(strstr(f->out_text, "    shutdownGrace: 10s\n"));
    FILE *fp = fopen(f->yaml, "w");
    fputs("download:\n  server:\n    shutdownGrace: 1m30s\n", fp);
    fclose(fp);
    char args[600];
    snprintf(args, sizeof(args), "--print-config -c %s", f->yaml);
    assert_int_equal(run(f, "", DFDAEMON_BIN, args), 0);
    assert_non_null(strstr(f->out_text, "    shutdownGrace: 1m30s\n"));
    assert_int_equal(run(f, "DFDAEMON_SHUTDOWN_GRACE=250ms", DFDAEMON_BIN, args), 0);
    assert_non_null(strstr(f->out_text, "    shutdownGrace: 250ms\n"));
}

/* upload.rateLimit and download.rateLimit: upstream's 10GiB (no limit in practice), else the
 * file's; storage.server.maxConcurrentUploads: 0 (= maxConnections), else the file's. */
static void test_dfdaemon_rate_limits(void **state) {
    struct fx *f = *state;
    assert_int_equal(run(f, "", DFDAEMON_BIN, "--print-config"), 0);
    assert_non_null(strstr(f->out_text, "download:\n"));
    const char *first = strstr(f->out_text, "\n  rateLimit: 10GiB\n");
    assert_non_null(first);
    assert_non_null(strstr(first + 1, "\n  rateLimit: 10GiB\n")); /* upload's too */
    assert_non_null(strstr(f->out_text, "    maxConcurrentUploads: 0\n"));
    FILE *fp = fopen(f->yaml, "w");
    fputs("download:\n  rateLimit: 100MiB\nupload:\n  rateLimit: 25MiB\nstorage:\n  server:\n"
          "    maxConcurrentUploads: 4\n",
          fp);
    fclose(fp);
    char args[600];
    snprintf(args, sizeof(args), "--print-config -c %s", f->yaml);
    assert_int_equal(run(f, "", DFDAEMON_BIN, args), 0);
    assert_non_null(strstr(f->out_text, "\n  rateLimit: 100MiB\n"));
    assert_non_null(strstr(f->out_text, "\n  rateLimit: 25MiB\n"));
    assert_non_null(strstr(f->out_text, "    maxConcurrentUploads: 4\n"));
}

/* dfcache: a flag hides a bad variable, so the import gets as far as the (missing) socket. */
static void test_dfcache_flag_over_env(void **state) {
    struct fx *f = *state;
    assert_int_equal(run(f, "DFCACHE_IMPORT_TTL=soon", DFCACHE_BIN,
                         "import --ttl 2h -e /nonexistent/df.sock /etc/hostname"),
                     1);
    assert_non_null(strstr(f->err_text, "no dfdaemon socket at `/nonexistent/df.sock`"));
    assert_int_equal(run(f, "DFCACHE_IMPORT_DFDAEMON_ENDPOINT=/nonexistent/env.sock", DFCACHE_BIN,
                         "import /etc/hostname"),
                     1);
    assert_non_null(strstr(f->err_text, "no dfdaemon socket at `/nonexistent/env.sock`"));
}

/* --help of every binary: every flag and variable the README documents, within 80 columns. */
static void assert_help(struct fx *f, const char *bin, const char *args, const char *const *want) {
    assert_int_equal(run(f, "", bin, args), 0);
    for (size_t i = 0; want[i] != NULL; i++) {
        if (strstr(f->out_text, want[i]) == NULL) {
            fprintf(stderr, "%s %s: no `%s` in:\n%s", bin, args, want[i], f->out_text);
        }
        assert_non_null(strstr(f->out_text, want[i]));
    }
    for (char *line = f->out_text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        assert_true(nl - line <= 80);
        line = nl + 1;
    }
}

static void test_help_lists_the_documented_options(void **state) {
    struct fx *f = *state;
    assert_help(f, DFDAEMON_BIN, "--help",
                (const char *const[]){"-c, --config FILE", "--socket-path PATH",
                                      "[DFDAEMON_SOCKET_PATH]", "--storage-dir DIR",
                                      "[DFDAEMON_STORAGE_DIR]", "-l, --log-level LEVEL",
                                      "[DFDAEMON_LOG_LEVEL]", "DFDAEMON_HOST_IP (host.ip)",
                                      "DFDAEMON_HOSTNAME (host.hostname)", "--set KEY=VALUE",
                                      "--print-config", "--discard-broken-store", "-V, --version",
                                      "Precedence: flags > environment > file > defaults.", NULL});
    assert_help(f, CSI_PLUGIN_BIN, "--help",
                (const char *const[]){"--endpoint ADDR",
                                      "[CSI_ENDPOINT]",
                                      "(required)",
                                      "--driver-name NAME",
                                      "[uds.csi.dragonflyoss.io]",
                                      "[CSI_DRIVER_NAME]",
                                      "--node-id ID",
                                      "[CSI_NODE_ID, else NODE_NAME]",
                                      "--socket-dir DIR",
                                      "[/var/run/dragonfly]",
                                      "[CSI_SOCKET_DIR]",
                                      "--kubelet-dir DIR",
                                      "[/var/lib/kubelet]",
                                      "[CSI_KUBELET_DIR]",
                                      "--state-dir DIR",
                                      "[/var/lib/dragonfly-csi]",
                                      "[CSI_STATE_DIR]",
                                      "--require-readonly",
                                      "[CSI_REQUIRE_READONLY]",
                                      "--probe-dfdaemon",
                                      "[CSI_PROBE_DFDAEMON]",
                                      "--shutdown-grace DURATION",
                                      "1ms..24h [5s]",
                                      "[CSI_SHUTDOWN_GRACE]",
                                      "-l, --log-level LEVEL",
                                      "[CSI_LOG_LEVEL]",
                                      NULL});
    assert_help(f, DFCACHE_BIN, "import --help",
                (const char *const[]){"--persistent-replica-count N", "1..5 [2]",
                                      "[DFCACHE_IMPORT_PERSISTENT_REPLICA_COUNT]", "--ttl DURATION",
                                      "5m..168h [1h] [DFCACHE_IMPORT_TTL]", "--timeout DURATION",
                                      "[30m] [DFCACHE_IMPORT_TIMEOUT]", "--piece-length SIZE",
                                      "4MiB..64MiB", "--transfer MODE", "[DFCACHE_IMPORT_TRANSFER]",
                                      "-e, --endpoint PATH", "[/var/run/dragonfly/dfdaemon.sock]",
                                      "[DFCACHE_IMPORT_DFDAEMON_ENDPOINT]", NULL});
    assert_help(f, DFCACHE_BIN, "export --help",
                (const char *const[]){"-O, --output PATH", "[DFCACHE_EXPORT_OUTPUT]",
                                      "--transfer-from-dfdaemon", "--timeout DURATION",
                                      "[2h] [DFCACHE_EXPORT_TIMEOUT]",
                                      "[DFCACHE_EXPORT_DFDAEMON_ENDPOINT]", NULL});
    assert_help(f, DFCACHE_BIN, "stat --help",
                (const char *const[]){"[DFCACHE_STAT_DFDAEMON_ENDPOINT]", "--json", "--bytes",
                                      "current_replica_count", "expires_at", NULL});
    assert_help(f, DFCACHE_BIN, "ls --help",
                (const char *const[]){"[DFCACHE_LS_DFDAEMON_ENDPOINT]", "--json", "--bytes",
                                      "ttl_seconds", NULL});
    assert_help(f, DFCACHE_BIN, "rm --help",
                (const char *const[]){"[DFCACHE_RM_DFDAEMON_ENDPOINT]", NULL});
}

/* Every TLS file setting of dfdaemon and the scheduler is read at start: a file that is not
 * there is a settings error naming the key (exit 2), before the binary announces or binds
 * anything. With every file good the binary gets past its settings and fails later, on
 * purpose and at once (a storage dir under /proc, a listen address no interface has: exit 1);
 * --print-config reads no file (it checks settings meant for another machine). */
static void test_tls_files_exit_2(void **state) {
    struct fx *f = *state;
    char certs[300], cmd[1200];
    snprintf(certs, sizeof(certs), "%s/certs", f->dir);
    snprintf(cmd, sizeof(cmd),
             "bash %s ca %s/ca >/dev/null 2>&1 && bash %s leaf %s/ca %s/n IP:127.0.0.1 "
             ">/dev/null 2>&1",
             MAKE_CERTS, certs, MAKE_CERTS, certs, certs);
    assert_int_equal(system(cmd), 0);
    char sock[400];
    snprintf(sock, sizeof(sock), "%s/d.sock", f->dir);
    static const struct {
        const char *bin, *name, *base;
        const char *sides[3];
    } bins[] = {
        {DFDAEMON_BIN,
         "dfdaemon",
         "--set storage.dir=/proc/dfc-no-such-dir --set scheduler.addrs=127.0.0.1:1 --set "
         "upload.server.ip=192.0.2.1 "
         "--set upload.server.port=1 --set metrics.server.port=0 --set health.server.port=0",
         {"upload.server.", "upload.client.", "scheduler."}},
        {SCHEDULER_BIN,
         "scheduler",
         "--set server.listenIP=192.0.2.1 --set database.redis.addrs=127.0.0.1:1 "
         "--set metrics.server.port=0",
         {"server.tls.", "peer.tls.", "database.redis.tls."}},
    };
    static const char *const keys[][2] = {
        {"caCert", "ca.crt"}, {"cert", "tls.crt"}, {"key", "tls.key"}};
    size_t checked = 0;
    for (size_t b = 0; b < 2; b++) {
        char base[900], good[2000] = "";
        if (b == 0) {
            snprintf(base, sizeof(base), "%s --set download.server.socketPath=%s", bins[b].base,
                     sock);
        } else {
            snprintf(base, sizeof(base), "%s", bins[b].base);
        }
        for (size_t s = 0; s < 3; s++) {
            for (size_t k = 0; k < 3; k++) {
                size_t len = strlen(good);
                snprintf(good + len, sizeof(good) - len, " --set %s%s=%s/n/%s", bins[b].sides[s],
                         keys[k][0], certs, keys[k][1]);
            }
        }
        char args[4096];
        snprintf(args, sizeof(args), "%s%s", base, good);
        int code = run(f, "", bins[b].bin, args);
        if (code != 1) {
            fprintf(stderr, "%s, good files: exit %d, stderr:\n%s", bins[b].name, code,
                    f->err_text);
        }
        assert_int_equal(code, 1);
        for (size_t s = 0; s < 3; s++) {
            for (size_t k = 0; k < 3; k++) {
                snprintf(args, sizeof(args), "%s%s --set %s%s=/nonexistent/%s", base, good,
                         bins[b].sides[s], keys[k][0], keys[k][1]);
                char want[300];
                snprintf(want, sizeof(want),
                         "%s: %s%s `/nonexistent/%s`: cannot read it: No such file or directory\n",
                         bins[b].name, bins[b].sides[s], keys[k][0], keys[k][1]);
                code = run(f, "", bins[b].bin, args);
                if (code != 2 || strcmp(f->err_text, want) != 0) {
                    fprintf(stderr, "%s %s%s: exit %d, stderr:\n%s", bins[b].name, bins[b].sides[s],
                            keys[k][0], code, f->err_text);
                }
                assert_int_equal(code, 2);
                assert_string_equal(f->err_text, want);
                checked++;
                /* --print-config checks the settings alone. */
                size_t len = strlen(args);
                snprintf(args + len, sizeof(args) - len, " --print-config");
                assert_int_equal(run(f, "", bins[b].bin, args), 0);
            }
        }
    }
    assert_int_equal(checked, 18);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_usage_errors_exit_2),     T(test_dfdaemon_precedence),
        T(test_dfdaemon_shutdown_grace), T(test_dfdaemon_rate_limits),
        T(test_dfcache_flag_over_env),   T(test_help_lists_the_documented_options),
        T(test_tls_files_exit_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
