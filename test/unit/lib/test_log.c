/* Tests for lib/src/log.c: levels, logfmt line shape, control-character scrubbing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "dfc/log.h"

static char last[4096];
static int lines;

static void capture(int level, const char *line, size_t len, void *ud) {
    memcpy(last, line, len < sizeof(last) - 1 ? len : sizeof(last) - 1);
    last[len < sizeof(last) - 1 ? len : sizeof(last) - 1] = '\0';
    lines++;
}

static int setup(void **state) {
    dfc_log_set_sink(capture, NULL);
    dfc_log_set_level(DFC_LOG_INFO);
    lines = 0;
    return 0;
}

static int teardown(void **state) {
    dfc_log_set_sink(NULL, NULL);
    return 0;
}

static void test_line_shape(void **state) {
    DFC_LOG(DFC_LOG_INFO, "rpc.done", "method=%s ms=%d", "/a.B/C", 3);
    assert_int_equal(lines, 1);
    assert_true(strncmp(last, "ts=", 3) == 0);
    assert_non_null(strstr(last, " level=info event=rpc.done method=/a.B/C ms=3\n"));
    assert_int_equal(strchr(last, '\n') - last, (long)strlen(last) - 1);
}

static int evaluated;
static int count_eval(void) {
    return ++evaluated;
}

static void test_threshold_skips_arguments(void **state) {
    evaluated = 0;
    DFC_LOG(DFC_LOG_DEBUG, "x", "n=%d", count_eval());
    assert_int_equal(lines, 0);
    assert_int_equal(evaluated, 0);
    dfc_log_set_level(DFC_LOG_DEBUG);
    DFC_LOG(DFC_LOG_DEBUG, "x", "n=%d", count_eval());
    assert_int_equal(lines, 1);
    assert_int_equal(evaluated, 1);
}

static void test_control_chars_cannot_forge_lines(void **state) {
    DFC_LOG(DFC_LOG_WARN, "import", "path=\"%s\"", "/tmp/a\nts=0 level=error event=forged");
    assert_int_equal(lines, 1);
    assert_null(strstr(last, "\nts=0"));
    assert_non_null(strstr(last, "/tmp/a?ts=0"));
}

static void test_parse_level(void **state) {
    int l = -1;
    assert_int_equal(dfc_log_parse_level("DEBUG", &l), 0);
    assert_int_equal(l, DFC_LOG_DEBUG);
    assert_int_equal(dfc_log_parse_level("warning", &l), 0);
    assert_int_equal(l, DFC_LOG_WARN);
    assert_int_equal(dfc_log_parse_level("loud", &l), -EINVAL);
    /* The choices a log-level option accepts are exactly what parses. */
    for (size_t i = 0; dfc_log_level_choices[i] != NULL; i++) {
        assert_int_equal(dfc_log_parse_level(dfc_log_level_choices[i], &l), 0);
    }
}

static void test_long_line_is_truncated_with_newline(void **state) {
    char big[5000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    DFC_LOG(DFC_LOG_ERROR, "big", "v=%s", big);
    size_t n = strlen(last);
    assert_true(n < 2100);
    assert_int_equal(last[n - 1], '\n');
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_line_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threshold_skips_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_chars_cannot_forge_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parse_level, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_line_is_truncated_with_newline, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
