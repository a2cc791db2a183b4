/*
 * Tests for scheduler/model.c and model_codec.c: every encoding against hand-written bytes
 * (upstream's Go writer is the reference), round trips, and the decoder's refusals of missing,
 * unparsable and oversized values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"

#define T0 INT64_C(1764595200) /* 2025-12-01T13:20:00Z */

static void set_tz(const char *tz) {
    setenv("TZ", tz, 1);
    tzset();
}

static int tz_utc(void **state) {
    set_tz("UTC");
    return 0;
}

/* ---- bitset ---- */

static void expect_marshal(const struct sched_bitset *b, const char *hex) {
    uint8_t *out;
    size_t len;
    assert_int_equal(sched_bitset_marshal(b, &out, &len), 0);
    char got[512] = "";
    for (size_t i = 0; i < len && 2 * i + 2 < sizeof(got); i++) {
        snprintf(got + 2 * i, 3, "%02x", out[i]);
    }
    assert_string_equal(got, hex);
    free(out);
}

static void test_bitset_bytes(void **state) {
    struct sched_bitset b;
    /* New(0) */
    assert_int_equal(sched_bitset_init(&b, 0), 0);
    assert_null(b.words);
    expect_marshal(&b, "0000000000000000");
    sched_bitset_done(&b);
    /* New(3) + SetAll */
    assert_int_equal(sched_bitset_init(&b, 3), 0);
    sched_bitset_set_all(&b);
    expect_marshal(&b, "0000000000000003"
                       "0000000000000007");
    assert_int_equal(sched_bitset_count(&b), 3);
    sched_bitset_done(&b);
    /* &bitset.BitSet{} + Set(5) */
    b = (struct sched_bitset){0};
    assert_int_equal(sched_bitset_set(&b, 5), 0);
    assert_int_equal(b.len, 6);
    expect_marshal(&b, "0000000000000006"
                       "0000000000000020");
    assert_true(sched_bitset_test(&b, 5));
    assert_false(sched_bitset_test(&b, 4));
    assert_false(sched_bitset_test(&b, 6));
    assert_false(sched_bitset_test(&b, 1000));
    /* growing across a word boundary keeps the old bits and zeroes the new word */
    assert_int_equal(sched_bitset_set(&b, 64), 0);
    expect_marshal(&b, "0000000000000041"
                       "0000000000000020"
                       "0000000000000001");
    assert_int_equal(sched_bitset_set(&b, 1), 0); /* below len: no growth */
    assert_int_equal(b.len, 65);
    assert_int_equal(sched_bitset_count(&b), 3);
    sched_bitset_done(&b);
    /* New(70) + SetAll */
    assert_int_equal(sched_bitset_init(&b, 70), 0);
    sched_bitset_set_all(&b);
    expect_marshal(&b, "0000000000000046"
                       "ffffffffffffffff"
                       "000000000000003f");
    assert_int_equal(sched_bitset_count(&b), 70);
    sched_bitset_done(&b);
    /* New(64) + SetAll: an exact word */
    assert_int_equal(sched_bitset_init(&b, 64), 0);
    sched_bitset_set_all(&b);
    expect_marshal(&b, "0000000000000040"
                       "ffffffffffffffff");
    sched_bitset_done(&b);
    /* limits */
    assert_int_equal(sched_bitset_init(&b, (UINT64_C(1) << 32) + 1), -ERANGE);
    b = (struct sched_bitset){0};
    assert_int_equal(sched_bitset_set(&b, UINT64_C(1) << 32), -ERANGE);
    assert_int_equal(b.len, 0);
}

static void test_bitset_unmarshal(void **state) {
    struct sched_bitset b;
    const uint8_t ok[] = {0,    0,    0,    0,    0, 0, 0, 0x46, 0xff, 0xff, 0xff, 0xff,
                          0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,    0,    0,    0,    0x3f};
    assert_int_equal(sched_bitset_unmarshal(ok, sizeof(ok), &b), 0);
    assert_int_equal(b.len, 70);
    assert_true(sched_bitset_test(&b, 69));
    assert_false(sched_bitset_test(&b, 70));
    assert_int_equal(sched_bitset_count(&b), 70);
    sched_bitset_done(&b);
    /* empty: length 0, no words */
    const uint8_t zero[8] = {0};
    assert_int_equal(sched_bitset_unmarshal(zero, 8, &b), 0);
    assert_int_equal(b.len, 0);
    assert_null(b.words);
    /* shorter than the length word, truncated words, trailing bytes */
    assert_int_equal(sched_bitset_unmarshal(ok, 0, &b), -EBADMSG);
    assert_int_equal(sched_bitset_unmarshal(ok, 7, &b), -EBADMSG);
    assert_int_equal(sched_bitset_unmarshal(ok, sizeof(ok) - 1, &b), -EBADMSG);
    assert_int_equal(sched_bitset_unmarshal(ok, 16, &b), -EBADMSG);
    uint8_t longer[sizeof(ok) + 8] = {0};
    memcpy(longer, ok, sizeof(ok));
    assert_int_equal(sched_bitset_unmarshal(longer, sizeof(longer), &b), -EBADMSG);
    assert_int_equal(sched_bitset_unmarshal(longer, sizeof(ok) + 3, &b), -EBADMSG);
    /* a huge claimed length with few bytes is refused before any allocation */
    const uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(sched_bitset_unmarshal(huge, sizeof(huge), &b), -EBADMSG);
    const uint8_t above[16] = {0, 0, 0, 1, 0, 0, 0, 1}; /* 2^32 + 1 bits */
    assert_int_equal(sched_bitset_unmarshal(above, sizeof(above), &b), -EBADMSG);
    const uint8_t at_limit[16] = {0, 0, 0, 1, 0, 0, 0, 0}; /* 2^32 bits need 2^26 words */
    assert_int_equal(sched_bitset_unmarshal(at_limit, sizeof(at_limit), &b), -EBADMSG);
    assert_int_equal(b.len, 0);
    assert_null(b.words);
    /* bits past len in the last word are kept (byte-exact round trip) but are not members */
    const uint8_t dirty[16] = {0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0xff};
    assert_int_equal(sched_bitset_unmarshal(dirty, sizeof(dirty), &b), 0);
    assert_int_equal(sched_bitset_count(&b), 2);
    assert_false(sched_bitset_test(&b, 2));
    expect_marshal(&b, "0000000000000002"
                       "00000000000000ff");
    sched_bitset_done(&b);
}

/* ---- floats, times, durations, bools ---- */

static void expect_double(double v, const char *want) {
    char buf[400];
    assert_int_equal(sched_format_double(v, buf, sizeof(buf)), 0);
    assert_string_equal(buf, want);
}

static void test_doubles(void **state) {
    expect_double(0, "0");
    expect_double(-0.0, "-0");
    expect_double(0.5, "0.5");
    expect_double(12, "12");
    expect_double(-2.5, "-2.5");
    expect_double(100, "100");
    expect_double(1e21, "1000000000000000000000");
    expect_double(1e23, "100000000000000000000000");
    expect_double(1e-7, "0.0000001");
    expect_double(0.1 + 0.2, "0.30000000000000004");
    expect_double(100.0 / 3.0, "33.333333333333336");
    expect_double(123456.789, "123456.789");
    /* Next to a power of two the shortest form is not the nearest p-digit one. */
    expect_double(ldexp(1, -24), "0.00000005960464477539063");
    expect_double(ldexp(1, -44), "0.00000000000005684341886080802");
    expect_double(NAN, "NaN");
    expect_double(INFINITY, "+Inf");
    expect_double(-INFINITY, "-Inf");
    /* the extremes fit in 400 bytes */
    char buf[400];
    assert_int_equal(sched_format_double(1.7976931348623157e308, buf, sizeof(buf)), 0);
    assert_int_equal(strlen(buf), 309);
    assert_memory_equal(buf, "17976931348623157000", 20);
    assert_int_equal(sched_format_double(5e-324, buf, sizeof(buf)), 0);
    assert_int_equal(strlen(buf), 326);
    assert_string_equal(buf + 322, "0005");
    assert_int_equal(sched_format_double(1e21, buf, 10), -ENOSPC);
}

static void test_times(void **state) {
    char buf[64];
    int64_t t;
    set_tz("UTC");
    assert_int_equal(sched_format_time(T0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2025-12-01T13:20:00Z");
    assert_int_equal(sched_format_time(0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
    set_tz("<+08>-8");
    assert_int_equal(sched_format_time(T0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2025-12-01T21:20:00+08:00");
    set_tz("<-0530>5:30");
    assert_int_equal(sched_format_time(T0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2025-12-01T07:50:00-05:30");
    assert_int_equal(sched_format_time(T0, buf, 10), -ENOSPC);
    set_tz("UTC");

    /* time.Parse(time.RFC3339, ...) */
    assert_int_equal(sched_parse_time("2025-12-01T13:20:00Z", &t), 0);
    assert_int_equal(t, T0);
    assert_int_equal(sched_parse_time("2025-12-01T21:20:00+08:00", &t), 0);
    assert_int_equal(t, T0);
    assert_int_equal(sched_parse_time("2025-12-01T07:50:00-05:30", &t), 0);
    assert_int_equal(t, T0);
    assert_int_equal(sched_parse_time("2025-12-01T13:20:00.999999Z", &t), 0);
    assert_int_equal(t, T0);
    assert_int_equal(sched_parse_time("2024-02-29T00:00:00Z", &t), 0);
    assert_int_equal(t, INT64_C(1709164800));
    assert_int_equal(sched_parse_time("1969-12-31T23:59:59Z", &t), 0);
    assert_int_equal(t, -1);
    const char *bad[] = {"",
                         "2025-12-01 13:20:00Z",
                         "2025-12-01T13:20:00",
                         "2025-12-01T13:20:00z",
                         "2025-12-01T13:20:00+0800",
                         "2025-12-01T13:20:00+08:00 ",
                         "2025-12-01T13:20Z",
                         "2025-13-01T13:20:00Z",
                         "2025-02-29T13:20:00Z",
                         "2025-04-31T13:20:00Z",
                         "2025-12-00T13:20:00Z",
                         "2025-12-01T24:00:00Z",
                         "2025-12-01T13:60:00Z",
                         "2025-12-01T13:20:60Z",
                         "2025-12-01T13:20:00+24:00",
                         "2025-12-01T13:20:00.Z",
                         "+025-12-01T13:20:00Z"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t = 42;
        assert_int_equal(sched_parse_time(bad[i], &t), -EINVAL);
        assert_int_equal(t, 42);
    }
}

/* ---- records: the exact fields in upstream's order ---- */

struct kv {
    const char *name;
    const char *value;
    size_t len; /* 0: strlen(value) */
};

static void expect_fields(const struct sched_fields *f, const struct kv *want, size_t n) {
    assert_int_equal(f->n, n);
    for (size_t i = 0; i < n; i++) {
        size_t len = want[i].len ? want[i].len : strlen(want[i].value);
        assert_string_equal(f->name[i], want[i].name);
        if (f->len[i] != len || memcmp(f->value[i], want[i].value, len) != 0) {
            fail_msg("field %s: got %.*s", want[i].name, (int)f->len[i], f->value[i]);
        }
    }
}

static void fill_host(struct sched_host *h) {
    *h = (struct sched_host){
        .id = strdup("127.0.0.1-node-a"),
        .name = strdup("node-a"),
        .hostname = strdup("node-a.example"),
        .ip = strdup("127.0.0.1"),
        .type = SCHED_HOST_SUPER,
        .port = 4000,
        .download_port = 4001,
        .proxy_port = 0,
        .disable_shared = true,
        .os = strdup("linux"),
        .platform = strdup("debian"),
        .platform_family = strdup("debian"),
        .platform_version = strdup("12"),
        .kernel_version = strdup("6.1.0"),
        .cpu = {.logical_count = 8,
                .physical_count = 4,
                .percent = 12.5,
                .process_percent = 0.5,
                .user = 100,
                .system = 20.25,
                .idle = 1000,
                .nice = 0,
                .iowait = 1e-7,
                .irq = 1,
                .softirq = 2,
                .steal = 0,
                .guest = 0,
                .guest_nice = 0},
        .memory = {.total = 17179869184,
                   .available = 8589934592,
                   .used = 8589934592,
                   .free = 4294967296,
                   .used_percent = 50,
                   .process_used_percent = 0.1 + 0.2},
        .network = {.tcp_connection_count = 10,
                    .upload_tcp_connection_count = 2,
                    .location = strdup("a|b"),
                    .idc = strdup("idc1"),
                    .rx_bandwidth = 1,
                    .max_rx_bandwidth = 2,
                    .tx_bandwidth = 3,
                    .max_tx_bandwidth = 4},
        .disk = {.total = 1000,
                 .free = 600,
                 .used = 400,
                 .inodes_total = 100,
                 .inodes_used = 10,
                 .inodes_free = 90,
                 .used_percent = 40,
                 .inodes_used_percent = 10,
                 .write_bandwidth = 5,
                 .read_bandwidth = 6},
        .build = {.git_version = strdup("v1.5.1"),
                  .git_commit = strdup("ff17c0b"),
                  .go_version = strdup(""),
                  .platform = strdup("linux")},
        .scheduler_cluster_id = 1,
        .announce_interval_ns = INT64_C(300000000000),
        .created_at = T0,
        .updated_at = T0 + 60,
    };
}

static const struct kv host_want[] = {
    {"id", "127.0.0.1-node-a", 0},
    {"type", "super", 0},
    {"name", "node-a", 0},
    {"hostname", "node-a.example", 0},
    {"ip", "127.0.0.1", 0},
    {"port", "4000", 0},
    {"download_port", "4001", 0},
    {"proxy_port", "0", 0},
    {"disable_shared", "1", 0},
    {"os", "linux", 0},
    {"platform", "debian", 0},
    {"platform_family", "debian", 0},
    {"platform_version", "12", 0},
    {"kernel_version", "6.1.0", 0},
    {"cpu_logical_count", "8", 0},
    {"cpu_physical_count", "4", 0},
    {"cpu_percent", "12.5", 0},
    {"cpu_process_percent", "0.5", 0},
    {"cpu_times_user", "100", 0},
    {"cpu_times_system", "20.25", 0},
    {"cpu_times_idle", "1000", 0},
    {"cpu_times_nice", "0", 0},
    {"cpu_times_iowait", "0.0000001", 0},
    {"cpu_times_irq", "1", 0},
    {"cpu_times_softirq", "2", 0},
    {"cpu_times_steal", "0", 0},
    {"cpu_times_guest", "0", 0},
    {"cpu_times_guest_nice", "0", 0},
    {"memory_total", "17179869184", 0},
    {"memory_available", "8589934592", 0},
    {"memory_used", "8589934592", 0},
    {"memory_used_percent", "50", 0},
    {"memory_process_used_percent", "0.30000000000000004", 0},
    {"memory_free", "4294967296", 0},
    {"network_tcp_connection_count", "10", 0},
    {"network_upload_tcp_connection_count", "2", 0},
    {"network_location", "a|b", 0},
    {"network_idc", "idc1", 0},
    {"network_rx_bandwidth", "1", 0},
    {"network_max_rx_bandwidth", "2", 0},
    {"network_tx_bandwidth", "3", 0},
    {"network_max_tx_bandwidth", "4", 0},
    {"disk_total", "1000", 0},
    {"disk_free", "600", 0},
    {"disk_used", "400", 0},
    {"disk_used_percent", "40", 0},
    {"disk_inodes_total", "100", 0},
    {"disk_inodes_used", "10", 0},
    {"disk_inodes_free", "90", 0},
    {"disk_inodes_used_percent", "10", 0},
    {"disk_write_bandwidth", "5", 0},
    {"disk_read_bandwidth", "6", 0},
    {"build_git_version", "v1.5.1", 0},
    {"build_git_commit", "ff17c0b", 0},
    {"build_go_version", "", 0},
    {"build_platform", "linux", 0},
    {"scheduler_cluster_id", "1", 0},
    {"announce_interval", "300000000000", 0},
    {"created_at", "2025-12-01T13:20:00Z", 0},
    {"updated_at", "2025-12-01T13:21:00Z", 0},
};

/* Decodes f (as an HGETALL reply would list it) into the record through dec. */
#define DECODE(dec, f, rec, err)                                                                   \
    ({                                                                                             \
        const char *kv_[128];                                                                      \
        size_t lens_[128];                                                                         \
        for (size_t i_ = 0; i_ < (f)->n; i_++) {                                                   \
            kv_[2 * i_] = (f)->name[i_];                                                           \
            lens_[2 * i_] = strlen((f)->name[i_]);                                                 \
            kv_[2 * i_ + 1] = (f)->value[i_];                                                      \
            lens_[2 * i_ + 1] = (f)->len[i_];                                                      \
        }                                                                                          \
        dec(kv_, lens_, 2 * (f)->n, rec, err);                                                     \
    })

static void test_host(void **state) {
    struct sched_host h, back;
    struct sched_fields f, again;
    struct dfc_error err;
    fill_host(&h);
    assert_int_equal(sched_host_encode(&h, &f), 0);
    assert_int_equal(f.n, 60);
    expect_fields(&f, host_want, sizeof(host_want) / sizeof(host_want[0]));
    assert_int_equal(DECODE(sched_host_decode, &f, &back, &err), 0);
    assert_string_equal(back.name, "node-a");
    assert_int_equal(back.type, SCHED_HOST_SUPER);
    assert_true(back.disable_shared);
    assert_true(back.cpu.iowait == 1e-7);
    assert_true(back.memory.process_used_percent == 0.1 + 0.2);
    assert_int_equal(back.updated_at, T0 + 60);
    assert_int_equal(back.announce_interval_ns, INT64_C(300000000000));
    assert_int_equal(sched_host_encode(&back, &again), 0);
    expect_fields(&again, host_want, 60); /* round trip */
    sched_fields_done(&again);
    sched_host_done(&back);
    assert_null(back.id);

    /* type by name: normal for 0 and anything unknown, both ways */
    h.type = SCHED_HOST_NORMAL;
    sched_fields_done(&f);
    assert_int_equal(sched_host_encode(&h, &f), 0);
    assert_string_equal(f.value[1], "normal");
    free(f.value[1]);
    f.value[1] = strdup("weird");
    f.len[1] = 5;
    assert_int_equal(DECODE(sched_host_decode, &f, &back, &err), 0);
    assert_int_equal(back.type, SCHED_HOST_NORMAL);
    sched_host_done(&back);
    sched_fields_done(&f);
    sched_host_done(&h);
}

static void test_host_decode_refusals(void **state) {
    struct sched_host h, back;
    struct sched_fields f;
    struct dfc_error err;
    fill_host(&h);
    assert_int_equal(sched_host_encode(&h, &f), 0);
    sched_host_done(&h);
    const char *kv[128];
    size_t lens[128];
    for (size_t i = 0; i < f.n; i++) {
        kv[2 * i] = f.name[i];
        lens[2 * i] = strlen(f.name[i]);
        kv[2 * i + 1] = f.value[i];
        lens[2 * i + 1] = f.len[i];
    }
    /* Every numeric, bool and time field is required and must parse. */
    for (size_t i = 0; i < f.n; i++) {
        static const char *const optional[] = {"id",
                                               "type",
                                               "name",
                                               "hostname",
                                               "ip",
                                               "os",
                                               "platform",
                                               "platform_family",
                                               "platform_version",
                                               "kernel_version",
                                               "network_location",
                                               "network_idc",
                                               "build_git_version",
                                               "build_git_commit",
                                               "build_go_version",
                                               "build_platform"};
        bool opt = false;
        for (size_t k = 0; k < sizeof(optional) / sizeof(optional[0]); k++) {
            opt = opt || strcmp(f.name[i], optional[k]) == 0;
        }
        /* missing: drop the pair by renaming the field */
        kv[2 * i] = "x-missing";
        lens[2 * i] = 9;
        memset(&err, 0, sizeof(err));
        int r = sched_host_decode(kv, lens, 2 * f.n, &back, &err);
        if (opt) {
            assert_int_equal(r, 0);
            sched_host_done(&back);
        } else {
            char want[128];
            snprintf(want, sizeof(want), "host field `%s` is missing", f.name[i]);
            assert_int_equal(r, -ENOENT);
            assert_string_equal(err.msg, want);
            assert_null(back.id); /* left zeroed */
        }
        kv[2 * i] = f.name[i];
        lens[2 * i] = strlen(f.name[i]);
        /* unparsable */
        if (!opt) {
            const char *v = kv[2 * i + 1];
            size_t vl = lens[2 * i + 1];
            kv[2 * i + 1] = "12abc";
            lens[2 * i + 1] = 5;
            r = sched_host_decode(kv, lens, 2 * f.n, &back, &err);
            char want[128];
            snprintf(want, sizeof(want), "host field `%s` is not parsable", f.name[i]);
            assert_int_equal(r, -ENOENT);
            assert_string_equal(err.msg, want);
            kv[2 * i + 1] = v;
            lens[2 * i + 1] = vl;
        }
    }
    /* Range: ports are int32, counts uint32. */
    kv[2 * 5 + 1] = "2147483648";
    lens[2 * 5 + 1] = 10;
    assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "host field `port` is not parsable");
    kv[2 * 5 + 1] = "-2147483648";
    lens[2 * 5 + 1] = 11;
    assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), 0);
    assert_int_equal(back.port, INT32_MIN);
    sched_host_done(&back);
    kv[2 * 14 + 1] = "4294967296";
    lens[2 * 14 + 1] = 10;
    assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "host field `cpu_logical_count` is not parsable");
    kv[2 * 14 + 1] = "+4";
    lens[2 * 14 + 1] = 2; /* ParseUint takes no sign */
    assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), -ENOENT);
    kv[2 * 14 + 1] = "4";
    lens[2 * 14 + 1] = 1;
    /* Go's ParseBool spellings */
    const char *truths[] = {"1", "t", "T", "TRUE", "true", "True"};
    for (size_t i = 0; i < 6; i++) {
        kv[2 * 8 + 1] = truths[i];
        lens[2 * 8 + 1] = strlen(truths[i]);
        assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), 0);
        assert_true(back.disable_shared);
        sched_host_done(&back);
    }
    kv[2 * 8 + 1] = "yes";
    lens[2 * 8 + 1] = 3;
    assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "host field `disable_shared` is not parsable");
    kv[2 * 8 + 1] = "0";
    lens[2 * 8 + 1] = 1;
    /* Floats: strconv forms only (no spaces, no hex). */
    const char *floats_ok[] = {"1e3", "-0.5", ".5", "5.", "+Inf", "NaN", "1E-2"};
    for (size_t i = 0; i < 7; i++) {
        kv[2 * 16 + 1] = floats_ok[i];
        lens[2 * 16 + 1] = strlen(floats_ok[i]);
        assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), 0);
        sched_host_done(&back);
    }
    const char *floats_bad[] = {" 1", "0x10", "1e", ".", "1.2.3", "nan(1)", "1e999", ""};
    for (size_t i = 0; i < 8; i++) {
        kv[2 * 16 + 1] = floats_bad[i];
        lens[2 * 16 + 1] = strlen(floats_bad[i]);
        assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), -ENOENT);
    }
    kv[2 * 16 + 1] = "1";
    lens[2 * 16 + 1] = 1;
    /* A NUL inside a string value is refused (records hold C strings). */
    kv[2 * 2 + 1] = "no\0de";
    lens[2 * 2 + 1] = 5;
    assert_int_equal(sched_host_decode(kv, lens, 2 * f.n, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "host field `name` is not parsable");
    kv[2 * 2 + 1] = "n";
    lens[2 * 2 + 1] = 1;
    /* An empty hash does not exist; an odd reply is malformed. */
    assert_int_equal(sched_host_decode(kv, lens, 0, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "host not found");
    assert_int_equal(sched_host_decode(kv, lens, 3, &back, &err), -ENOENT);
    sched_fields_done(&f);
}

static const struct kv task_want[] = {
    {"id", "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249", 0},
    {"persistent_replica_count", "2", 0},
    {"tag", "t", 0},
    {"application", "", 0},
    {"piece_length", "4194304", 0},
    {"content_length", "10485760", 0},
    {"total_piece_count", "3", 0},
    {"state", "Uploading", 0},
    {"ttl", "3600000000000", 0},
    {"created_at", "2025-12-01T13:20:00Z", 0},
    {"updated_at", "2025-12-01T13:20:05Z", 0},
};

static void test_task(void **state) {
    struct sched_task t = {
        .id = strdup("e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249"),
        .persistent_replica_count = 2,
        .tag = strdup("t"),
        .application = strdup(""),
        .piece_length = 4194304,
        .content_length = 10485760,
        .total_piece_count = 3,
        .state = SCHED_TASK_UPLOADING,
        .ttl_ns = INT64_C(3600000000000),
        .created_at = T0,
        .updated_at = T0 + 5,
    };
    struct sched_task back;
    struct sched_fields f, again;
    struct dfc_error err;
    assert_int_equal(sched_task_encode(&t, &f), 0);
    expect_fields(&f, task_want, 11);
    assert_int_equal(DECODE(sched_task_decode, &f, &back, &err), 0);
    assert_int_equal(back.state, SCHED_TASK_UPLOADING);
    assert_int_equal(back.ttl_ns, INT64_C(3600000000000));
    assert_string_equal(back.application, "");
    assert_int_equal(sched_task_encode(&back, &again), 0);
    expect_fields(&again, task_want, 11);
    sched_fields_done(&again);
    sched_task_done(&back);
    /* a state name that is not a task state */
    free(f.value[7]);
    f.value[7] = strdup("Running");
    f.len[7] = 7;
    assert_int_equal(DECODE(sched_task_decode, &f, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "task field `state` is not parsable");
    /* ttl is an int64 of nanoseconds */
    free(f.value[7]);
    f.value[7] = strdup("Failed");
    f.len[7] = 6;
    free(f.value[8]);
    f.value[8] = strdup("1h");
    f.len[8] = 2;
    assert_int_equal(DECODE(sched_task_decode, &f, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "task field `ttl` is not parsable");
    sched_fields_done(&f);

    /* SizeScope: EMPTY 3, TINY 2 (<= 128 B), SMALL 1 (one piece), NORMAL 0 */
    t.content_length = 0;
    assert_int_equal(sched_task_size_scope(&t), 3);
    t.content_length = 128;
    assert_int_equal(sched_task_size_scope(&t), 2);
    t.content_length = 129;
    t.total_piece_count = 1;
    assert_int_equal(sched_task_size_scope(&t), 1);
    t.total_piece_count = 2;
    assert_int_equal(sched_task_size_scope(&t), 0);
    sched_task_done(&t);
}

static void test_peer(void **state) {
    /* the uploader's peer: New(3) + SetAll, block_parents nil */
    struct sched_peer p = {
        .id = strdup("127.0.0.1-node-a-3b2f"),
        .persistent = true,
        .state = SCHED_PEER_SUCCEEDED,
        .block_parents_null = true,
        .task_id = strdup("e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249"),
        .host_id = strdup("127.0.0.1-node-a"),
        .cost_ns = 1500000000,
        .created_at = T0,
        .updated_at = T0 + 2,
        .concurrent_piece_count = 8,
    };
    assert_int_equal(sched_bitset_init(&p.finished_pieces, 3), 0);
    sched_bitset_set_all(&p.finished_pieces);
    const struct kv want[] = {
        {"id", "127.0.0.1-node-a-3b2f", 0},
        {"persistent", "1", 0},
        {"finished_pieces", "\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0\7", 16},
        {"state", "Succeeded", 0},
        {"block_parents", "null", 0},
        {"task_id", "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249", 0},
        {"host_id", "127.0.0.1-node-a", 0},
        {"cost", "1500000000", 0},
        {"created_at", "2025-12-01T13:20:00Z", 0},
        {"updated_at", "2025-12-01T13:20:02Z", 0},
        {"concurrent_piece_count", "8", 0},
    };
    struct sched_peer back;
    struct sched_fields f, again;
    struct dfc_error err;
    assert_int_equal(sched_peer_encode(&p, &f), 0);
    expect_fields(&f, want, 11);
    assert_int_equal(DECODE(sched_peer_decode, &f, &back, &err), 0);
    assert_true(back.block_parents_null);
    assert_null(back.block_parents);
    assert_int_equal(back.finished_pieces.len, 3);
    assert_int_equal(sched_bitset_count(&back.finished_pieces), 3);
    assert_int_equal(sched_peer_encode(&back, &again), 0);
    expect_fields(&again, want, 11); /* null survives the round trip */
    sched_fields_done(&again);
    sched_peer_done(&back);
    sched_fields_done(&f);

    /* a downloader: []  then a reschedule's list; {} + Set(5) */
    sched_bitset_done(&p.finished_pieces);
    assert_int_equal(sched_bitset_set(&p.finished_pieces, 5), 0);
    p.block_parents_null = false;
    p.persistent = false;
    p.state = SCHED_PEER_RUNNING;
    assert_int_equal(sched_peer_encode(&p, &f), 0);
    assert_string_equal(f.value[4], "[]");
    assert_string_equal(f.value[1], "0");
    assert_int_equal(f.len[2], 16);
    assert_memory_equal(f.value[2], "\0\0\0\0\0\0\0\6\0\0\0\0\0\0\0\x20", 16);
    assert_int_equal(DECODE(sched_peer_decode, &f, &back, &err), 0);
    assert_false(back.block_parents_null);
    assert_int_equal(back.n_block_parents, 0);
    assert_true(sched_bitset_test(&back.finished_pieces, 5));
    sched_peer_done(&back);
    sched_fields_done(&f);

    p.block_parents = calloc(3, sizeof(char *));
    p.block_parents[0] = strdup("peer-1");
    p.block_parents[1] = strdup("a\"b\\c<d>&e\n\t\x01\b\f\r/\xe2\x80\xa8\xc3\xa9");
    p.block_parents[2] = strdup("bad\xff");
    p.n_block_parents = 3;
    assert_int_equal(sched_peer_encode(&p, &f), 0);
    assert_string_equal(f.value[4], "[\"peer-1\",\"a\\\"b\\\\c\\u003cd\\u003e\\u0026e\\n\\t\\u0001"
                                    "\\b\\f\\r/\\u2028\xc3\xa9\",\"bad\\ufffd\"]");
    assert_int_equal(DECODE(sched_peer_decode, &f, &back, &err), 0);
    assert_int_equal(back.n_block_parents, 3);
    assert_string_equal(back.block_parents[0], "peer-1");
    assert_string_equal(back.block_parents[1], "a\"b\\c<d>&e\n\t\x01\b\f\r/\xe2\x80\xa8\xc3\xa9");
    assert_string_equal(back.block_parents[2], "bad\xef\xbf\xbd");
    sched_peer_done(&back);
    sched_fields_done(&f);

    /* a block list the decoder would refuse is never written: the peer would vanish (ours) */
    {
        struct sched_peer big = p;
        big.n_block_parents = SCHED_BLOCK_PARENTS_MAX + 1;
        big.block_parents = calloc(big.n_block_parents, sizeof(char *));
        assert_non_null(big.block_parents);
        for (size_t i = 0; i < big.n_block_parents; i++) {
            big.block_parents[i] = "peer";
        }
        assert_int_equal(sched_peer_encode(&big, &f), -EMSGSIZE);
        big.n_block_parents = SCHED_BLOCK_PARENTS_MAX;
        assert_int_equal(sched_peer_encode(&big, &f), 0);
        assert_int_equal(DECODE(sched_peer_decode, &f, &back, &err), 0);
        assert_int_equal(back.n_block_parents, SCHED_BLOCK_PARENTS_MAX);
        sched_peer_done(&back);
        free(big.block_parents);
    }

    /* block_parents JSON the Go decoder takes, and what it refuses */
    struct {
        const char *json;
        int r;
        size_t n;
    } cases[] = {
        {" [ \"a\" , \"b\" ] ", 0, 2},
        {"[\"\\u00e9\\ud83d\\ude00\\/\"]", 0, 1},
        {"[null]", 0, 1},
        {"null", 0, 0},
        {"", -ENOENT, 0},
        {"[", -ENOENT, 0},
        {"[\"a\",]", -ENOENT, 0},
        {"[\"a\"] x", -ENOENT, 0},
        {"[1]", -ENOENT, 0},
        {"{}", -ENOENT, 0},
        {"[\"a\nb\"]", -ENOENT, 0},
        {"[\"\\x\"]", -ENOENT, 0},
        {"[\"\\u12\"]", -ENOENT, 0},
        {"[\"\\u0000\"]", -ENOENT, 0},
        {"nul", -ENOENT, 0},
        {"[\"a\xff"
         "b\xc3\xa9\xed\xa0\x80\"]",
         0, 1}, /* invalid UTF-8: U+FFFD per byte */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        free(f.value[4]);
        f.value[4] = strdup(cases[i].json);
        f.len[4] = strlen(cases[i].json);
        int r = DECODE(sched_peer_decode, &f, &back, &err);
        assert_int_equal(r, cases[i].r);
        if (r == 0) {
            assert_int_equal(back.n_block_parents, cases[i].n);
            if (i == 1) {
                assert_string_equal(back.block_parents[0], "\xc3\xa9\xf0\x9f\x98\x80/");
            }
            if (cases[i].json[2] == 'a' && cases[i].json[3] == '\xff') {
                assert_string_equal(back.block_parents[0],
                                    "a\xef\xbf\xbd"
                                    "b\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
            }
            sched_peer_done(&back);
        } else {
            assert_string_equal(err.msg, "peer field `block_parents` is not parsable");
        }
    }
    /* too many items: bounded */
    size_t big_len = 4097 * 4 + 2;
    char *big = malloc(big_len + 1);
    big[0] = '[';
    for (size_t i = 0; i < 4097; i++) {
        memcpy(big + 1 + 4 * i, "\"a\",", 4);
    }
    big[big_len - 2] = ']';
    big[big_len - 1] = '\0';
    free(f.value[4]);
    f.value[4] = big;
    f.len[4] = big_len - 1;
    assert_int_equal(DECODE(sched_peer_decode, &f, &back, &err), -ENOENT);
    /* a truncated bitset names its field */
    f.value[4][0] = '\0';
    memcpy(f.value[4], "[]", 3);
    f.len[4] = 2;
    f.len[2] = 15;
    assert_int_equal(DECODE(sched_peer_decode, &f, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "peer field `finished_pieces` is not parsable");
    f.len[2] = 16;
    assert_int_equal(DECODE(sched_peer_decode, &f, &back, &err), 0);
    sched_peer_done(&back);
    /* concurrent_piece_count is a uint32 */
    free(f.value[10]);
    f.value[10] = strdup("-1");
    f.len[10] = 2;
    assert_int_equal(DECODE(sched_peer_decode, &f, &back, &err), -ENOENT);
    assert_string_equal(err.msg, "peer field `concurrent_piece_count` is not parsable");
    sched_fields_done(&f);
    sched_peer_done(&p);
}

/* Times in the fields follow the process's zone: "+08:00" under a fixed offset. */
static void test_fields_local_offset(void **state) {
    struct sched_task t = {.id = strdup("x"),
                           .tag = strdup(""),
                           .application = strdup(""),
                           .created_at = T0,
                           .updated_at = T0};
    struct sched_fields f;
    struct dfc_error err;
    set_tz("<+08>-8");
    assert_int_equal(sched_task_encode(&t, &f), 0);
    assert_string_equal(f.value[9], "2025-12-01T21:20:00+08:00");
    assert_string_equal(f.value[7], "Pending");
    set_tz("UTC");
    struct sched_task back;
    assert_int_equal(DECODE(sched_task_decode, &f, &back, &err), 0);
    assert_int_equal(back.created_at, T0);
    sched_task_done(&back);
    sched_fields_done(&f);
    sched_task_done(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitset_bytes),
        cmocka_unit_test(test_bitset_unmarshal),
        cmocka_unit_test(test_doubles),
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_host_decode_refusals),
        cmocka_unit_test(test_task),
        cmocka_unit_test(test_peer),
        cmocka_unit_test(test_fields_local_offset),
    };
    return cmocka_run_group_tests(tests, tz_utc, NULL);
}
