/*
 * model.c - the host, task and peer records as upstream's Redis hashes: one table per record
 * lists every field in upstream's HSET order with its encoding, and both directions walk that
 * table (docs/dragonfly-compat.md, "Scheduler on Redis").
 *
 * Decoding follows the Go readers: string fields that are absent read as "" (hashes written
 * by older upstream versions lack `name`), every number, bool, time, state and the two
 * structured peer fields must be present and parse, or the record "does not exist" (-ENOENT
 * naming the field). An unknown host `type` name reads as normal, as upstream's
 * ParseHostType does.
 */
#include "model.h"
#include "model_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind {
    K_STR,   /* char * */
    K_I32,   /* int32_t */
    K_U32,   /* uint32_t */
    K_I64,   /* int64_t: integers and durations in ns */
    K_U64,   /* uint64_t */
    K_F64,   /* double */
    K_BOOL,  /* bool */
    K_TIME,  /* int64_t seconds */
    K_HTYPE, /* uint32_t host type, stored by name */
    K_TSTATE,
    K_PSTATE,
    K_BITSET,        /* struct sched_bitset */
    K_BLOCK_PARENTS, /* sched_peer.block_parents, n_block_parents, block_parents_null */
};

struct field {
    const char *name;
    enum kind kind;
    size_t off;
};

#define HF(n, k, m)                                                                                \
    { n, k, offsetof(struct sched_host, m) }
static const struct field host_fields[] = {
    HF("id", K_STR, id),
    HF("type", K_HTYPE, type),
    HF("name", K_STR, name),
    HF("hostname", K_STR, hostname),
    HF("ip", K_STR, ip),
    HF("port", K_I32, port),
    HF("download_port", K_I32, download_port),
    HF("proxy_port", K_I32, proxy_port),
    HF("disable_shared", K_BOOL, disable_shared),
    HF("os", K_STR, os),
    HF("platform", K_STR, platform),
    HF("platform_family", K_STR, platform_family),
    HF("platform_version", K_STR, platform_version),
    HF("kernel_version", K_STR, kernel_version),
    HF("cpu_logical_count", K_U32, cpu.logical_count),
    HF("cpu_physical_count", K_U32, cpu.physical_count),
    HF("cpu_percent", K_F64, cpu.percent),
    HF("cpu_process_percent", K_F64, cpu.process_percent),
    HF("cpu_times_user", K_F64, cpu.user),
    HF("cpu_times_system", K_F64, cpu.system),
    HF("cpu_times_idle", K_F64, cpu.idle),
    HF("cpu_times_nice", K_F64, cpu.nice),
    HF("cpu_times_iowait", K_F64, cpu.iowait),
    HF("cpu_times_irq", K_F64, cpu.irq),
    HF("cpu_times_softirq", K_F64, cpu.softirq),
    HF("cpu_times_steal", K_F64, cpu.steal),
    HF("cpu_times_guest", K_F64, cpu.guest),
    HF("cpu_times_guest_nice", K_F64, cpu.guest_nice),
    HF("memory_total", K_U64, memory.total),
    HF("memory_available", K_U64, memory.available),
    HF("memory_used", K_U64, memory.used),
    HF("memory_used_percent", K_F64, memory.used_percent),
    HF("memory_process_used_percent", K_F64, memory.process_used_percent),
    HF("memory_free", K_U64, memory.free),
    HF("network_tcp_connection_count", K_U32, network.tcp_connection_count),
    HF("network_upload_tcp_connection_count", K_U32, network.upload_tcp_connection_count),
    HF("network_location", K_STR, network.location),
    HF("network_idc", K_STR, network.idc),
    HF("network_rx_bandwidth", K_U64, network.rx_bandwidth),
    HF("network_max_rx_bandwidth", K_U64, network.max_rx_bandwidth),
    HF("network_tx_bandwidth", K_U64, network.tx_bandwidth),
    HF("network_max_tx_bandwidth", K_U64, network.max_tx_bandwidth),
    HF("disk_total", K_U64, disk.total),
    HF("disk_free", K_U64, disk.free),
    HF("disk_used", K_U64, disk.used),
    HF("disk_used_percent", K_F64, disk.used_percent),
    HF("disk_inodes_total", K_U64, disk.inodes_total),
    HF("disk_inodes_used", K_U64, disk.inodes_used),
    HF("disk_inodes_free", K_U64, disk.inodes_free),
    HF("disk_inodes_used_percent", K_F64, disk.inodes_used_percent),
    HF("disk_write_bandwidth", K_U64, disk.write_bandwidth),
    HF("disk_read_bandwidth", K_U64, disk.read_bandwidth),
    HF("build_git_version", K_STR, build.git_version),
    HF("build_git_commit", K_STR, build.git_commit),
    HF("build_go_version", K_STR, build.go_version),
    HF("build_platform", K_STR, build.platform),
    HF("scheduler_cluster_id", K_U64, scheduler_cluster_id),
    HF("announce_interval", K_I64, announce_interval_ns),
    HF("created_at", K_TIME, created_at),
    HF("updated_at", K_TIME, updated_at),
};

#define TF(n, k, m)                                                                                \
    { n, k, offsetof(struct sched_task, m) }
static const struct field task_fields[] = {
    TF("id", K_STR, id),
    TF("persistent_replica_count", K_U64, persistent_replica_count),
    TF("tag", K_STR, tag),
    TF("application", K_STR, application),
    TF("piece_length", K_U64, piece_length),
    TF("content_length", K_U64, content_length),
    TF("total_piece_count", K_U32, total_piece_count),
    TF("state", K_TSTATE, state),
    TF("ttl", K_I64, ttl_ns),
    TF("created_at", K_TIME, created_at),
    TF("updated_at", K_TIME, updated_at),
};

#define PF(n, k, m)                                                                                \
    { n, k, offsetof(struct sched_peer, m) }
static const struct field peer_fields[] = {
    PF("id", K_STR, id),
    PF("persistent", K_BOOL, persistent),
    PF("finished_pieces", K_BITSET, finished_pieces),
    PF("state", K_PSTATE, state),
    PF("block_parents", K_BLOCK_PARENTS, block_parents),
    PF("task_id", K_STR, task_id),
    PF("host_id", K_STR, host_id),
    PF("cost", K_I64, cost_ns),
    PF("created_at", K_TIME, created_at),
    PF("updated_at", K_TIME, updated_at),
    PF("concurrent_piece_count", K_U32, concurrent_piece_count),
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* upstream's pkg/types HostType names, by number; anything else is "normal". */
static const char *host_type_name(uint32_t t) {
    switch (t) {
    case 1:
        return "super";
    case 2:
        return "strong";
    case 3:
        return "weak";
    default:
        return "normal";
    }
}

static uint32_t host_type_parse(const char *s, size_t len) {
    static const char *const names[] = {"normal", "super", "strong", "weak"};
    for (uint32_t i = 1; i < 4; i++) {
        if (strlen(names[i]) == len && memcmp(s, names[i], len) == 0) {
            return i;
        }
    }
    return 0;
}

/* ---- encoding ---- */

void sched_fields_done(struct sched_fields *f) {
    for (size_t i = 0; i < f->n; i++) {
        free(f->value[i]);
        f->value[i] = NULL;
    }
    f->n = 0;
}

static int add_value(struct sched_fields *f, const char *name, char *value, size_t len) {
    if (value == NULL) {
        return -ENOMEM;
    }
    f->name[f->n] = name;
    f->value[f->n] = value;
    f->len[f->n] = len;
    f->n++;
    return 0;
}

static int add_copy(struct sched_fields *f, const char *name, const char *s) {
    char *v = strdup(s != NULL ? s : "");
    return add_value(f, name, v, v != NULL ? strlen(v) : 0);
}

static int encode_one(const struct field *fd, const void *rec, struct sched_fields *f) {
    const char *p = (const char *)rec + fd->off;
    char buf[400]; /* a double in plain decimal takes up to 327 bytes (5e-324) */
    switch (fd->kind) {
    case K_STR:
        return add_copy(f, fd->name, *(char *const *)p);
    case K_I32:
        snprintf(buf, sizeof(buf), "%" PRId32, *(const int32_t *)p);
        break;
    case K_U32:
        snprintf(buf, sizeof(buf), "%" PRIu32, *(const uint32_t *)p);
        break;
    case K_I64:
        snprintf(buf, sizeof(buf), "%" PRId64, *(const int64_t *)p);
        break;
    case K_U64:
        snprintf(buf, sizeof(buf), "%" PRIu64, *(const uint64_t *)p);
        break;
    case K_F64: {
        int r = sched_format_double(*(const double *)p, buf, sizeof(buf));
        if (r < 0) {
            return r;
        }
        break;
    }
    case K_BOOL:
        snprintf(buf, sizeof(buf), "%s", *(const bool *)p ? "1" : "0");
        break;
    case K_TIME: {
        int r = sched_format_time(*(const int64_t *)p, buf, sizeof(buf));
        if (r < 0) {
            return r;
        }
        break;
    }
    case K_HTYPE:
        snprintf(buf, sizeof(buf), "%s", host_type_name(*(const uint32_t *)p));
        break;
    case K_TSTATE:
        snprintf(buf, sizeof(buf), "%s", sched_task_state_name(*(const enum sched_task_state *)p));
        break;
    case K_PSTATE:
        snprintf(buf, sizeof(buf), "%s", sched_peer_state_name(*(const enum sched_peer_state *)p));
        break;
    case K_BITSET: {
        uint8_t *out;
        size_t len;
        int r = sched_bitset_marshal((const struct sched_bitset *)p, &out, &len);
        return r < 0 ? r : add_value(f, fd->name, (char *)out, len);
    }
    case K_BLOCK_PARENTS: {
        const struct sched_peer *peer = rec;
        if (peer->n_block_parents > SCHED_BLOCK_PARENTS_MAX) {
            return -EMSGSIZE; /* the decoder would refuse it: the peer would vanish */
        }
        char *out;
        size_t len;
        int r = sched__json_strings_encode(peer->block_parents, peer->n_block_parents,
                                           peer->block_parents_null, &out, &len);
        return r < 0 ? r : add_value(f, fd->name, out, len);
    }
    }
    return add_copy(f, fd->name, buf);
}

static int encode(const struct field *fields, size_t n, const void *rec, struct sched_fields *out) {
    out->n = 0;
    for (size_t i = 0; i < n; i++) {
        int r = encode_one(&fields[i], rec, out);
        if (r < 0) {
            sched_fields_done(out);
            return r;
        }
    }
    return 0;
}

int sched_host_encode(const struct sched_host *h, struct sched_fields *out) {
    return encode(host_fields, N_OF(host_fields), h, out);
}

int sched_task_encode(const struct sched_task *t, struct sched_fields *out) {
    return encode(task_fields, N_OF(task_fields), t, out);
}

int sched_peer_encode(const struct sched_peer *p, struct sched_fields *out) {
    return encode(peer_fields, N_OF(peer_fields), p, out);
}

/* ---- decoding ---- */

static int decode_one(const struct field *fd, const char *what, const char *v, size_t len,
                      void *rec, struct dfc_error *err) {
    char *p = (char *)rec + fd->off;
    int r = 0;
    if (v == NULL) {
        if (fd->kind == K_STR || fd->kind == K_HTYPE) {
            v = "";
            len = 0;
        } else {
            return dfc_error_set(err, -ENOENT, "%s field `%s` is missing", what, fd->name);
        }
    }
    switch (fd->kind) {
    case K_STR: {
        if (memchr(v, '\0', len) != NULL) {
            r = -EINVAL;
            break;
        }
        char *s = strndup(v, len);
        if (s == NULL) {
            return dfc_error_set(err, -ENOMEM, "%s field `%s`: out of memory", what, fd->name);
        }
        *(char **)p = s;
        return 0;
    }
    case K_I32: {
        int64_t x;
        r = sched__parse_int(v, len, 32, &x);
        if (r == 0) {
            *(int32_t *)p = (int32_t)x;
        }
        break;
    }
    case K_U32: {
        uint64_t x;
        r = sched__parse_uint(v, len, 32, &x);
        if (r == 0) {
            *(uint32_t *)p = (uint32_t)x;
        }
        break;
    }
    case K_I64:
        r = sched__parse_int(v, len, 64, (int64_t *)p);
        break;
    case K_U64:
        r = sched__parse_uint(v, len, 64, (uint64_t *)p);
        break;
    case K_F64:
        r = sched__parse_double(v, len, (double *)p);
        break;
    case K_BOOL:
        r = sched__parse_bool(v, len, (bool *)p);
        break;
    case K_TIME: {
        char buf[64];
        if (len >= sizeof(buf) || memchr(v, '\0', len) != NULL) {
            r = -EINVAL;
            break;
        }
        memcpy(buf, v, len);
        buf[len] = '\0';
        r = sched_parse_time(buf, (int64_t *)p);
        break;
    }
    case K_HTYPE:
        *(uint32_t *)p = host_type_parse(v, len);
        return 0;
    case K_TSTATE:
    case K_PSTATE: {
        char buf[32];
        if (len >= sizeof(buf) || memchr(v, '\0', len) != NULL) {
            r = -EINVAL;
            break;
        }
        memcpy(buf, v, len);
        buf[len] = '\0';
        r = fd->kind == K_TSTATE ? sched_task_state_parse(buf, (enum sched_task_state *)p)
                                 : sched_peer_state_parse(buf, (enum sched_peer_state *)p);
        break;
    }
    case K_BITSET:
        r = sched_bitset_unmarshal((const uint8_t *)v, len, (struct sched_bitset *)p);
        break;
    case K_BLOCK_PARENTS: {
        struct sched_peer *peer = rec;
        r = sched__json_strings_decode(v, len, SCHED_BLOCK_PARENTS_MAX, &peer->block_parents,
                                       &peer->n_block_parents, &peer->block_parents_null);
        break;
    }
    }
    if (r == -ENOMEM) {
        return dfc_error_set(err, -ENOMEM, "%s field `%s`: out of memory", what, fd->name);
    }
    if (r < 0) {
        return dfc_error_set(err, -ENOENT, "%s field `%s` is not parsable", what, fd->name);
    }
    return 0;
}

/* Frees what decode filled, by the same table (the struct was zeroed first). */
static void release(const struct field *fields, size_t n, void *rec) {
    for (size_t i = 0; i < n; i++) {
        char *p = (char *)rec + fields[i].off;
        if (fields[i].kind == K_STR) {
            free(*(char **)p);
        } else if (fields[i].kind == K_BITSET) {
            sched_bitset_done((struct sched_bitset *)p);
        } else if (fields[i].kind == K_BLOCK_PARENTS) {
            struct sched_peer *peer = rec;
            sched__strings_free(peer->block_parents, peer->n_block_parents);
        }
    }
}

static int decode(const struct field *fields, size_t n, const char *what, size_t size,
                  const char *const *kv, const size_t *lens, size_t n_kv, void *rec,
                  struct dfc_error *err) {
    memset(rec, 0, size);
    if (n_kv == 0) {
        return dfc_error_set(err, -ENOENT, "%s not found", what);
    }
    if (n_kv % 2 != 0) {
        return dfc_error_set(err, -ENOENT, "%s hash is malformed (%zu elements)", what, n_kv);
    }
    for (size_t i = 0; i < n; i++) {
        const char *v = NULL;
        size_t vlen = 0;
        size_t nlen = strlen(fields[i].name);
        for (size_t j = 0; j < n_kv; j += 2) {
            if (lens[j] == nlen && memcmp(kv[j], fields[i].name, nlen) == 0) {
                v = kv[j + 1];
                vlen = lens[j + 1];
            }
        }
        int r = decode_one(&fields[i], what, v, vlen, rec, err);
        if (r < 0) {
            release(fields, n, rec);
            memset(rec, 0, size);
            return r;
        }
    }
    return 0;
}

int sched_host_decode(const char *const *kv, const size_t *lens, size_t n_kv, struct sched_host *h,
                      struct dfc_error *err) {
    return decode(host_fields, N_OF(host_fields), "host", sizeof(*h), kv, lens, n_kv, h, err);
}

int sched_task_decode(const char *const *kv, const size_t *lens, size_t n_kv, struct sched_task *t,
                      struct dfc_error *err) {
    return decode(task_fields, N_OF(task_fields), "task", sizeof(*t), kv, lens, n_kv, t, err);
}

int sched_peer_decode(const char *const *kv, const size_t *lens, size_t n_kv, struct sched_peer *p,
                      struct dfc_error *err) {
    return decode(peer_fields, N_OF(peer_fields), "peer", sizeof(*p), kv, lens, n_kv, p, err);
}

void sched_host_done(struct sched_host *h) {
    release(host_fields, N_OF(host_fields), h);
    memset(h, 0, sizeof(*h));
}

void sched_task_done(struct sched_task *t) {
    release(task_fields, N_OF(task_fields), t);
    memset(t, 0, sizeof(*t));
}

void sched_peer_done(struct sched_peer *p) {
    release(peer_fields, N_OF(peer_fields), p);
    memset(p, 0, sizeof(*p));
}

int sched_task_size_scope(const struct sched_task *t) {
    enum { NORMAL = 0, SMALL = 1, TINY = 2, EMPTY = 3 }; /* common.v2.SizeScope */
    if (t->content_length == 0) {
        return EMPTY;
    }
    if (t->content_length <= 128) {
        return TINY;
    }
    if (t->total_piece_count == 1) {
        return SMALL;
    }
    return NORMAL;
}
