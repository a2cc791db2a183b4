/*
 * daemon.c - dfdaemon wiring.
 *
 * Start: storage (with crash recovery) -> with scheduler.addrs, the scheduler client, the
 * rejoin thread and the announcer thread (its first AnnounceHost runs on the thread: an absent
 * scheduler never holds start-up) -> GC thread -> with scheduler.addrs, the Vortex piece server,
 * the P2P download engine and DfdaemonUpload on TCP -> RPC server (services registered, socket
 * bound with its mode and group) -> ready. Stop (SIGINT/SIGTERM, taken by sigwait on the main
 * thread by dfc_server_wait, never in a handler): the TCP and Unix RPC servers (drain calls for
 * up to download.server.shutdownGrace each, then cancel) -> the engine (downloads still in progress
 * are cancelled) -> Vortex -> GC -> announcer (then the rejoin thread, then DeleteHost) and
 * scheduler client -> storage. The socket file is removed by the RPC layer on the way out. The
 * sibling socket `<socketPath>.fd` (fdpass.h) is bound right after the main one, with its mode and
 * group, and stopped (descriptors closed, file removed) once the Unix server's calls are done,
 * before the main socket goes.
 */
#include "daemon.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "announcer.h"
#include "endpoints.h"
#include "fdpass.h"
#include "dfc/fs.h"
#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/ratelimit.h"
#include "dfc/rpc_server.h"
#include "dfc/stream_cap.h"
#include "dfc/tls_ssl.h"
#include "dfc/units.h"
#include "gc.h"
#include "metrics.h"
#include "p2p/download.h"
#include "p2p/vortex_server.h"
#include "registration.h"
#include "rejoin.h"
#include "integrity_client.h"
#include "scheduler_client.h"
#include "service.h"
#include "storage/pins.h"
#include "volume_fetch.h"
#include "storage/storage.h"

#define FD_HEADROOM 256

static int make_socket_dir(const char *path, struct dfc_error *err) {
    int r = dfc_mkdir_parent(path, 0755);
    return r < 0 ? dfc_error_errno(err, r, "create the directory of `%s`", path) : 0;
}

static int resolve_group(const char *name, int *ret_gid, struct dfc_error *err) {
    *ret_gid = -1;
    if (name[0] == '\0') {
        return 0;
    }
    struct group *g = getgrnam(name);
    if (g != NULL) {
        *ret_gid = (int)g->gr_gid;
        return 0;
    }
    char *end;
    long v = strtol(name, &end, 10);
    if (*end == '\0' && v >= 0 && v <= INT_MAX) {
        *ret_gid = (int)v;
        return 0;
    }
    return dfc_error_set(err, -EINVAL, "download.server.socketGroup: no group `%s`", name);
}

/* Raises the descriptor limit to its hard limit and returns the connection cap that leaves
 * FD_HEADROOM descriptors for files, the database and gRPC's own, lowering the configured
 * one (with a warning) when the limit is too small for it. */
static unsigned connection_cap(uint64_t wanted) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        return (unsigned)wanted;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            rl.rlim_cur = old;
        }
    }
    uint64_t room = rl.rlim_cur > 2 * FD_HEADROOM ? rl.rlim_cur - FD_HEADROOM : rl.rlim_cur / 2;
    if (wanted <= room) {
        return (unsigned)wanted;
    }
    DFC_LOG(DFC_LOG_WARN, "dfdaemon.connection_cap_lowered",
            "download.server.maxConnections=%llu nofile=%llu cap=%llu", (unsigned long long)wanted,
            (unsigned long long)rl.rlim_cur, (unsigned long long)room);
    return (unsigned)room;
}

/* ---- peer to peer: the scheduler client and the announcer ---- */

struct sched_parts {
    struct dfd_sched *sched; /* NULL when standalone */
    struct dfd_announcer *announcer;
    struct dfd_rejoin *rejoin; /* the announcer's (it stops it), kicked by the P2P engine */
};

/* With scheduler.addrs: the client and the announcer; standalone: nothing. */
static int sched_start(const struct dfd_config *cfg, struct dfd_storage *storage,
                       struct sched_parts *ret, struct dfc_error *err) {
    memset(ret, 0, sizeof(*ret));
    if (!dfd_config_p2p(cfg)) {
        return 0;
    }
    char host_id[320];
    int r = dfc_host_id(cfg->host_ip, cfg->hostname, host_id, sizeof(host_id));
    if (r < 0) {
        return dfc_error_set(err, r, "host.ip and host.hostname make a host id that is too long");
    }
    if ((r = dfd_sched_new(cfg, host_id, &ret->sched, err)) < 0) {
        return r;
    }
    struct dfd_rejoin *rejoin = NULL;
    if ((r = dfd_rejoin_start(ret->sched, storage, cfg, &rejoin, err)) < 0 ||
        (r = dfd_announcer_start(ret->sched, cfg, host_id, rejoin, &ret->announcer, err)) < 0) {
        dfd_sched_free(ret->sched);
        ret->sched = NULL;
        return r;
    }
    ret->rejoin = rejoin;
    DFC_LOG(DFC_LOG_INFO, "scheduler.client_ready", "schedulers=%zu host_id=%s",
            cfg->scheduler_addrs.n, host_id);
    return 0;
}

/* After the RPC server and GC, which use the client: DeleteHost, then the client. */
static void sched_stop(struct sched_parts *p) {
    dfd_announcer_stop(p->announcer);
    dfd_sched_free(p->sched);
    memset(p, 0, sizeof(*p));
}

/* GC's on_delete: a copy that expired or was evicted is no peer any more. */
static void gc_deleted(void *sched, const struct dfd_task_meta *t) {
    dfd_registration_forget(sched, t);
}

/* ---- peer to peer: Vortex, the download engine, DfdaemonUpload on TCP ---- */

/* What serves other peers; all NULL when standalone. */
struct p2p_parts {
    struct dfd_vortex_server *vortex;
    struct dfd_p2p *engine;
    struct dfc_rpc_server *upload;         /* DfdaemonUpload on TCP */
    struct dfc_stream_cap sync_host_cap;   /* SyncHost streams per remote, once cap_set */
    struct dfc_stream_cap sync_pieces_cap; /* waiting SyncPersistentCachePieces, likewise */
    bool cap_set;
    struct dfc_ratelimit download_rate; /* download.rateLimit: every download's, once rate_set */
    bool rate_set;
    /* Vortex TLS (cfg->tls not off): the server's context (upload.server.*) and the one for
     * fetching from other nodes (upload.client.*); NULL with TLS off. */
    struct dfc_tls_ctx *tls_server, *tls_client;
};

/* The Vortex TLS contexts from cfg->tls and the two file sets; none with TLS off. */
static int p2p_tls(const struct dfd_config *cfg, struct p2p_parts *pp, struct dfc_error *err) {
    if (cfg->tls == DFC_TLS_OFF) {
        return 0;
    }
    struct dfc_tls_files sf = dfd_tls_upload_server(cfg), cf = dfd_tls_upload_client(cfg);
    int r = dfc_tls_ctx_new(cfg->tls, &sf, true, DFC_TLS_RECHECK_NS, &pp->tls_server, err);
    if (r < 0) {
        return dfc_error_prefix(err, "storage.server (Vortex) upload.server.*");
    }
    r = dfc_tls_ctx_new(cfg->tls, &cf, false, DFC_TLS_RECHECK_NS, &pp->tls_client, err);
    if (r < 0) {
        return dfc_error_prefix(err, "Vortex client upload.client.*");
    }
    return 0;
}

/* A download committed a copy the scheduler could not be told about: a rejoin pass puts it back
 * (rejoin.h). */
static void p2p_untold(void *rejoin) {
    dfd_rejoin_kick(rejoin);
}

/* The Vortex piece server, the download engine and DfdaemonUpload on TCP, after the scheduler
 * client (svc->sched); wires the engine into svc; rejoin is kicked for copies the scheduler
 * missed. Standalone: nothing. */
static int p2p_start(const struct dfd_config *cfg, struct dfd_storage *storage,
                     struct dfd_rejoin *rejoin, struct dfd_service *svc, struct p2p_parts *pp,
                     struct dfc_error *err) {
    struct dfd_metrics *m = svc->metrics;
    if (svc->sched == NULL) {
        return 0;
    }
    int r = p2p_tls(cfg, pp, err);
    if (r < 0) {
        return r;
    }
    struct dfd_vortex_server_opts vo = {
        .ip = cfg->vortex_ip,
        .port = (uint16_t)cfg->vortex_port,
        .max_conns = (unsigned)cfg->vortex_max_connections,
        .max_conns_per_ip = (unsigned)cfg->vortex_max_connections_per_ip,
        .request_timeout_ns = cfg->vortex_request_timeout,
        /* A client of ours gives one piece from one parent this long, connect to last byte. */
        .answer_timeout_ns = cfg->piece_timeout,
        .parent_id = svc->host_id,
        .served_pieces = dfd_metrics_served_pieces(m),
        .served_bytes = dfd_metrics_served_bytes(m),
        .busy_answers = dfd_metrics_busy_answers(m),
        .tls = pp->tls_server,
        .rate_limit = cfg->upload_rate_limit,
        .max_uploads = (unsigned)cfg->vortex_max_uploads,
    };
    r = dfd_vortex_server_start(storage, &vo, &pp->vortex, err);
    if (r < 0) {
        return dfc_error_prefix(err, "storage.server (Vortex) %s:%llu",
                                cfg->vortex_ip[0] ? cfg->vortex_ip : "0.0.0.0",
                                (unsigned long long)cfg->vortex_port);
    }
    dfc_ratelimit_init(&pp->download_rate, cfg->download_rate_limit, 0);
    pp->rate_set = true;
    const struct dfd_p2p_opts po = {
        .host_id = svc->host_id,
        .host_ip = cfg->host_ip,
        .hostname = cfg->hostname,
        .max_schedule_count = cfg->max_schedule_count,
        .schedule_timeout_ns = cfg->schedule_timeout,
        .piece_timeout_ns = cfg->piece_timeout,
        .concurrent_piece_count = cfg->concurrent_piece_count,
        .fetched_pieces = dfd_metrics_fetched_pieces(m),
        .fetched_bytes = dfd_metrics_fetched_bytes(m),
        .crc_failures = dfd_metrics_crc_failures(m),
        .tls = cfg->tls,
        .tls_files = dfd_tls_upload_client(cfg),
        .sched = {.s = svc->sched,
                  .stat_task = dfd_sched_stat_task,
                  .announce_open = dfd_sched_announce_peer_open,
                  .peer_register = dfd_sched_peer_register,
                  .peer_event = dfd_sched_peer_event,
                  .peer_reschedule = dfd_sched_peer_reschedule,
                  .peer_piece_finished = dfd_sched_peer_piece_finished,
                  .peer_piece_failed = dfd_sched_peer_piece_failed,
                  .get_digests = dfd_sched_get_digests},
        .vortex_tls = pp->tls_client,
        .untold = p2p_untold,
        .untold_arg = rejoin,
        .download_rate = &pp->download_rate,
    };
    if ((r = dfd_p2p_new(storage, &po, &pp->engine, err)) < 0) {
        return r;
    }
    svc->p2p = pp->engine;
    dfc_stream_cap_init(&pp->sync_host_cap, (unsigned)cfg->upload_max_sync_host_streams, "SyncHost",
                        "upload.server.maxSyncHostStreamsPerHost");
    dfc_stream_cap_init(&pp->sync_pieces_cap, (unsigned)cfg->upload_max_sync_pieces_streams,
                        "SyncPersistentCachePieces", "upload.server.maxSyncPiecesStreamsPerHost");
    pp->cap_set = true;
    svc->sync_host_cap = &pp->sync_host_cap;
    svc->sync_pieces_cap = &pp->sync_pieces_cap;
    /* Streams may hold the TCP server's workers less the reserved ones (max_workers / 8, at
     * least 1: rpc_server.h); half of those at most wait for pieces, so SyncHost and the
     * replication pulls keep workers. */
    unsigned workers = (unsigned)cfg->upload_max_workers;
    unsigned reserved = workers / 8 > 0 ? workers / 8 : 1;
    unsigned streams = workers > reserved ? workers - reserved : 1;
    svc->sync_pieces_max_waiting = streams / 2 > 0 ? streams / 2 : 1;
    struct dfc_rpc_server_opts opts = {
        .max_workers = (unsigned)cfg->upload_max_workers,
        .log_level_ok = DFC_LOG_DEBUG,
        .name = "dfdaemon-upload",
        .idle_timeout_ms = cfg->idle_timeout / 1000000,
        .max_conns = (unsigned)cfg->upload_max_connections,
        .max_conns_per_ip = (unsigned)cfg->upload_max_connections_per_ip,
        .first_bytes_timeout_ms = cfg->upload_first_bytes_timeout / 1000000,
        .first_call_timeout_ms = cfg->upload_first_call_timeout / 1000000,
        .option_prefix = "upload.server.",
        .metrics = dfd_metrics_registry(m),
        .metrics_prefix = DFD_METRICS_PREFIX,
        .tls = cfg->tls,
        .tls_files = dfd_tls_upload_server(cfg),
    };
    if (cfg->tls == DFC_TLS_OFF) {
        DFC_LOG(DFC_LOG_WARN, "dfdaemon.tls_off",
                "msg=\"TLS is off: DfdaemonUpload, Vortex and the calls to the schedulers and "
                "other nodes are plaintext and unauthenticated (security.tlsPolicy, "
                "upload.server.*, upload.client.*, scheduler.*; docs/trust-model.md)\"");
    }
    if ((r = dfc_rpc_server_new(&opts, &pp->upload, err)) < 0 ||
        (r = dfd_service_register_tcp(svc, pp->upload, err)) < 0) {
        return r;
    }
    if (dfc_rpc_server_listen_tcp(pp->upload, cfg->upload_ip, (unsigned)cfg->upload_port, NULL,
                                  err) < 0) {
        return dfc_error_prefix(err, "upload.server %s:%llu",
                                cfg->upload_ip[0] ? cfg->upload_ip : "0.0.0.0",
                                (unsigned long long)cfg->upload_port);
    }
    if ((r = dfc_rpc_server_start(pp->upload, err)) < 0) {
        return r;
    }
    DFC_LOG(DFC_LOG_INFO, "dfdaemon.p2p_ready", "upload=%s:%llu vortex=%s:%u vortex_tls=%s",
            cfg->upload_ip[0] ? cfg->upload_ip : "0.0.0.0", (unsigned long long)cfg->upload_port,
            cfg->vortex_ip[0] ? cfg->vortex_ip : "0.0.0.0", dfd_vortex_server_port(pp->vortex),
            dfc_tls_policy_name(cfg->tls));
    return 0;
}

/* Stops the TCP server's calls, with the Unix server's grace. */
static void p2p_stop_serving(struct p2p_parts *pp, int64_t grace_ms) {
    if (pp->upload != NULL) {
        dfc_rpc_server_shutdown(pp->upload, grace_ms);
    }
}

static void p2p_free(struct p2p_parts *pp, struct dfd_service *svc) {
    dfc_rpc_server_free(pp->upload);
    dfd_p2p_free(pp->engine);
    svc->p2p = NULL;
    dfd_vortex_server_stop(pp->vortex);
    if (pp->rate_set) {
        dfc_ratelimit_destroy(&pp->download_rate);
        pp->rate_set = false;
    }
    svc->sync_host_cap = NULL;
    svc->sync_pieces_cap = NULL;
    if (pp->cap_set) {
        dfc_stream_cap_destroy(&pp->sync_host_cap);
        dfc_stream_cap_destroy(&pp->sync_pieces_cap);
        pp->cap_set = false;
    }
    dfc_tls_ctx_free(pp->tls_client);
    dfc_tls_ctx_free(pp->tls_server);
    pp->tls_client = NULL;
    pp->tls_server = NULL;
    pp->upload = NULL;
    pp->engine = NULL;
    pp->vortex = NULL;
}

/* What the store's recovery did to the pins of content volumes, and whether its filesystem
 * takes fs-verity (said once, at start: docs/content-volumes.md). */
static void log_volumes(struct dfd_storage *storage, const struct dfd_recovery *rec) {
    struct dfc_error e;
    int v = dfd_storage_verity_probe(storage, &e);
    DFC_LOG(DFC_LOG_INFO, "storage.volumes",
            "pins=%u removed_stale=%u rebuilt=%u dropped=%u verity=%s%s%s%s", rec->pins,
            rec->stale_volumes, rec->rebuilt_pins, rec->dropped_pins,
            v > 0    ? "supported"
            : v == 0 ? "unsupported"
                     : "unknown",
            v < 0 ? " error=\"" : "", v < 0 ? dfc_error_msg(&e) : "", v < 0 ? "\"" : "");
}

int dfd_daemon_run(const struct dfd_config *cfg, const struct dfc_server_run *run,
                   struct dfc_error *err) {
    struct dfd_storage *storage = NULL;
    struct dfd_gc *gc = NULL;
    struct dfc_rpc_server *server = NULL;
    struct dfd_service svc;
    struct dfd_recovery rec;
    struct sched_parts sp = {0};
    struct p2p_parts pp = {0};
    struct dfd_fdpass *fdpass = NULL;
    struct dfd_metrics *metrics = NULL;
    struct dfd_endpoints *endpoints = NULL;
    struct dfd_vfetch *vfetch = NULL;
    int gid, r;

    struct dfd_storage_opts so = {.dir = cfg->storage_dir,
                                  .keep = cfg->storage_keep,
                                  .discard_broken = cfg->discard_broken,
                                  .unsafe_shared_inode_imports = cfg->unsafe_shared_inode_imports,
                                  .max_tasks = cfg->max_tasks};
    if ((r = dfd_storage_open(&so, &storage, &rec, err)) < 0) {
        return r;
    }
    if (rec.discarded_reason != NULL) {
        DFC_LOG(DFC_LOG_WARN, "storage.discarded",
                "dir=%s reason=%s files=%u bytes=%llu moved_db=%s/metadata/pcache.db.broken",
                cfg->storage_dir, rec.discarded_reason, rec.discarded_files,
                (unsigned long long)rec.discarded_bytes, cfg->storage_dir);
    }
    DFC_LOG(DFC_LOG_INFO, "storage.ready",
            "dir=%s tasks=%u removed_temp=%u removed_orphans=%u removed_broken=%u",
            cfg->storage_dir, rec.tasks, rec.temp_files, rec.orphan_files, rec.broken_rows);
    log_volumes(storage, &rec);

    if ((r = sched_start(cfg, storage, &sp, err)) < 0) {
        goto out;
    }
    struct dfd_gc_policy policy = {
        .interval_ns = cfg->gc_interval,
        .high_percent = cfg->disk_high,
        .low_percent = cfg->disk_low,
        .disk_threshold = cfg->disk_threshold,
        .on_delete = sp.sched != NULL ? gc_deleted : NULL,
        .on_delete_arg = sp.sched,
    };
    if ((r = dfd_service_init(&svc, storage, cfg, &dfc_clock_real, err)) < 0) {
        goto out;
    }
    svc.sched = sp.sched;
    /* Metrics exist only with their endpoint: metrics.server.port 0 costs nothing at all. */
    if (cfg->metrics_port != 0 && (r = dfd_metrics_new(storage, &policy, &metrics, err)) < 0) {
        goto out;
    }
    svc.metrics = metrics;
    if ((r = dfd_gc_start(storage, &policy, &dfc_clock_real,
                          metrics != NULL ? dfd_metrics_gc_pass : NULL, metrics, &gc, err)) < 0 ||
        (r = p2p_start(cfg, storage, sp.rejoin, &svc, &pp, err)) < 0 ||
        (svc.p2p != NULL && (r = dfd_vfetch_new(svc.p2p, &vfetch, err)) < 0)) {
        goto out;
    }
    svc.vfetch = vfetch;
    struct dfc_rpc_server_opts opts = {
        .max_workers = (unsigned)cfg->max_workers,
        .log_level_ok = DFC_LOG_DEBUG,
        .name = "dfdaemon",
        .idle_timeout_ms = cfg->idle_timeout / 1000000,
        .reserved_workers = (unsigned)cfg->reserved_workers,
        .max_calls_per_uid = (unsigned)cfg->max_calls_per_user,
        .max_workers_per_uid = (unsigned)cfg->max_workers_per_user,
        .max_conns = connection_cap(cfg->max_connections),
        .max_conns_per_uid = (unsigned)cfg->max_conns_per_user,
        .option_prefix = "download.server.",
        .metrics = dfd_metrics_registry(metrics),
        .metrics_prefix = DFD_METRICS_PREFIX,
    };
    if ((r = dfc_rpc_server_new(&opts, &server, err)) < 0 ||
        (r = dfd_service_register(&svc, server, err)) < 0 ||
        /* Before the socket appears: whoever sees it finds the endpoints up (not ready until
         * the server serves). */
        (r = dfd_endpoints_start(cfg, dfd_metrics_registry(metrics), server, storage, &endpoints,
                                 err)) < 0 ||
        (r = resolve_group(cfg->socket_group, &gid, err)) < 0 ||
        (r = make_socket_dir(cfg->socket_path, err)) < 0 ||
        (r = dfc_rpc_server_listen_unix(server, cfg->socket_path, cfg->socket_mode, gid, err)) <
            0 ||
        (r = dfd_fdpass_start(cfg->socket_path, cfg->socket_mode, gid, cfg->fd_token_timeout,
                              &fdpass, err)) < 0) {
        goto out;
    }
    svc.fdpass = fdpass;
    if ((r = dfc_rpc_server_start(server, err)) < 0) {
        goto out;
    }
    char ttl[32], interval[32];
    dfc_format_duration(cfg->default_ttl, ttl, sizeof(ttl));
    dfc_format_duration(cfg->gc_interval, interval, sizeof(interval));
    DFC_LOG(DFC_LOG_INFO, "dfdaemon.ready", "socket=%s mode=%04o host_id=%s gc_interval=%s ttl=%s",
            cfg->socket_path, cfg->socket_mode, svc.host_id, interval, ttl);

    int sig = dfc_server_wait(run);
    DFC_LOG(DFC_LOG_INFO, "dfdaemon.stopping", "signal=%s", sig == SIGINT ? "SIGINT" : "SIGTERM");
    p2p_stop_serving(&pp, run->grace_ms);
    dfc_rpc_server_shutdown(server, run->grace_ms);
out:
    dfd_endpoints_stop(endpoints); /* its readiness check reads the server */
    dfc_rpc_server_free(server);
    dfd_fdpass_stop(fdpass); /* no handler runs any more: none takes a descriptor */
    dfd_vfetch_free(vfetch); /* its downloads stopped and joined, before the engine goes */
    svc.vfetch = NULL;
    p2p_free(&pp, &svc);
    dfd_gc_stop(gc);
    sched_stop(&sp);
    dfd_metrics_free(metrics); /* after every server and thread that counts */
    dfd_storage_close(storage);
    if (r == 0) {
        DFC_LOG(DFC_LOG_INFO, "dfdaemon.stopped", "socket=%s", cfg->socket_path);
    }
    return r;
}
