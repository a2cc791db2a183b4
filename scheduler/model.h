/*
 * model.h - the scheduler's persistent-cache records (host, task, peer) and their exact
 * encoding as upstream's Redis hash fields (docs/dragonfly-compat.md, "Scheduler on Redis").
 *
 * Encodings, byte for byte as upstream's go-redis writer: ints and uints in decimal, floats in
 * the shortest plain decimal form that round-trips (Go 'f', -1: "0.5", "12", never exponent),
 * bools "1"/"0", times RFC 3339 with second precision in the process's local offset ("Z" under
 * UTC), durations in integer nanoseconds, finished_pieces as a bits-and-blooms bitset
 * (u64 BE bit length, then ceil(len/64) u64 BE words, bit i in word i/64 at bit i%64),
 * block_parents as a JSON array of strings (or the literal null).
 *
 * Ownership: every char * in these structs is a heap string owned by the struct (never NULL
 * once decoded; "" when empty); release with the matching *_done(). Decoders fill a zeroed
 * struct and leave it zeroed on error.
 */
#ifndef SCHED_MODEL_H
#define SCHED_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "fsm.h"

struct sched_bitset {
    uint64_t len;    /* bits */
    uint64_t *words; /* ceil(len / 64), heap; NULL when len is 0 */
};
int sched_bitset_init(struct sched_bitset *b, uint64_t len); /* all clear */
int sched_bitset_set(struct sched_bitset *b, uint64_t i);    /* grows len to i + 1 */
void sched_bitset_set_all(struct sched_bitset *b);           /* bits 0..len-1 */
bool sched_bitset_test(const struct sched_bitset *b, uint64_t i);
uint64_t sched_bitset_count(const struct sched_bitset *b);
void sched_bitset_done(struct sched_bitset *b);
/* Marshal into a malloc'd buffer of 8 + 8 * words bytes; unmarshal rejects a length that does
 * not match the words that follow (-EBADMSG) and any bit length above 2^32. */
int sched_bitset_marshal(const struct sched_bitset *b, uint8_t **out, size_t *out_len);
int sched_bitset_unmarshal(const uint8_t *buf, size_t len, struct sched_bitset *b);

enum sched_host_type { SCHED_HOST_NORMAL = 0, SCHED_HOST_SUPER = 1 }; /* stored "normal"/"super" */

struct sched_host {
    char *id, *name, *hostname, *ip;
    uint32_t type;
    int32_t port, download_port, proxy_port;
    bool disable_shared;
    char *os, *platform, *platform_family, *platform_version, *kernel_version;
    struct {
        uint32_t logical_count, physical_count;
        double percent, process_percent;
        double user, system, idle, nice, iowait, irq, softirq, steal, guest, guest_nice;
    } cpu;
    struct {
        uint64_t total, available, used, free;
        double used_percent, process_used_percent;
    } memory;
    struct {
        uint32_t tcp_connection_count, upload_tcp_connection_count;
        char *location, *idc;
        uint64_t rx_bandwidth, max_rx_bandwidth, tx_bandwidth, max_tx_bandwidth;
    } network;
    struct {
        uint64_t total, free, used, inodes_total, inodes_used, inodes_free;
        double used_percent, inodes_used_percent;
        uint64_t write_bandwidth, read_bandwidth;
    } disk;
    struct {
        char *git_version, *git_commit, *go_version, *platform;
    } build;
    uint64_t scheduler_cluster_id;
    int64_t announce_interval_ns;
    int64_t created_at, updated_at; /* seconds since the epoch */
};

struct sched_task {
    char *id;
    uint64_t persistent_replica_count;
    char *tag, *application;
    uint64_t piece_length, content_length;
    uint32_t total_piece_count;
    enum sched_task_state state;
    int64_t ttl_ns;
    int64_t created_at, updated_at;
};

/* Most ids a peer's block_parents may hold, written or read: far more than reschedules need.
 * Encoding a peer over it fails with -EMSGSIZE (RESOURCE_EXHAUSTED). */
#define SCHED_BLOCK_PARENTS_MAX 4096

struct sched_peer {
    char *id;
    bool persistent;
    struct sched_bitset finished_pieces;
    enum sched_peer_state state;
    char **block_parents; /* NULL with n_block_parents 0 and block_parents_null: JSON null */
    size_t n_block_parents;
    bool block_parents_null;
    char *task_id, *host_id;
    int64_t cost_ns;
    int64_t created_at, updated_at;
    uint32_t concurrent_piece_count; /* default 8 */
};

/* A hash as field/value pairs in upstream's HSET order; values are binary-safe. */
struct sched_fields {
    size_t n;
    const char *name[64];
    char *value[64]; /* heap */
    size_t len[64];
};
void sched_fields_done(struct sched_fields *f);

int sched_host_encode(const struct sched_host *h, struct sched_fields *out);
int sched_task_encode(const struct sched_task *t, struct sched_fields *out);
int sched_peer_encode(const struct sched_peer *p, struct sched_fields *out);

/* Decode from an HGETALL reply's flat name/value array. A missing or unparsable field is
 * -ENOENT ("the record does not exist", as upstream treats it) with err naming the field. */
int sched_host_decode(const char *const *kv, const size_t *lens, size_t n_kv, struct sched_host *h,
                      struct dfc_error *err);
int sched_task_decode(const char *const *kv, const size_t *lens, size_t n_kv, struct sched_task *t,
                      struct dfc_error *err);
int sched_peer_decode(const char *const *kv, const size_t *lens, size_t n_kv, struct sched_peer *p,
                      struct dfc_error *err);

void sched_host_done(struct sched_host *h);
void sched_task_done(struct sched_task *t);
void sched_peer_done(struct sched_peer *p);

/* Upstream's SizeScope of a task: EMPTY (content 0), TINY (<= 128 B), SMALL (one piece),
 * NORMAL; values as common.v2.SizeScope. */
int sched_task_size_scope(const struct sched_task *t);

/* The encodings on their own, for tests and for the store's scripts. */
int sched_format_time(int64_t unix_seconds, char *buf, size_t len); /* RFC 3339, local offset */
int sched_parse_time(const char *s, int64_t *unix_seconds);
int sched_format_double(double v, char *buf, size_t len); /* Go 'f', -1 */

#endif /* SCHED_MODEL_H */
