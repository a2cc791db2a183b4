/* Tests for lib/src/json.c: the JSON writer's layout, string escaping and misuse. The
 * escaping cases are also read back by a real JSON parser (python3's json module). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfc/json.h"
#include "test_support.h"

struct buf {
    char *p;
    size_t n;
    FILE *f;
};

static void buf_open(struct buf *b, struct dfc_json *j) {
    b->p = NULL;
    b->n = 0;
    b->f = open_memstream(&b->p, &b->n);
    assert_non_null(b->f);
    dfc_json_init(j, b->f);
}

static void buf_close(struct buf *b) {
    fclose(b->f);
}

/* One string value written as a whole document: its JSON text, without the newline. */
static char *string_doc(const char *s) {
    struct buf b;
    struct dfc_json j;
    buf_open(&b, &j);
    dfc_json_string(&j, s);
    assert_int_equal(dfc_json_end(&j), 0);
    buf_close(&b);
    assert_true(b.n > 0 && b.p[b.n - 1] == '\n');
    b.p[b.n - 1] = '\0';
    return b.p;
}

static void test_layout(void **state) {
    (void)state;
    struct buf b;
    struct dfc_json j;
    buf_open(&b, &j);
    dfc_json_object_begin(&j);
    dfc_json_key(&j, "id");
    dfc_json_string(&j, "abc");
    dfc_json_key(&j, "n");
    dfc_json_u64(&j, UINT64_MAX);
    dfc_json_key(&j, "i");
    dfc_json_i64(&j, INT64_MIN);
    dfc_json_key(&j, "d");
    dfc_json_array_begin(&j);
    dfc_json_decimal(&j, INT64_C(300500000000), 9);
    dfc_json_decimal(&j, INT64_C(3600000000000), 9);
    dfc_json_decimal(&j, -1, 9);
    dfc_json_decimal(&j, INT64_MIN, 9);
    dfc_json_decimal(&j, 120, 0);
    dfc_json_decimal(&j, 0, 3);
    dfc_json_array_end(&j);
    dfc_json_key(&j, "ok");
    dfc_json_bool(&j, true);
    dfc_json_key(&j, "none");
    dfc_json_null(&j);
    dfc_json_key(&j, "empty");
    dfc_json_array_begin(&j);
    dfc_json_array_end(&j);
    dfc_json_key(&j, "list");
    dfc_json_array_begin(&j);
    dfc_json_u64(&j, 1);
    dfc_json_object_begin(&j);
    dfc_json_object_end(&j);
    dfc_json_array_end(&j);
    dfc_json_object_end(&j);
    assert_int_equal(dfc_json_end(&j), 0);
    buf_close(&b);
    assert_string_equal(b.p, "{\n"
                             "  \"id\": \"abc\",\n"
                             "  \"n\": 18446744073709551615,\n"
                             "  \"i\": -9223372036854775808,\n"
                             "  \"d\": [\n"
                             "    300.5,\n"
                             "    3600,\n"
                             "    -0.000000001,\n"
                             "    -9223372036.854775808,\n"
                             "    120,\n"
                             "    0\n"
                             "  ],\n"
                             "  \"ok\": true,\n"
                             "  \"none\": null,\n"
                             "  \"empty\": [],\n"
                             "  \"list\": [\n"
                             "    1,\n"
                             "    {}\n"
                             "  ]\n"
                             "}\n");
    free(b.p);
}

static void test_escapes(void **state) {
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"", "\"\""},
        {"plain", "\"plain\""},
        {"q\"b\\s/", "\"q\\\"b\\\\s/\""},
        {"\n\r\t\b\f", "\"\\n\\r\\t\\b\\f\""},
        {"\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\""},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        /* invalid UTF-8: a stray continuation, a truncated sequence, an overlong "/", a
         * surrogate, past U+10FFFF, a 0xff byte: each bad byte becomes U+FFFD */
        {"a\x80z", "\"a\xef\xbf\xbdz\""},
        {"\xe2\x82", "\"\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xff", "\"\xef\xbf\xbd\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = string_doc(cases[i].in);
        assert_string_equal(got, cases[i].out);
        free(got);
    }
    char *null = string_doc(NULL);
    assert_string_equal(null, "null");
    free(null);
}

/* A real parser reads every control character and a mix of UTF-8 back to the same string. */
static void test_parsed_by_python(void **state) {
    (void)state;
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        test_skip("needs python3");
    }
    char in[64];
    size_t n = 0;
    for (int c = 1; c < 0x20; c++) {
        in[n++] = (char)c;
    }
    memcpy(in + n, "\"\\\xc3\xa9", 4);
    n += 4;
    in[n] = '\0';
    char *doc = string_doc(in);
    char path[] = "/tmp/test_json_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
    close(fd);
    free(doc);
    char cmd[512];
    /* The parsed string must be chr(1)..chr(31) + '"\\é'. */
    snprintf(cmd, sizeof(cmd),
             "python3 -c 'import json,sys; s=json.load(open(sys.argv[1], encoding=\"utf-8\")); "
             "sys.exit(0 if s == \"\".join(map(chr, range(1, 32))) + \"\\\"\\\\\\u00e9\" else 1)' "
             "%s",
             path);
    int rc = system(cmd);
    unlink(path);
    assert_int_equal(rc, 0);
}

static void test_misuse(void **state) {
    (void)state;
    struct buf b;
    struct dfc_json j;
    /* a value without a key in an object */
    buf_open(&b, &j);
    dfc_json_object_begin(&j);
    dfc_json_u64(&j, 1);
    dfc_json_object_end(&j);
    assert_int_equal(dfc_json_end(&j), -EINVAL);
    buf_close(&b);
    free(b.p);
    /* a key in an array */
    buf_open(&b, &j);
    dfc_json_array_begin(&j);
    dfc_json_key(&j, "k");
    dfc_json_array_end(&j);
    assert_int_equal(dfc_json_end(&j), -EINVAL);
    buf_close(&b);
    free(b.p);
    /* unbalanced, a key left without its value, a mismatched end, nothing at all */
    buf_open(&b, &j);
    dfc_json_object_begin(&j);
    assert_int_equal(dfc_json_end(&j), -EINVAL);
    buf_close(&b);
    free(b.p);
    buf_open(&b, &j);
    dfc_json_object_begin(&j);
    dfc_json_key(&j, "k");
    dfc_json_object_end(&j);
    assert_int_equal(dfc_json_end(&j), -EINVAL);
    buf_close(&b);
    free(b.p);
    buf_open(&b, &j);
    dfc_json_array_begin(&j);
    dfc_json_object_end(&j);
    assert_int_equal(dfc_json_end(&j), -EINVAL);
    buf_close(&b);
    free(b.p);
    buf_open(&b, &j);
    assert_int_equal(dfc_json_end(&j), -EINVAL);
    buf_close(&b);
    free(b.p);
    /* two documents */
    buf_open(&b, &j);
    dfc_json_u64(&j, 1);
    dfc_json_u64(&j, 2);
    assert_int_equal(dfc_json_end(&j), -EINVAL);
    buf_close(&b);
    free(b.p);
    /* nesting past the limit */
    buf_open(&b, &j);
    for (int i = 0; i <= DFC_JSON_MAX_DEPTH; i++) {
        dfc_json_array_begin(&j);
    }
    assert_int_equal(dfc_json_end(&j), -EINVAL);
    buf_close(&b);
    free(b.p);
}

/* A write error (a full disk) is reported, not lost. */
static void test_write_error(void **state) {
    (void)state;
    FILE *full = fopen("/dev/full", "w");
    if (full == NULL) {
        test_skip("no /dev/full");
    }
    struct dfc_json j;
    dfc_json_init(&j, full);
    dfc_json_string(&j, "x");
    assert_int_equal(dfc_json_end(&j), -EIO);
    fclose(full);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),           cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_parsed_by_python), cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_write_error),
    };
    return test_run_group(tests, NULL, NULL);
}
