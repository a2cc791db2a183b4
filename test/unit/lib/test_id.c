/* Tests for lib/src/id.c: uuid v4 shape, host and peer id formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <arpa/inet.h>
#include <string.h>

#include "dfc/id.h"

static void test_uuid_v4(void **state) {
    char a[DFC_UUID_STR_LEN + 1], b[DFC_UUID_STR_LEN + 1];
    dfc_uuid_v4(a);
    dfc_uuid_v4(b);
    assert_int_equal(strlen(a), 36);
    assert_int_equal(a[14], '4');           /* version nibble */
    assert_non_null(strchr("89ab", a[19])); /* RFC 4122 variant */
    for (const char *p = a; *p; p++) {
        assert_non_null(strchr("0123456789abcdef-", *p));
    }
    assert_string_not_equal(a, b);
}

static void test_host_and_peer_ids(void **state) {
    char buf[128];
    assert_int_equal(dfc_host_id("10.0.0.1", "node-a", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "10.0.0.1-node-a");
    assert_int_equal(dfc_peer_id("10.0.0.1", "node-a", buf, sizeof(buf)), 0);
    assert_int_equal(strncmp(buf, "10.0.0.1-node-a-", 16), 0);
    assert_int_equal(strlen(buf), 16 + 36);
    char small[8];
    assert_int_equal(dfc_host_id("10.0.0.1", "node-a", small, sizeof(small)), -ENAMETOOLONG);
}

static void test_local_ip_parses(void **state) {
    char ip[DFC_IP_STR_MAX];
    unsigned char raw[16];
    dfc_local_ip(ip);
    assert_true(inet_pton(AF_INET, ip, raw) == 1 || inet_pton(AF_INET6, ip, raw) == 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid_v4),
        cmocka_unit_test(test_host_and_peer_ids),
        cmocka_unit_test(test_local_ip_parses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
