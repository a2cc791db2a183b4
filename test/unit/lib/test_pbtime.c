/* Tests for lib/src/pbtime.c: nanoseconds <-> Duration, Timestamp and timespec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>

#include "dfc/pbtime.h"

#define SEC DFC_NS_PER_SEC

static Google__Protobuf__Duration dur(int64_t s, int32_t n) {
    Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
    d.seconds = s;
    d.nanos = n;
    return d;
}

static Google__Protobuf__Timestamp ts(int64_t s, int32_t n) {
    Google__Protobuf__Timestamp t = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    t.seconds = s;
    t.nanos = n;
    return t;
}

static void test_duration_from_ns(void **state) {
    static const struct {
        int64_t ns, seconds;
        int32_t nanos;
    } cases[] = {
        {0, 0, 0},
        {1, 0, 1},
        {SEC, 1, 0},
        {300 * SEC, 300, 0},
        {1500 * DFC_NS_PER_MS, 1, 500000000},
        {-1, 0, -1}, /* nanos takes the sign of the value */
        {-1500 * DFC_NS_PER_MS, -1, -500000000},
        {INT64_MAX, 9223372036, 854775807},
        {INT64_MIN, -9223372036, -854775808},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Google__Protobuf__Duration d = dur(7, 7);
        dfc_pb_duration_from_ns(cases[i].ns, &d);
        assert_true(d.seconds == cases[i].seconds);
        assert_int_equal(d.nanos, cases[i].nanos);
        int64_t back = 0;
        assert_int_equal(dfc_pb_duration_to_ns(&d, &back), 0); /* and round-trips */
        assert_true(back == cases[i].ns);
    }
}

static void test_duration_to_ns_invalid(void **state) {
    int64_t ns = 0;
    Google__Protobuf__Duration d = dur(600, -5); /* signs differ */
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -EINVAL);
    assert_true(ns == 600 * SEC - 5); /* the sum is still written */
    d = dur(-1, 5);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -EINVAL);
    assert_true(ns == -SEC + 5);
    d = dur(1, (int32_t)SEC); /* nanos not normalised: folded into seconds */
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -EINVAL);
    assert_true(ns == 2 * SEC);
    d = dur(0, -1000000001);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -EINVAL);
    assert_true(ns == -SEC - 1);
    d = dur(0, INT32_MAX);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -EINVAL);
    assert_true(ns == INT32_MAX);
    /* A negative value is a valid Duration: callers decide whether they accept one. */
    d = dur(-5, -1);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), 0);
    assert_true(ns == -5 * SEC - 1);
}

static void test_duration_to_ns_overflow(void **state) {
    int64_t ns = 0;
    Google__Protobuf__Duration d = dur(9223372036, 854775808); /* INT64_MAX + 1 */
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -ERANGE);
    assert_true(ns == INT64_MAX);
    d = dur(9223372037, 0);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -ERANGE);
    assert_true(ns == INT64_MAX);
    d = dur(315576000000, 999999999); /* protobuf's largest Duration */
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -ERANGE);
    assert_true(ns == INT64_MAX);
    d = dur(INT64_MAX, 999999999);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -ERANGE);
    assert_true(ns == INT64_MAX);
    d = dur(-9223372036, -854775809); /* INT64_MIN - 1 */
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -ERANGE);
    assert_true(ns == INT64_MIN);
    d = dur(INT64_MIN, 0);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -ERANGE);
    assert_true(ns == INT64_MIN);
    /* Out of range and not normalised: -EINVAL wins, the value is still clamped. */
    d = dur(INT64_MAX, INT32_MAX);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -EINVAL);
    assert_true(ns == INT64_MAX);
    d = dur(INT64_MIN, INT32_MIN);
    assert_int_equal(dfc_pb_duration_to_ns(&d, &ns), -EINVAL);
    assert_true(ns == INT64_MIN);
}

static void test_timestamp(void **state) {
    Google__Protobuf__Timestamp t = ts(1, 1);
    dfc_pb_timestamp_from_ns(1787000000 * SEC + 123, &t);
    assert_true(t.seconds == 1787000000);
    assert_int_equal(t.nanos, 123);
    /* Before 1970: seconds rounds down, nanos stays non-negative. */
    dfc_pb_timestamp_from_ns(-1, &t);
    assert_true(t.seconds == -1);
    assert_int_equal(t.nanos, 999999999);
    dfc_pb_timestamp_from_ns(-SEC, &t);
    assert_true(t.seconds == -1);
    assert_int_equal(t.nanos, 0);
    dfc_pb_timestamp_from_ns(INT64_MIN, &t);
    assert_true(t.seconds == -9223372037);
    assert_int_equal(t.nanos, 145224192);
    int64_t ns = 0;
    assert_int_equal(dfc_pb_timestamp_to_ns(&t, &ns), 0);
    assert_true(ns == INT64_MIN);
    dfc_pb_timestamp_from_ns(INT64_MAX, &t);
    assert_int_equal(dfc_pb_timestamp_to_ns(&t, &ns), 0);
    assert_true(ns == INT64_MAX);

    t = ts(-1, 999999999);
    assert_int_equal(dfc_pb_timestamp_to_ns(&t, &ns), 0);
    assert_true(ns == -1);
    t = ts(5, -1); /* negative nanos are never valid in a Timestamp */
    assert_int_equal(dfc_pb_timestamp_to_ns(&t, &ns), -EINVAL);
    assert_true(ns == 5 * SEC - 1);
    t = ts(5, (int32_t)SEC);
    assert_int_equal(dfc_pb_timestamp_to_ns(&t, &ns), -EINVAL);
    assert_true(ns == 6 * SEC);
    t = ts(253402300799, 0); /* 9999-12-31T23:59:59Z: valid protobuf, past int64 ns */
    assert_int_equal(dfc_pb_timestamp_to_ns(&t, &ns), -ERANGE);
    assert_true(ns == INT64_MAX);
    t = ts(-62135596800, 0); /* 0001-01-01T00:00:00Z */
    assert_int_equal(dfc_pb_timestamp_to_ns(&t, &ns), -ERANGE);
    assert_true(ns == INT64_MIN);
}

static void test_timespec(void **state) {
    struct timespec a = {.tv_sec = 2, .tv_nsec = 500000000};
    assert_true(dfc_timespec_to_ns(&a) == 2500 * DFC_NS_PER_MS);
    struct timespec big = {.tv_sec = (time_t)INT64_MAX, .tv_nsec = 0};
    assert_true(dfc_timespec_to_ns(&big) == INT64_MAX);
    struct timespec small = {.tv_sec = (time_t)INT64_MIN, .tv_nsec = 0};
    assert_true(dfc_timespec_to_ns(&small) == INT64_MIN);

    struct timespec b = dfc_timespec_from_ns(-1);
    assert_true(b.tv_sec == -1 && b.tv_nsec == 999999999);
    b = dfc_timespec_from_ns(3 * SEC + 7);
    assert_true(b.tv_sec == 3 && b.tv_nsec == 7);

    /* Carries past a whole second, both ways. */
    struct timespec c = dfc_timespec_add_ns(a, 600 * DFC_NS_PER_MS);
    assert_true(c.tv_sec == 3 && c.tv_nsec == 100000000);
    c = dfc_timespec_add_ns(a, -600 * DFC_NS_PER_MS);
    assert_true(c.tv_sec == 1 && c.tv_nsec == 900000000);
    c = dfc_timespec_add_ns(a, 0);
    assert_true(c.tv_sec == 2 && c.tv_nsec == 500000000);
    struct timespec edge = {.tv_sec = 0, .tv_nsec = 999999999};
    c = dfc_timespec_add_ns(edge, 1);
    assert_true(c.tv_sec == 1 && c.tv_nsec == 0);
    /* Saturates instead of wrapping: a deadline of "forever" stays in the future. */
    c = dfc_timespec_add_ns(a, INT64_MAX);
    assert_true(c.tv_sec == 9223372039 && c.tv_nsec == 354775807);
    struct timespec near_max = {.tv_sec = (time_t)INT64_MAX - 1, .tv_nsec = 999999999};
    c = dfc_timespec_add_ns(near_max, 2 * SEC);
    assert_true(c.tv_sec == (time_t)INT64_MAX && c.tv_nsec == 999999999);
    struct timespec near_min = {.tv_sec = (time_t)INT64_MIN + 1, .tv_nsec = 0};
    c = dfc_timespec_add_ns(near_min, -2 * SEC);
    assert_true(c.tv_sec == (time_t)INT64_MIN && c.tv_nsec == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration_from_ns),
        cmocka_unit_test(test_duration_to_ns_invalid),
        cmocka_unit_test(test_duration_to_ns_overflow),
        cmocka_unit_test(test_timestamp),
        cmocka_unit_test(test_timespec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
