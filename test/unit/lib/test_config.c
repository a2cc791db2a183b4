/* Tests for lib/src/config.c: defaults -> YAML -> env -> set, errors with line:column, print. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "dfc/config.h"
#include "dfc/units.h"
#include "test_support.h"

struct cfg {
    char *socket_path;
    uint32_t socket_mode;
    char *storage_dir;
    bool keep;
    int64_t gc_interval;
    int64_t ttl;
    uint64_t high;
    uint64_t piece;
    int64_t offset;
};

static int validate_percent(const struct dfc_config_row *row, const void *field,
                            struct dfc_error *err) {
    uint64_t v = *(const uint64_t *)field;
    return v <= 100 ? 0
                    : dfc_error_set(err, -EINVAL, "%s: %llu is over 100", row->key,
                                    (unsigned long long)v);
}

#define F(member) offsetof(struct cfg, member)

static const struct dfc_config_row rows[] = {
    {.key = "download.server.socketPath",
     .type = DFC_CFG_PATH,
     .offset = F(socket_path),
     .def = "/var/run/dragonfly/dfdaemon.sock",
     .env = "TEST_SOCKET_PATH"},
    {.key = "download.server.socketMode",
     .type = DFC_CFG_MODE,
     .offset = F(socket_mode),
     .def = "0777"},
    {.key = "storage.dir",
     .type = DFC_CFG_PATH,
     .offset = F(storage_dir),
     .def = "/var/lib/dragonfly"},
    {.key = "storage.keep", .type = DFC_CFG_BOOL, .offset = F(keep), .def = "true"},
    {.key = "storage.pieceLength", .type = DFC_CFG_SIZE, .offset = F(piece), .def = "4MiB"},
    {.key = "gc.interval",
     .type = DFC_CFG_DURATION,
     .offset = F(gc_interval),
     .def = "15m",
     .env = "TEST_GC_INTERVAL"},
    {.key = "gc.policy.persistentCacheTaskTTL",
     .type = DFC_CFG_DURATION,
     .offset = F(ttl),
     .def = "24h"},
    {.key = "gc.policy.diskHighThresholdPercent",
     .type = DFC_CFG_UINT,
     .offset = F(high),
     .def = "80",
     .validate = validate_percent},
    {.key = "misc.offset", .type = DFC_CFG_INT, .offset = F(offset)},
};
static const struct dfc_config_schema schema = {"test", rows, sizeof(rows) / sizeof(rows[0])};

static int setup(void **state) {
    struct cfg *c = calloc(1, sizeof(*c));
    struct dfc_error err;
    assert_int_equal(dfc_config_defaults(&schema, c, &err), 0);
    *state = c;
    return 0;
}

static int teardown(void **state) {
    dfc_config_free(&schema, *state);
    free(*state);
    unsetenv("TEST_SOCKET_PATH");
    unsetenv("TEST_GC_INTERVAL");
    return 0;
}

static int load(struct cfg *c, const char *yaml, struct dfc_error *err) {
    return dfc_config_load_string(&schema, c, "test.yaml", yaml, strlen(yaml), err);
}

static void test_defaults(void **state) {
    struct cfg *c = *state;
    assert_string_equal(c->socket_path, "/var/run/dragonfly/dfdaemon.sock");
    assert_int_equal(c->socket_mode, 0777);
    assert_true(c->keep);
    assert_true(c->gc_interval == 900 * DFC_NS_PER_SEC);
    assert_true(c->ttl == 86400 * DFC_NS_PER_SEC);
    assert_true(c->piece == 4u << 20);
    assert_true(c->high == 80);
    assert_true(c->offset == 0);
}

static void test_nested_yaml(void **state) {
    struct cfg *c = *state;
    struct dfc_error err;
    const char *y = "download:\n"
                    "  server:\n"
                    "    socketPath: /tmp/x.sock\n"
                    "    socketMode: '0660'\n"
                    "gc:\n"
                    "  interval: 30s\n"
                    "  policy:\n"
                    "    persistentCacheTaskTTL: 1h30m\n"
                    "storage:\n"
                    "  keep: false\n"
                    "  pieceLength: 8MiB\n"
                    "misc: {offset: -5}\n";
    assert_int_equal(load(c, y, &err), 0);
    assert_string_equal(c->socket_path, "/tmp/x.sock");
    assert_int_equal(c->socket_mode, 0660);
    assert_true(c->gc_interval == 30 * DFC_NS_PER_SEC);
    assert_true(c->ttl == 5400 * DFC_NS_PER_SEC);
    assert_false(c->keep);
    assert_true(c->piece == 8u << 20);
    assert_true(c->offset == -5);
    /* Untouched keys keep their defaults. */
    assert_string_equal(c->storage_dir, "/var/lib/dragonfly");
}

static void test_unknown_key_names_line_and_column(void **state) {
    struct dfc_error err;
    const char *y = "gc:\n  interval: 30s\n  intervall: 40s\n";
    assert_int_equal(load(*state, y, &err), -EINVAL);
    assert_string_equal(err.msg, "test.yaml:3:3: unknown key `gc.intervall`");
}

static void test_bad_values(void **state) {
    struct dfc_error err;
    assert_int_equal(load(*state, "gc:\n  interval: soon\n", &err), -EINVAL);
    assert_string_equal(err.msg,
                        "test.yaml:2:13: gc.interval: `soon` is not a duration such as 1h30m");
    assert_int_equal(load(*state, "storage:\n  dir: relative/dir\n", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "is not an absolute path"));
    assert_int_equal(load(*state, "storage:\n  keep: maybe\n", &err), -EINVAL);
    assert_int_equal(load(*state, "download:\n  server:\n    socketMode: '0999'\n", &err), -EINVAL);
    assert_int_equal(load(*state, "storage: [1, 2]\n", &err), -EINVAL);
    assert_int_equal(load(*state, "storage:\n  keep:\n    deeper: 1\n", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "takes a value, not a mapping"));
    assert_int_equal(load(*state, "- a\n- b\n", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "must be a mapping"));
    assert_int_equal(load(*state, "gc:\n  interval: 5s\nstorage: {}\ngc:\n  interval: 6s\n", &err),
                     -EINVAL);
    assert_string_equal(err.msg, "test.yaml:4:1: `gc` appears twice (also at line 1)");
    assert_int_equal(load(*state, "gc: {interval: 5s\n", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "test.yaml:"));
}

static void test_empty_document_and_sections(void **state) {
    struct cfg *c = *state;
    struct dfc_error err;
    assert_int_equal(load(c, "", &err), 0);
    assert_int_equal(load(c, "gc:\nstorage:\n  keep:\n", &err), 0);
    assert_true(c->keep);
}

static void test_env_and_set_override(void **state) {
    struct cfg *c = *state;
    struct dfc_error err;
    assert_int_equal(load(c, "gc:\n  interval: 30s\n", &err), 0);
    setenv("TEST_GC_INTERVAL", "45s", 1);
    setenv("TEST_SOCKET_PATH", "/run/env.sock", 1);
    assert_int_equal(dfc_config_load_env(&schema, c, &err), 0);
    assert_true(c->gc_interval == 45 * DFC_NS_PER_SEC);
    assert_string_equal(c->socket_path, "/run/env.sock");
    assert_int_equal(dfc_config_set(&schema, c, "gc.interval", "1m", &err), 0);
    assert_true(c->gc_interval == 60 * DFC_NS_PER_SEC);
    assert_int_equal(dfc_config_set(&schema, c, "gc.nope", "1m", &err), -ENOENT);
    setenv("TEST_GC_INTERVAL", "never", 1);
    assert_int_equal(dfc_config_load_env(&schema, c, &err), -EINVAL);
    assert_string_equal(err.msg, "TEST_GC_INTERVAL: `never` is not a duration such as 1h30m");
    /* An empty variable counts as unset. */
    setenv("TEST_GC_INTERVAL", "", 1);
    assert_int_equal(dfc_config_load_env(&schema, c, &err), 0);
    assert_true(c->gc_interval == 60 * DFC_NS_PER_SEC);
}

static void test_validate(void **state) {
    struct cfg *c = *state;
    struct dfc_error err;
    assert_int_equal(dfc_config_validate(&schema, c, &err), 0);
    assert_int_equal(dfc_config_set(&schema, c, "gc.policy.diskHighThresholdPercent", "101", &err),
                     0);
    assert_int_equal(dfc_config_validate(&schema, c, &err), -EINVAL);
    assert_string_equal(err.msg, "gc.policy.diskHighThresholdPercent: 101 is over 100");
}

static void test_print_round_trips(void **state) {
    struct cfg *c = *state;
    struct dfc_error err;
    assert_int_equal(load(c, "gc:\n  interval: 90s\nstorage:\n  dir: \"/data/d f\"\n", &err), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(dfc_config_print(&schema, c, f), 0);
    fclose(f);
    assert_non_null(strstr(text,
                           "download:\n  server:\n    socketPath: "
                           "\"/var/run/dragonfly/dfdaemon.sock\"\n    socketMode: \"0777\"\n"));
    assert_non_null(strstr(text, "gc:\n  interval: 1m30s\n  policy:\n"));
    /* Loading the printed text into fresh defaults gives the same values. */
    struct cfg d = {0};
    assert_int_equal(dfc_config_defaults(&schema, &d, &err), 0);
    assert_int_equal(dfc_config_load_string(&schema, &d, "printed", text, len, &err), 0);
    assert_string_equal(d.storage_dir, "/data/d f");
    assert_true(d.gc_interval == c->gc_interval);
    assert_int_equal(d.socket_mode, c->socket_mode);
    assert_true(d.keep == c->keep && d.ttl == c->ttl && d.piece == c->piece);
    dfc_config_free(&schema, &d);
    free(text);
}

static void test_file_errors(void **state) {
    struct cfg *c = *state;
    struct dfc_error err;
    char dir[256], path[300];
    test_mkdtemp(dir, sizeof(dir), "config");
    assert_int_equal(dfc_config_load_file(&schema, c, "/nonexistent/x.yaml", &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/x.yaml"));
    assert_int_equal(dfc_config_load_file(&schema, c, dir, &err), -EINVAL);
    snprintf(path, sizeof(path), "%s/c.yaml", dir);
    FILE *f = fopen(path, "w");
    fputs("storage:\n  dir: /srv/df\n", f);
    fclose(f);
    assert_int_equal(dfc_config_load_file(&schema, c, path, &err), 0);
    assert_string_equal(c->storage_dir, "/srv/df");
    test_rmtree(dir);
}

/* ---- STRING_LIST: a YAML sequence, or comma-separated text ---- */

struct list_cfg {
    struct dfc_config_list addrs;
    struct dfc_config_list none;
    char *name;
};

static const struct dfc_config_row list_rows[] = {
    {.key = "database.redis.addrs",
     .type = DFC_CFG_STRING_LIST,
     .offset = offsetof(struct list_cfg, addrs),
     .def = "127.0.0.1:6379",
     .env = "TEST_REDIS_ADDRS"},
    {.key = "database.redis.other",
     .type = DFC_CFG_STRING_LIST,
     .offset = offsetof(struct list_cfg, none)},
    {.key = "database.redis.masterName",
     .type = DFC_CFG_STRING,
     .offset = offsetof(struct list_cfg, name)},
};
static const struct dfc_config_schema list_schema = {"test", list_rows, 3};

static int load_list(struct list_cfg *c, const char *yaml, struct dfc_error *err) {
    return dfc_config_load_string(&list_schema, c, "l.yaml", yaml, strlen(yaml), err);
}

static void test_string_list(void **state) {
    struct list_cfg c = {{0, NULL}, {0, NULL}, NULL};
    struct dfc_error err;
    assert_int_equal(dfc_config_defaults(&list_schema, &c, &err), 0);
    assert_int_equal(c.addrs.n, 1);
    assert_string_equal(c.addrs.items[0], "127.0.0.1:6379");
    assert_int_equal(c.none.n, 0);
    assert_null(c.none.items);

    /* A block sequence and a flow sequence replace the default. */
    assert_int_equal(
        load_list(&c, "database:\n  redis:\n    addrs:\n      - a:1\n      - b:2\n", &err), 0);
    assert_int_equal(c.addrs.n, 2);
    assert_string_equal(c.addrs.items[0], "a:1");
    assert_string_equal(c.addrs.items[1], "b:2");
    assert_int_equal(load_list(&c, "database: {redis: {addrs: [\"c:3\"], other: []}}\n", &err), 0);
    assert_int_equal(c.addrs.n, 1);
    assert_string_equal(c.addrs.items[0], "c:3");
    /* "key:" with no value keeps what is there. */
    assert_int_equal(load_list(&c, "database:\n  redis:\n    addrs:\n", &err), 0);
    assert_int_equal(c.addrs.n, 1);

    /* Bad items name the key and the position, and leave the field as it was. */
    assert_int_equal(
        load_list(&c, "database:\n  redis:\n    addrs:\n      - a:1\n      - [x]\n", &err),
        -EINVAL);
    assert_string_equal(err.msg, "l.yaml:5:9: database.redis.addrs: items must be strings");
    assert_int_equal(load_list(&c, "database:\n  redis:\n    addrs: [a:1, \"\"]\n", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "l.yaml:3:18: database.redis.addrs: items must be non-empty"));
    assert_int_equal(c.addrs.n, 1);
    assert_string_equal(c.addrs.items[0], "c:3");
    /* A sequence for a row that is not a list is still refused. */
    assert_int_equal(load_list(&c, "database:\n  redis:\n    masterName: [a]\n", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "lists are not supported here"));

    /* Text (env, --set): comma-separated, blanks trimmed; "" is the empty list. */
    assert_int_equal(dfc_config_set(&list_schema, &c, "database.redis.addrs", " x:1 , y:2", &err),
                     0);
    assert_int_equal(c.addrs.n, 2);
    assert_string_equal(c.addrs.items[0], "x:1");
    assert_string_equal(c.addrs.items[1], "y:2");
    assert_int_equal(dfc_config_set(&list_schema, &c, "database.redis.addrs", "x:1,,y:2", &err),
                     -EINVAL);
    assert_string_equal(err.msg, "database.redis.addrs: empty item in `x:1,,y:2`");
    assert_int_equal(c.addrs.n, 2);
    setenv("TEST_REDIS_ADDRS", "e:1", 1);
    assert_int_equal(dfc_config_load_env(&list_schema, &c, &err), 0);
    assert_int_equal(c.addrs.n, 1);
    assert_string_equal(c.addrs.items[0], "e:1");
    unsetenv("TEST_REDIS_ADDRS");
    assert_int_equal(dfc_config_set(&list_schema, &c, "database.redis.addrs", "", &err), 0);
    assert_int_equal(c.addrs.n, 0);

    /* Too many items. */
    char many[DFC_CONFIG_LIST_MAX * 2 + 8];
    size_t at = 0;
    for (int i = 0; i <= DFC_CONFIG_LIST_MAX; i++) {
        at += (size_t)snprintf(many + at, sizeof(many) - at, i ? ",h" : "h");
    }
    assert_int_equal(dfc_config_set(&list_schema, &c, "database.redis.addrs", many, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "more than 64 items"));

    /* Printed as a flow sequence that loads back to the same list. */
    assert_int_equal(
        dfc_config_set(&list_schema, &c, "database.redis.addrs", "a:1,b \"q\":2", &err), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(dfc_config_print(&list_schema, &c, f), 0);
    fclose(f);
    assert_non_null(strstr(text, "    addrs: [\"a:1\", \"b \\\"q\\\":2\"]\n    other: []\n"));
    struct list_cfg d = {{0, NULL}, {0, NULL}, NULL};
    assert_int_equal(dfc_config_defaults(&list_schema, &d, &err), 0);
    assert_int_equal(dfc_config_load_string(&list_schema, &d, "printed", text, len, &err), 0);
    assert_int_equal(d.addrs.n, 2);
    assert_string_equal(d.addrs.items[1], "b \"q\":2");
    free(text);
    dfc_config_free(&list_schema, &d);
    dfc_config_free(&list_schema, &c);
    assert_int_equal(c.addrs.n, 0);
    assert_null(c.addrs.items);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_defaults),
        T(test_nested_yaml),
        T(test_unknown_key_names_line_and_column),
        T(test_bad_values),
        T(test_empty_document_and_sections),
        T(test_env_and_set_override),
        T(test_validate),
        T(test_print_round_trips),
        T(test_file_errors),
        cmocka_unit_test(test_string_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
