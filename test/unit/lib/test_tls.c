/*
 * Unit tests for lib/src/tls.c: the policy an option row resolves to, the files each side
 * needs, and the start-time read of those files (a missing, unreadable, non-PEM, encrypted or
 * mismatched file is an error naming the option key and the path).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/tls.h"
#include "test_support.h"

static char certs[256];

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fail_msg("command failed: %s", cmd);
    }
}

static int group_setup(void **state) {
    (void)state;
    test_mkdtemp(certs, sizeof(certs), "tls-certs");
    sh("bash %s ca %s/ca >/dev/null 2>&1", MAKE_CERTS, certs);
    sh("bash %s leaf %s/ca %s/a IP:127.0.0.1 >/dev/null 2>&1", MAKE_CERTS, certs, certs);
    sh("bash %s leaf %s/ca %s/b IP:127.0.0.2 >/dev/null 2>&1", MAKE_CERTS, certs, certs);
    sh("openssl pkey -in %s/a/tls.key -aes256 -passout pass:secret -out %s/a/enc.key 2>/dev/null",
       certs, certs);
    sh("cat %s/a/tls.crt %s/b/tls.crt > %s/bundle.crt", certs, certs, certs);
    sh("echo 'not a certificate' > %s/junk.pem", certs);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    test_rmtree(certs);
    return 0;
}

/* certs/<rel>, in a static buffer per slot. */
static const char *path(int slot, const char *rel) {
    static char buf[4][512];
    snprintf(buf[slot], sizeof(buf[slot]), "%s/%s", certs, rel);
    return buf[slot];
}

static void test_policy_resolve(void **state) {
    (void)state;
    assert_int_equal(dfc_tls_policy_resolve("auto", false), DFC_TLS_OFF);
    assert_int_equal(dfc_tls_policy_resolve("auto", true), DFC_TLS_MUTUAL);
    assert_int_equal(dfc_tls_policy_resolve("off", true), DFC_TLS_OFF);
    assert_int_equal(dfc_tls_policy_resolve("server-auth", true), DFC_TLS_SERVER_AUTH);
    assert_int_equal(dfc_tls_policy_resolve("mutual", false), DFC_TLS_MUTUAL);
    assert_string_equal(dfc_tls_policy_name(DFC_TLS_SERVER_AUTH), "server-auth");
}

/* A server needs its identity (and the CA when mutual); a client the CA (and its identity
 * when mutual). The message names the first missing key. */
static void test_files_check_names_the_missing_key(void **state) {
    (void)state;
    struct dfc_error err = {0};
    struct dfc_tls_files only_ca = {"/ca", "", "", NULL};
    assert_int_equal(dfc_tls_files_check(DFC_TLS_SERVER_AUTH, &only_ca, true, "x.", &err), -EINVAL);
    assert_string_equal(err.msg, "x.cert is required: the TLS policy is server-auth");
    assert_int_equal(dfc_tls_files_check(DFC_TLS_SERVER_AUTH, &only_ca, false, "x.", &err), 0);
    assert_int_equal(dfc_tls_files_check(DFC_TLS_MUTUAL, &only_ca, false, "y.", &err), -EINVAL);
    assert_string_equal(err.msg, "y.cert is required: the TLS policy is mutual");
    struct dfc_tls_files no_key = {"/ca", "/crt", "", NULL};
    assert_int_equal(dfc_tls_files_check(DFC_TLS_MUTUAL, &no_key, true, "z.", &err), -EINVAL);
    assert_string_equal(err.msg, "z.key is required: the TLS policy is mutual");
    struct dfc_tls_files none = {"", "", "", NULL};
    assert_int_equal(dfc_tls_files_check(DFC_TLS_OFF, &none, true, "z.", &err), 0);
}

static void test_files_read_accepts_good_files(void **state) {
    (void)state;
    struct dfc_error err = {0};
    struct dfc_tls_files f = {path(0, "a/ca.crt"), path(1, "a/tls.crt"), path(2, "a/tls.key"),
                              NULL};
    assert_int_equal(dfc_tls_files_read(&f, "upload.server.", &err), 0);
    /* A CA bundle of several certificates, and nothing given at all. */
    struct dfc_tls_files bundle = {path(0, "bundle.crt"), "", "", NULL};
    assert_int_equal(dfc_tls_files_read(&bundle, "scheduler.", &err), 0);
    struct dfc_tls_files none = {"", NULL, "", NULL};
    assert_int_equal(dfc_tls_files_read(&none, "scheduler.", &err), 0);
}

static void expect_read_error(const struct dfc_tls_files *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void expect_read_error(const struct dfc_tls_files *f, const char *fmt, ...) {
    struct dfc_error err = {0};
    assert_int_equal(dfc_tls_files_read(f, "p.", &err), -EINVAL);
    char want[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof(want), fmt, ap);
    va_end(ap);
    assert_string_equal(err.msg, want);
}

static void test_files_read_names_key_and_path(void **state) {
    (void)state;
    struct dfc_tls_files missing = {"/nonexistent/ca.crt", "", "", NULL};
    expect_read_error(&missing,
                      "p.caCert `/nonexistent/ca.crt`: cannot read it: No such file or directory");
    struct dfc_tls_files junk = {"", path(0, "junk.pem"), "", NULL};
    expect_read_error(&junk, "p.cert `%s/junk.pem` holds no PEM certificate", certs);
    struct dfc_tls_files dir = {path(0, "a"), "", "", NULL};
    expect_read_error(&dir, "p.caCert `%s/a` holds no PEM certificate", certs);
    /* A certificate given as the key. */
    struct dfc_tls_files key_is_cert = {"", "", path(0, "a/tls.crt"), NULL};
    expect_read_error(&key_is_cert, "p.key `%s/a/tls.crt` holds no unencrypted PEM private key",
                      certs);
    struct dfc_tls_files encrypted = {"", "", path(0, "a/enc.key"), NULL};
    expect_read_error(&encrypted, "p.key `%s/a/enc.key` holds no unencrypted PEM private key",
                      certs);
    struct dfc_tls_files mismatch = {"", path(0, "a/tls.crt"), path(1, "b/tls.key"), NULL};
    expect_read_error(&mismatch, "p.key `%s/b/tls.key` does not match p.cert `%s/a/tls.crt`", certs,
                      certs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_resolve),
        cmocka_unit_test(test_files_check_names_the_missing_key),
        cmocka_unit_test(test_files_read_accepts_good_files),
        cmocka_unit_test(test_files_read_names_key_and_path),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
