/* Tests for csi/content.c: content volume attributes, allow rules and pin ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "content.h"
#include "test_support.h"

#define ID_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static struct csi_content_spec spec;

static void expect_invalid(const char *task_id, const char *file_name, const char *files,
                           const char *in_msg) {
    struct dfc_error err = {0};
    assert_int_equal(csi_content_parse(task_id, file_name, files, &spec, &err), -EINVAL);
    if (strstr(err.msg, in_msg) == NULL) {
        fail_msg("message `%s` lacks `%s`", err.msg, in_msg);
    }
    assert_int_equal(spec.n, 0);
}

static void socket_volume(void **state) {
    struct dfc_error err = {0};
    assert_int_equal(csi_content_parse(NULL, NULL, NULL, &spec, &err), 0);
    assert_int_equal(spec.n, 0);
}

static void one_task(void **state) {
    struct dfc_error err = {0};
    assert_int_equal(csi_content_parse(ID_A, NULL, NULL, &spec, &err), 1);
    assert_int_equal(spec.n, 1);
    assert_string_equal(spec.files[0].name, "content");
    assert_string_equal(spec.files[0].task_id, ID_A);
    assert_int_equal(csi_content_parse(ID_B, "model.safetensors", NULL, &spec, &err), 1);
    assert_string_equal(spec.files[0].name, "model.safetensors");
    assert_string_equal(spec.files[0].task_id, ID_B);
}

static void several_files(void **state) {
    struct dfc_error err = {0};
    assert_int_equal(
        csi_content_parse(NULL, NULL, "config.json=" ID_A ", weights.bin=" ID_B " ", &spec, &err),
        1);
    assert_int_equal(spec.n, 2);
    assert_string_equal(spec.files[0].name, "config.json");
    assert_string_equal(spec.files[0].task_id, ID_A);
    assert_string_equal(spec.files[1].name, "weights.bin");
    assert_string_equal(spec.files[1].task_id, ID_B);
    /* One task under two names is fine: two links to one inode. */
    assert_int_equal(csi_content_parse(NULL, NULL, "a=" ID_A ",b=" ID_A, &spec, &err), 1);
    assert_int_equal(spec.n, 2);
}

static void bad_ids(void **state) {
    expect_invalid("abc", NULL, NULL, "taskID: task id `abc` is not 64 lowercase");
    expect_invalid(ID_A "0", NULL, NULL, "taskID");
    expect_invalid("0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", NULL, NULL,
                   "taskID");
    expect_invalid("", NULL, NULL, "taskID");
    expect_invalid("g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", NULL, NULL,
                   "taskID");
    expect_invalid(NULL, NULL, "a=" ID_A ",b=xyz", "files: task id `xyz`");
    expect_invalid(NULL, NULL, "a=", "files: task id ``");
}

static void bad_names(void **state) {
    expect_invalid(ID_A, "a/b", NULL, "fileName: file name `a/b` must not contain '/'");
    expect_invalid(ID_A, "..", NULL, "fileName: file name `..` is not allowed");
    expect_invalid(ID_A, ".", NULL, "fileName: file name `.` is not allowed");
    expect_invalid(ID_A, "", NULL, "fileName: a file name is empty");
    char longname[300];
    memset(longname, 'x', 256);
    longname[256] = '\0';
    expect_invalid(ID_A, longname, NULL, "longer than 255 bytes");
    expect_invalid(NULL, NULL, "../etc=" ID_A, "files: file name `../etc` must not contain '/'");
    expect_invalid(NULL, NULL, "..=" ID_A, "files: file name `..` is not allowed");
    expect_invalid(NULL, NULL, "=" ID_A, "files: a file name is empty");
    expect_invalid(NULL, NULL, "a=" ID_A ",", "files: entry 2 `` is not name=taskID");
    expect_invalid(NULL, NULL, "", "files: entry 1 `` is not name=taskID");
    expect_invalid(NULL, NULL, ID_A, "is not name=taskID");
}

static void duplicates_and_limits(void **state) {
    expect_invalid(NULL, NULL, "a=" ID_A ", a=" ID_B, "files: file name `a` is given twice");
    size_t size = 66 * 80;
    char *many = malloc(size);
    size_t o = 0;
    for (int i = 0; i < 64; i++) {
        o += (size_t)snprintf(many + o, size - o, "%sf%d=%s", i ? "," : "", i, ID_A);
    }
    struct dfc_error err = {0};
    assert_int_equal(csi_content_parse(NULL, NULL, many, &spec, &err), 1);
    assert_int_equal(spec.n, 64);
    snprintf(many + o, size - o, ",f64=%s", ID_A);
    expect_invalid(NULL, NULL, many, "files: more than 64 files");
    free(many);
}

static void conflicting_attributes(void **state) {
    expect_invalid(ID_A, NULL, "a=" ID_A, "taskID and files are both given");
    expect_invalid(NULL, "x", "a=" ID_A, "fileName is given with files");
    expect_invalid(NULL, "x", NULL, "fileName is given without taskID");
}

static int authorize(const char *const *items, size_t n, const char *ns, const char *sa,
                     struct dfc_error *err) {
    struct csi_content_rules rules = {n, (char *const *)items};
    assert_int_equal(csi_content_rules_check(&rules, err), 0);
    return csi_content_authorize(&rules, ns, sa, err);
}

static void rules(void **state) {
    struct dfc_error err = {0};
    /* No rules: everyone, even without pod info. */
    assert_int_equal(authorize(NULL, 0, NULL, NULL, &err), 0);
    const char *const r[] = {"models", "team-*/model-server"};
    assert_int_equal(authorize(r, 2, "models", "default", &err), 0);
    assert_int_equal(authorize(r, 2, "team-a", "model-server", &err), 0);
    assert_int_equal(authorize(r, 2, "team-a", "default", &err), -EACCES);
    assert_non_null(strstr(err.msg, "namespace `team-a` service account `default`"));
    assert_non_null(strstr(err.msg, "models, team-*/model-server"));
    assert_int_equal(authorize(r, 2, "other", "model-server", &err), -EACCES);
    assert_non_null(strstr(err.msg, "namespace `other`"));
    assert_int_equal(authorize(r, 2, NULL, NULL, &err), -EACCES);
    assert_non_null(strstr(err.msg, "podInfoOnMount"));
    assert_int_equal(authorize(r, 2, "", "x", &err), -EACCES);
    /* "models" must match the whole name. */
    assert_int_equal(authorize(r, 2, "models-x", "default", &err), -EACCES);
}

static void bad_rules(void **state) {
    const char *const bad[][1] = {{""}, {"/sa"}, {"ns/"}, {"a/b/c"}};
    for (size_t i = 0; i < 4; i++) {
        struct csi_content_rules rules = {1, (char *const *)bad[i]};
        struct dfc_error err = {0};
        assert_int_equal(csi_content_rules_check(&rules, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "content allow rule"));
    }
}

static void pin_ids(void **state) {
    char a[CSI_CONTENT_PIN_ID_LEN + 1], b[CSI_CONTENT_PIN_ID_LEN + 1];
    csi_content_pin_id("vol", "/k/pods/1/mount", a);
    assert_int_equal(strlen(a), CSI_CONTENT_PIN_ID_LEN);
    assert_memory_equal(a, "cv-", 3);
    for (size_t i = 3; i < CSI_CONTENT_PIN_ID_LEN; i++) {
        assert_true(strchr("0123456789abcdef", a[i]) != NULL);
    }
    csi_content_pin_id("vol", "/k/pods/1/mount", b);
    assert_string_equal(a, b);
    csi_content_pin_id("vol", "/k/pods/2/mount", b);
    assert_string_not_equal(a, b);
    /* The separator keeps ("ab", "/c") and ("a", "b/c") apart. */
    csi_content_pin_id("ab", "/c", a);
    csi_content_pin_id("a", "b/c", b);
    assert_string_not_equal(a, b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(socket_volume),
        cmocka_unit_test(one_task),
        cmocka_unit_test(several_files),
        cmocka_unit_test(bad_ids),
        cmocka_unit_test(bad_names),
        cmocka_unit_test(duplicates_and_limits),
        cmocka_unit_test(conflicting_attributes),
        cmocka_unit_test(rules),
        cmocka_unit_test(bad_rules),
        cmocka_unit_test(pin_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
