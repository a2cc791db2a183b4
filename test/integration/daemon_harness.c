/*
 * daemon_harness.c - real dfdaemon and dfcache processes for the integration tests.
 */
#include "daemon_harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dfc/import.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "test_support.h"

struct harness_methods hm;

static const struct dfc_rpc_client_row harness_rows[] = {
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "UploadPersistentCacheTask", &hm.upload),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "DownloadPersistentCacheTask",
                          &hm.download),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "StatPersistentCacheTask", &hm.stat),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "StatLocalPersistentCacheTask",
                          &hm.stat_local),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "ListLocalPersistentCacheTasks",
                          &hm.list_local),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_download, "DeleteHost", &hm.delete_host),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "UpdatePersistentCacheTask", &hm.update),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "StatPersistentCacheTask", &hm.up_stat),
    DFC_RPC_CLIENT_METHOD(dfdaemon__v2__dfdaemon_upload, "DeletePersistentCacheTask",
                          &hm.delete_task),
    DFC_RPC_CLIENT_METHOD(dfc__dfdaemon__v1__dfdaemon_import, "ImportPersistentCacheTask",
                          &hm.import),
};

int harness_resolve_methods(const struct dfc_rpc_client_row *extra, size_t n_extra) {
    struct dfc_error err;
    if (dfc_rpc_client_resolve(harness_rows, DFC_RPC_N(harness_rows), &err) < 0 ||
        (n_extra > 0 && dfc_rpc_client_resolve(extra, n_extra, &err) < 0)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

int harness_client_new(const char *socket_path, const struct dfc_rpc_client_opts *opts,
                       struct dfc_rpc_client **ret, struct dfc_error *err) {
    char target[PATH_MAX + 8];
    snprintf(target, sizeof(target), "unix:%s", socket_path);
    return dfc_rpc_client_new(target, opts, ret, err);
}

void harness_open(struct harness *h, struct dfc_rpc_client **ret_client) {
    harness_start(h, "gc:\n  interval: 1h\n");
    *ret_client = harness_client(h);
}

int harness_close(struct harness *h, struct dfc_rpc_client *c) {
    int code = harness_destroy(h);
    dfc_rpc_client_free(c);
    return code;
}

int harness_fx_setup(void **state) {
    struct harness_fx *f = calloc(1, sizeof(*f));
    harness_open(&f->h, &f->c);
    *state = f;
    return 0;
}

int harness_fx_teardown(void **state) {
    struct harness_fx *f = *state;
    int code = harness_close(&f->h, f->c);
    free(f);
    assert_int_equal(code, 0); /* a clean shutdown, and no leaks under a sanitizer */
    return 0;
}

void harness_done_id(const char *out, char id[65]) {
    assert_int_equal(strncmp(out, "Done: ", 6), 0);
    memcpy(id, out + 6, 64);
    id[64] = '\0';
}

void harness_path(const struct harness *h, const char *name, char *buf, size_t size) {
    snprintf(buf, size, "%s/%s", h->dir, name);
}

struct dfc_rpc_client *harness_client(struct harness *h) {
    struct dfc_rpc_client *c;
    struct dfc_error err;
    if (harness_client_new(h->socket, NULL, &c, &err) < 0) {
        fprintf(stderr, "harness: client of %s: %s\n", h->socket, err.msg);
        abort();
    }
    return c;
}

static void die(const char *what) {
    fprintf(stderr, "harness: %s: %m\n", what);
    abort();
}

static bool socket_ready(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path) >= (int)sizeof(sa.sun_path)) {
        return false;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* Starts dfdaemon on h's config with one optional extra argument, its output in h->log.
 * argv and the environment are made before the fork: this process may have gRPC's threads,
 * so the child calls only async-signal-safe functions. */
static pid_t exec_daemon(struct harness *h, const char *extra_arg) {
    char metrics[48], health[48];
    snprintf(metrics, sizeof(metrics), "DFDAEMON_METRICS_PORT=%u", h->metrics_port);
    snprintf(health, sizeof(health), "DFDAEMON_HEALTH_PORT=%u", h->health_port);
    char **envp = test_environ_with((const char *const[]){metrics, health, NULL});
    const char *argv[] = {"dfdaemon", "--config", h->config, extra_arg, NULL};
    pid_t pid = fork();
    if (pid < 0) {
        die("fork");
    }
    if (pid == 0) {
        int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 2);
        dup2(fd, 1);
        execve(DFDAEMON_BIN, (char *const *)argv, envp);
        _exit(127);
    }
    free(envp);
    return pid;
}

static void spawn(struct harness *h, const char *extra_arg) {
    pid_t pid = exec_daemon(h, extra_arg);
    h->pid = pid;
    double until = test_now_ms() + 10000;
    while (test_now_ms() < until) {
        if (socket_ready(h->socket)) {
            return;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            fprintf(stderr, "harness: dfdaemon exited early, log %s\n", h->log);
            abort();
        }
        usleep(5000);
    }
    fprintf(stderr, "harness: dfdaemon did not come up, log %s\n", h->log);
    abort();
}

/* The temp dir and the paths in it. */
static void harness_init(struct harness *h) {
    memset(h, 0, sizeof(*h));
    test_mkdtemp(h->dir, sizeof(h->dir), "it");
    chmod(h->dir, 0755); /* other uids must reach the socket and test files */
    snprintf(h->store, sizeof(h->store), "%s/store", h->dir);
    snprintf(h->socket, sizeof(h->socket), "%s/run/dfdaemon.sock", h->dir);
    snprintf(h->config, sizeof(h->config), "%s/dfdaemon.yaml", h->dir);
    snprintf(h->log, sizeof(h->log), "%s/dfdaemon.log", h->dir);
}

void harness_start(struct harness *h, const char *extra_yaml) {
    harness_start_ports(h, extra_yaml, 0, 0);
}

void harness_start_ports(struct harness *h, const char *extra_yaml, unsigned metrics_port,
                         unsigned health_port) {
    harness_init(h);
    h->metrics_port = metrics_port;
    h->health_port = health_port;
    FILE *f = fopen(h->config, "w");
    if (f == NULL) {
        die("write config");
    }
    fprintf(f,
            "download:\n  server:\n    socketPath: %s\n"
            "storage:\n  dir: %s\n"
            "log:\n  level: info\n"
            "%s",
            h->socket, h->store, extra_yaml ? extra_yaml : "");
    fclose(f);
    spawn(h, NULL);
}

void harness_start_config(struct harness *h,
                          void (*write)(FILE *f, const struct harness *h, void *arg), void *arg) {
    harness_init(h);
    FILE *f = fopen(h->config, "w");
    if (f == NULL) {
        die("write config");
    }
    write(f, h, arg);
    fclose(f);
    spawn(h, NULL);
}

void harness_restart(struct harness *h) {
    spawn(h, NULL);
}

void harness_restart_with(struct harness *h, const char *arg) {
    spawn(h, arg);
}

int harness_run_daemon(struct harness *h, const char *arg) {
    pid_t pid = exec_daemon(h, arg);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        die("waitpid");
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int harness_stop(struct harness *h, int sig) {
    if (h->pid <= 0) {
        return 0;
    }
    kill(h->pid, sig);
    int status;
    waitpid(h->pid, &status, 0);
    h->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int harness_destroy(struct harness *h) {
    int code = harness_stop(h, SIGTERM);
    if (code != 0) {
        fprintf(stderr, "harness: dfdaemon exited with %d; its log:\n", code);
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "tail -50 '%s' >&2", h->log);
        (void)system(cmd);
    }
    struct test_env env;
    test_env_load(&env);
    if (env.keep == NULL) {
        test_rmtree(h->dir);
    }
    test_env_free(&env);
    return code;
}

static void slurp(const char *path, char *buf, size_t size) {
    if (buf == NULL || size == 0) {
        return;
    }
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return;
    }
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

int harness_dfcache(struct harness *h, int run_as_uid, char *out, size_t out_size, char *errbuf,
                    size_t err_size, const char *const *argv) {
    char out_path[400], err_path[400];
    snprintf(out_path, sizeof(out_path), "%s/dfcache.out", h->dir);
    snprintf(err_path, sizeof(err_path), "%s/dfcache.err", h->dir);
    const char *args[64];
    size_t n = 0;
    args[n++] = "dfcache";
    for (size_t i = 0; argv[i] != NULL && n < 60; i++) {
        args[n++] = argv[i];
    }
    args[n++] = "-e";
    args[n++] = h->socket;
    args[n] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        die("fork");
    }
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        dup2(o, 1);
        dup2(e, 2);
        if (run_as_uid >= 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)run_as_uid) < 0 ||
                                setuid((uid_t)run_as_uid) < 0)) {
            _exit(126);
        }
        execv(DFCACHE_BIN, (char *const *)args);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    slurp(out_path, out, out_size);
    slurp(err_path, errbuf, err_size);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void harness_write_file(const char *path, size_t len, unsigned seed) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        die("create test file");
    }
    char buf[65536];
    size_t done = 0;
    while (done < len) {
        size_t k = len - done < sizeof(buf) ? len - done : sizeof(buf);
        for (size_t i = 0; i < k; i++) {
            buf[i] = (char)(((done + i) * 2654435761u + seed * 40503u) >> 13);
        }
        if (write(fd, buf, k) != (ssize_t)k) {
            die("write test file");
        }
        done += k;
    }
    close(fd);
}

bool harness_same_file(const char *a, const char *b) {
    char cmd[PATH_MAX * 2 + 32];
    snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

size_t harness_count(const char *dir) {
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (fscanf(p, "%zu", &n) != 1) {
        n = (size_t)-1;
    }
    pclose(p);
    return n;
}

bool harness_log_has(struct harness *h, const char *text) {
    static char buf[1 << 20];
    slurp(h->log, buf, sizeof(buf));
    return strstr(buf, text) != NULL;
}
