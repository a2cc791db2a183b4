/* Tests for lib/src/units.c: human sizes, durations and integers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>

#include "dfc/units.h"

static void test_sizes(void **state) {
    static const struct {
        const char *in;
        uint64_t out;
    } ok[] = {
        {"0", 0},
        {"1024", 1024},
        {"4MiB", 4ULL << 20},
        {"4mib", 4ULL << 20},
        {"4 MiB", 4ULL << 20},
        {"64M", 64ULL << 20},
        {"1GiB", 1ULL << 30},
        {"5KB", 5000},
        {"2mb", 2000000},
        {"3b", 3},
        {"1TiB", 1ULL << 40},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t v = 1;
        assert_int_equal(dfc_parse_size(ok[i].in, &v), 0);
        assert_true(v == ok[i].out);
    }
    uint64_t v;
    assert_int_equal(dfc_parse_size("", &v), -EINVAL);
    assert_int_equal(dfc_parse_size("MiB", &v), -EINVAL);
    assert_int_equal(dfc_parse_size("4 parsecs", &v), -EINVAL);
    assert_int_equal(dfc_parse_size("-4MiB", &v), -EINVAL);
    assert_int_equal(dfc_parse_size("99999999999999999999", &v), -ERANGE);
    assert_int_equal(dfc_parse_size("17000000TiB", &v), -ERANGE);
}

static void test_format_size(void **state) {
    char b[32];
    dfc_format_size(4ULL << 20, b, sizeof(b));
    assert_string_equal(b, "4MiB");
    dfc_format_size(1536 * 1024, b, sizeof(b));
    assert_string_equal(b, "1536KiB");
    dfc_format_size(7, b, sizeof(b));
    assert_string_equal(b, "7B");
    dfc_format_size(0, b, sizeof(b));
    assert_string_equal(b, "0B");
}

static void test_durations(void **state) {
    static const struct {
        const char *in;
        int64_t out;
    } ok[] = {
        {"300", 300 * DFC_NS_PER_SEC},      {"300s", 300 * DFC_NS_PER_SEC},
        {"5m", 300 * DFC_NS_PER_SEC},       {"5min", 300 * DFC_NS_PER_SEC},
        {"1h30m", 5400 * DFC_NS_PER_SEC},   {"1h 30m", 5400 * DFC_NS_PER_SEC},
        {"7d", 7 * 86400 * DFC_NS_PER_SEC}, {"2h", 7200 * DFC_NS_PER_SEC},
        {"250ms", 250 * DFC_NS_PER_MS},     {"10us", 10000},
        {"1w", 7 * 86400 * DFC_NS_PER_SEC},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t v = -1;
        assert_int_equal(dfc_parse_duration(ok[i].in, &v), 0);
        assert_true(v == ok[i].out);
    }
    int64_t v;
    assert_int_equal(dfc_parse_duration("", &v), -EINVAL);
    assert_int_equal(dfc_parse_duration("h", &v), -EINVAL);
    assert_int_equal(dfc_parse_duration("5 fortnights", &v), -EINVAL);
    assert_int_equal(dfc_parse_duration("-5s", &v), -EINVAL);
    assert_int_equal(dfc_parse_duration("5", &v), 0);
    assert_int_equal(dfc_parse_duration("999999999999d", &v), -ERANGE);
}

static void test_format_duration(void **state) {
    char b[32];
    dfc_format_duration(5400 * DFC_NS_PER_SEC, b, sizeof(b));
    assert_string_equal(b, "1h30m");
    dfc_format_duration(300 * DFC_NS_PER_SEC, b, sizeof(b));
    assert_string_equal(b, "5m");
    dfc_format_duration(250 * DFC_NS_PER_MS, b, sizeof(b));
    assert_string_equal(b, "250ms");
    dfc_format_duration(1500 * DFC_NS_PER_MS, b, sizeof(b));
    assert_string_equal(b, "1.500s");
    dfc_format_duration(0, b, sizeof(b));
    assert_string_equal(b, "0s");
    /* Formatting then parsing gives the value back. */
    int64_t v;
    dfc_format_duration(90061 * DFC_NS_PER_SEC, b, sizeof(b));
    assert_int_equal(dfc_parse_duration(b, &v), 0);
    assert_true(v == 90061 * DFC_NS_PER_SEC);
}

static void test_integers(void **state) {
    uint64_t u;
    int64_t i;
    assert_int_equal(dfc_parse_u64("18446744073709551615", &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(dfc_parse_u64("18446744073709551616", &u), -ERANGE);
    assert_int_equal(dfc_parse_u64("12a", &u), -EINVAL);
    assert_int_equal(dfc_parse_u64("", &u), -EINVAL);
    assert_int_equal(dfc_parse_i64("-9223372036854775808", &i), 0);
    assert_true(i == INT64_MIN);
    assert_int_equal(dfc_parse_i64("9223372036854775808", &i), -ERANGE);
    assert_int_equal(dfc_parse_i64("-1", &i), 0);
    assert_true(i == -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),     cmocka_unit_test(test_format_size),
        cmocka_unit_test(test_durations), cmocka_unit_test(test_format_duration),
        cmocka_unit_test(test_integers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
