/*
 * Integration tests of dfcache stat and ls (daemon/cmd/dfcache/show.c) against a real dfdaemon
 * process (standalone: no scheduler; test_p2p.c has stat with a scheduler's answer): the human
 * output of a real import (IEC sizes, "expires in", persistent, "-" replica counts), the --json
 * output read by a real JSON parser (python3's json module) with exact values, an expired TTL,
 * an empty list, and usage errors (exit 2 naming the flag).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_harness.h"
#include "test_support.h"

#define MiB ((size_t)1 << 20)

/* Imports a len-byte file (seed) with the extra import flags; the task id into id. */
static void import(struct harness_fx *f, size_t len, unsigned seed, const char *ttl, char id[65]) {
    char src[400];
    snprintf(src, sizeof(src), "%s/src-%u.bin", f->h.dir, seed);
    harness_write_file(src, len, seed);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--ttl", ttl, "--tag", "t\"1",
                             "--application", "app\\x", src),
                     0);
    const char *p = strstr(f->out, "Done: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "Done: %64s", id), 1);
}

static bool have_python(void) {
    return system("command -v python3 >/dev/null 2>&1") == 0;
}

/* Runs the python3 statements check on the JSON document json (loaded as d, with re and
 * datetime imported and the helper secs(t): whole seconds of an RFC 3339 time, and frac(t):
 * its fraction digits); the statements assert. Returns python's exit code (0: all held). */
static int py_check(struct harness_fx *f, const char *json, const char *check) {
    char doc[400], script[400], cmd[1000];
    snprintf(doc, sizeof(doc), "%s/doc.json", f->h.dir);
    snprintf(script, sizeof(script), "%s/check.py", f->h.dir);
    FILE *fp = fopen(doc, "w");
    assert_non_null(fp);
    fputs(json, fp);
    fclose(fp);
    fp = fopen(script, "w");
    assert_non_null(fp);
    fprintf(fp,
            "import json, re, sys, datetime\n"
            "d = json.load(open(sys.argv[1], encoding='utf-8'))\n"
            "RFC = re.compile(r'^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d{3}|\\.\\d{6}|"
            "\\.\\d{9})?Z$')\n"
            "def secs(t):\n"
            "    assert RFC.match(t), t\n"
            "    return int(datetime.datetime.strptime(t[:19], '%%Y-%%m-%%dT%%H:%%M:%%S')\n"
            "               .replace(tzinfo=datetime.timezone.utc).timestamp())\n"
            "def frac(t):\n"
            "    return t[19:-1]\n"
            "%s\n",
            check);
    fclose(fp);
    snprintf(cmd, sizeof(cmd), "python3 '%s' '%s'", script, doc);
    int rc = system(cmd);
    return rc == 0 ? 0 : 1;
}

/* The line of text that starts with prefix (copied into line), or fails the test. */
static void line_of(const char *text, const char *prefix, char *line, size_t size) {
    const char *p = text;
    while (p != NULL && *p != '\0') {
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            assert_true(n < size);
            memcpy(line, p, n);
            line[n] = '\0';
            return;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    fail_msg("no line starting with `%s` in:\n%s", prefix, text);
}

/* The start of a table row's last column: CREATED ("just now", "12s ago") holds single spaces
 * only, and two spaces end every column before it. */
static const char *last_column(const char *row) {
    const char *last = NULL;
    for (const char *p = strstr(row, "  "); p != NULL; p = strstr(p + 1, "  ")) {
        last = p;
    }
    assert_non_null(last);
    return last + 2;
}

static void test_stat_human(void **state) {
    struct harness_fx *f = *state;
    char id[65];
    import(f, 5 * MiB + 512 * 1024, 1, "2h", id); /* 5.5 MiB */
    assert_int_equal(DFCACHE(f, "stat", id), 0);
    char want[200];
    snprintf(want, sizeof(want), "ID:                   %s\n", id);
    assert_non_null(strstr(f->out, want));
    assert_non_null(strstr(f->out, "State:                Succeeded\n"));
    assert_non_null(strstr(f->out, "Content length:       5.5 MiB\n"));
    assert_non_null(strstr(f->out, "Piece length:         4.0 MiB\n"));
    assert_non_null(strstr(f->out, "Piece count:          2\n"));
    assert_non_null(strstr(f->out, "Persistent:           yes\n"));
    /* No scheduler: the counts are unknown, never 0; the wanted count is the import's. */
    assert_non_null(strstr(f->out, "Persistent replicas:  - of 2\n"));
    assert_non_null(strstr(f->out, "Replicas:             -\n"));
    assert_non_null(strstr(f->out, "Tag:                  t\"1\n"));
    assert_non_null(strstr(f->out, "Application:          app\\x\n"));
    /* Less than 2h left a moment after the import; the minutes are truncated. */
    assert_non_null(strstr(f->out, "TTL:                  2h (expires in 1h59m)\n"));
    char line[200];
    line_of(f->out, "Created:", line, sizeof(line));
    assert_true(strstr(line, "(just now)") != NULL || strstr(line, "s ago)") != NULL);
    assert_non_null(strstr(f->out, "Scheduler:            none (the daemon runs without a "
                                   "scheduler)\n"));
    /* Exact bytes on request. */
    assert_int_equal(DFCACHE(f, "stat", "--bytes", id), 0);
    assert_non_null(strstr(f->out, "Content length:       5767168\n"));
    assert_non_null(strstr(f->out, "Piece length:         4194304\n"));
}

/* Another user's tag and application reach whoever runs `dfcache stat`: their control bytes
 * (a terminal's escape sequences) are shown as `?`, never written to the terminal; --json
 * keeps the exact value, escaped. */
static void test_stat_human_shows_no_control_bytes(void **state) {
    struct harness_fx *f = *state;
    char src[400], id[65];
    snprintf(src, sizeof(src), "%s/esc.bin", f->h.dir);
    harness_write_file(src, 1000, 77);
    assert_int_equal(DFCACHE(f, "import", "--no-progress", "--tag", "a\x1b]0;owned\ab",
                             "--application", "x\ry\x7fz", src),
                     0);
    const char *p = strstr(f->out, "Done: ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "Done: %64s", id), 1);
    assert_int_equal(DFCACHE(f, "stat", id), 0);
    print_message("%s", f->out);
    assert_null(strchr(f->out, '\x1b'));
    assert_null(strchr(f->out, '\x07'));
    assert_null(strchr(f->out, '\r'));
    assert_null(strchr(f->out, '\x7f'));
    assert_non_null(strstr(f->out, "Tag:                  a?]0;owned?b\n"));
    assert_non_null(strstr(f->out, "Application:          x?y?z\n"));
    assert_int_equal(DFCACHE(f, "stat", "--json", id), 0);
    assert_non_null(strstr(f->out, "\"a\\u001b]0;owned\\u0007b\""));
}

static void test_stat_json(void **state) {
    struct harness_fx *f = *state;
    if (!have_python()) {
        test_skip("needs python3");
    }
    char id[65];
    import(f, 3 * MiB + 7, 2, "90m", id);
    assert_int_equal(DFCACHE(f, "stat", "--json", id), 0);
    char check[2000];
    snprintf(check, sizeof(check),
             "assert d['id'] == '%s', d\n"
             "assert d['state'] == 'Succeeded'\n"
             "assert d['content_length'] == 3145735 and d['piece_length'] == 4194304\n"
             "assert d['piece_count'] == 1\n"
             "assert d['tag'] == 't\"1' and d['application'] == 'app\\\\x', d\n"
             "assert d['persistent_replica_count'] == 2\n"
             "assert d['current_persistent_replica_count'] is None\n"
             "assert d['current_replica_count'] is None\n"
             "assert d['ttl_seconds'] == 5400\n"
             "assert d['scheduler'] == {'configured': False, 'answered': False, 'error': None}\n"
             "assert secs(d['expires_at']) - secs(d['created_at']) == 5400\n"
             "assert frac(d['expires_at']) == frac(d['created_at'])\n"
             "assert d['expired'] is False\n"
             "assert abs(secs(d['created_at']) - %lld) < 600\n"
             "l = d['local']\n"
             "assert l['persistent'] is True and l['ttl_seconds'] == 5400 and not l['expired']\n"
             "assert l['created_at'] == d['created_at'] and RFC.match(l['finished_at'])\n"
             "assert sorted(d) == sorted(['id', 'state', 'content_length', 'piece_length',\n"
             "    'piece_count', 'tag', 'application', 'persistent_replica_count',\n"
             "    'current_persistent_replica_count', 'current_replica_count', 'ttl_seconds',\n"
             "    'created_at', 'updated_at', 'expires_at', 'expired', 'scheduler', 'pins',\n"
             "    'local'])\n"
             "assert d['pins'] == []\n",
             id, (long long)time(NULL));
    assert_int_equal(py_check(f, f->out, check), 0);
    /* --bytes changes nothing in JSON: its numbers are always exact. */
    char first[sizeof(f->out)];
    memcpy(first, f->out, sizeof(first));
    assert_int_equal(DFCACHE(f, "stat", "--json", "--bytes", id), 0);
    assert_string_equal(f->out, first);
}

static void test_ls_human_and_json(void **state) {
    struct harness_fx *f = *state;
    char a[65], b[65];
    import(f, 1536 * 1024, 3, "1h", a); /* 1.5 MiB */
    import(f, 700, 4, "3h", b);         /* 700 B */
    assert_int_equal(DFCACHE(f, "ls"), 0);
    char head[300], ra[300], rb[300];
    line_of(f->out, "ID ", head, sizeof(head));
    line_of(f->out, a, ra, sizeof(ra));
    line_of(f->out, b, rb, sizeof(rb));
    /* Full ids; the columns line up with the header (SIZE right-aligned). */
    /* "in 59m59s" unless the second import took a second or more */
    assert_non_null(strstr(ra, "  1.5 MiB  yes         1h   in 59m"));
    assert_non_null(strstr(rb, "    700 B  yes         3h   in 2h59m "));
    assert_int_equal(strstr(head, "SIZE") + 4 - head, strstr(ra, "MiB") + 3 - ra);
    assert_int_equal(strstr(head, "SIZE") + 4 - head, strstr(rb, " B") + 2 - rb);
    assert_int_equal(strstr(head, "PERSISTENT") - head, strstr(ra, "yes") - ra);
    assert_int_equal(strstr(head, "EXPIRES") - head, strstr(rb, "in 2h59m") - rb);
    assert_int_equal(strstr(head, "EXPIRES") - head, strstr(ra, "in 59m") - ra);
    assert_int_equal(strstr(head, "CREATED") - head, last_column(ra) - ra);
    assert_int_equal(strstr(head, "CREATED") - head, last_column(rb) - rb);
    assert_int_equal(DFCACHE(f, "ls", "--bytes"), 0);
    line_of(f->out, a, ra, sizeof(ra));
    assert_non_null(strstr(ra, "  1572864  yes"));
    if (!have_python()) {
        return;
    }
    assert_int_equal(DFCACHE(f, "ls", "--json"), 0);
    char check[1500];
    snprintf(check, sizeof(check),
             "assert isinstance(d, list) and len(d) == 2, d\n"
             "t = {e['id']: e for e in d}\n"
             "a, b = t['%s'], t['%s']\n"
             "assert a['content_length'] == 1572864 and b['content_length'] == 700\n"
             "assert a['piece_length'] == 4194304\n"
             "assert a['persistent'] is True and b['persistent'] is True\n"
             "assert a['ttl_seconds'] == 3600 and b['ttl_seconds'] == 10800\n"
             "assert secs(b['expires_at']) - secs(b['created_at']) == 10800\n"
             "assert a['expired'] is False and b['expired'] is False\n"
             "assert sorted(a) == sorted(['id', 'content_length', 'piece_length', 'persistent',\n"
             "    'ttl_seconds', 'created_at', 'updated_at', 'finished_at', 'expires_at',\n"
             "    'expired'])\n",
             a, b);
    assert_int_equal(py_check(f, f->out, check), 0);
}

static void test_ls_empty(void **state) {
    struct harness_fx *f = *state;
    assert_int_equal(DFCACHE(f, "ls"), 0);
    assert_string_equal(f->out, "ID  SIZE  PERSISTENT  TTL  EXPIRES  CREATED\n"); /* header only */
    assert_int_equal(DFCACHE(f, "ls", "--json"), 0);
    assert_string_equal(f->out, "[]\n");
    if (have_python()) {
        assert_int_equal(py_check(f, f->out, "assert d == []"), 0);
    }
}

static void sql(struct harness_fx *f, const char *stmt) {
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "sqlite3 '%s/metadata/pcache.db' \"%s\"", f->h.store, stmt);
    assert_int_equal(system(cmd), 0);
}

/* A task past its TTL that the GC has not reached yet shows as expired. Time "passes" by moving
 * the stored creation time back while the daemon is stopped (its GC runs hourly here and first
 * only after an hour, so it cannot delete the task during the test). */
static void test_expired(void **state) {
    struct harness_fx *f = *state;
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        test_skip("needs the sqlite3 command-line shell");
    }
    char id[65];
    import(f, 4096, 5, "5m", id);
    assert_int_equal(harness_stop(&f->h, SIGTERM), 0);
    char stmt[300];
    snprintf(stmt, sizeof(stmt),
             "UPDATE tasks SET created_at_ns = created_at_ns - 400000000000 WHERE id = '%s'", id);
    sql(f, stmt);
    harness_restart(&f->h);
    assert_int_equal(DFCACHE(f, "stat", id), 0);
    assert_non_null(strstr(f->out, "TTL:                  5m (expired)\n"));
    char line[200];
    line_of(f->out, "Created:", line, sizeof(line));
    assert_non_null(strstr(line, " (6m")); /* 400 s and the few since the import */
    assert_non_null(strstr(line, "s ago)"));
    assert_int_equal(DFCACHE(f, "ls"), 0);
    line_of(f->out, id, line, sizeof(line));
    assert_non_null(strstr(line, "  5m   expired  6m"));
    if (have_python()) {
        assert_int_equal(DFCACHE(f, "stat", "--json", id), 0);
        assert_int_equal(py_check(f, f->out,
                                  "assert d['expired'] is True and d['local']['expired'] is True\n"
                                  "assert secs(d['expires_at']) - secs(d['created_at']) == 300\n"),
                         0);
        assert_int_equal(DFCACHE(f, "ls", "--json"), 0);
        assert_int_equal(py_check(f, f->out, "assert d[0]['expired'] is True"), 0);
    }
}

static void test_usage_errors(void **state) {
    struct harness_fx *f = *state;
    assert_int_equal(DFCACHE(f, "ls", "--bogus"), 2);
    assert_non_null(strstr(f->err, "dfcache ls: unknown flag `--bogus`"));
    assert_int_equal(DFCACHE(f, "stat", "--json"), 2); /* no id */
    assert_non_null(strstr(f->err, "dfcache stat: "));
    assert_int_equal(DFCACHE(f, "stat", "--json=maybe", "x"), 2);
    assert_non_null(strstr(f->err, "--json"));
    assert_int_equal(DFCACHE(f, "ls", "extra"), 2);
    assert_int_equal(DFCACHE(f, "stat", "--help"), 0);
    assert_non_null(strstr(f->out, "current_replica_count")); /* the JSON fields are listed */
    assert_non_null(strstr(f->out, "--bytes"));
    /* A bad id is the daemon's INVALID_ARGUMENT (exit 1), and nothing on stdout. */
    assert_int_equal(DFCACHE(f, "stat", "--json", "not-an-id"), 1);
    assert_string_equal(f->out, "");
    assert_non_null(strstr(f->err, "(INVALID_ARGUMENT)"));
}

int main(void) {
    if (harness_resolve_methods(NULL, 0) < 0) {
        return 1;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, harness_fx_setup, harness_fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_stat_human),   T(test_stat_human_shows_no_control_bytes),
        T(test_stat_json),    T(test_ls_human_and_json),
        T(test_ls_empty),     T(test_expired),
        T(test_usage_errors),
    };
    return test_run_group(tests, NULL, NULL);
}
