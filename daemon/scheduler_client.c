/*
 * scheduler_client.c - dfdaemon's scheduler.v2 calls (see scheduler_client.h).
 *
 * DESIGN
 * - One dfc_rpc_client per configured address, made in dfd_sched_new() (gRPC channels connect
 *   lazily, so an absent scheduler does not fail start-up; its calls fail UNAVAILABLE fast,
 *   since calls are not queued for a channel that is not ready).
 * - The ring. Upstream keys a consistent-hash ring (the Rust `hashring` crate) by the first 5
 *   characters of the task id. Every scheduler shares one Redis, so any of them can answer for
 *   any task and an exact match of upstream's hash is not needed; what matters is that a task
 *   keeps going to the same scheduler while the set of addresses stays the same, and that
 *   adding or removing one address moves only its share of the tasks. Here each address owns
 *   RING_VNODES points, point i of address A at hash("A#i"), where hash is 64-bit FNV-1a
 *   followed by the splitmix64 finaliser (FNV alone spreads short, similar keys poorly). A key
 *   (the first 5 characters of the task id) goes to the first point at or after its hash,
 *   wrapping; the fail-over order is the sequence of distinct addresses met walking on from
 *   there, so every address comes once.
 * - Fail-over: a task call that fails with a code that maps to UNAVAILABLE moves to the next
 *   address; any other error (NOT_FOUND, ALREADY_EXISTS, INVALID_ARGUMENT, DEADLINE_EXCEEDED)
 *   is the scheduler's answer and is returned. Host calls go to every address.
 * - Addresses are resolved to IPs (getaddrinfo: numeric IPs, or names from /etc/hosts or
 *   DNS) only for dfd_sched_is_scheduler_ip(): at start, and again when a caller's IP is not
 *   among them, at most once per RERESOLVE_MS, so a scheduler named by a headless Service
 *   (whose pods change IPs) keeps being recognised. A name that does not resolve is logged
 *   and matches nothing until it does. The channels resolve on their own.
 */
#include "scheduler_client.h"

#include <netinet/in.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dfc/addr.h"
#include "dfc/clock.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"
#include "dfc/integrity.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "google/protobuf/empty.pb-c.h"
#include "storage/task.h"

#define REQUEST_TIMEOUT_MS      10000
#define SCHED_RECONNECT_WAIT_MS 500 /* one fresh connection attempt on a failed channel */
#define RING_VNODES             160
#define RING_KEY_LEN            5
#define RERESOLVE_MS            10000 /* a miss re-resolves the addresses at most this often */

struct sched_addr {
    char *addr; /* as configured: "host:port" */
    struct dfc_rpc_client *client;
    char (*ips)[INET6_ADDRSTRLEN]; /* under ips_mu: what addr's host resolved to last */
    size_t n_ips;
};

struct ring_point {
    uint64_t hash;
    unsigned addr; /* index into addrs */
};

struct dfd_sched {
    char *host_id;
    struct dfd_sched_methods m;
    struct sched_addr *addrs;
    size_t n_addrs;
    struct ring_point *ring; /* sorted by hash */
    size_t n_ring;
    pthread_mutex_t ips_mu;     /* guards every addrs[i].ips/n_ips and resolved_ms */
    pthread_mutex_t resolve_mu; /* one re-resolve at a time, without holding ips_mu */
    int64_t resolved_ms;        /* CLOCK_MONOTONIC of the last resolve */
    int64_t reresolve_ms;       /* RERESOLVE_MS; tests shorten it */
    atomic_bool unregistered;   /* an import was kept without a peer since the last take */
};

/* ---- the ring ---- */

static uint64_t ring_hash(const char *s, size_t len) {
    uint64_t h = 14695981039346656037ULL; /* FNV-1a 64 */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    h ^= h >> 30; /* splitmix64's finaliser */
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

static int point_cmp(const void *a, const void *b) {
    const struct ring_point *x = a, *y = b;
    if (x->hash != y->hash) {
        return x->hash < y->hash ? -1 : 1;
    }
    return x->addr < y->addr ? -1 : (x->addr > y->addr); /* a tie is broken the same way always */
}

static int ring_build(struct dfd_sched *s, struct dfc_error *err) {
    s->ring = calloc(s->n_addrs * RING_VNODES, sizeof(*s->ring));
    if (s->ring == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t a = 0; a < s->n_addrs; a++) {
        for (unsigned i = 0; i < RING_VNODES; i++) {
            char key[300];
            int n = snprintf(key, sizeof(key), "%s#%u", s->addrs[a].addr, i);
            size_t len = n < 0 ? 0 : ((size_t)n >= sizeof(key) ? sizeof(key) - 1 : (size_t)n);
            s->ring[s->n_ring++] =
                (struct ring_point){.hash = ring_hash(key, len), .addr = (unsigned)a};
        }
    }
    qsort(s->ring, s->n_ring, sizeof(*s->ring), point_cmp);
    return 0;
}

/* The attempt-th address on the ring for task_id, NULL past the last. */
static struct sched_addr *pick_addr(struct dfd_sched *s, const char *task_id, unsigned attempt) {
    if (attempt >= s->n_addrs) {
        return NULL;
    }
    size_t klen = strnlen(task_id, RING_KEY_LEN);
    uint64_t h = ring_hash(task_id, klen);
    size_t lo = 0, hi = s->n_ring; /* first point with hash >= h */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ring[mid].hash < h) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    /* Walk on from there; the attempt-th distinct address met is the answer. At most
     * n_addrs distinct addresses exist, so a bounded walk over the whole ring finds it. */
    unsigned seen_n = 0;
    unsigned seen[64];
    bool *seen_big = NULL;
    if (s->n_addrs > 64) {
        seen_big = calloc(s->n_addrs, sizeof(*seen_big));
        if (seen_big == NULL) {
            return NULL;
        }
    }
    struct sched_addr *found = NULL;
    for (size_t k = 0; k < s->n_ring && found == NULL; k++) {
        unsigned a = s->ring[(lo + k) % s->n_ring].addr;
        bool dup = false;
        if (seen_big != NULL) {
            dup = seen_big[a];
            seen_big[a] = true;
        } else {
            for (unsigned j = 0; j < seen_n && !dup; j++) {
                dup = seen[j] == a;
            }
            if (!dup) {
                seen[seen_n] = a;
            }
        }
        if (dup) {
            continue;
        }
        if (seen_n++ == attempt) {
            found = &s->addrs[a];
        }
    }
    free(seen_big);
    return found;
}

struct dfc_rpc_client *dfd_sched_pick(struct dfd_sched *s, const char *task_id, unsigned attempt,
                                      const char **ret_addr) {
    struct sched_addr *a = pick_addr(s, task_id, attempt);
    if (a == NULL) {
        return NULL;
    }
    if (ret_addr != NULL) {
        *ret_addr = a->addr;
    }
    return a->client;
}

/* ---- set-up ---- */

static int resolve_methods(struct dfd_sched_methods *m, struct dfc_error *err) {
    const struct dfc_rpc_client_row rows[] = {
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnounceHost", &m->announce_host),
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "DeleteHost", &m->delete_host),
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "AnnouncePersistentCachePeer",
                              &m->announce_peer),
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "DeletePersistentCachePeer",
                              &m->delete_peer),
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskStarted",
                              &m->upload_started),
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskFinished",
                              &m->upload_finished),
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "UploadPersistentCacheTaskFailed",
                              &m->upload_failed),
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "StatPersistentCacheTask", &m->stat_task),
        DFC_RPC_CLIENT_METHOD(scheduler__v2__scheduler, "StatPersistentCachePeer", &m->stat_peer),
        DFC_RPC_CLIENT_METHOD(dfc__scheduler__v1__persistent_cache_integrity,
                              "RecordPersistentCacheTaskDigests", &m->record_digests),
        DFC_RPC_CLIENT_METHOD(dfc__scheduler__v1__persistent_cache_integrity,
                              "GetPersistentCacheTaskDigests", &m->get_digests),
    };
    return dfc_rpc_client_resolve(rows, DFC_RPC_N(rows), err);
}

/* The IPs addr's host resolves to now, into *ret (n into *ret_n); false (nothing) when it
 * does not resolve. */
static bool resolve_ips(const char *addr, char (**ret)[INET6_ADDRSTRLEN], size_t *ret_n) {
    struct dfc_hostport hp; /* checked by the config's validator (dfc_config_check_hostports) */
    if (dfc_addr_parse(addr, &hp) < 0) {
        return false;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int r = getaddrinfo(hp.host, NULL, &hints, &res);
    if (r != 0) {
        DFC_LOG(DFC_LOG_WARN, "scheduler.resolve_failed",
                "addr=%s error=\"%s\": its calls to this dfdaemon are not recognised, ignoring",
                addr, gai_strerror(r));
        return false;
    }
    size_t n = 0;
    for (struct addrinfo *p = res; p != NULL; p = p->ai_next) {
        n++;
    }
    char(*ips)[INET6_ADDRSTRLEN] = calloc(n + 1, sizeof(*ips));
    size_t k = 0;
    for (struct addrinfo *p = res; ips != NULL && p != NULL; p = p->ai_next) {
        if (dfc_addr_ip(p->ai_addr, ips[k], INET6_ADDRSTRLEN) == 0) {
            k++;
        }
    }
    freeaddrinfo(res);
    *ret = ips;
    *ret_n = ips != NULL ? k : 0;
    return ips != NULL;
}

/* Resolves every address again (no lock held across getaddrinfo) and swaps the results in;
 * an address that fails to resolve keeps what it had. */
static void resolve_all(struct dfd_sched *s) {
    for (size_t i = 0; i < s->n_addrs; i++) {
        char(*ips)[INET6_ADDRSTRLEN] = NULL;
        size_t n = 0;
        if (!resolve_ips(s->addrs[i].addr, &ips, &n)) {
            continue;
        }
        pthread_mutex_lock(&s->ips_mu);
        char(*old)[INET6_ADDRSTRLEN] = s->addrs[i].ips;
        s->addrs[i].ips = ips;
        s->addrs[i].n_ips = n;
        pthread_mutex_unlock(&s->ips_mu);
        free(old);
    }
    pthread_mutex_lock(&s->ips_mu);
    s->resolved_ms = dfc_mono_ms();
    pthread_mutex_unlock(&s->ips_mu);
}

int dfd_sched_new(const struct dfd_config *cfg, const char *host_id, struct dfd_sched **ret,
                  struct dfc_error *err) {
    if (cfg->scheduler_addrs.n == 0) {
        return dfc_error_set(err, -EINVAL, "scheduler.addrs: must not be empty");
    }
    struct dfd_sched *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r;
    pthread_mutex_init(&s->ips_mu, NULL);
    pthread_mutex_init(&s->resolve_mu, NULL);
    s->reresolve_ms = RERESOLVE_MS;
    if ((s->host_id = strdup(host_id)) == NULL ||
        (s->addrs = calloc(cfg->scheduler_addrs.n, sizeof(*s->addrs))) == NULL) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    if ((r = resolve_methods(&s->m, err)) < 0) {
        goto fail;
    }
    for (size_t i = 0; i < cfg->scheduler_addrs.n; i++) {
        const char *addr = cfg->scheduler_addrs.items[i];
        bool dup = false;
        for (size_t j = 0; j < s->n_addrs && !dup; j++) {
            dup = strcmp(s->addrs[j].addr, addr) == 0;
        }
        if (dup) {
            continue; /* one address listed twice is one scheduler */
        }
        struct sched_addr *a = &s->addrs[s->n_addrs];
        if ((a->addr = strdup(addr)) == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
            goto fail;
        }
        s->n_addrs++;
        /* Calls fail fast (UNAVAILABLE) while the channel cannot connect, instead of waiting
         * for it: that is what moves a task call on to the next scheduler. A call on a
         * failed channel first tries one fresh connection (SCHED_RECONNECT_WAIT_MS), so a
         * restarted scheduler is used by the next call, not after gRPC's back-off. */
        struct dfc_rpc_client_opts opts = {.wait_for_ready = false,
                                           .reconnect_wait_ms = SCHED_RECONNECT_WAIT_MS,
                                           .tls = cfg->tls,
                                           .tls_files = dfd_tls_scheduler(cfg)};
        if ((r = dfc_rpc_client_new(addr, &opts, &a->client, err)) < 0) {
            dfc_error_prefix(err, "scheduler %s", addr);
            goto fail;
        }
    }
    resolve_all(s);
    if ((r = ring_build(s, err)) < 0) {
        goto fail;
    }
    *ret = s;
    return 0;
fail:
    dfd_sched_free(s);
    return r;
}

void dfd_sched_free(struct dfd_sched *s) {
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; s->addrs != NULL && i < s->n_addrs; i++) {
        dfc_rpc_client_free(s->addrs[i].client);
        free(s->addrs[i].addr);
        free(s->addrs[i].ips);
    }
    pthread_mutex_destroy(&s->ips_mu);
    pthread_mutex_destroy(&s->resolve_mu);
    free(s->addrs);
    free(s->ring);
    free(s->host_id);
    free(s);
}

const struct dfd_sched_methods *dfd_sched_methods(const struct dfd_sched *s) {
    return &s->m;
}

const char *dfd_sched_host_id(const struct dfd_sched *s) {
    return s->host_id;
}

void dfd_sched_note_unregistered(struct dfd_sched *s) {
    atomic_store(&s->unregistered, true);
}

bool dfd_sched_take_unregistered(struct dfd_sched *s) {
    return atomic_exchange(&s->unregistered, false);
}

void dfd_sched_set_reresolve_ms(struct dfd_sched *s, int64_t ms) {
    s->reresolve_ms = ms;
}

static bool ip_known(struct dfd_sched *s, const char *ip, int64_t *ret_resolved_ms) {
    bool hit = false;
    pthread_mutex_lock(&s->ips_mu);
    for (size_t i = 0; i < s->n_addrs && !hit; i++) {
        for (size_t j = 0; j < s->addrs[i].n_ips && !hit; j++) {
            hit = strcmp(s->addrs[i].ips[j], ip) == 0;
        }
    }
    *ret_resolved_ms = s->resolved_ms;
    pthread_mutex_unlock(&s->ips_mu);
    return hit;
}

bool dfd_sched_is_scheduler_ip(struct dfd_sched *s, const char *ip) {
    int64_t at;
    if (ip_known(s, ip, &at)) {
        return true;
    }
    if (dfc_mono_ms() - at < s->reresolve_ms) {
        return false;
    }
    /* One caller re-resolves; the others wait for it and look again. */
    pthread_mutex_lock(&s->resolve_mu);
    if (ip_known(s, ip, &at)) {
        pthread_mutex_unlock(&s->resolve_mu);
        return true;
    }
    if (dfc_mono_ms() - at >= s->reresolve_ms) {
        resolve_all(s);
    }
    pthread_mutex_unlock(&s->resolve_mu);
    return ip_known(s, ip, &at);
}

/* ---- calls ---- */

bool dfd_sched_unreachable(int err, bool *ret_maybe_arrived) {
    int code = err < 0 ? dfc_error_to_grpc(err) : DFC_GRPC_OK;
    bool late = code == DFC_GRPC_DEADLINE_EXCEEDED;
    if (ret_maybe_arrived != NULL) {
        *ret_maybe_arrived = late;
    }
    return late || code == DFC_GRPC_UNAVAILABLE;
}

/* A call that never reached the scheduler: the next one on the ring may take it. */
static bool is_unavailable(int r) {
    bool maybe_arrived;
    return dfd_sched_unreachable(r, &maybe_arrived) && !maybe_arrived;
}

static int call_one(struct sched_addr *a, const struct dfc_rpc_client_method *m, const char *what,
                    const ProtobufCMessage *req, ProtobufCMessage **ret, struct dfc_error *err) {
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary(a->client, m, req, REQUEST_TIMEOUT_MS, &resp, err);
    if (r < 0) {
        return dfc_error_prefix(err, "scheduler %s %s", a->addr, what);
    }
    if (ret != NULL) {
        *ret = resp;
    } else {
        dfc_rpc_msg_free(resp);
    }
    return 0;
}

/* A task call: the ring's choice for task_id, then the next ones while UNAVAILABLE. */
static int task_call(struct dfd_sched *s, const char *task_id,
                     const struct dfc_rpc_client_method *m, const char *what,
                     const ProtobufCMessage *req, ProtobufCMessage **ret, struct dfc_error *err) {
    int r = dfc_error_set(err, -ECONNREFUSED, "no scheduler");
    for (unsigned attempt = 0;; attempt++) {
        struct sched_addr *a = pick_addr(s, task_id, attempt);
        if (a == NULL) {
            return r;
        }
        r = call_one(a, m, what, req, ret, err);
        if (r == 0 || !is_unavailable(r)) {
            return r;
        }
        DFC_LOG(DFC_LOG_DEBUG, "scheduler.failover", "task_id=%s method=%s error=\"%s\"", task_id,
                what, dfc_error_msg(err));
    }
}

int dfd_sched_announce_host(struct dfd_sched *s, const Common__V2__Host *host, int64_t interval_ns,
                            struct dfc_error *err) {
    Scheduler__V2__AnnounceHostRequest req = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    Google__Protobuf__Duration interval = GOOGLE__PROTOBUF__DURATION__INIT;
    dfc_pb_duration_from_ns(interval_ns, &interval);
    req.host = (Common__V2__Host *)host;
    req.interval = &interval;
    int r = 0;
    bool any = false;
    for (size_t i = 0; i < s->n_addrs; i++) {
        struct dfc_error e;
        int lr = call_one(&s->addrs[i], &s->m.announce_host, "AnnounceHost", &req.base, NULL, &e);
        if (lr == 0) {
            any = true;
        } else {
            r = lr;
            *err = e;
        }
    }
    return any ? 0 : r;
}

void dfd_sched_delete_host(struct dfd_sched *s) {
    Scheduler__V2__DeleteHostRequest req = SCHEDULER__V2__DELETE_HOST_REQUEST__INIT;
    req.host_id = s->host_id;
    for (size_t i = 0; i < s->n_addrs; i++) {
        struct dfc_error e;
        if (call_one(&s->addrs[i], &s->m.delete_host, "DeleteHost", &req.base, NULL, &e) < 0) {
            DFC_LOG(DFC_LOG_WARN, "scheduler.delete_host_failed",
                    "host_id=%s error=\"%s\", ignoring", s->host_id, dfc_error_msg(&e));
        }
    }
}

int dfd_sched_upload_started(struct dfd_sched *s, const struct dfd_task_meta *t,
                             const char *peer_id, struct dfc_error *err) {
    Scheduler__V2__UploadPersistentCacheTaskStartedRequest req =
        SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_STARTED_REQUEST__INIT;
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    req.host_id = s->host_id;
    req.task_id = (char *)t->id;
    req.peer_id = (char *)peer_id;
    req.persistent_replica_count = t->replica_count;
    if (t->tag != NULL) {
        req.opt_tag_case = SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_STARTED_REQUEST__OPT_TAG_TAG;
        req.tag = t->tag;
    }
    if (t->application != NULL) {
        req.opt_application_case =
            SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_STARTED_REQUEST__OPT_APPLICATION_APPLICATION;
        req.application = t->application;
    }
    req.piece_length = t->piece_length;
    req.content_length = t->content_length;
    req.piece_count = t->piece_count;
    dfc_pb_duration_from_ns(t->ttl_ns, &ttl);
    req.ttl = &ttl;
    return task_call(s, t->id, &s->m.upload_started, "UploadPersistentCacheTaskStarted", &req.base,
                     NULL, err);
}

int dfd_sched_upload_finished(struct dfd_sched *s, const char *task_id, const char *peer_id,
                              Common__V2__PersistentCacheTask **ret, struct dfc_error *err) {
    Scheduler__V2__UploadPersistentCacheTaskFinishedRequest req =
        SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_FINISHED_REQUEST__INIT;
    req.host_id = s->host_id;
    req.task_id = (char *)task_id;
    req.peer_id = (char *)peer_id;
    ProtobufCMessage *resp = NULL;
    int r = task_call(s, task_id, &s->m.upload_finished, "UploadPersistentCacheTaskFinished",
                      &req.base, &resp, err);
    if (r == 0 && ret != NULL) {
        *ret = (Common__V2__PersistentCacheTask *)resp;
    } else {
        dfc_rpc_msg_free(resp);
    }
    return r;
}

void dfd_sched_upload_failed(struct dfd_sched *s, const char *task_id, const char *peer_id,
                             const char *description) {
    Scheduler__V2__UploadPersistentCacheTaskFailedRequest req =
        SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_FAILED_REQUEST__INIT;
    req.host_id = s->host_id;
    req.task_id = (char *)task_id;
    req.peer_id = (char *)peer_id;
    if (description != NULL && description[0] != '\0') {
        req.opt_description_case =
            SCHEDULER__V2__UPLOAD_PERSISTENT_CACHE_TASK_FAILED_REQUEST__OPT_DESCRIPTION_DESCRIPTION;
        req.description = (char *)description;
    }
    struct dfc_error e;
    if (task_call(s, task_id, &s->m.upload_failed, "UploadPersistentCacheTaskFailed", &req.base,
                  NULL, &e) < 0) {
        DFC_LOG(DFC_LOG_WARN, "scheduler.upload_failed_failed",
                "task_id=%s peer_id=%s error=\"%s\", ignoring", task_id, peer_id,
                dfc_error_msg(&e));
    }
}

bool dfd_sched_same_geometry(const Common__V2__PersistentCacheTask *st,
                             const struct dfd_task_meta *t) {
    return st->content_length == t->content_length && st->piece_length == t->piece_length &&
           st->piece_count == t->piece_count;
}

int dfd_sched_stat_task(struct dfd_sched *s, const char *task_id,
                        Common__V2__PersistentCacheTask **ret, struct dfc_error *err) {
    Scheduler__V2__StatPersistentCacheTaskRequest req =
        SCHEDULER__V2__STAT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    req.host_id = s->host_id;
    req.task_id = (char *)task_id;
    ProtobufCMessage *resp = NULL;
    int r =
        task_call(s, task_id, &s->m.stat_task, "StatPersistentCacheTask", &req.base, &resp, err);
    if (r == 0 && ret != NULL) {
        *ret = (Common__V2__PersistentCacheTask *)resp;
    } else {
        dfc_rpc_msg_free(resp);
    }
    return r;
}

int dfd_sched_stat_peer(struct dfd_sched *s, const char *task_id, const char *peer_id,
                        Common__V2__PersistentCachePeer **ret, struct dfc_error *err) {
    Scheduler__V2__StatPersistentCachePeerRequest req =
        SCHEDULER__V2__STAT_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    req.host_id = s->host_id;
    req.task_id = (char *)task_id;
    req.peer_id = (char *)peer_id;
    ProtobufCMessage *resp = NULL;
    int r =
        task_call(s, task_id, &s->m.stat_peer, "StatPersistentCachePeer", &req.base, &resp, err);
    if (r == 0 && ret != NULL) {
        *ret = (Common__V2__PersistentCachePeer *)resp;
    } else {
        dfc_rpc_msg_free(resp);
    }
    return r;
}

void dfd_sched_delete_peer(struct dfd_sched *s, const char *task_id, const char *peer_id) {
    Scheduler__V2__DeletePersistentCachePeerRequest req =
        SCHEDULER__V2__DELETE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    req.host_id = s->host_id;
    req.task_id = (char *)task_id;
    req.peer_id = (char *)peer_id;
    struct dfc_error e;
    int r =
        task_call(s, task_id, &s->m.delete_peer, "DeletePersistentCachePeer", &req.base, NULL, &e);
    if (r < 0) {
        /* NOT_FOUND: already gone (a DeleteHost at the last clean stop removed this host's
         * peers, or the scheduler deleted the task), which is what was wanted. */
        DFC_LOG(dfc_error_to_grpc(r) == DFC_GRPC_NOT_FOUND ? DFC_LOG_DEBUG : DFC_LOG_WARN,
                "scheduler.delete_peer_failed", "task_id=%s peer_id=%s error=\"%s\", ignoring",
                task_id, peer_id, dfc_error_msg(&e));
    }
}

int dfd_sched_announce_peer_open(struct dfd_sched *s, const char *task_id, int64_t timeout_ms,
                                 struct dfc_rpc_stream **ret, struct dfc_error *err) {
    int r = dfc_error_set(err, -ECONNREFUSED, "no scheduler");
    for (unsigned attempt = 0;; attempt++) {
        const char *addr = NULL;
        struct dfc_rpc_client *c = dfd_sched_pick(s, task_id, attempt, &addr);
        if (c == NULL) {
            return r;
        }
        /* Opening starts the call without waiting for the server: a scheduler that is away
         * shows here only when the channel refuses the call at once; otherwise its
         * UNAVAILABLE comes from the first send or receive. */
        r = dfc_rpc_stream_open(c, &s->m.announce_peer, timeout_ms, ret, err);
        if (r == 0) {
            return 0;
        }
        dfc_error_prefix(err, "scheduler %s AnnouncePersistentCachePeer", addr);
        if (!is_unavailable(r)) {
            return r;
        }
    }
}

/* ---- AnnouncePersistentCachePeer messages ---- */

static int peer_send(struct dfd_sched *s, struct dfc_rpc_stream *st,
                     Scheduler__V2__AnnouncePersistentCachePeerRequest *m, const char *task_id,
                     const char *peer_id, struct dfc_error *err) {
    m->host_id = s->host_id;
    m->task_id = (char *)task_id;
    m->peer_id = (char *)peer_id;
    int r = dfc_rpc_stream_send(st, &m->base, err);
    return r < 0 ? dfc_error_prefix(err, "scheduler AnnouncePersistentCachePeer") : 0;
}

#define REQ(name) SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_##name

int dfd_sched_peer_register(struct dfd_sched *s, struct dfc_rpc_stream *st,
                            const struct dfd_sched_register *g, struct dfc_error *err) {
    Scheduler__V2__AnnouncePersistentCachePeerRequest m =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__RegisterPersistentCachePeerRequest reg =
        SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    reg.persistent = g->persistent;
    if (g->tag != NULL) {
        reg.opt_tag_case = SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__OPT_TAG_TAG;
        reg.tag = (char *)g->tag;
    }
    if (g->application != NULL) {
        reg.opt_application_case =
            SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__OPT_APPLICATION_APPLICATION;
        reg.application = (char *)g->application;
    }
    reg.piece_length = g->piece_length;
    reg.opt_concurrent_piece_count_case =
        SCHEDULER__V2__REGISTER_PERSISTENT_CACHE_PEER_REQUEST__OPT_CONCURRENT_PIECE_COUNT_CONCURRENT_PIECE_COUNT;
    reg.concurrent_piece_count = g->concurrent_piece_count;
    reg.piece_count = g->piece_count;
    m.request_case = REQ(REGISTER_PERSISTENT_CACHE_PEER_REQUEST);
    m.register_persistent_cache_peer_request = &reg;
    return peer_send(s, st, &m, g->task_id, g->peer_id, err);
}

int dfd_sched_peer_event(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                         const char *peer_id, enum dfd_sched_peer_event ev, const char *description,
                         struct dfc_error *err) {
    Scheduler__V2__AnnouncePersistentCachePeerRequest m =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__DownloadPersistentCachePeerStartedRequest started =
        SCHEDULER__V2__DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST__INIT;
    Scheduler__V2__DownloadPersistentCachePeerFinishedRequest finished =
        SCHEDULER__V2__DOWNLOAD_PERSISTENT_CACHE_PEER_FINISHED_REQUEST__INIT;
    Scheduler__V2__DownloadPersistentCachePeerFailedRequest failed =
        SCHEDULER__V2__DOWNLOAD_PERSISTENT_CACHE_PEER_FAILED_REQUEST__INIT;
    switch (ev) {
    case DFD_SCHED_PEER_STARTED:
        m.request_case = REQ(DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST);
        m.download_persistent_cache_peer_started_request = &started;
        break;
    case DFD_SCHED_PEER_FINISHED:
        m.request_case = REQ(DOWNLOAD_PERSISTENT_CACHE_PEER_FINISHED_REQUEST);
        m.download_persistent_cache_peer_finished_request = &finished;
        break;
    case DFD_SCHED_PEER_FAILED:
        m.request_case = REQ(DOWNLOAD_PERSISTENT_CACHE_PEER_FAILED_REQUEST);
        if (description != NULL) {
            failed.opt_description_case =
                SCHEDULER__V2__DOWNLOAD_PERSISTENT_CACHE_PEER_FAILED_REQUEST__OPT_DESCRIPTION_DESCRIPTION;
            failed.description = (char *)description;
        }
        m.download_persistent_cache_peer_failed_request = &failed;
        break;
    }
    return peer_send(s, st, &m, task_id, peer_id, err);
}

int dfd_sched_peer_reschedule(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                              const char *peer_id, Common__V2__PersistentCachePeer *const *parents,
                              size_t n, const char *description, struct dfc_error *err) {
    Scheduler__V2__AnnouncePersistentCachePeerRequest m =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__ReschedulePersistentCachePeerRequest rs =
        SCHEDULER__V2__RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    rs.candidate_parents = (Common__V2__PersistentCachePeer **)parents;
    rs.n_candidate_parents = n;
    if (description != NULL) {
        rs.opt_description_case =
            SCHEDULER__V2__RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST__OPT_DESCRIPTION_DESCRIPTION;
        rs.description = (char *)description;
    }
    m.request_case = REQ(RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST);
    m.reschedule_persistent_cache_peer_request = &rs;
    return peer_send(s, st, &m, task_id, peer_id, err);
}

int dfd_sched_peer_piece_finished(struct dfd_sched *s, struct dfc_rpc_stream *st,
                                  const char *task_id, const char *peer_id,
                                  const Common__V2__Piece *piece, struct dfc_error *err) {
    Scheduler__V2__AnnouncePersistentCachePeerRequest m =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__DownloadPieceFinishedRequest fin =
        SCHEDULER__V2__DOWNLOAD_PIECE_FINISHED_REQUEST__INIT;
    fin.piece = (Common__V2__Piece *)piece;
    m.request_case = REQ(DOWNLOAD_PIECE_FINISHED_REQUEST);
    m.download_piece_finished_request = &fin;
    return peer_send(s, st, &m, task_id, peer_id, err);
}

int dfd_sched_peer_piece_failed(struct dfd_sched *s, struct dfc_rpc_stream *st, const char *task_id,
                                const char *peer_id, uint32_t number, const char *parent_id,
                                bool temporary, struct dfc_error *err) {
    Scheduler__V2__AnnouncePersistentCachePeerRequest m =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__DownloadPieceFailedRequest f =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__INIT;
    f.opt_piece_number_case =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__OPT_PIECE_NUMBER_PIECE_NUMBER;
    f.piece_number = number;
    f.parent_id = (char *)parent_id;
    f.temporary = temporary;
    m.request_case = REQ(DOWNLOAD_PIECE_FAILED_REQUEST);
    m.download_piece_failed_request = &f;
    return peer_send(s, st, &m, task_id, peer_id, err);
}
