/*
 * service.c - the service's state and what the handler files share: the deadline of a Redis
 * step, the clock, and the conversions between records (model.h) and common.v2 messages. The
 * method table is rpc_methods.c.
 */
#include "service.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dfc/units.h"
#include "google/protobuf/duration.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"

static int64_t real_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * DFC_NS_PER_SEC + ts.tv_nsec;
}

int sched_service_init(struct sched_service *svc, const struct sched_config *cfg,
                       struct sched_store *store, struct sched_placement *placement,
                       struct dfc_error *err) {
    memset(svc, 0, sizeof(*svc));
    svc->cfg = cfg;
    svc->store = store;
    svc->placement = placement;
    svc->now_ns = real_now_ns;
    dfc_stream_cap_init(&svc->announce_cap, (unsigned)cfg->max_announce_streams_per_host,
                        "AnnouncePersistentCachePeer", "server.maxAnnounceStreamsPerHost");
    int r = pthread_mutex_init(&svc->lock, NULL);
    return r != 0 ? dfc_error_set(err, -r, "cannot create a mutex") : 0;
}

void sched_service_done(struct sched_service *svc) {
    for (size_t i = 0; i < svc->n_hosts; i++) {
        free(svc->hosts[i].id);
        free(svc->hosts[i].packed);
    }
    free(svc->hosts);
    svc->hosts = NULL;
    svc->n_hosts = 0;
    dfc_stream_cap_destroy(&svc->announce_cap);
    pthread_mutex_destroy(&svc->lock);
}

int sched__need_redis(const struct sched_service *svc, struct dfc_error *err) {
    if (svc->store == NULL) {
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION, "redis is not enabled");
    }
    return 0;
}

int64_t sched__deadline(const struct sched_service *svc, struct dfc_rpc_call *call) {
    int64_t ms = svc->cfg->redis_timeout / DFC_NS_PER_MS;
    int64_t left = call != NULL ? dfc_rpc_call_remaining_ms(call) : INT64_MAX;
    if (left < ms) {
        ms = left > 0 ? left : 0;
    }
    return sched_redis_deadline(ms);
}

int64_t sched__now_s(const struct sched_service *svc) {
    return svc->now_ns() / DFC_NS_PER_SEC;
}

/* ---- records from messages ---- */

static int dup_into(char **dst, const char *s) {
    char *c = strdup(s != NULL ? s : "");
    if (c == NULL) {
        return -ENOMEM;
    }
    free(*dst);
    *dst = c;
    return 0;
}

int sched__host_from_proto(const Common__V2__Host *in, struct sched_host *h,
                           struct dfc_error *err) {
    const Common__V2__CPU *cpu = in->cpu;
    const Common__V2__Memory *mem = in->memory;
    const Common__V2__Network *net = in->network;
    const Common__V2__Disk *disk = in->disk;
    const Common__V2__Build *b = in->build;
    int r = 0;
    r |= dup_into(&h->id, in->id);
    r |= dup_into(&h->name, in->name);
    r |= dup_into(&h->hostname, in->hostname);
    r |= dup_into(&h->ip, in->ip);
    r |= dup_into(&h->os, in->os);
    r |= dup_into(&h->platform, in->platform);
    r |= dup_into(&h->platform_family, in->platform_family);
    r |= dup_into(&h->platform_version, in->platform_version);
    r |= dup_into(&h->kernel_version, in->kernel_version);
    h->type = in->type;
    h->port = in->port;
    h->download_port = in->download_port;
    h->proxy_port = in->proxy_port;
    h->disable_shared = in->disable_shared;
    h->scheduler_cluster_id = in->scheduler_cluster_id; /* the request's, as upstream */
    if (cpu != NULL) {
        h->cpu.logical_count = cpu->logical_count;
        h->cpu.physical_count = cpu->physical_count;
        h->cpu.percent = cpu->percent;
        h->cpu.process_percent = cpu->process_percent;
        const Common__V2__CPUTimes *t = cpu->times;
        h->cpu.user = t != NULL ? t->user : 0;
        h->cpu.system = t != NULL ? t->system : 0;
        h->cpu.idle = t != NULL ? t->idle : 0;
        h->cpu.nice = t != NULL ? t->nice : 0;
        h->cpu.iowait = t != NULL ? t->iowait : 0;
        h->cpu.irq = t != NULL ? t->irq : 0;
        h->cpu.softirq = t != NULL ? t->softirq : 0;
        h->cpu.steal = t != NULL ? t->steal : 0;
        h->cpu.guest = t != NULL ? t->guest : 0;
        h->cpu.guest_nice = t != NULL ? t->guest_nice : 0;
    }
    if (mem != NULL) {
        h->memory.total = mem->total;
        h->memory.available = mem->available;
        h->memory.used = mem->used;
        h->memory.free = mem->free;
        h->memory.used_percent = mem->used_percent;
        h->memory.process_used_percent = mem->process_used_percent;
    }
    if (net != NULL) {
        h->network.tcp_connection_count = net->tcp_connection_count;
        h->network.upload_tcp_connection_count = net->upload_tcp_connection_count;
        r |= dup_into(&h->network.location, net->opt_location_case ? net->location : "");
        r |= dup_into(&h->network.idc, net->opt_idc_case ? net->idc : "");
        h->network.rx_bandwidth = net->opt_rx_bandwidth_case ? net->rx_bandwidth : 0;
        h->network.max_rx_bandwidth = net->max_rx_bandwidth;
        h->network.tx_bandwidth = net->opt_tx_bandwidth_case ? net->tx_bandwidth : 0;
        h->network.max_tx_bandwidth = net->max_tx_bandwidth;
    } else {
        r |= dup_into(&h->network.location, h->network.location);
        r |= dup_into(&h->network.idc, h->network.idc);
    }
    if (disk != NULL) {
        h->disk.total = disk->total;
        h->disk.free = disk->free;
        h->disk.used = disk->used;
        h->disk.used_percent = disk->used_percent;
        h->disk.inodes_total = disk->inodes_total;
        h->disk.inodes_used = disk->inodes_used;
        h->disk.inodes_free = disk->inodes_free;
        h->disk.inodes_used_percent = disk->inodes_used_percent;
        h->disk.read_bandwidth = disk->read_bandwidth;
        h->disk.write_bandwidth = disk->write_bandwidth;
    }
    if (b != NULL) {
        r |= dup_into(&h->build.git_version, b->git_version);
        r |= dup_into(&h->build.git_commit, b->opt_git_commit_case ? b->git_commit : "");
        r |= dup_into(&h->build.go_version, b->opt_go_version_case ? b->go_version : "");
        r |= dup_into(&h->build.platform, b->opt_platform_case ? b->platform : "");
    } else {
        r |= dup_into(&h->build.git_version, h->build.git_version);
        r |= dup_into(&h->build.git_commit, h->build.git_commit);
        r |= dup_into(&h->build.go_version, h->build.go_version);
        r |= dup_into(&h->build.platform, h->build.platform);
    }
    return r != 0 ? dfc_error_set(err, -ENOMEM, "out of memory") : 0;
}

/* ---- messages from records ---- */

/* A copy in the call's arena; NULL sets *oom. */
static char *cs(struct dfc_rpc_call *call, const char *s, bool *oom) {
    char *c = dfc_rpc_call_strdup(call, s != NULL ? s : "");
    if (c == NULL) {
        *oom = true;
    }
    return c;
}

#define NEW(call, type, desc) ((type *)dfc_rpc_call_new_msg(call, &desc##__descriptor))

int sched__host_to_proto(struct dfc_rpc_call *call, const struct sched_host *h, uint64_t cluster_id,
                         Common__V2__Host *out, struct dfc_error *err) {
    bool oom = false;
    out->id = cs(call, h->id, &oom);
    out->type = h->type;
    out->name = cs(call, h->name, &oom);
    out->hostname = cs(call, h->hostname, &oom);
    out->ip = cs(call, h->ip, &oom);
    out->port = h->port;
    out->download_port = h->download_port;
    out->proxy_port = h->proxy_port;
    out->os = cs(call, h->os, &oom);
    out->platform = cs(call, h->platform, &oom);
    out->platform_family = cs(call, h->platform_family, &oom);
    out->platform_version = cs(call, h->platform_version, &oom);
    out->kernel_version = cs(call, h->kernel_version, &oom);
    out->scheduler_cluster_id = cluster_id;
    out->disable_shared = h->disable_shared;

    Common__V2__CPU *cpu = NEW(call, Common__V2__CPU, common__v2__cpu);
    Common__V2__CPUTimes *t = NEW(call, Common__V2__CPUTimes, common__v2__cputimes);
    Common__V2__Memory *m = NEW(call, Common__V2__Memory, common__v2__memory);
    Common__V2__Network *n = NEW(call, Common__V2__Network, common__v2__network);
    Common__V2__Disk *d = NEW(call, Common__V2__Disk, common__v2__disk);
    Common__V2__Build *b = NEW(call, Common__V2__Build, common__v2__build);
    if (!cpu || !t || !m || !n || !d || !b) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    cpu->logical_count = h->cpu.logical_count;
    cpu->physical_count = h->cpu.physical_count;
    cpu->percent = h->cpu.percent;
    cpu->process_percent = h->cpu.process_percent;
    t->user = h->cpu.user;
    t->system = h->cpu.system;
    t->idle = h->cpu.idle;
    t->nice = h->cpu.nice;
    t->iowait = h->cpu.iowait;
    t->irq = h->cpu.irq;
    t->softirq = h->cpu.softirq;
    t->steal = h->cpu.steal;
    t->guest = h->cpu.guest;
    t->guest_nice = h->cpu.guest_nice;
    cpu->times = t;
    out->cpu = cpu;
    m->total = h->memory.total;
    m->available = h->memory.available;
    m->used = h->memory.used;
    m->used_percent = h->memory.used_percent;
    m->process_used_percent = h->memory.process_used_percent;
    m->free = h->memory.free;
    out->memory = m;
    /* As upstream: location, idc, rx and tx always present, maybe "" or 0. */
    n->tcp_connection_count = h->network.tcp_connection_count;
    n->upload_tcp_connection_count = h->network.upload_tcp_connection_count;
    n->opt_location_case = COMMON__V2__NETWORK__OPT_LOCATION_LOCATION;
    n->location = cs(call, h->network.location, &oom);
    n->opt_idc_case = COMMON__V2__NETWORK__OPT_IDC_IDC;
    n->idc = cs(call, h->network.idc, &oom);
    n->opt_rx_bandwidth_case = COMMON__V2__NETWORK__OPT_RX_BANDWIDTH_RX_BANDWIDTH;
    n->rx_bandwidth = h->network.rx_bandwidth;
    n->max_rx_bandwidth = h->network.max_rx_bandwidth;
    n->opt_tx_bandwidth_case = COMMON__V2__NETWORK__OPT_TX_BANDWIDTH_TX_BANDWIDTH;
    n->tx_bandwidth = h->network.tx_bandwidth;
    n->max_tx_bandwidth = h->network.max_tx_bandwidth;
    out->network = n;
    d->total = h->disk.total;
    d->free = h->disk.free;
    d->used = h->disk.used;
    d->used_percent = h->disk.used_percent;
    d->inodes_total = h->disk.inodes_total;
    d->inodes_used = h->disk.inodes_used;
    d->inodes_free = h->disk.inodes_free;
    d->inodes_used_percent = h->disk.inodes_used_percent;
    d->read_bandwidth = h->disk.read_bandwidth;
    d->write_bandwidth = h->disk.write_bandwidth;
    out->disk = d;
    b->git_version = cs(call, h->build.git_version, &oom);
    b->opt_git_commit_case = COMMON__V2__BUILD__OPT_GIT_COMMIT_GIT_COMMIT;
    b->git_commit = cs(call, h->build.git_commit, &oom);
    b->opt_go_version_case = COMMON__V2__BUILD__OPT_GO_VERSION_GO_VERSION;
    b->go_version = cs(call, h->build.go_version, &oom);
    b->opt_rust_version_case = COMMON__V2__BUILD__OPT_RUST_VERSION_RUST_VERSION;
    b->rust_version = cs(call, "", &oom);
    b->opt_platform_case = COMMON__V2__BUILD__OPT_PLATFORM_PLATFORM;
    b->platform = cs(call, h->build.platform, &oom);
    out->build = b;
    return oom ? dfc_error_set(err, -ENOMEM, "out of memory") : 0;
}

int sched__task_to_proto(struct dfc_rpc_call *call, const struct sched_task *t, uint64_t all,
                         uint64_t persistent, Common__V2__PersistentCacheTask *out,
                         struct dfc_error *err) {
    bool oom = false;
    out->id = cs(call, t->id, &oom);
    out->persistent_replica_count = t->persistent_replica_count;
    out->current_persistent_replica_count = persistent;
    out->current_replica_count = all;
    /* tag and application always set, maybe empty, as upstream */
    out->opt_tag_case = COMMON__V2__PERSISTENT_CACHE_TASK__OPT_TAG_TAG;
    out->tag = cs(call, t->tag, &oom);
    out->opt_application_case = COMMON__V2__PERSISTENT_CACHE_TASK__OPT_APPLICATION_APPLICATION;
    out->application = cs(call, t->application, &oom);
    out->piece_length = t->piece_length;
    out->content_length = t->content_length;
    out->piece_count = t->total_piece_count;
    out->state = cs(call, sched_task_state_name(t->state), &oom);
    out->ttl = dfc_rpc_call_new_duration(call, t->ttl_ns);
    out->created_at = dfc_rpc_call_new_timestamp(call, t->created_at * DFC_NS_PER_SEC);
    out->updated_at = dfc_rpc_call_new_timestamp(call, t->updated_at * DFC_NS_PER_SEC);
    if (oom || !out->ttl || !out->created_at || !out->updated_at) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int sched__peer_to_proto(struct dfc_rpc_call *call, const struct sched_peer *p,
                         const struct sched_task *t, uint64_t all, uint64_t persistent,
                         const struct sched_host *h, uint64_t cluster_id,
                         Common__V2__PersistentCachePeer *out, struct dfc_error *err) {
    bool oom = false;
    out->id = cs(call, p->id, &oom);
    out->persistent = p->persistent;
    out->concurrent_piece_count = p->concurrent_piece_count;
    out->cost = dfc_rpc_call_new_duration(call, p->cost_ns);
    out->state = cs(call, sched_peer_state_name(p->state), &oom);
    out->created_at = dfc_rpc_call_new_timestamp(call, p->created_at * DFC_NS_PER_SEC);
    out->updated_at = dfc_rpc_call_new_timestamp(call, p->updated_at * DFC_NS_PER_SEC);
    out->task = NEW(call, Common__V2__PersistentCacheTask, common__v2__persistent_cache_task);
    out->host = NEW(call, Common__V2__Host, common__v2__host);
    if (oom || !out->cost || !out->created_at || !out->updated_at || !out->task || !out->host) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r = sched__task_to_proto(call, t, all, persistent, out->task, err);
    return r < 0 ? r : sched__host_to_proto(call, h, cluster_id, out->host, err);
}
