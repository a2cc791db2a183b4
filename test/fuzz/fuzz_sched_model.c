/*
 * Fuzz target: the scheduler's decoders of Redis data (scheduler/model*.c), which any Redis
 * client can write. The input is split at 0x1e bytes into an HGETALL-style name/value list
 * and decoded as a host, a task and a peer; the whole input also goes through the bitset,
 * block_parents JSON, time and float parsers. A record that decodes must encode, and
 * decoding that encoding must give the same bytes again (encode o decode is stable).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "model_internal.h"

#define MAX_ITEMS 256

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    setenv("TZ", "UTC", 1);
    tzset();
    return 0;
}

static void same(const struct sched_fields *a, const struct sched_fields *b) {
    if (a->n != b->n) {
        abort();
    }
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->name[i], b->name[i]) != 0 || a->len[i] != b->len[i] ||
            memcmp(a->value[i], b->value[i], a->len[i]) != 0) {
            abort();
        }
    }
}

/* decode -> encode -> decode -> encode: both encodings equal. */
#define ROUND_TRIP(type, dec, enc, kv_, lens_, n_)                                                 \
    do {                                                                                           \
        struct type rec, again;                                                                    \
        struct sched_fields f1, f2;                                                                \
        struct dfc_error err;                                                                      \
        if (dec(kv_, lens_, n_, &rec, &err) != 0) {                                                \
            break;                                                                                 \
        }                                                                                          \
        if (enc(&rec, &f1) == 0) {                                                                 \
            const char *kv2[128];                                                                  \
            size_t lens2[128];                                                                     \
            for (size_t i = 0; i < f1.n; i++) {                                                    \
                kv2[2 * i] = f1.name[i];                                                           \
                lens2[2 * i] = strlen(f1.name[i]);                                                 \
                kv2[2 * i + 1] = f1.value[i];                                                      \
                lens2[2 * i + 1] = f1.len[i];                                                      \
            }                                                                                      \
            if (dec(kv2, lens2, 2 * f1.n, &again, &err) != 0 || enc(&again, &f2) != 0) {           \
                abort();                                                                           \
            }                                                                                      \
            same(&f1, &f2);                                                                        \
            sched_fields_done(&f2);                                                                \
            type##_done(&again);                                                                   \
            sched_fields_done(&f1);                                                                \
        }                                                                                          \
        type##_done(&rec);                                                                         \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;

    struct sched_bitset b;
    if (sched_bitset_unmarshal(data, size, &b) == 0) {
        (void)sched_bitset_count(&b);
        sched_bitset_done(&b);
    }
    char **list;
    size_t n;
    bool null;
    if (sched__json_strings_decode(s, size, 64, &list, &n, &null) == 0) {
        char *out;
        size_t out_len;
        if (sched__json_strings_encode(list, n, null, &out, &out_len) != 0) {
            abort();
        }
        free(out);
        sched__strings_free(list, n);
    }
    double d;
    (void)sched__parse_double(s, size, &d);
    if (size < 64 && memchr(s, '\0', size) == NULL) {
        char buf[64];
        memcpy(buf, s, size);
        buf[size] = '\0';
        int64_t t;
        (void)sched_parse_time(buf, &t);
    }

    const char *kv[MAX_ITEMS];
    size_t lens[MAX_ITEMS];
    size_t items = 0, start = 0;
    for (size_t i = 0; i <= size && items < MAX_ITEMS; i++) {
        if (i == size || data[i] == 0x1e) {
            kv[items] = s + start;
            lens[items++] = i - start;
            start = i + 1;
        }
    }
    items &= ~(size_t)1;
    ROUND_TRIP(sched_host, sched_host_decode, sched_host_encode, kv, lens, items);
    ROUND_TRIP(sched_task, sched_task_decode, sched_task_encode, kv, lens, items);
    ROUND_TRIP(sched_peer, sched_peer_decode, sched_peer_encode, kv, lens, items);
    return 0;
}
