/* Tests for lib/src/error.c: the one error table and its gRPC mapping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "dfc/error.h"

static void test_to_grpc(void **state) {
    assert_int_equal(dfc_error_to_grpc(0), 0);
    assert_int_equal(dfc_error_to_grpc(-EINVAL), 3);
    assert_int_equal(dfc_error_to_grpc(-ENOENT), 5);
    assert_int_equal(dfc_error_to_grpc(-EEXIST), 6);
    assert_int_equal(dfc_error_to_grpc(-EACCES), 7);
    assert_int_equal(dfc_error_to_grpc(-ENOSPC), 8);
    assert_int_equal(dfc_error_to_grpc(-ETIMEDOUT), 4);
    assert_int_equal(dfc_error_to_grpc(-ECANCELED), 1);
    assert_int_equal(dfc_error_to_grpc(-ENOSYS), 12);
    assert_int_equal(dfc_error_to_grpc(DFC_E_FAILED_PRECONDITION), 9);
    assert_int_equal(dfc_error_to_grpc(DFC_E_DATA_LOSS), 15);
    /* Codes outside the table are internal errors. */
    assert_int_equal(dfc_error_to_grpc(-ECHILD), 13);
}

static void test_from_grpc_round_trips(void **state) {
    /* Every gRPC code 1..16 maps to an error whose gRPC code is the same one. */
    for (int g = 1; g <= 16; g++) {
        int e = dfc_error_from_grpc(g);
        assert_true(e < 0);
        assert_int_equal(dfc_error_to_grpc(e), g);
    }
    assert_int_equal(dfc_error_from_grpc(0), 0);
    assert_int_equal(dfc_error_from_grpc(5), -ENOENT);
    assert_int_equal(dfc_error_from_grpc(DFC_GRPC_FAILED_PRECONDITION), DFC_E_FAILED_PRECONDITION);
    assert_int_equal(dfc_error_from_grpc(DFC_GRPC_INTERNAL), DFC_E_INTERNAL);
    assert_int_equal(dfc_error_from_grpc(DFC_GRPC_RESOURCE_EXHAUSTED), -ENOSPC);
    assert_int_equal(dfc_error_from_grpc(99), DFC_E_UNKNOWN);
}

static void test_set_and_prefix(void **state) {
    struct dfc_error err;
    dfc_error_clear(&err);
    assert_string_equal(dfc_error_msg(&err), "success");
    int r = dfc_error_set(&err, -ENOENT, "task `%s` not found", "abc");
    assert_int_equal(r, -ENOENT);
    assert_int_equal(err.code, -ENOENT);
    assert_string_equal(err.msg, "task `abc` not found");
    assert_int_equal(dfc_error_prefix(&err, "stat %d", 7), -ENOENT);
    assert_string_equal(err.msg, "stat 7: task `abc` not found");
    dfc_error_errno(&err, -EACCES, "open `%s`", "/x");
    assert_string_equal(err.msg, "open `/x`: permission denied");
    /* A NULL error is allowed and still returns the code. */
    assert_int_equal(dfc_error_set(NULL, -EIO, "x"), -EIO);
}

static void test_long_messages_truncate(void **state) {
    struct dfc_error err;
    char big[2000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    dfc_error_set(&err, -EINVAL, "%s", big);
    assert_int_equal(strlen(err.msg), DFC_ERROR_MSG_MAX - 1);
    dfc_error_prefix(&err, "ctx");
    assert_int_equal(strlen(err.msg), DFC_ERROR_MSG_MAX - 1);
    assert_memory_equal(err.msg, "ctx: aaa", 8);
}

static void test_names_and_text(void **state) {
    assert_string_equal(dfc_error_name(-ENOENT), "ENOENT");
    assert_string_equal(dfc_grpc_code_name(DFC_GRPC_NOT_FOUND), "NOT_FOUND");
    assert_string_equal(dfc_grpc_code_name(16), "UNAUTHENTICATED");
    assert_string_equal(dfc_grpc_code_name(17), "UNKNOWN");
    assert_string_equal(dfc_error_name(DFC_E_ABORTED), "ABORTED");
    assert_string_equal(dfc_strerror(-ENOSPC), "no space left on device");
    assert_string_equal(dfc_strerror(-ECHILD), "No child processes");
    assert_string_equal(dfc_strerror(-(DFC_E_BASE + 99)), "unknown error");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_grpc),        cmocka_unit_test(test_from_grpc_round_trips),
        cmocka_unit_test(test_set_and_prefix), cmocka_unit_test(test_long_messages_truncate),
        cmocka_unit_test(test_names_and_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
