/*
 * validate.c - upstream's PGV rules for the scheduler.v2 requests (see validate.h), in field
 * order, so the first broken field is the one named, as PGV reports it.
 */
#include "validate.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dfc/addr.h"
#include "dfc/dragonfly.h"
#include "dfc/pbtime.h"
#include "dfc/units.h"

#define PATH_MAX_LEN 256

/* "<path>.<field>" (or "<field>" when path is empty) into buf; paths are short (the deepest
 * is about 90 bytes), so truncation only shortens a message. */
static const char *join(char *buf, const char *path, const char *field) {
    int n = snprintf(buf, PATH_MAX_LEN, "%s%s%s", path, path[0] != '\0' ? "." : "", field);
    if (n < 0) {
        buf[0] = '\0';
    }
    return buf;
}

/* string.min_len = 1, plus our length limit. */
static int nonempty(const char *path, const char *field, const char *s, struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    if (s == NULL || s[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "%s: must not be empty", join(p, path, field));
    }
    if (strlen(s) > SCHED_STRING_MAX) {
        return dfc_error_set(err, -EINVAL, "%s: longer than %d bytes", join(p, path, field),
                             SCHED_STRING_MAX);
    }
    return 0;
}

/* A string without rules upstream that we store: only our length limit. */
static int bounded(const char *path, const char *field, const char *s, struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    if (s != NULL && strlen(s) > SCHED_STRING_MAX) {
        return dfc_error_set(err, -EINVAL, "%s: longer than %d bytes", join(p, path, field),
                             SCHED_STRING_MAX);
    }
    return 0;
}

static int required(const char *path, const char *field, const void *m, struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    if (m == NULL) {
        return dfc_error_set(err, -EINVAL, "%s: required", join(p, path, field));
    }
    return 0;
}

/* double.gte = 0 (and, beyond PGV, not NaN). */
static int not_negative(const char *path, const char *field, double v, struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    if (isnan(v) || v < 0) {
        return dfc_error_set(err, -EINVAL, "%s: must be at least 0, got %g", join(p, path, field),
                             v);
    }
    return 0;
}

/* double {gte: 0, lte: 100} (and not NaN). */
static int percent(const char *path, const char *field, double v, struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    if (isnan(v) || v < 0 || v > 100) {
        return dfc_error_set(err, -EINVAL, "%s: must be between 0 and 100, got %g",
                             join(p, path, field), v);
    }
    return 0;
}

/* int32 {gte: 1024, lt: 65535}. */
static int port(const char *path, const char *field, int32_t v, struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    if (v < 1024 || v >= 65535) {
        return dfc_error_set(err, -EINVAL, "%s: must be at least 1024 and below 65535, got %d",
                             join(p, path, field), (int)v);
    }
    return 0;
}

/* A well-formed google.protobuf.Duration that fits int64 nanoseconds. */
static bool duration_valid(const Google__Protobuf__Duration *d, int64_t *ret_ns) {
    return dfc_pb_duration_to_ns(d, ret_ns) == 0;
}

static int uint64_at_least_one(const char *path, const char *field, uint64_t v,
                               struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    if (v < 1) {
        return dfc_error_set(err, -EINVAL, "%s: must be at least 1, got 0", join(p, path, field));
    }
    return 0;
}

static int piece_length_min(const char *path, const char *field, uint64_t v,
                            struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    if (v < DFC_PIECE_LENGTH_MIN) {
        return dfc_error_set(err, -EINVAL, "%s: must be at least 4194304 (4MiB), got %llu",
                             join(p, path, field), (unsigned long long)v);
    }
    return 0;
}

/* ---- common.v2 messages ---- */

static int host_rules(const char *path, const Common__V2__Host *h, bool require_cpu,
                      struct dfc_error *err) {
    char p[PATH_MAX_LEN], sub[PATH_MAX_LEN];
    int r;
    if ((r = nonempty(path, "id", h->id, err)) < 0) {
        return r;
    }
    if (h->type > 3) {
        return dfc_error_set(err, -EINVAL, "%s: must be at most 3, got %u", join(p, path, "type"),
                             (unsigned)h->type);
    }
    if ((r = nonempty(path, "hostname", h->hostname, err)) < 0) {
        return r;
    }
    if (!dfc_addr_is_ip(h->ip)) {
        return dfc_error_set(err, -EINVAL, "%s: `%.64s` is not an IP address", join(p, path, "ip"),
                             h->ip);
    }
    if ((r = port(path, "port", h->port, err)) < 0 ||
        (r = port(path, "download_port", h->download_port, err)) < 0 ||
        (r = bounded(path, "os", h->os, err)) < 0 ||
        (r = bounded(path, "platform", h->platform, err)) < 0 ||
        (r = bounded(path, "platform_family", h->platform_family, err)) < 0 ||
        (r = bounded(path, "platform_version", h->platform_version, err)) < 0 ||
        (r = bounded(path, "kernel_version", h->kernel_version, err)) < 0) {
        return r;
    }
    if (require_cpu && (r = required(path, "cpu", h->cpu, err)) < 0) {
        return r;
    }
    if (h->cpu != NULL) {
        const Common__V2__CPU *c = h->cpu;
        join(sub, path, "cpu");
        if ((r = not_negative(sub, "percent", c->percent, err)) < 0 ||
            (r = not_negative(sub, "process_percent", c->process_percent, err)) < 0) {
            return r;
        }
        if (c->times != NULL) {
            const Common__V2__CPUTimes *t = c->times;
            char tp[PATH_MAX_LEN];
            join(tp, sub, "times");
            if ((r = not_negative(tp, "user", t->user, err)) < 0 ||
                (r = not_negative(tp, "system", t->system, err)) < 0 ||
                (r = not_negative(tp, "idle", t->idle, err)) < 0 ||
                (r = not_negative(tp, "nice", t->nice, err)) < 0 ||
                (r = not_negative(tp, "iowait", t->iowait, err)) < 0 ||
                (r = not_negative(tp, "irq", t->irq, err)) < 0 ||
                (r = not_negative(tp, "softirq", t->softirq, err)) < 0 ||
                (r = not_negative(tp, "steal", t->steal, err)) < 0 ||
                (r = not_negative(tp, "guest", t->guest, err)) < 0 ||
                (r = not_negative(tp, "guest_nice", t->guest_nice, err)) < 0) {
                return r;
            }
        }
    }
    if (h->memory != NULL) {
        join(sub, path, "memory");
        if ((r = percent(sub, "used_percent", h->memory->used_percent, err)) < 0 ||
            (r = percent(sub, "process_used_percent", h->memory->process_used_percent, err)) < 0) {
            return r;
        }
    }
    if (h->network != NULL) {
        join(sub, path, "network");
        const Common__V2__Network *n = h->network;
        if ((r = bounded(sub, "location", n->opt_location_case != 0 ? n->location : NULL, err)) <
                0 ||
            (r = bounded(sub, "idc", n->opt_idc_case != 0 ? n->idc : NULL, err)) < 0) {
            return r;
        }
    }
    if (h->disk != NULL) {
        join(sub, path, "disk");
        if ((r = percent(sub, "used_percent", h->disk->used_percent, err)) < 0 ||
            (r = percent(sub, "inodes_used_percent", h->disk->inodes_used_percent, err)) < 0) {
            return r;
        }
    }
    if (h->build != NULL) {
        const Common__V2__Build *b = h->build;
        join(sub, path, "build");
        if ((r = bounded(sub, "git_version", b->git_version, err)) < 0 ||
            (r = bounded(sub, "git_commit", b->opt_git_commit_case ? b->git_commit : NULL, err)) <
                0 ||
            (r = bounded(sub, "go_version", b->opt_go_version_case ? b->go_version : NULL, err)) <
                0 ||
            (r = bounded(sub, "platform", b->opt_platform_case ? b->platform : NULL, err)) < 0) {
            return r;
        }
    }
    return bounded(path, "name", h->name, err);
}

int sched_validate_host(const char *path, const Common__V2__Host *h, struct dfc_error *err) {
    return host_rules(path, h, false, err);
}

int sched_validate_task(const char *path, const Common__V2__PersistentCacheTask *t,
                        struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    int r;
    if ((r = nonempty(path, "id", t->id, err)) < 0 ||
        (r = uint64_at_least_one(path, "persistent_replica_count", t->persistent_replica_count,
                                 err)) < 0) {
        return r;
    }
    if (t->piece_length < DFC_PIECE_LENGTH_MIN || t->piece_length > DFC_PIECE_LENGTH_MAX) {
        return dfc_error_set(err, -EINVAL,
                             "%s: must be between 4194304 (4MiB) and 67108864 (64MiB), got %llu",
                             join(p, path, "piece_length"), (unsigned long long)t->piece_length);
    }
    if ((r = nonempty(path, "state", t->state, err)) < 0 ||
        (r = required(path, "ttl", t->ttl, err)) < 0 ||
        (r = required(path, "created_at", t->created_at, err)) < 0 ||
        (r = required(path, "updated_at", t->updated_at, err)) < 0) {
        return r;
    }
    return 0;
}

int sched_validate_peer(const char *path, const Common__V2__PersistentCachePeer *pe,
                        struct dfc_error *err) {
    char sub[PATH_MAX_LEN];
    int r;
    if ((r = nonempty(path, "id", pe->id, err)) < 0 ||
        (r = required(path, "cost", pe->cost, err)) < 0 ||
        (r = nonempty(path, "state", pe->state, err)) < 0 ||
        (r = required(path, "task", pe->task, err)) < 0 ||
        (r = sched_validate_task(join(sub, path, "task"), pe->task, err)) < 0 ||
        (r = required(path, "host", pe->host, err)) < 0 ||
        (r = sched_validate_host(join(sub, path, "host"), pe->host, err)) < 0 ||
        (r = required(path, "created_at", pe->created_at, err)) < 0 ||
        (r = required(path, "updated_at", pe->updated_at, err)) < 0) {
        return r;
    }
    return 0;
}

static bool hex_run(const char *s, size_t n) {
    if (strlen(s) != n || n == 0) {
        return false;
    }
    return strspn(s, "0123456789abcdefABCDEF") == n;
}

/* ^(md5:hex32|sha1:hex40|sha256:hex64|sha512:hex128|blake3:hex64|crc32:hex+)$ */
static bool digest_matches(const char *d) {
    static const struct {
        const char *prefix;
        size_t hex;
    } forms[] = {{"md5:", 32},     {"sha1:", 40},   {"sha256:", 64},
                 {"sha512:", 128}, {"blake3:", 64}, {"crc32:", 0}};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        size_t n = strlen(forms[i].prefix);
        if (strncmp(d, forms[i].prefix, n) != 0) {
            continue;
        }
        const char *v = d + n;
        return forms[i].hex != 0 ? hex_run(v, forms[i].hex) : hex_run(v, strlen(v));
    }
    return false;
}

int sched_validate_piece(const char *path, const Common__V2__Piece *pc, struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    int r;
    /* parent_id and content are min_len 1 with ignore_empty: no constraint; parent_id is kept
     * to our length limit because it is looked up. */
    if ((r = bounded(path, "parent_id", pc->opt_parent_id_case != 0 ? pc->parent_id : NULL, err)) <
        0) {
        return r;
    }
    if (pc->digest != NULL && pc->digest[0] != '\0' && !digest_matches(pc->digest)) {
        return dfc_error_set(err, -EINVAL,
                             "%s: `%.80s` is not md5:, sha1:, sha256:, sha512:, blake3: or crc32: "
                             "followed by hex",
                             join(p, path, "digest"), pc->digest);
    }
    if ((r = required(path, "cost", pc->cost, err)) < 0 ||
        (r = required(path, "created_at", pc->created_at, err)) < 0) {
        return r;
    }
    return 0;
}

/* ---- requests ---- */

int sched_validate_announce_host(const Scheduler__V2__AnnounceHostRequest *r,
                                 struct dfc_error *err) {
    int rc = required("", "host", r->host, err);
    if (rc == 0) {
        rc = host_rules("host", r->host, true, err);
    }
    int64_t ns;
    if (rc == 0 && r->interval != NULL && !duration_valid(r->interval, &ns)) {
        rc = dfc_error_set(err, -EINVAL, "interval: not a valid duration");
    }
    return rc;
}

int sched_validate_delete_host(const Scheduler__V2__DeleteHostRequest *r, struct dfc_error *err) {
    return nonempty("", "host_id", r->host_id, err);
}

static int ids3(const char *host_id, const char *task_id, const char *peer_id,
                struct dfc_error *err) {
    int r;
    if ((r = nonempty("", "host_id", host_id, err)) < 0 ||
        (r = nonempty("", "task_id", task_id, err)) < 0) {
        return r;
    }
    return peer_id != NULL ? nonempty("", "peer_id", peer_id, err) : 0;
}

int sched_validate_upload_started(const Scheduler__V2__UploadPersistentCacheTaskStartedRequest *r,
                                  struct dfc_error *err) {
    int rc;
    if ((rc = ids3(r->host_id, r->task_id, r->peer_id, err)) < 0 ||
        (rc = uint64_at_least_one("", "persistent_replica_count", r->persistent_replica_count,
                                  err)) < 0 ||
        (rc = bounded("", "tag", r->opt_tag_case != 0 ? r->tag : NULL, err)) < 0 ||
        (rc = bounded("", "application", r->opt_application_case != 0 ? r->application : NULL,
                      err)) < 0 ||
        (rc = piece_length_min("", "piece_length", r->piece_length, err)) < 0) {
        return rc;
    }
    uint64_t want =
        r->content_length / r->piece_length + (r->content_length % r->piece_length != 0);
    /* The uploader's bitset has piece_count bits, allocated and stored in Redis: bound it
     * (2 MiB of bitset; 64 TiB at the smallest piece length). Ours: upstream has no limit. */
    if (want > SCHED_PIECE_COUNT_MAX) {
        return dfc_error_set(err, -EINVAL,
                             "content_length: at most %u pieces of piece_length %llu, got %llu",
                             (unsigned)SCHED_PIECE_COUNT_MAX, (unsigned long long)r->piece_length,
                             (unsigned long long)want);
    }
    if (r->piece_count != want) {
        return dfc_error_set(err, -EINVAL,
                             "piece_count: must be ceil(content_length / piece_length) = %llu, "
                             "got %u",
                             (unsigned long long)want, (unsigned)r->piece_count);
    }
    /* duration {gte: 300s, lte: 604800s} without `required`: an absent ttl passes (as 0). */
    if (r->ttl != NULL) {
        int64_t ns;
        if (!duration_valid(r->ttl, &ns)) {
            return dfc_error_set(err, -EINVAL, "ttl: not a valid duration");
        }
        if (ns < DFC_TTL_MIN_NS || ns > DFC_TTL_MAX_NS) {
            char b[32];
            dfc_format_duration(ns, b, sizeof(b));
            return dfc_error_set(err, -EINVAL, "ttl: must be between 5m and 168h, got %s", b);
        }
    }
    return 0;
}

int sched_validate_upload_finished(const Scheduler__V2__UploadPersistentCacheTaskFinishedRequest *r,
                                   struct dfc_error *err) {
    return ids3(r->host_id, r->task_id, r->peer_id, err);
}

int sched_validate_upload_failed(const Scheduler__V2__UploadPersistentCacheTaskFailedRequest *r,
                                 struct dfc_error *err) {
    /* description: min_len 1 with ignore_empty, i.e. anything. */
    return ids3(r->host_id, r->task_id, r->peer_id, err);
}

int sched_validate_stat_task(const Scheduler__V2__StatPersistentCacheTaskRequest *r,
                             struct dfc_error *err) {
    return ids3(r->host_id, r->task_id, NULL, err);
}

int sched_validate_delete_task(const Scheduler__V2__DeletePersistentCacheTaskRequest *r,
                               struct dfc_error *err) {
    return ids3(r->host_id, r->task_id, NULL, err);
}

int sched_validate_stat_peer(const Scheduler__V2__StatPersistentCachePeerRequest *r,
                             struct dfc_error *err) {
    return ids3(r->host_id, r->task_id, r->peer_id, err);
}

int sched_validate_delete_peer(const Scheduler__V2__DeletePersistentCachePeerRequest *r,
                               struct dfc_error *err) {
    return ids3(r->host_id, r->task_id, r->peer_id, err);
}

int sched_validate_announce_peer(const Scheduler__V2__AnnouncePersistentCachePeerRequest *r,
                                 struct dfc_error *err) {
    char p[PATH_MAX_LEN];
    int rc = ids3(r->host_id, r->task_id, r->peer_id, err);
    if (rc < 0) {
        return rc;
    }
    switch (r->request_case) {
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_REGISTER_PERSISTENT_CACHE_PEER_REQUEST: {
        const Scheduler__V2__RegisterPersistentCachePeerRequest *g =
            r->register_persistent_cache_peer_request;
        const char *path = "register_persistent_cache_peer_request";
        if ((rc = bounded(path, "tag", g->opt_tag_case != 0 ? g->tag : NULL, err)) < 0 ||
            (rc = bounded(path, "application", g->opt_application_case != 0 ? g->application : NULL,
                          err)) < 0) {
            return rc;
        }
        return piece_length_min(path, "piece_length", g->piece_length, err);
    }
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_RESCHEDULE_PERSISTENT_CACHE_PEER_REQUEST: {
        const Scheduler__V2__ReschedulePersistentCachePeerRequest *s =
            r->reschedule_persistent_cache_peer_request;
        for (size_t i = 0; i < s->n_candidate_parents; i++) {
            snprintf(p, sizeof(p),
                     "reschedule_persistent_cache_peer_request.candidate_parents[%zu]", i);
            if (s->candidate_parents[i] == NULL) {
                return dfc_error_set(err, -EINVAL, "%s: required", p);
            }
            if ((rc = sched_validate_peer(p, s->candidate_parents[i], err)) < 0) {
                return rc;
            }
        }
        return 0;
    }
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PIECE_FINISHED_REQUEST: {
        const Scheduler__V2__DownloadPieceFinishedRequest *f = r->download_piece_finished_request;
        const char *path = "download_piece_finished_request";
        if ((rc = required(path, "piece", f->piece, err)) < 0) {
            return rc;
        }
        return sched_validate_piece(join(p, path, "piece"), f->piece, err);
    }
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PIECE_FAILED_REQUEST:
        return nonempty("download_piece_failed_request", "parent_id",
                        r->download_piece_failed_request->parent_id, err);
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_STARTED_REQUEST:
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_FINISHED_REQUEST:
    case SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PERSISTENT_CACHE_PEER_FAILED_REQUEST:
        return 0;
    default:
        return dfc_error_set(err, -EINVAL, "request: required (one of its fields must be set)");
    }
}
