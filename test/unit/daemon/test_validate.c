/* Tests for daemon/validate.c: every field check, its code and its message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "dfc/dragonfly.h"
#include "validate.h"

static void test_path(void **state) {
    struct dfc_error err;
    assert_int_equal(dfd_validate_path("path", "/data/a.bin", &err), 0);
    assert_int_equal(dfd_validate_path("path", "", &err), -EINVAL);
    assert_string_equal(err.msg, "path is required");
    assert_int_equal(dfd_validate_path("path", "rel/a", &err), -EINVAL);
    assert_string_equal(err.msg, "path `rel/a` must be absolute");
    assert_int_equal(dfd_validate_path("output_path", "/a/../etc/x", &err), -EINVAL);
    assert_string_equal(err.msg, "output_path `/a/../etc/x` must not contain . or .. components");
    assert_int_equal(dfd_validate_path("path", "/a/./b", &err), -EINVAL);
    assert_int_equal(dfd_validate_path("path", "/a/..b/.c", &err), 0); /* names, not components */
    static char long_path[PATH_MAX + 10];
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    assert_int_equal(dfd_validate_path("path", long_path, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "longer than"));
}

static void test_numbers(void **state) {
    struct dfc_error err;
    assert_int_equal(dfd_validate_replica_count(1, &err), 0);
    assert_int_equal(dfd_validate_replica_count(5, &err), 0);
    assert_int_equal(dfd_validate_replica_count(0, &err), -EINVAL);
    assert_string_equal(err.msg, "persistent_replica_count must be between 1 and 5, got 0");
    assert_int_equal(dfd_validate_replica_count(6, &err), -EINVAL);
    assert_int_equal(dfd_validate_piece_length(4 << 20, &err), 0);
    assert_int_equal(dfd_validate_piece_length(64 << 20, &err), 0);
    assert_int_equal(dfd_validate_piece_length((4 << 20) - 1, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "piece_length must be between 4194304 (4MiB)"));
    assert_int_equal(dfd_validate_piece_length((64 << 20) + 1, &err), -EINVAL);
}

static void test_ttl(void **state) {
    struct dfc_error err;
    int64_t ns = 0;
    assert_int_equal(dfd_validate_ttl(300, 0, &ns, &err), 0);
    assert_true(ns == DFC_TTL_MIN_NS);
    assert_int_equal(dfd_validate_ttl(7 * 86400, 0, &ns, &err), 0);
    assert_int_equal(dfd_validate_ttl(299, 999999999, &ns, &err), -EINVAL);
    assert_string_equal(err.msg, "ttl must be between 5m and 168h, got 4m59s");
    assert_int_equal(dfd_validate_ttl(7 * 86400 + 1, 0, &ns, &err), -EINVAL);
    assert_int_equal(dfd_validate_ttl(-1, 0, &ns, &err), -EINVAL);
    assert_int_equal(dfd_validate_ttl(600, -5, &ns, &err), -EINVAL);
    assert_string_equal(err.msg, "ttl must be between 5m and 168h, got seconds=600 nanos=-5");
    assert_int_equal(dfd_validate_ttl(INT64_MAX, 0, &ns, &err), -EINVAL);
}

static void test_labels_ids_ips(void **state) {
    struct dfc_error err;
    char big[DFD_LABEL_MAX + 2];
    memset(big, 't', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(dfd_validate_label("tag", NULL, DFD_LABEL_MAX, &err), 0);
    assert_int_equal(dfd_validate_label("tag", big, DFD_LABEL_MAX, &err), -EINVAL);
    assert_string_equal(err.msg, "tag is longer than 1024 bytes");
    assert_int_equal(dfd_validate_task_id(
                         "e2d0fe1585a63ec6009c8016ff8dda8b17719a637405a4e23c0ff81339148249", &err),
                     0);
    assert_int_equal(dfd_validate_task_id("", &err), -EINVAL);
    assert_string_equal(err.msg, "task_id is required");
    assert_int_equal(dfd_validate_task_id("../x", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "64 lowercase hex"));
    assert_int_equal(dfd_validate_ip("remote_ip", "10.0.0.1", &err), 0);
    assert_int_equal(dfd_validate_ip("remote_ip", "::1", &err), 0);
    assert_int_equal(dfd_validate_ip("remote_ip", "10.0.0", &err), -EINVAL);
    assert_string_equal(err.msg, "remote_ip `10.0.0` is not an IP address");
}

static void test_digest(void **state) {
    struct dfc_error err;
    const char *algo, *value;
    assert_int_equal(dfd_validate_digest("crc32:1475635037", &algo, &value, &err), 0);
    assert_string_equal(algo, "crc32");
    assert_string_equal(value, "1475635037");
    /* Upstream insists on 10 digits; a small CRC is just as valid. */
    assert_int_equal(dfd_validate_digest("crc32:7", &algo, &value, &err), 0);
    assert_int_equal(dfd_validate_digest("crc32:4294967296", &algo, &value, &err), -EINVAL);
    assert_int_equal(dfd_validate_digest(
                         "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                         &algo, &value, &err),
                     0);
    assert_string_equal(algo, "sha256");
    assert_int_equal(dfd_validate_digest("sha256:e3b0", &algo, &value, &err), -EINVAL);
    assert_int_equal(
        dfd_validate_digest("md5:d41d8cd98f00b204e9800998ecf8427e", &algo, &value, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "must be crc32:<decimal>, sha256:<64 hex> or sha512"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path),   cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_ttl),    cmocka_unit_test(test_labels_ids_ips),
        cmocka_unit_test(test_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
