/*
 * sched_upload.c - load client for hack/bench/scheduler.sh: UploadPersistentCacheTaskStarted +
 * Finished pairs against a running scheduler over lib's RPC client, from N concurrent clients
 * (one channel each, as N dfdaemons would have), after announcing the host they name.
 *
 *   bench_sched_upload free-port
 *       prints a TCP port that is free on 127.0.0.1 right now
 *   bench_sched_upload load ADDR SECONDS CLIENTS [TLS_DIR]
 *       announces the host, runs pairs for SECONDS from CLIENTS clients (one channel each, all
 *       driven by one thread, each with one call in flight) and prints one line:
 *       pairs=N seconds=S pairs_per_s=R p50_ms=A p99_ms=B max_ms=C errors=E
 *       With TLS_DIR, over mutual TLS with TLS_DIR/ca.crt, tls.crt and tls.key (a node's files
 *       in cert-manager's layout; the certificate must name 127.0.0.1, the announced host).
 *   bench_sched_upload capture ADDR REDIS_PORT DIR [TLS_DIR]
 *       announces the host, runs one warm-up pair, then one pair while a MONITOR connection
 *       to Redis records the commands the scheduler sends; writes each command to
 *       DIR/cmd-<i>.args (arguments separated by NUL bytes, NULs inside an argument replaced
 *       by 0x01 so that redis-benchmark can take them as argv) and prints their count, then
 *       the count of commands scripts ran inside those (MONITOR shows them as "lua"), whose
 *       names go to DIR/lua-names, one a line.
 *
 * Exit status 0 only when every call succeeded (load) or at least one command was seen
 * (capture); errors name the call and carry the scheduler's status message.
 */
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dfc/error.h"
#include "dfc/rpc_client.h"
#include "dragonfly/scheduler.pb-c.h"

#define HOST_ID    "bench-host-0000000000000000000000000000000000000000000000000000000"
#define CALL_MS    10000
#define PIECE_LEN  (4ull << 20)
#define PIECES     4
#define MAX_CLIENT 1024

static struct dfc_rpc_client_method announce_m, started_m, finished_m;

/* The clients' options: NULL for plaintext, else mutual TLS (tls_from). */
static struct dfc_rpc_client_opts tls_opts;
static const struct dfc_rpc_client_opts *client_opts;
static char tls_paths[3][4096];

static void tls_from(const char *dir) {
    const char *names[3] = {"ca.crt", "tls.crt", "tls.key"};
    for (int i = 0; i < 3; i++) {
        snprintf(tls_paths[i], sizeof(tls_paths[i]), "%s/%s", dir, names[i]);
    }
    tls_opts.tls = DFC_TLS_MUTUAL;
    tls_opts.tls_files =
        (struct dfc_tls_files){.ca_cert = tls_paths[0], .cert = tls_paths[1], .key = tls_paths[2]};
    client_opts = &tls_opts;
}
static const struct dfc_rpc_client_row methods[] = {
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnounceHost", &announce_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskStarted", &started_m),
    DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskFinished",
                          &finished_m),
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("bind 127.0.0.1:0");
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
}

/* A full Host, cpu included (AnnounceHost requires it), as a dfdaemon would announce. */
static int announce(struct dfc_rpc_client *c, struct dfc_error *err) {
    Common__V2__CPUTimes times = COMMON__V2__CPUTIMES__INIT;
    times.user = 100.5;
    times.system = 20.25;
    times.idle = 1000;
    Common__V2__CPU cpu = COMMON__V2__CPU__INIT;
    cpu.logical_count = 2;
    cpu.physical_count = 2;
    cpu.percent = 12.5;
    cpu.process_percent = 1.5;
    cpu.times = &times;
    Common__V2__Memory mem = COMMON__V2__MEMORY__INIT;
    mem.total = 8ull << 30;
    mem.available = 4ull << 30;
    mem.used = 4ull << 30;
    mem.used_percent = 50;
    mem.free = 4ull << 30;
    Common__V2__Network net = COMMON__V2__NETWORK__INIT;
    net.opt_location_case = COMMON__V2__NETWORK__OPT_LOCATION_LOCATION;
    net.location = "bench|rack-1";
    net.opt_idc_case = COMMON__V2__NETWORK__OPT_IDC_IDC;
    net.idc = "bench-idc";
    net.max_rx_bandwidth = 1250000000;
    net.max_tx_bandwidth = 1250000000;
    Common__V2__Disk disk = COMMON__V2__DISK__INIT;
    disk.total = 100ull << 30;
    disk.free = 50ull << 30;
    disk.used = 50ull << 30;
    disk.used_percent = 50;
    Common__V2__Build build = COMMON__V2__BUILD__INIT;
    build.git_version = "v0.1.0-bench";
    Common__V2__Host host = COMMON__V2__HOST__INIT;
    host.id = HOST_ID;
    host.hostname = "bench-host";
    host.ip = "127.0.0.1";
    host.port = 4000;
    host.download_port = 4001;
    host.os = "linux";
    host.platform = "debian";
    host.platform_family = "debian";
    host.platform_version = "12";
    host.kernel_version = "6.1.0";
    host.cpu = &cpu;
    host.memory = &mem;
    host.network = &net;
    host.disk = &disk;
    host.build = &build;
    host.scheduler_cluster_id = 1;
    host.name = "bench-host";
    Google__Protobuf__Duration interval = GOOGLE__PROTOBUF__DURATION__INIT;
    interval.seconds = 3600; /* host GC = 2 x interval: never during a run */
    Scheduler__V2__AnnounceHostRequest req = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    req.host = &host;
    req.interval = &interval;
    ProtobufCMessage *resp = NULL;
    int rc = dfc_rpc_unary(c, &announce_m, &req.base, CALL_MS, &resp, err);
    dfc_rpc_msg_free(resp);
    return rc < 0 ? dfc_error_prefix(err, "AnnounceHost") : 0;
}

/* The ids of one pair: a fresh task and peer per (run, client, seq). */
struct pair_ids {
    char task[72], peer[72];
};

static void pair_ids(unsigned run, unsigned client, unsigned long seq, struct pair_ids *ids) {
    snprintf(ids->task, sizeof(ids->task), "%08x%08x%016lx%032x", run, client, seq, 0u);
    snprintf(ids->peer, sizeof(ids->peer), "127.0.0.1-bench-host-%08x-%08x-%016lx", run, client,
             seq);
}

/* The two requests of a pair; they borrow ids (and ttl). */
static void started_req(const struct pair_ids *ids, Google__Protobuf__Duration *ttl,
                        Scheduler__V2__UploadPersistentCacheTaskStartedRequest *st) {
    google__protobuf__duration__init(ttl);
    ttl->seconds = 3600;
    scheduler__v2__upload_persistent_cache_task_started_request__init(st);
    st->host_id = HOST_ID;
    st->task_id = (char *)ids->task;
    st->peer_id = (char *)ids->peer;
    st->persistent_replica_count = 1;
    st->piece_length = PIECE_LEN;
    st->content_length = PIECE_LEN * PIECES;
    st->piece_count = PIECES;
    st->ttl = ttl;
}

static void finished_req(const struct pair_ids *ids,
                         Scheduler__V2__UploadPersistentCacheTaskFinishedRequest *fin) {
    scheduler__v2__upload_persistent_cache_task_finished_request__init(fin);
    fin->host_id = HOST_ID;
    fin->task_id = (char *)ids->task;
    fin->peer_id = (char *)ids->peer;
}

/* One Started + Finished pair for a fresh task and peer, blocking (the capture's). */
static int pair(struct dfc_rpc_client *c, unsigned client, unsigned long seq, unsigned run,
                struct dfc_error *err) {
    struct pair_ids ids;
    pair_ids(run, client, seq, &ids);
    Google__Protobuf__Duration ttl;
    Scheduler__V2__UploadPersistentCacheTaskStartedRequest st;
    started_req(&ids, &ttl, &st);
    ProtobufCMessage *resp = NULL;
    int rc = dfc_rpc_unary(c, &started_m, &st.base, CALL_MS, &resp, err);
    dfc_rpc_msg_free(resp);
    if (rc < 0) {
        return dfc_error_prefix(err, "UploadPersistentCacheTaskStarted");
    }
    Scheduler__V2__UploadPersistentCacheTaskFinishedRequest fin;
    finished_req(&ids, &fin);
    resp = NULL;
    rc = dfc_rpc_unary(c, &finished_m, &fin.base, CALL_MS, &resp, err);
    dfc_rpc_msg_free(resp);
    return rc < 0 ? dfc_error_prefix(err, "UploadPersistentCacheTaskFinished") : 0;
}

/* ---- load ----
 *
 * One thread drives every client's calls (dfc_rpc_async), as redis-benchmark drives its
 * connections from one event loop: the reference and the load then both pay for an efficient
 * client, and the load generator's own thread switches do not take the scheduler's cores
 * (64 blocking threads cost 130 us of CPU per pair on this VM, the scheduler about 300). */

struct client {
    struct dfc_rpc_client *c;
    unsigned id;
    unsigned long seq;
    bool finishing; /* Started answered; Finished in flight */
    double t0;      /* when the pair's Started went out */
};

struct load_state {
    struct dfc_rpc_async *q;
    unsigned run;
    double stop_at;
    double *lat; /* ms per pair */
    size_t n, cap;
    unsigned long errors;
    struct dfc_error first;
    unsigned in_flight;
};

static void load_error(struct load_state *ls, const struct dfc_error *err, const char *call) {
    if (ls->errors++ == 0) {
        ls->first = *err;
        dfc_error_prefix(&ls->first, "%s", call);
    }
}

/* Sends cl's next call: Finished after its Started, else a new pair's Started while time is
 * left. */
static void send_next(struct load_state *ls, struct client *cl) {
    struct pair_ids ids;
    pair_ids(ls->run, cl->id, cl->seq, &ids);
    struct dfc_error err = {0};
    int rc;
    if (cl->finishing) {
        Scheduler__V2__UploadPersistentCacheTaskFinishedRequest fin;
        finished_req(&ids, &fin);
        rc = dfc_rpc_async_unary(ls->q, cl->c, &finished_m, &fin.base, CALL_MS, cl, &err);
    } else {
        if (now_ms() >= ls->stop_at) {
            return;
        }
        Google__Protobuf__Duration ttl;
        Scheduler__V2__UploadPersistentCacheTaskStartedRequest st;
        started_req(&ids, &ttl, &st);
        cl->t0 = now_ms();
        rc = dfc_rpc_async_unary(ls->q, cl->c, &started_m, &st.base, CALL_MS, cl, &err);
    }
    if (rc < 0) {
        load_error(ls, &err, "starting a call");
        return; /* this client stops: a queue that cannot start a call will not recover */
    }
    ls->in_flight++;
}

/* A call of cl ended: record it and send what follows. */
static void on_done(struct load_state *ls, struct client *cl, struct dfc_rpc_async_done *d) {
    ls->in_flight--;
    dfc_rpc_msg_free(d->resp);
    if (d->code < 0) {
        load_error(ls, &d->err,
                   cl->finishing ? "UploadPersistentCacheTaskFinished"
                                 : "UploadPersistentCacheTaskStarted");
        cl->finishing = false; /* the pair is lost; the next one starts */
        cl->seq++;
    } else if (!cl->finishing) {
        cl->finishing = true;
    } else {
        cl->finishing = false;
        cl->seq++;
        if (ls->n == ls->cap) {
            size_t cap = ls->cap ? ls->cap * 2 : 4096;
            double *p = realloc(ls->lat, cap * sizeof(*p));
            if (p != NULL) {
                ls->lat = p;
                ls->cap = cap;
            }
        }
        if (ls->n < ls->cap) { /* else the latency is not kept, and the client goes on */
            ls->lat[ls->n++] = now_ms() - cl->t0;
        }
    }
    send_next(ls, cl);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int load(const char *addr, double seconds, unsigned clients) {
    struct dfc_error err = {0};
    struct load_state ls = {.run = (unsigned)getpid() ^ (unsigned)time(NULL)};
    struct client *cl = calloc(clients, sizeof(*cl));
    int rc = 1;
    if (cl == NULL) {
        fprintf(stderr, "bench: out of memory\n");
        return 1;
    }
    /* One channel per client, as that many dfdaemons would have. */
    for (unsigned i = 0; i < clients; i++) {
        cl[i].id = i;
        if (dfc_rpc_client_new(addr, client_opts, &cl[i].c, &err) < 0) {
            fprintf(stderr, "bench: %s\n", dfc_error_msg(&err));
            goto out;
        }
    }
    if (announce(cl[0].c, &err) < 0 || dfc_rpc_async_new(&ls.q, &err) < 0) {
        fprintf(stderr, "bench: %s\n", dfc_error_msg(&err));
        goto out;
    }
    double t0 = now_ms();
    ls.stop_at = t0 + seconds * 1e3;
    for (unsigned i = 0; i < clients; i++) {
        send_next(&ls, &cl[i]);
    }
    struct dfc_rpc_async_done done;
    while (ls.in_flight > 0 && dfc_rpc_async_next(ls.q, -1, &done) == 1) {
        on_done(&ls, done.tag, &done);
    }
    double took = (now_ms() - t0) / 1e3;
    size_t total = ls.n;
    qsort(ls.lat, total, sizeof(*ls.lat), cmp_double);
    double p50 = total ? ls.lat[total / 2] : 0, p99 = total ? ls.lat[total * 99 / 100] : 0;
    double max = total ? ls.lat[total - 1] : 0;
    printf("pairs=%zu seconds=%.2f pairs_per_s=%.1f p50_ms=%.3f p99_ms=%.3f max_ms=%.3f "
           "errors=%lu\n",
           total, took, (double)total / took, p50, p99, max, ls.errors);
    if (ls.errors != 0) {
        fprintf(stderr, "bench: first error: %s\n", dfc_error_msg(&ls.first));
    }
    rc = ls.errors == 0 && total > 0 ? 0 : 1;
out:
    dfc_rpc_async_free(ls.q);
    for (unsigned i = 0; i < clients; i++) {
        dfc_rpc_client_free(cl[i].c);
    }
    free(ls.lat);
    free(cl);
    return rc;
}

/* ---- capture ---- */

static int hexval(char ch) {
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* Decodes one MONITOR line ("<time> [<db> <client>] "ARG" "ARG" ...", arguments quoted as
 * sdscatrepr does) into out as NUL-separated arguments; returns the byte count, -1 when the
 * line is not a command. */
static long decode_monitor(const char *line, char *out, size_t cap) {
    const char *p = strstr(line, "] \"");
    if (p == NULL || (p - line >= 4 && memcmp(p - 4, " lua", 4) == 0)) {
        return -1; /* not a command, or one a script ran (part of its EVALSHA's cost) */
    }
    p += 2;
    size_t n = 0;
    while (*p == '"') {
        p++;
        while (*p != '\0' && *p != '"' && n + 2 < cap) {
            char ch = *p++;
            if (ch == '\\' && *p != '\0') {
                char e = *p++;
                switch (e) {
                case 'n':
                    ch = '\n';
                    break;
                case 'r':
                    ch = '\r';
                    break;
                case 't':
                    ch = '\t';
                    break;
                case 'a':
                    ch = '\a';
                    break;
                case 'b':
                    ch = '\b';
                    break;
                case 'x':
                    if (hexval(p[0]) >= 0 && hexval(p[1]) >= 0) {
                        ch = (char)(hexval(p[0]) * 16 + hexval(p[1]));
                        p += 2;
                    }
                    break;
                default:
                    ch = e;
                    break;
                }
            }
            if (ch == '\0') {
                ch = '\x01'; /* argv cannot carry a NUL */
            }
            out[n++] = ch;
        }
        if (*p != '"') {
            return -1;
        }
        p++;
        out[n++] = '\0';
        if (*p == ' ') {
            p++;
        }
    }
    return (long)n;
}

static int capture(const char *addr, int redis_port, const char *dir) {
    struct dfc_error err = {0};
    struct dfc_rpc_client *c = NULL;
    unsigned run = (unsigned)getpid() ^ (unsigned)time(NULL) ^ 0x5a5a5a5au;
    if (dfc_rpc_client_new(addr, client_opts, &c, &err) < 0 || announce(c, &err) < 0 ||
        pair(c, 0, 0, run, &err) < 0) {
        fprintf(stderr, "bench: warm-up: %s\n", dfc_error_msg(&err));
        dfc_rpc_client_free(c);
        return 1;
    }
    /* A pair's work does not end with Finished's reply: the replica check it queues runs
     * after it. Let the warm-up's finish before recording, and record the captured pair's. */
    usleep(1000000);
    struct timeval tv = {.tv_sec = 5};
    redisContext *m = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
    redisReply *rep = m && !m->err ? redisCommand(m, "MONITOR") : NULL;
    if (rep == NULL || rep->type != REDIS_REPLY_STATUS) {
        fprintf(stderr, "bench: MONITOR on 127.0.0.1:%d failed\n", redis_port);
        return 1;
    }
    freeReplyObject(rep);
    int rc = pair(c, 0, 1, run, &err);
    dfc_rpc_client_free(c);
    if (rc < 0) {
        fprintf(stderr, "bench: captured pair: %s\n", dfc_error_msg(&err));
        return 1;
    }
    usleep(1000000);
    struct timeval quiet = {.tv_sec = 0, .tv_usec = 300000};
    redisSetTimeout(m, quiet);
    int n = 0, in_scripts = 0;
    static char buf[1 << 20];
    char names_path[4200];
    snprintf(names_path, sizeof(names_path), "%s/lua-names", dir);
    FILE *lua_names = fopen(names_path, "w");
    if (lua_names == NULL) {
        perror(names_path);
        return 1;
    }
    while (redisGetReply(m, (void **)&rep) == REDIS_OK) {
        const char *in_lua = rep->type == REDIS_REPLY_STATUS ? strstr(rep->str, " lua] \"") : NULL;
        if (in_lua != NULL) {
            const char *name = in_lua + strlen(" lua] \"");
            fprintf(lua_names, "%.*s\n", (int)strcspn(name, "\""), name);
            in_scripts++;
        }
        long len =
            rep->type == REDIS_REPLY_STATUS ? decode_monitor(rep->str, buf, sizeof(buf)) : -1;
        freeReplyObject(rep);
        if (len <= 0 || strcasecmp(buf, "PING") == 0) {
            continue; /* no pair sends PING: the /readyz check thread does, every second */
        }
        char path[4200];
        snprintf(path, sizeof(path), "%s/cmd-%03d.args", dir, n);
        FILE *f = fopen(path, "wb");
        if (f == NULL || fwrite(buf, 1, (size_t)len, f) != (size_t)len || fclose(f) != 0) {
            perror(path);
            return 1;
        }
        n++;
    }
    redisFree(m);
    fclose(lua_names);
    printf("%d %d\n", n, in_scripts);
    return n > 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    struct dfc_error err = {0};
    if (dfc_rpc_client_resolve(methods, DFC_RPC_N(methods), &err) < 0) {
        fprintf(stderr, "bench: %s\n", dfc_error_msg(&err));
        return 1;
    }
    if (argc == 2 && strcmp(argv[1], "free-port") == 0) {
        int port = free_port();
        if (port < 0) {
            return 1;
        }
        printf("%d\n", port);
        return 0;
    }
    if ((argc == 5 || argc == 6) &&
        (strcmp(argv[1], "load") == 0 || strcmp(argv[1], "capture") == 0)) {
        if (argc == 6) {
            tls_from(argv[5]);
        }
        argc = 5;
    }
    if (argc == 5 && strcmp(argv[1], "load") == 0) {
        double seconds = strtod(argv[3], NULL);
        long clients = strtol(argv[4], NULL, 10);
        if (seconds <= 0 || clients < 1 || clients > MAX_CLIENT) {
            fprintf(stderr, "bench: SECONDS > 0, CLIENTS 1..%d\n", MAX_CLIENT);
            return 2;
        }
        return load(argv[2], seconds, (unsigned)clients);
    }
    if (argc == 5 && strcmp(argv[1], "capture") == 0) {
        long port = strtol(argv[3], NULL, 10);
        if (port < 1 || port > 65535) {
            fprintf(stderr, "bench: REDIS_PORT 1..65535\n");
            return 2;
        }
        return capture(argv[2], (int)port, argv[4]);
    }
    fprintf(stderr,
            "usage: %s free-port | load ADDR SECONDS CLIENTS [TLS_DIR] | capture ADDR "
            "REDIS_PORT DIR [TLS_DIR]\n",
            argv[0]);
    return 2;
}
