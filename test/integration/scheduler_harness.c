/*
 * scheduler_harness.c - real scheduler processes for the integration tests.
 */
#include "scheduler_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

static void die(const char *what) {
    fprintf(stderr, "sched_harness: %s: %m\n", what);
    abort();
}

static void dump_log(const char *log) {
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "tail -40 '%s' >&2", log);
    if (system(cmd) != 0) {
        fprintf(stderr, "sched_harness: cannot show %s\n", log);
    }
}

static size_t slurp(const char *path, char *buf, size_t size) {
    if (buf == NULL || size == 0) {
        return 0;
    }
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

/* The port of the last "event=scheduler.ready ... port=N" line after offset start, or 0. */
static int ready_port_after(const char *log, size_t start) {
    static char buf[1 << 20];
    size_t n = slurp(log, buf, sizeof(buf));
    const char *line = NULL;
    for (const char *p = buf + (start < n ? start : n);
         (p = strstr(p, "event=scheduler.ready")) != NULL; p++) {
        line = p;
    }
    const char *p = line != NULL ? strstr(line, " port=") : NULL;
    long v = p != NULL ? strtol(p + 6, NULL, 10) : 0;
    return v > 0 && v < 65536 ? (int)v : 0;
}

/* Runs the scheduler on h's config (on port when it is not 0) and waits for its ready line. */
static void spawn(struct sched_harness *h, int port) {
    char port_arg[16];
    snprintf(port_arg, sizeof(port_arg), "%d", port);
    size_t log_start = 0;
    FILE *lf = fopen(h->log, "r");
    if (lf != NULL) { /* only a ready line after this start counts */
        long end = fseek(lf, 0, SEEK_END) == 0 ? ftell(lf) : 0;
        log_start = end > 0 ? (size_t)end : 0;
        fclose(lf);
    }
    /* argv and the environment are made before the fork: this process may have gRPC's
     * threads, so the child calls only async-signal-safe functions. */
    char mport[64];
    snprintf(mport, sizeof(mport), "SCHEDULER_METRICS_SERVER_PORT=%u", h->metrics_port);
    char **envp = test_environ_with((const char *const[]){mport, NULL});
    const char *argv[] = {"scheduler", "--config", h->config, "--port", port_arg, NULL};
    if (port <= 0) {
        argv[3] = NULL; /* no --port */
    }
    pid_t pid = fork();
    if (pid < 0) {
        die("fork");
    }
    if (pid == 0) {
        int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execve(SCHEDULER_BIN, (char *const *)argv, envp);
        _exit(127);
    }
    free(envp);
    h->pid = pid;
    double until = test_now_ms() + 20000;
    while (test_now_ms() < until) {
        int ready = ready_port_after(h->log, log_start);
        if (ready > 0) {
            h->port = ready;
            snprintf(h->target, sizeof(h->target), "127.0.0.1:%d", h->port);
            return;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            h->pid = 0;
            fprintf(stderr, "sched_harness: the scheduler exited early; its log:\n");
            dump_log(h->log);
            abort();
        }
        usleep(5000);
    }
    fprintf(stderr, "sched_harness: the scheduler did not come up; its log:\n");
    dump_log(h->log);
    abort();
}

static void start(struct sched_harness *h, const char *redis_addr, const char *extra_yaml,
                  unsigned metrics_port, const char *tls_dir);

void sched_harness_start(struct sched_harness *h, const char *redis_addr, const char *extra_yaml) {
    start(h, redis_addr, extra_yaml, 0, NULL);
}

void sched_harness_start_tls(struct sched_harness *h, const char *redis_addr, const char *tls_dir) {
    sched_harness_start_tls_named(h, redis_addr, tls_dir, "");
}

void sched_harness_start_tls_named(struct sched_harness *h, const char *redis_addr,
                                   const char *tls_dir, const char *server_name) {
    sched_harness_start_tls_with(h, redis_addr, tls_dir, server_name, NULL);
}

void sched_harness_start_tls_with(struct sched_harness *h, const char *redis_addr,
                                  const char *tls_dir, const char *server_name,
                                  const char *security_yaml) {
    char yaml[4096];
    snprintf(yaml, sizeof(yaml),
             "security:\n  tlsPolicy: mutual\n%s"
             "peer:\n  tls:\n    caCert: %s/ca.crt\n    cert: %s/tls.crt\n    key: %s/tls.key\n"
             "    serverName: \"%s\"\n",
             security_yaml != NULL ? security_yaml : "", tls_dir, tls_dir, tls_dir, server_name);
    start(h, redis_addr, yaml, 0, tls_dir);
}

void sched_harness_start_metrics(struct sched_harness *h, const char *redis_addr,
                                 const char *extra_yaml, unsigned metrics_port) {
    start(h, redis_addr, extra_yaml, metrics_port, NULL);
}

/* Writes the config (the server's TLS files from tls_dir, NULL = none) and starts the
 * scheduler; h need not be initialised. */
static void start(struct sched_harness *h, const char *redis_addr, const char *extra_yaml,
                  unsigned metrics_port, const char *tls_dir) {
    memset(h, 0, sizeof(*h));
    if (tls_dir != NULL) {
        snprintf(h->server_tls_dir, sizeof(h->server_tls_dir), "%s", tls_dir);
    }
    h->metrics_port = metrics_port;
    test_mkdtemp(h->dir, sizeof(h->dir), "sched");
    snprintf(h->config, sizeof(h->config), "%s/scheduler.yaml", h->dir);
    snprintf(h->log, sizeof(h->log), "%s/scheduler.log", h->dir);
    FILE *f = fopen(h->config, "w");
    if (f == NULL) {
        die("write config");
    }
    fprintf(f, "server:\n  listenIP: 127.0.0.1\n  port: 0\n  advertiseIP: 127.0.0.1\n");
    if (tls_dir != NULL) {
        fprintf(f, "  tls:\n    caCert: %s/ca.crt\n    cert: %s/tls.crt\n    key: %s/tls.key\n",
                tls_dir, tls_dir, tls_dir);
    }
    fprintf(f,
            "database:\n  redis:\n    addrs: [%s]\n"
            "log:\n  level: debug\n%s",
            redis_addr != NULL ? redis_addr : "", extra_yaml != NULL ? extra_yaml : "");
    fclose(f);
    spawn(h, 0);
}

void sched_harness_restart(struct sched_harness *h) {
    if (h->pid > 0) {
        sched_harness_stop(h, SIGTERM);
    }
    spawn(h, h->port);
}

int sched_harness_stop(struct sched_harness *h, int sig) {
    if (h->pid <= 0) {
        return 0;
    }
    kill(h->pid, sig);
    int status;
    if (waitpid(h->pid, &status, 0) != h->pid) {
        die("waitpid");
    }
    h->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int sched_harness_destroy(struct sched_harness *h) {
    int code = sched_harness_stop(h, SIGTERM);
    if (code != 0) {
        fprintf(stderr, "sched_harness: the scheduler exited with %d; its log:\n", code);
        dump_log(h->log);
    }
    struct test_env env;
    test_env_load(&env);
    if (h->dir[0] != '\0' && env.keep == NULL) {
        test_rmtree(h->dir);
    }
    test_env_free(&env);
    return code;
}

int sched_harness_run(const char *const *argv, char *out, size_t out_size, char *errbuf,
                      size_t err_size) {
    char dir[256], out_path[320], err_path[320];
    test_mkdtemp(dir, sizeof(dir), "sched-run");
    snprintf(out_path, sizeof(out_path), "%s/out", dir);
    snprintf(err_path, sizeof(err_path), "%s/err", dir);
    const char *args[32];
    size_t n = 0;
    args[n++] = "scheduler";
    for (size_t i = 0; argv[i] != NULL && n < 30; i++) {
        args[n++] = argv[i];
    }
    args[n] = NULL;
    /* never compete for 8000; made before the fork, as in spawn() */
    char **envp = test_environ_with((const char *const[]){"SCHEDULER_METRICS_SERVER_PORT=0", NULL});
    pid_t pid = fork();
    if (pid < 0) {
        die("fork");
    }
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execve(SCHEDULER_BIN, (char *const *)args, envp);
        _exit(127);
    }
    free(envp);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        die("waitpid");
    }
    slurp(out_path, out, out_size);
    slurp(err_path, errbuf, err_size);
    test_rmtree(dir);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool sched_harness_log_has(const struct sched_harness *h, const char *text) {
    static char buf[1 << 20];
    slurp(h->log, buf, sizeof(buf));
    return strstr(buf, text) != NULL;
}
