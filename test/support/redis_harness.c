/*
 * redis_harness.c - real redis-server and redis-sentinel processes for the scheduler tests
 * (see redis_harness.h for the contract).
 */
#include "redis_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

#define MAX_ARGS 48

static void die(const struct redis_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static void die(const struct redis_server *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "redis_harness: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (s != NULL && s->log[0] != '\0') {
        char cmd[400];
        fprintf(stderr, "redis_harness: last lines of %s:\n", s->log);
        snprintf(cmd, sizeof(cmd), "tail -30 '%s' >&2", s->log);
        (void)system(cmd);
    }
    abort();
}

/* $PATH, read through the option module as every variable is (hack/lint.sh). */
struct path_env {
    char *path;
};

static const struct dfc_config_row path_rows[] = {
    {.type = DFC_CFG_STRING, .offset = offsetof(struct path_env, path), .env = "PATH"},
};
static const struct dfc_config_schema path_schema = {"test", path_rows, 1};

/* Finds an executable named name into buf; false when there is none. */
static bool find_bin(const char *name, char *buf, size_t len) {
    struct path_env env = {NULL};
    struct dfc_error err;
    char dirs[4096];
    if (dfc_config_defaults(&path_schema, &env, &err) < 0 ||
        dfc_config_load_env(&path_schema, &env, &err) < 0) {
        env.path = NULL;
    }
    snprintf(dirs, sizeof(dirs), "%s:/usr/bin:/usr/sbin:/usr/local/bin",
             env.path != NULL ? env.path : "");
    dfc_config_free(&path_schema, &env);
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        if (*d == '\0') {
            continue;
        }
        if (snprintf(buf, len, "%s/%s", d, name) < (int)len && access(buf, X_OK) == 0) {
            return true;
        }
    }
    return false;
}

bool redis_harness_available(void) {
    char bin[PATH_MAX];
    return find_bin("redis-server", bin, sizeof(bin));
}

/* A port nothing listens on right now (test_free_port). Another process may take it before
 * the server binds; spawn() retries with a new port then. */
static int free_port(void) {
    return (int)test_free_port();
}

static void set_port(struct redis_server *s, int port) {
    s->port = port;
    snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%d", port);
    if (s->tls_port > 0) {
        s->tls_port = free_port();
        snprintf(s->tls_addr, sizeof(s->tls_addr), "127.0.0.1:%d", s->tls_port);
    }
}

static void copy_str(char *dst, size_t len, const char *src) {
    snprintf(dst, len, "%s", src ? src : "");
}

/* Writes the Sentinel's config (it rewrites the file itself as it learns the topology). */
static void write_sentinel_tls(FILE *f, const struct redis_server *s) {
    if (s->tls_port > 0) {
        fprintf(f,
                "tls-port %d\n"
                "tls-cert-file %s/%s.crt\n"
                "tls-key-file %s/%s.key\n"
                "tls-ca-cert-file %s/ca.crt\n"
                "tls-auth-clients %s\n"
                "tls-replication yes\n",
                s->tls_port, s->tls_dir, s->tls_name, s->tls_dir, s->tls_name, s->tls_dir,
                s->tls_auth_clients ? "yes" : "no");
    }
    if (s->password[0] != '\0') {
        fprintf(f, "requirepass %s\n", s->password);
    }
    if (s->acl_user[0] != '\0') {
        fprintf(f, "user %s on >%s +@all\n", s->acl_user, s->acl_pass);
    }
}

static void write_sentinel_conf(struct redis_server *s, const char *master_name, int master_port) {
    char path[400];
    snprintf(path, sizeof(path), "%s/sentinel.conf", s->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        die(s, "write %s: %m", path);
    }
    fprintf(f,
            "port %d\n"
            "bind 127.0.0.1\n"
            "daemonize no\n"
            "protected-mode no\n"
            "dir %s\n"
            "sentinel monitor %s 127.0.0.1 %d 1\n"
            "sentinel down-after-milliseconds %s 1000\n"
            "sentinel failover-timeout %s 5000\n"
            "sentinel parallel-syncs %s 1\n",
            s->port, s->dir, master_name, master_port, master_name, master_name, master_name);
    write_sentinel_tls(f, s);
    fclose(f);
}

/* Builds argv (pointers into s and static strings) for s; returns argc. */
/* Paths and the TLS port of s, for build_argv. */
struct tls_bufs {
    char port[16], cert[320], key[320], ca[320];
};

static int build_argv(struct redis_server *s, const char *bin, char *port_buf, size_t port_len,
                      char *replica_buf, size_t replica_len, char *acl_pass_buf,
                      size_t acl_pass_len, char *extra_buf, size_t extra_len, char *conf_buf,
                      size_t conf_len, struct tls_bufs *tb, const char **argv) {
    int n = 0;
    argv[n++] = bin;
    if (s->sentinel) {
        snprintf(conf_buf, conf_len, "%s/sentinel.conf", s->dir);
        argv[n++] = conf_buf;
        argv[n++] = "--sentinel";
        argv[n] = NULL;
        return n;
    }
    snprintf(port_buf, port_len, "%d", s->port);
    argv[n++] = "--port";
    argv[n++] = port_buf;
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = "no";
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--dir";
    argv[n++] = s->dir;
    argv[n++] = "--logfile";
    argv[n++] = "";
    argv[n++] = "--repl-diskless-sync-delay"; /* a replica syncs at once, not after 5 s */
    argv[n++] = "0";
    if (s->tls_port > 0) {
        snprintf(tb->port, sizeof(tb->port), "%d", s->tls_port);
        snprintf(tb->cert, sizeof(tb->cert), "%s/%s.crt", s->tls_dir, s->tls_name);
        snprintf(tb->key, sizeof(tb->key), "%s/%s.key", s->tls_dir, s->tls_name);
        snprintf(tb->ca, sizeof(tb->ca), "%s/ca.crt", s->tls_dir);
        argv[n++] = "--tls-port";
        argv[n++] = tb->port;
        argv[n++] = "--tls-cert-file";
        argv[n++] = tb->cert;
        argv[n++] = "--tls-key-file";
        argv[n++] = tb->key;
        argv[n++] = "--tls-ca-cert-file";
        argv[n++] = tb->ca;
        argv[n++] = "--tls-auth-clients";
        argv[n++] = s->tls_auth_clients ? "yes" : "no";
    }
    if (s->password[0] != '\0') {
        argv[n++] = "--requirepass";
        argv[n++] = s->password;
    }
    if (s->acl_user[0] != '\0') {
        snprintf(acl_pass_buf, acl_pass_len, ">%s", s->acl_pass);
        argv[n++] = "--user";
        argv[n++] = s->acl_user;
        argv[n++] = "on";
        argv[n++] = acl_pass_buf;
        argv[n++] = "~*";
        argv[n++] = "&*";
        argv[n++] = "+@all";
    }
    if (s->replica_of_port > 0) {
        snprintf(replica_buf, replica_len, "%d", s->replica_of_port);
        argv[n++] = "--replicaof";
        argv[n++] = "127.0.0.1";
        argv[n++] = replica_buf;
        if (s->password[0] != '\0') {
            argv[n++] = "--masterauth";
            argv[n++] = s->password;
        }
    }
    if (s->extra_arg[0] != '\0') {
        copy_str(extra_buf, extra_len, s->extra_arg);
        char *save = NULL;
        for (char *w = strtok_r(extra_buf, " ", &save); w != NULL && n < MAX_ARGS - 1;
             w = strtok_r(NULL, " ", &save)) {
            argv[n++] = w;
        }
    }
    argv[n] = NULL;
    return n;
}

/* Connects to s and sends PING (after AUTH when s has a password); true on PONG. */
static bool answers_ping(const struct redis_server *s) {
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (c == NULL) {
        return false;
    }
    bool ok = false;
    if (c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
        redisReply *r = NULL;
        if (s->password[0] != '\0') {
            r = redisCommand(c, "AUTH %s", s->password);
            freeReplyObject(r);
        }
        r = redisCommand(c, "PING");
        ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
        freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

/* True when the server's log says its port was taken (then a new port is worth a try). */
static bool log_says_port_taken(const struct redis_server *s) {
    FILE *f = fopen(s->log, "r");
    if (f == NULL) {
        return false;
    }
    char line[512];
    bool taken = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "Address already in use") != NULL) {
            taken = true;
        }
    }
    fclose(f);
    return taken;
}

/* Forks and execs the server; false when it exited because its port was taken. */
static bool spawn_once(struct redis_server *s) {
    char bin[PATH_MAX];
    const char *name = s->sentinel ? "redis-sentinel" : "redis-server";
    if (!find_bin(name, bin, sizeof(bin)) && !find_bin("redis-server", bin, sizeof(bin))) {
        die(s, "%s not found", name);
    }
    /* Everything the child needs is prepared before fork: the test may be multithreaded, so
     * the child calls only async-signal-safe functions before exec. */
    char port_buf[16], replica_buf[16], acl_pass_buf[80], extra_buf[256], conf_buf[400];
    const char *argv[MAX_ARGS];
    struct tls_bufs tb;
    build_argv(s, bin, port_buf, sizeof(port_buf), replica_buf, sizeof(replica_buf), acl_pass_buf,
               sizeof(acl_pass_buf), extra_buf, sizeof(extra_buf), conf_buf, sizeof(conf_buf), &tb,
               argv);
    int logfd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (logfd < 0) {
        die(s, "open %s: %m", s->log);
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        die(s, "fork: %m");
    }
    if (pid == 0) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(126);
        }
        (void)dup2(logfd, 1);
        (void)dup2(logfd, 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) {
            (void)dup2(devnull, 0);
        }
        (void)chdir(s->dir);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(logfd);
    s->pid = pid;
    double until = test_now_ms() + 15000;
    while (test_now_ms() < until) {
        if (answers_ping(s)) {
            return true;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s->pid = 0;
            if (log_says_port_taken(s)) {
                return false;
            }
            die(s, "%s on %s exited early (status 0x%x)", name, s->addr, status);
        }
        usleep(5000);
    }
    die(s, "%s on %s did not answer PING within 15 s", name, s->addr);
}

/* Starts s on its port; when the port was taken meanwhile, on a new one (fresh start only). */
static void spawn(struct redis_server *s, bool may_move) {
    for (int attempt = 0; attempt < 10; attempt++) {
        if (spawn_once(s)) {
            return;
        }
        if (!may_move) {
            die(s, "port %d is taken, cannot restart on it", s->port);
        }
        set_port(s, free_port());
    }
    die(s, "no free port after 10 attempts");
}

static void init(struct redis_server *s, const char *kind) {
    memset(s, 0, sizeof(*s));
    test_mkdtemp(s->dir, sizeof(s->dir), kind);
    snprintf(s->log, sizeof(s->log), "%s/redis.log", s->dir);
    set_port(s, free_port());
}

/* Takes opts' TLS settings: a TLS port besides the plain one. */
static void take_tls(struct redis_server *s, const struct redis_server_opts *opts) {
    if (opts == NULL || opts->tls_dir == NULL) {
        return;
    }
    copy_str(s->tls_dir, sizeof(s->tls_dir), opts->tls_dir);
    copy_str(s->tls_name, sizeof(s->tls_name), opts->tls_name ? opts->tls_name : "server");
    s->tls_auth_clients = opts->tls_auth_clients;
    s->tls_port = 1; /* set_port picks a real one */
    set_port(s, s->port);
}

void redis_server_start(struct redis_server *s, const struct redis_server_opts *opts) {
    init(s, "redis");
    take_tls(s, opts);
    if (opts != NULL) {
        copy_str(s->password, sizeof(s->password), opts->password);
        copy_str(s->acl_user, sizeof(s->acl_user), opts->acl_user);
        copy_str(s->acl_pass, sizeof(s->acl_pass), opts->acl_pass);
        copy_str(s->extra_arg, sizeof(s->extra_arg), opts->extra_arg);
        s->replica_of_port = opts->replica_of_port;
    }
    spawn(s, true);
}

void redis_server_stop(struct redis_server *s, int sig) {
    if (s->pid <= 0) {
        return;
    }
    kill(s->pid, SIGCONT); /* a paused server must be able to die of SIGTERM */
    kill(s->pid, sig);
    int status;
    while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
}

void redis_server_restart(struct redis_server *s) {
    redis_server_stop(s, SIGKILL);
    spawn(s, false);
}

void redis_server_pause(struct redis_server *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGSTOP);
    }
}

void redis_server_resume(struct redis_server *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGCONT);
    }
}

void redis_server_destroy(struct redis_server *s) {
    redis_server_stop(s, SIGKILL);
    struct test_env env;
    test_env_load(&env);
    if (s->dir[0] != '\0' && env.keep == NULL) {
        test_rmtree(s->dir);
    }
    test_env_free(&env);
    s->dir[0] = '\0';
}

redisContext *redis_server_connect(const struct redis_server *s) {
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (c == NULL || c->err != 0) {
        die(s, "connect %s: %s", s->addr, c ? c->errstr : "out of memory");
    }
    redisSetTimeout(c, tv);
    if (s->password[0] != '\0') {
        redisReply *r = redisCommand(c, "AUTH %s", s->password);
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            die(s, "AUTH on %s: %s", s->addr, r ? r->str : c->errstr);
        }
        freeReplyObject(r);
    }
    return c;
}

redisReply *redis_server_command(const struct redis_server *s, const char *fmt, ...) {
    redisContext *c = redis_server_connect(s);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r == NULL) {
        die(s, "command on %s: %s", s->addr, c->errstr);
    }
    redisFree(c);
    return r;
}

/* ---- Sentinel ---- */

/* The master port the Sentinel reports, or 0 when it has none yet. */
int redis_sentinel_master_port(const struct redis_sentinel_setup *t) {
    redisReply *r =
        redis_server_command(&t->sentinel, "SENTINEL get-master-addr-by-name %s", t->master_name);
    int port = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING) {
        port = (int)strtol(r->element[1]->str, NULL, 10);
    }
    freeReplyObject(r);
    return port;
}

/* True when node's ROLE reply starts with role ("master" or "slave"); for a replica, also
 * that its link to the master is up. */
static bool node_role_is(const struct redis_server *node, const char *role) {
    redisReply *r = redis_server_command(node, "ROLE");
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
              r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, role) == 0;
    if (ok && strcmp(role, "slave") == 0) {
        ok = r->elements >= 4 && r->element[3]->type == REDIS_REPLY_STRING &&
             strcmp(r->element[3]->str, "connected") == 0;
    }
    freeReplyObject(r);
    return ok;
}

/* True when the Sentinel lists the replica node[idx] without down or disconnected flags. */
static bool sentinel_knows_replica(const struct redis_sentinel_setup *t, int idx) {
    redisReply *r = redis_server_command(&t->sentinel, "SENTINEL replicas %s", t->master_name);
    bool ok = false;
    char port[16];
    snprintf(port, sizeof(port), "%d", t->node[idx].port);
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *fields = r->element[i];
        const char *p = NULL, *flags = NULL;
        for (size_t j = 0; fields->type == REDIS_REPLY_ARRAY && j + 1 < fields->elements; j += 2) {
            if (strcmp(fields->element[j]->str, "port") == 0) {
                p = fields->element[j + 1]->str;
            } else if (strcmp(fields->element[j]->str, "flags") == 0) {
                flags = fields->element[j + 1]->str;
            }
        }
        if (p != NULL && flags != NULL && strcmp(p, port) == 0 && strcmp(flags, "slave") == 0) {
            ok = true;
        }
    }
    freeReplyObject(r);
    return ok;
}

static bool wait_until(bool (*pred)(const struct redis_sentinel_setup *, int),
                       const struct redis_sentinel_setup *t, int idx, int timeout_ms) {
    double until = test_now_ms() + timeout_ms;
    while (test_now_ms() < until) {
        if (pred(t, idx)) {
            return true;
        }
        usleep(20000);
    }
    return pred(t, idx);
}

static bool is_replica_up(const struct redis_sentinel_setup *t, int idx) {
    return node_role_is(&t->node[idx], "slave");
}

static bool is_master_now(const struct redis_sentinel_setup *t, int idx) {
    return redis_sentinel_master_port(t) == t->node[idx].port &&
           node_role_is(&t->node[idx], "master");
}

void redis_sentinel_start(struct redis_sentinel_setup *t, const char *master_name) {
    memset(t, 0, sizeof(*t));
    copy_str(t->master_name, sizeof(t->master_name), master_name ? master_name : "mymaster");
    redis_server_start(&t->node[0], NULL);
    struct redis_server_opts ro = {.replica_of_port = t->node[0].port};
    redis_server_start(&t->node[1], &ro);
    if (!wait_until(is_replica_up, t, 1, 15000)) {
        die(&t->node[1], "replica %s never linked to %s", t->node[1].addr, t->node[0].addr);
    }
    init(&t->sentinel, "sentinel");
    t->sentinel.sentinel = true;
    snprintf(t->sentinel.log, sizeof(t->sentinel.log), "%s/sentinel.log", t->sentinel.dir);
    for (int attempt = 0; attempt < 10; attempt++) {
        write_sentinel_conf(&t->sentinel, t->master_name, t->node[0].port);
        if (spawn_once(&t->sentinel)) {
            break;
        }
        set_port(&t->sentinel, free_port());
    }
    if (t->sentinel.pid == 0) {
        die(&t->sentinel, "sentinel found no free port");
    }
    t->master = 0;
    if (!wait_until(sentinel_knows_replica, t, 1, 30000)) {
        die(&t->sentinel, "sentinel on %s did not discover replica %s", t->sentinel.addr,
            t->node[1].addr);
    }
}

int redis_sentinel_failover(struct redis_sentinel_setup *t) {
    int next = 1 - t->master;
    double until = test_now_ms() + 30000;
    for (;;) {
        if (test_now_ms() > until) {
            die(&t->sentinel, "SENTINEL FAILOVER %s kept failing", t->master_name);
        }
        redisReply *r = redis_server_command(&t->sentinel, "SENTINEL FAILOVER %s", t->master_name);
        bool ok = r->type == REDIS_REPLY_STATUS;
        bool retry = r->type == REDIS_REPLY_ERROR && (strstr(r->str, "NOGOODSLAVE") != NULL ||
                                                      strstr(r->str, "INPROGRESS") != NULL);
        if (!ok && !retry) {
            die(&t->sentinel, "SENTINEL FAILOVER %s: %s", t->master_name,
                r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        }
        freeReplyObject(r);
        if (ok) {
            break;
        }
        usleep(100000);
    }
    int left = (int)(until - test_now_ms());
    if (!wait_until(is_master_now, t, next, left > 0 ? left : 1)) {
        die(&t->sentinel, "sentinel never reported %s as master", t->node[next].addr);
    }
    /* The Sentinel would turn the old master into a replica of the new one on its next INFO
     * round (up to 10 s, not configurable); do what it would do now. Unlike the Sentinel,
     * this keeps the old master's client connections open, so a client still holding one
     * gets -READONLY for a write: the harder case. */
    redisReply *r =
        redis_server_command(&t->node[t->master], "REPLICAOF 127.0.0.1 %d", t->node[next].port);
    if (r->type == REDIS_REPLY_ERROR) {
        die(&t->node[t->master], "REPLICAOF on the old master: %s", r->str);
    }
    freeReplyObject(r);
    left = (int)(until - test_now_ms());
    if (!wait_until(is_replica_up, t, t->master, left > 0 ? left : 1)) {
        die(&t->node[t->master], "old master %s never became a replica", t->node[t->master].addr);
    }
    t->master = next;
    return next;
}

void redis_sentinel_alone(struct redis_server *s, const char *master_name, int master_port,
                          const struct redis_server_opts *opts) {
    init(s, "sentinel");
    s->sentinel = true;
    copy_str(s->master_name, sizeof(s->master_name), master_name);
    s->master_port = master_port;
    snprintf(s->log, sizeof(s->log), "%s/sentinel.log", s->dir);
    take_tls(s, opts);
    if (opts != NULL) {
        copy_str(s->password, sizeof(s->password), opts->password);
        copy_str(s->acl_user, sizeof(s->acl_user), opts->acl_user);
        copy_str(s->acl_pass, sizeof(s->acl_pass), opts->acl_pass);
    }
    for (int attempt = 0; attempt < 10; attempt++) {
        write_sentinel_conf(s, master_name, master_port);
        if (spawn_once(s)) {
            return;
        }
        set_port(s, free_port());
    }
    die(s, "sentinel found no free port");
}

/* Runs one shell command line; aborts when it fails. */
static void run_sh(const char *line) {
    if (system(line) != 0) {
        die(NULL, "failed: %s", line);
    }
}

void redis_tls_make_ca(const char *dir) {
    char line[1024];
    snprintf(line, sizeof(line),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout '%s/ca.key' -out '%s/ca.crt' -days 2 -subj /CN=dfc-test-ca 2>/dev/null",
             dir, dir);
    run_sh(line);
}

void redis_tls_make_cert(const char *ca_dir, const char *out_dir, const char *name,
                         const char *san) {
    char line[2048];
    snprintf(line, sizeof(line),
             "set -e; cd '%s'; printf 'subjectAltName=%s\\n' > '%s.ext'; "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout '%s.key' -out '%s.csr' -subj /CN=%s 2>/dev/null; "
             "openssl x509 -req -in '%s.csr' -CA '%s/ca.crt' -CAkey '%s/ca.key' "
             "-CAcreateserial -out '%s.crt' -days 2 -extfile '%s.ext' 2>/dev/null; "
             "chmod 644 '%s.key'",
             out_dir, san, name, name, name, name, name, ca_dir, ca_dir, name, name, name);
    run_sh(line);
}

void redis_sentinel_destroy(struct redis_sentinel_setup *t) {
    redis_server_destroy(&t->sentinel);
    redis_server_destroy(&t->node[1]);
    redis_server_destroy(&t->node[0]);
}
