/*
 * redis_harness.h - real redis-server and redis-sentinel processes for the scheduler tests.
 *
 * Each server runs in its own temp dir on a free 127.0.0.1 port (never 6379, never a system
 * Redis), with no persistence (--save '', --appendonly no), no Unix socket and daemonize no.
 * It is a child of the test process with PR_SET_PDEATHSIG, so it dies with the test even when
 * the test crashes; start servers from the main thread (the death signal follows the thread
 * that forked). Failures to start abort the test binary with the server's log on stderr.
 *
 * TLS: a server given tls_dir listens on a second port with TLS (tls_addr) besides its plain
 * one (addr, which the harness's own checks and commands use). redis_tls_make_ca and
 * redis_tls_make_cert write the CA and certificates with the openssl command.
 *
 * Skipping: call REDIS_HARNESS_REQUIRE() (needs test_support.h first) at the top of a test; it
 * skips (test_skip) with a message naming the package when redis-server is not installed.
 *
 * Ownership: the structs are the caller's (stack or static); *_destroy kills the processes and
 * removes the temp dirs (kept when DFC_TEST_KEEP is set). Connections returned by
 * redis_server_connect are the caller's to redisFree().
 */
#ifndef DFC_TEST_REDIS_HARNESS_H
#define DFC_TEST_REDIS_HARNESS_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "test_support.h"

struct redisContext;
struct redisReply;

/* Optional settings of one server; zero = none. Strings are copied. */
struct redis_server_opts {
    const char *password;  /* requirepass (the "default" user's password) */
    const char *acl_user;  /* an extra ACL user with every permission ... */
    const char *acl_pass;  /* ... and this password (both or neither) */
    int replica_of_port;   /* > 0: --replicaof 127.0.0.1 <port> (masterauth = password) */
    const char *extra_arg; /* one more "--name value" pair as a single string, or NULL */
    /* TLS on a second port: tls_dir holds ca.crt and <tls_name>.crt/.key (redis_tls_make_*) */
    const char *tls_dir;
    const char *tls_name;  /* NULL: "server" */
    bool tls_auth_clients; /* require a client certificate signed by ca.crt */
};

struct redis_server {
    char dir[256]; /* temp dir: the log and the server's working dir */
    char log[320]; /* redis.log (server stdout and stderr) */
    char addr[32]; /* "127.0.0.1:<port>" */
    int port;
    pid_t pid;     /* 0 when not running */
    bool sentinel; /* a redis-sentinel (config in dir/sentinel.conf) */
    char password[64];
    char acl_user[64];
    char acl_pass[64];
    int replica_of_port;
    char extra_arg[256];
    int tls_port;      /* 0: no TLS */
    char tls_addr[32]; /* "127.0.0.1:<tls_port>" */
    char tls_dir[256];
    char tls_name[32];
    bool tls_auth_clients;
    /* A Sentinel alone (redis_sentinel_alone): the master it monitors. */
    char master_name[32];
    int master_port;
};

/* One master, one replica of it and one Sentinel monitoring them (quorum 1, short timeouts). */
struct redis_sentinel_setup {
    struct redis_server node[2]; /* node[0] starts as master, node[1] as its replica */
    struct redis_server sentinel;
    char master_name[32];
    int master; /* index in node[] of the current master, per the Sentinel */
};

/* True when redis-server is installed (PATH, /usr/bin, /usr/sbin, /usr/local/bin). */
bool redis_harness_available(void);

#define REDIS_HARNESS_REQUIRE()                                                                    \
    do {                                                                                           \
        if (!redis_harness_available()) {                                                          \
            test_skip("redis-server is not installed (Debian: apt-get install redis-server "       \
                      "redis-sentinel; hack/install-deps.sh)");                                    \
        }                                                                                          \
    } while (0)

/* Creates the temp dir, picks a free port, starts redis-server with opts (NULL = defaults) and
 * waits until it answers PING (authenticated when a password is set). */
void redis_server_start(struct redis_server *s, const struct redis_server_opts *opts);

/* Stops it with sig (SIGKILL: crash, SIGTERM: clean) and reaps it. No-op when not running. */
void redis_server_stop(struct redis_server *s, int sig);

/* Starts it again on the same port and dir, with the same options; waits for PING. Data is
 * gone (no persistence). Stops it first when it is still running. */
void redis_server_restart(struct redis_server *s);

/* SIGSTOP / SIGCONT: the server keeps its socket open but stops answering (a hung Redis). */
void redis_server_pause(struct redis_server *s);
void redis_server_resume(struct redis_server *s);

/* Kills the server (SIGKILL) and removes its temp dir. Safe on a zeroed or stopped struct. */
void redis_server_destroy(struct redis_server *s);

/* A plain hiredis connection to s (AUTHed with the default password when one is set), with a
 * 5 s timeout; aborts when it cannot connect. The caller redisFree()s it. */
struct redisContext *redis_server_connect(const struct redis_server *s);

/* Runs one printf-style command on a fresh connection to s and returns the reply (the
 * caller's to freeReplyObject). Aborts when the connection fails; error replies are
 * returned as REDIS_REPLY_ERROR. */
struct redisReply *redis_server_command(const struct redis_server *s, const char *fmt, ...);

/* Starts node[0], node[1] as its replica (waits until the link is up) and a Sentinel that
 * monitors node[0] as master_name (NULL: "mymaster") with quorum 1, down-after 1000 ms and
 * failover-timeout 5000 ms, and waits until the Sentinel has discovered the replica. */
void redis_sentinel_start(struct redis_sentinel_setup *t, const char *master_name);

/* Forces a failover (SENTINEL FAILOVER, retried while the Sentinel answers NOGOODSLAVE or
 * INPROGRESS) and waits until the Sentinel names the other node as master and that node
 * answers ROLE master. Then turns the old master into a replica of the new one at once (what
 * the Sentinel itself does on its next 10 s INFO round) and waits for the link; its client
 * connections stay open, so writes on them get -READONLY. Returns the index of the new
 * master in t->node. Aborts after 30 s. */
int redis_sentinel_failover(struct redis_sentinel_setup *t);

/* The port the Sentinel currently reports for the master (get-master-addr-by-name). */
int redis_sentinel_master_port(const struct redis_sentinel_setup *t);

/* A Sentinel alone that monitors 127.0.0.1:master_port as master_name (nothing needs to run
 * there: it names that address whatever it finds). opts: password is the Sentinel's own
 * requirepass, acl_user and acl_pass an ACL user of it; tls_* give it a TLS port (and TLS
 * towards the master). */
void redis_sentinel_alone(struct redis_server *s, const char *master_name, int master_port,
                          const struct redis_server_opts *opts);

/* A CA into dir/ca.crt and dir/ca.key (EC P-256, valid 2 days). */
void redis_tls_make_ca(const char *dir);

/* A certificate signed by ca_dir's CA into out_dir/<name>.crt and <name>.key, with the SAN
 * san ("IP:127.0.0.1"). */
void redis_tls_make_cert(const char *ca_dir, const char *out_dir, const char *name,
                         const char *san);

/* Kills all three processes and removes their temp dirs. Safe on a zeroed struct. */
void redis_sentinel_destroy(struct redis_sentinel_setup *t);

#endif /* DFC_TEST_REDIS_HARNESS_H */
