/* Tests for lib/src/options.c: the command line and environment over a config schema, the
 * precedence flags > environment > file > defaults for every parser kind, every error path
 * with its exact message, and the --help text generated from the rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "dfc/options.h"
#include "dfc/units.h"
#include "test_support.h"

struct cfg {
    uint64_t size;
    int64_t ttl;
    bool keep;
    int64_t count;
    uint64_t workers;
    char *name;
    const char *mode;
    char *dir;
    uint32_t perm;
    char *node;
    bool discard;
    char *hidden;
};

static const char *const modes[] = {"auto", "path", "stream", NULL};

#define F(member) offsetof(struct cfg, member)

static const struct dfc_config_row rows[] = {
    {.key = "s.size",
     .type = DFC_CFG_SIZE,
     .offset = F(size),
     .def = "4MiB",
     .env = "T_SIZE",
     .flag = "size",
     .help = "piece size",
     DFC_OPT_RANGE(1 << 20, 1 << 30)},
    {.key = "s.ttl",
     .type = DFC_CFG_DURATION,
     .offset = F(ttl),
     .def = "1h",
     .env = "T_TTL",
     .flag = "ttl",
     .short_flag = 't',
     DFC_OPT_RANGE(300 * DFC_NS_PER_SEC, 168 * 3600 * DFC_NS_PER_SEC)},
    {.key = "s.keep", .type = DFC_CFG_BOOL, .offset = F(keep), .env = "T_KEEP", .flag = "keep"},
    {.key = "s.count",
     .type = DFC_CFG_INT,
     .offset = F(count),
     .env = "T_COUNT",
     .flag = "count",
     DFC_OPT_RANGE(-5, 5)},
    {.key = "s.workers",
     .type = DFC_CFG_UINT,
     .offset = F(workers),
     .def = "8",
     .env = "T_WORKERS",
     .flag = "workers",
     DFC_OPT_RANGE(1, 64)},
    {.key = "s.name",
     .type = DFC_CFG_STRING,
     .offset = F(name),
     .def = "dflt",
     .env = "T_NAME",
     .flag = "name",
     .short_flag = 'n',
     .flags = DFC_OPT_NONEMPTY},
    {.key = "s.mode",
     .type = DFC_CFG_ENUM,
     .offset = F(mode),
     .def = "auto",
     .env = "T_MODE",
     .flag = "mode",
     .choices = modes},
    {.key = "s.dir",
     .type = DFC_CFG_PATH,
     .offset = F(dir),
     .def = "/var/x",
     .env = "T_DIR",
     .flag = "dir"},
    {.key = "s.perm",
     .type = DFC_CFG_MODE,
     .offset = F(perm),
     .def = "0644",
     .env = "T_PERM",
     .flag = "perm"},
    {.key = "s.node",
     .type = DFC_CFG_STRING,
     .offset = F(node),
     .env = "T_NODE",
     .env_alt = "T_NODE2",
     .flag = "node",
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_BOOL, .offset = F(discard), .flag = "discard", .help = "a flag, not a key"},
    {.key = "s.hidden", .type = DFC_CFG_STRING, .offset = F(hidden), .env = "T_HIDDEN"},
};

static const struct dfc_config_schema schema = {"test", rows, sizeof(rows) / sizeof(rows[0])};

static const struct dfc_cli cli = {
    .prog = "tester",
    .usage = "[options] [PATH]",
    .about = "Tests the options.",
    .schema = &schema,
    .version = "1.2.3",
    .features = DFC_CLI_CONFIG | DFC_CLI_SET | DFC_CLI_PRINT,
    .max_args = 1,
    .arg_name = "PATH",
};

/* A second program: a required flag without a YAML key, exactly one argument. */
struct out_cfg {
    char *output;
};
static const struct dfc_config_row out_rows[] = {
    {.type = DFC_CFG_STRING,
     .offset = offsetof(struct out_cfg, output),
     .env = "T_OUTPUT",
     .flag = "output",
     .short_flag = 'O',
     .flags = DFC_OPT_REQUIRED},
};
static const struct dfc_config_schema out_schema = {"out", out_rows, 1};
static const struct dfc_cli out_cli = {
    .prog = "out",
    .usage = "[options] <ID>",
    .schema = &out_schema,
    .min_args = 1,
    .max_args = 1,
    .arg_name = "task ID",
};

/* A third: address rows (DFC_CFG_ADDR), any host or an IP only. */
struct addr_cfg {
    char *peer, *listen;
};
static const struct dfc_config_row addr_rows[] = {
    {.key = "a.peer",
     .type = DFC_CFG_ADDR,
     .offset = offsetof(struct addr_cfg, peer),
     .env = "T_PEER",
     .flag = "peer",
     .help = "where the peer listens"},
    {.key = "a.listen",
     .type = DFC_CFG_ADDR,
     .offset = offsetof(struct addr_cfg, listen),
     .def = "127.0.0.1:80",
     .env = "T_LISTEN",
     .flag = "listen",
     .flags = DFC_OPT_IP | DFC_OPT_NONEMPTY},
};
static const struct dfc_config_schema addr_schema = {"addr", addr_rows, 2};
static const struct dfc_cli addr_cli = {
    .prog = "addr",
    .usage = "[options]",
    .schema = &addr_schema,
    .features = DFC_CLI_CONFIG,
};

static const char *const all_env[] = {
    "T_SIZE", "T_TTL",  "T_KEEP",  "T_COUNT",  "T_WORKERS", "T_NAME", "T_MODE",   "T_DIR",
    "T_PERM", "T_NODE", "T_NODE2", "T_OUTPUT", "T_HIDDEN",  "T_PEER", "T_LISTEN", NULL};

struct fx {
    char dir[256];
    char file[300];
    struct cfg c;
    struct dfc_cli_args args;
    struct dfc_error err;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "options");
    snprintf(f->file, sizeof(f->file), "%s/t.yaml", f->dir);
    for (size_t i = 0; all_env[i] != NULL; i++) {
        unsetenv(all_env[i]);
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfc_config_free(&schema, &f->c);
    test_rmtree(f->dir);
    for (size_t i = 0; all_env[i] != NULL; i++) {
        unsetenv(all_env[i]);
    }
    free(f);
    return 0;
}

static void write_file(struct fx *f, const char *yaml) {
    FILE *fp = fopen(f->file, "w");
    assert_non_null(fp);
    fputs(yaml, fp);
    fclose(fp);
}

/* Parses a NULL-terminated argument list (argv[0] is added) into f->c. */
static int parse_v(struct fx *f, const struct dfc_cli *c, void *cfg, const char *const *list) {
    char *argv[32] = {"tester"};
    int argc = 1;
    for (; list[argc - 1] != NULL; argc++) {
        argv[argc] = (char *)list[argc - 1];
    }
    return dfc_cli_parse(c, cfg, argc, argv, &f->args, &f->err);
}

#define PARSE(f, ...) parse_v(f, &cli, &(f)->c, (const char *const[]){__VA_ARGS__, NULL})

/* The printed effective configuration, for comparing values of any kind. */
static char *printed(struct fx *f) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_int_equal(dfc_config_print(&schema, &f->c, m), 0);
    fclose(m);
    return text;
}

static void assert_printed(struct fx *f, const char *leaf, const char *value) {
    char want[128];
    snprintf(want, sizeof(want), "\n  %s: %s\n", leaf, value);
    char *text = printed(f);
    if (strstr(text, want) == NULL) {
        fprintf(stderr, "want `%s` in:\n%s\n", want, text);
    }
    assert_non_null(strstr(text, want));
    free(text);
}

/* c's --help (markdown: its Markdown reference), a heap string. */
static char *help_of(const struct dfc_cli *c, bool markdown) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_non_null(m);
    if (markdown) {
        dfc_cli_help_markdown(c, m);
    } else {
        dfc_cli_help(c, m);
    }
    fclose(m);
    return text;
}

/* dfc_cli_main() with fd (stdout or stderr) sent to /dev/null; returns its exit code. */
static int main_quiet(int fd, const struct dfc_cli *c, void *cfg, int argc, char **argv) {
    struct dfc_cli_args args;
    FILE *stream = fd == STDOUT_FILENO ? stdout : stderr;
    int saved = dup(fd);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    assert_true(saved >= 0 && null >= 0);
    fflush(stream);
    dup2(null, fd);
    int r = dfc_cli_main(c, cfg, argc, argv, &args);
    fflush(stream);
    dup2(saved, fd);
    close(saved);
    close(null);
    return r;
}

/* ---- precedence, one setting of each parser kind ---- */

static const struct {
    const char *leaf, *env, *flag;
    const char *file_v, *env_v, *flag_v;         /* flag_v NULL: a boolean flag without a value */
    const char *def_p, *file_p, *env_p, *flag_p; /* as printed */
} kinds[] = {
    {"size", "T_SIZE", "--size", "8MiB", "16MiB", "32MiB", "4MiB", "8MiB", "16MiB", "32MiB"},
    {"ttl", "T_TTL", "--ttl", "2h", "3h", "4h", "1h", "2h", "3h", "4h"},
    {"keep", "T_KEEP", "--keep", "true", "false", NULL, "false", "true", "false", "true"},
    {"count", "T_COUNT", "--count", "1", "-2", "3", "0", "1", "-2", "3"},
    {"workers", "T_WORKERS", "--workers", "2", "3", "4", "8", "2", "3", "4"},
    {"name", "T_NAME", "--name", "f", "e", "c", "\"dflt\"", "\"f\"", "\"e\"", "\"c\""},
    {"mode", "T_MODE", "--mode", "path", "stream", "AUTO", "\"auto\"", "\"path\"", "\"stream\"",
     "\"auto\""},
    {"dir", "T_DIR", "--dir", "/f", "/e", "/c", "\"/var/x\"", "\"/f\"", "\"/e\"", "\"/c\""},
    {"perm", "T_PERM", "--perm", "0600", "0640", "0660", "\"0644\"", "\"0600\"", "\"0640\"",
     "\"0660\""},
};

static void test_precedence_every_kind(void **state) {
    struct fx *f = *state;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        char yaml[128];
        snprintf(yaml, sizeof(yaml), "s:\n  %s: %s\n", kinds[i].leaf, kinds[i].file_v);
        write_file(f, yaml);
        const char *flag_argv[4] = {"-c", f->file, kinds[i].flag, kinds[i].flag_v};

        /* defaults */
        assert_int_equal(PARSE(f, "--print-config"), 0);
        assert_printed(f, kinds[i].leaf, kinds[i].def_p);
        /* file > defaults */
        assert_int_equal(PARSE(f, "-c", f->file), 0);
        assert_printed(f, kinds[i].leaf, kinds[i].file_p);
        /* environment > file */
        setenv(kinds[i].env, kinds[i].env_v, 1);
        assert_int_equal(PARSE(f, "--config", f->file), 0);
        assert_printed(f, kinds[i].leaf, kinds[i].env_p);
        /* flags > environment > file, whatever their order on the line */
        char *argv[6] = {"tester", (char *)flag_argv[2], (char *)flag_argv[3], "-c", f->file};
        int argc = kinds[i].flag_v != NULL ? 5 : 4;
        if (kinds[i].flag_v == NULL) {
            argv[2] = "-c";
            argv[3] = f->file;
        }
        assert_int_equal(dfc_cli_parse(&cli, &f->c, argc, argv, &f->args, &f->err), 0);
        assert_printed(f, kinds[i].leaf, kinds[i].flag_p);
        /* --set counts as a flag */
        if (kinds[i].flag_v != NULL) {
            char set[64];
            snprintf(set, sizeof(set), "s.%s=%s", kinds[i].leaf, kinds[i].flag_v);
            assert_int_equal(PARSE(f, "--set", set, "-c", f->file), 0);
            assert_printed(f, kinds[i].leaf, kinds[i].flag_p);
        }
        unsetenv(kinds[i].env);
    }
}

static void test_forms_and_arguments(void **state) {
    struct fx *f = *state;
    assert_int_equal(PARSE(f, "--ttl=2h", "p", "--print-config"), 0);
    assert_true(f->c.ttl == 7200 * DFC_NS_PER_SEC);
    assert_true(f->args.print_config);
    assert_int_equal(f->args.n_args, 1);
    assert_string_equal(f->args.args[0], "p");
    assert_int_equal(PARSE(f, "-t10m", "-n", "x"), 0);
    assert_true(f->c.ttl == 600 * DFC_NS_PER_SEC);
    assert_string_equal(f->c.name, "x");
    /* As with getopt_long, a prefix only one flag has stands for it. */
    assert_int_equal(PARSE(f, "--wor", "3", "--print-c", "--disc"), 0);
    assert_true(f->c.workers == 3 && f->args.print_config && f->c.discard);
    assert_int_equal(PARSE(f, "--he"), DFC_CLI_HELP);
    assert_int_equal(PARSE(f, "--", "--ttl"), 0);
    assert_string_equal(f->args.args[0], "--ttl");
    assert_int_equal(PARSE(f, "-"), 0);
    assert_string_equal(f->args.args[0], "-");
    /* A flag-only row (no YAML key) is set by its flag and never printed. */
    assert_int_equal(PARSE(f, "--discard"), 0);
    assert_true(f->c.discard);
    char *text = printed(f);
    assert_null(strstr(text, "discard"));
    free(text);
    assert_int_equal(PARSE(f, "--set", "s.name=a=b"), 0);
    assert_string_equal(f->c.name, "a=b");
}

static void test_env_alt_and_empty(void **state) {
    struct fx *f = *state;
    assert_int_equal(PARSE(f, "--keep"), 0);
    assert_null(f->c.node); /* OPTIONAL: nothing set it */
    setenv("T_NODE2", "second", 1);
    assert_int_equal(PARSE(f, "--keep"), 0);
    assert_string_equal(f->c.node, "second");
    setenv("T_NODE", "", 1); /* empty counts as unset */
    assert_int_equal(PARSE(f, "--keep"), 0);
    assert_string_equal(f->c.node, "second");
    setenv("T_NODE", "first", 1);
    assert_int_equal(PARSE(f, "--keep"), 0);
    assert_string_equal(f->c.node, "first");
    assert_int_equal(PARSE(f, "--node", ""), 0);
    assert_string_equal(f->c.node, "");
    /* An empty variable falls back to the file, then the default. */
    setenv("T_TTL", "", 1);
    assert_int_equal(PARSE(f, "--keep"), 0);
    assert_true(f->c.ttl == 3600 * DFC_NS_PER_SEC);
}

/* Only the value that wins is checked: a bad value a higher source hides is not an error. */
static void test_hidden_values_not_checked(void **state) {
    struct fx *f = *state;
    setenv("T_TTL", "soon", 1);
    assert_int_equal(PARSE(f, "--ttl", "2h"), 0);
    assert_true(f->c.ttl == 7200 * DFC_NS_PER_SEC);
    write_file(f, "s:\n  ttl: 1m\n");
    setenv("T_TTL", "3h", 1);
    assert_int_equal(PARSE(f, "-c", f->file), 0);
    assert_true(f->c.ttl == 3 * 3600 * DFC_NS_PER_SEC);
    /* ... but the file's keys are all checked. */
    write_file(f, "s:\n  ttl: 1m\n  nope: 1\n");
    assert_int_equal(PARSE(f, "-c", f->file), -EINVAL);
}

/* ---- errors: one line each, naming the flag (its long form, however it was typed), the
 * variable or file:line:column ---- */

struct err_case {
    const char *env, *env_v; /* or NULL */
    const char *yaml;        /* or NULL; loaded with -c FILE */
    const char *argv[4];
    int code;
    bool usage;
    const char *msg; /* "%s" stands for the file's path */
};

static const struct err_case err_cases[] = {
    /* the shape of the command line */
    {NULL, NULL, NULL, {"--bogus"}, -EINVAL, true, "unknown flag `--bogus`"},
    {NULL, NULL, NULL, {"--bogus=1"}, -EINVAL, true, "unknown flag `--bogus`"},
    {NULL, NULL, NULL, {"-z"}, -EINVAL, true, "unknown flag `-z`"},
    {NULL, NULL, NULL, {"--s", "1"}, -EINVAL, true, "ambiguous flag `--s`: --set, --size"},
    {NULL, NULL, NULL, {"--co=1"}, -EINVAL, true, "ambiguous flag `--co`: --config, --count"},
    {NULL,
     NULL,
     NULL,
     {"--wo", "0"},
     -ERANGE,
     false,
     "--workers must be between 1 and 64, got `0`"},
    {NULL, NULL, NULL, {"--ttl"}, -EINVAL, true, "--ttl needs a value"},
    {NULL, NULL, NULL, {"-t"}, -EINVAL, true, "-t needs a value"},
    {NULL, NULL, NULL, {"--config"}, -EINVAL, true, "--config needs a value"},
    {NULL, NULL, NULL, {"--keep=yes"}, -EINVAL, true, "--keep takes no value"},
    {NULL, NULL, NULL, {"--print-config=1"}, -EINVAL, true, "--print-config takes no value"},
    {NULL, NULL, NULL, {"a", "b"}, -EINVAL, true, "unexpected argument `b`"},
    {NULL, NULL, NULL, {"--set", "s.nope=1"}, -ENOENT, false, "unknown test config key `s.nope`"},
    {NULL, NULL, NULL, {"--set", "s.ttl"}, -EINVAL, false, "--set wants KEY=VALUE, got `s.ttl`"},
    /* a bad value of each kind */
    {NULL,
     NULL,
     NULL,
     {"--size", "big"},
     -EINVAL,
     false,
     "--size: `big` is not a size such as 4MiB"},
    {NULL,
     NULL,
     NULL,
     {"--ttl", "soon"},
     -EINVAL,
     false,
     "--ttl: `soon` is not a duration such as 1h30m"},
    {"T_KEEP", "maybe", NULL, {NULL}, -EINVAL, false, "T_KEEP: `maybe` is not true or false"},
    {NULL, NULL, NULL, {"--count", "x"}, -EINVAL, false, "--count: `x` is not an integer"},
    {NULL,
     NULL,
     NULL,
     {"--workers", "-1"},
     -EINVAL,
     false,
     "--workers: `-1` is not a non-negative integer"},
    {NULL, NULL, NULL, {"-n", ""}, -EINVAL, false, "--name must not be empty"},
    {NULL,
     NULL,
     NULL,
     {"--mode=fax"},
     -EINVAL,
     false,
     "bad --mode `fax`: must be auto, path or stream"},
    {NULL, NULL, NULL, {"--dir", "rel"}, -EINVAL, false, "--dir: `rel` is not an absolute path"},
    {NULL,
     NULL,
     NULL,
     {"--perm", "0999"},
     -EINVAL,
     false,
     "--perm: `0999` is not an octal file mode such as 0660"},
    /* out of range */
    {NULL,
     NULL,
     NULL,
     {"--size", "2GiB"},
     -ERANGE,
     false,
     "--size must be between 1MiB and 1GiB, got `2GiB`"},
    {NULL, NULL, NULL, {"-t", "1m"}, -ERANGE, false, "--ttl must be between 5m and 168h, got `1m`"},
    {NULL,
     NULL,
     NULL,
     {"--count", "6"},
     -ERANGE,
     false,
     "--count must be between -5 and 5, got `6`"},
    {"T_WORKERS", "0", NULL, {NULL}, -ERANGE, false, "T_WORKERS must be between 1 and 64, got `0`"},
    {NULL,
     NULL,
     NULL,
     {"--set", "s.count=-6"},
     -ERANGE,
     false,
     "s.count must be between -5 and 5, got `-6`"},
    /* the environment names the variable, the file its line and column */
    {"T_TTL",
     "soon",
     NULL,
     {NULL},
     -EINVAL,
     false,
     "T_TTL: `soon` is not a duration such as 1h30m"},
    {"T_MODE",
     "fax",
     NULL,
     {NULL},
     -EINVAL,
     false,
     "bad T_MODE `fax`: must be auto, path or stream"},
    {NULL,
     NULL,
     "s:\n  ttl: 2h\n  nope: 1\n",
     {NULL},
     -EINVAL,
     false,
     "%s:3:3: unknown key `s.nope`"},
    {NULL,
     NULL,
     "s:\n  workers: 65\n",
     {NULL},
     -ERANGE,
     false,
     "%s:2:12: s.workers must be between 1 and 64, got `65`"},
    {NULL,
     NULL,
     "s:\n  keep: perhaps\n",
     {NULL},
     -EINVAL,
     false,
     "%s:2:9: s.keep: `perhaps` is not true or false"},
};

static void test_errors(void **state) {
    struct fx *f = *state;
    for (size_t i = 0; i < sizeof(err_cases) / sizeof(err_cases[0]); i++) {
        const struct err_case *e = &err_cases[i];
        char *argv[8] = {"tester"};
        int argc = 1;
        if (e->yaml != NULL) {
            write_file(f, e->yaml);
            argv[argc++] = "-c";
            argv[argc++] = f->file;
        }
        for (size_t j = 0; j < 4 && e->argv[j] != NULL; j++) {
            argv[argc++] = (char *)e->argv[j];
        }
        if (e->env != NULL) {
            setenv(e->env, e->env_v, 1);
        }
        char want[512];
        if (strncmp(e->msg, "%s", 2) == 0) {
            snprintf(want, sizeof(want), "%s%s", f->file, e->msg + 2);
        } else {
            snprintf(want, sizeof(want), "%s", e->msg);
        }
        int r = dfc_cli_parse(&cli, &f->c, argc, argv, &f->args, &f->err);
        if (r != e->code || strcmp(f->err.msg, want) != 0 || f->args.usage_error != e->usage) {
            fprintf(stderr, "case %zu: got %d `%s` usage=%d\n", i, r, f->err.msg,
                    f->args.usage_error);
        }
        assert_int_equal(r, e->code);
        assert_string_equal(f->err.msg, want);
        assert_int_equal(f->args.usage_error, e->usage);
        if (e->env != NULL) {
            unsetenv(e->env);
        }
    }
}

static void test_required_and_arguments(void **state) {
    struct fx *f = *state;
    struct out_cfg o = {0};
    assert_int_equal(parse_v(f, &out_cli, &o, (const char *const[]){"id", NULL}), -EINVAL);
    assert_string_equal(f->err.msg, "-O/--output or T_OUTPUT is required");
    assert_true(f->args.usage_error);
    assert_int_equal(parse_v(f, &out_cli, &o, (const char *const[]){"-O", "x", NULL}), -EINVAL);
    assert_string_equal(f->err.msg, "expects exactly one task ID");
    assert_int_equal(parse_v(f, &out_cli, &o, (const char *const[]){"id", "-Ox", NULL}), 0);
    assert_string_equal(o.output, "x");
    setenv("T_OUTPUT", "/env/out", 1);
    assert_int_equal(parse_v(f, &out_cli, &o, (const char *const[]){"id", NULL}), 0);
    assert_string_equal(o.output, "/env/out");
    dfc_config_free(&out_schema, &o);
}

static void test_help_and_version_win(void **state) {
    struct fx *f = *state;
    /* --help anywhere after bad values still answers, as getopt did ... */
    assert_int_equal(PARSE(f, "--ttl", "soon", "a", "b", "--help"), DFC_CLI_HELP);
    assert_int_equal(PARSE(f, "-h"), DFC_CLI_HELP);
    assert_int_equal(PARSE(f, "-V"), DFC_CLI_VERSION);
    assert_int_equal(PARSE(f, "--version"), DFC_CLI_VERSION);
    /* ... but a malformed flag before it is reported. */
    assert_int_equal(PARSE(f, "--bogus", "--help"), -EINVAL);
    /* A program without a version has no -V. */
    struct out_cfg o = {0};
    assert_int_equal(parse_v(f, &out_cli, &o, (const char *const[]){"-V", NULL}), -EINVAL);
    assert_string_equal(f->err.msg, "unknown flag `-V`");
    dfc_config_free(&out_schema, &o);
}

static void test_help_generated_from_rows(void **state) {
    (void)state;
    char *text = help_of(&cli, false);
    static const char want[] =
        "Usage: tester [options] [PATH]\n"
        "\n"
        "Tests the options.\n"
        "\n"
        "Options:\n"
        "  -c, --config FILE             YAML configuration file\n"
        "      --size SIZE               s.size: piece size, 1MiB..1GiB [4MiB] [T_SIZE]\n"
        "  -t, --ttl DURATION            s.ttl, 5m..168h [1h] [T_TTL]\n"
        "      --keep                    s.keep [T_KEEP]\n"
        "      --count N                 s.count, -5..5 [T_COUNT]\n"
        "      --workers N               s.workers, 1..64 [8] [T_WORKERS]\n"
        "  -n, --name STR                s.name [dflt] [T_NAME]\n"
        "      --mode WORD               s.mode [auto] [T_MODE]\n"
        "      --dir PATH                s.dir [/var/x] [T_DIR]\n"
        "      --perm MODE               s.perm [0644] [T_PERM]\n"
        "      --node STR                s.node [T_NODE, else T_NODE2]\n"
        "      --discard                 a flag, not a key\n"
        "      --set KEY=VALUE           set any configuration key (repeatable)\n"
        "      --print-config            print the effective configuration and exit\n"
        "  -V, --version                 print the version and exit\n"
        "  -h, --help                    print this help and exit\n"
        "\n"
        "Environment: T_HIDDEN (s.hidden).\n"
        "Precedence: flags > environment > file > defaults.\n";
    if (strcmp(text, want) != 0) {
        fprintf(stderr, "got:\n%s", text);
    }
    assert_string_equal(text, want);
    free(text);

    /* Long lines wrap at 80 columns under the help column; a required row says so. */
    text = help_of(&out_cli, false);
    assert_non_null(strstr(text, "  -O, --output STR              (required) [T_OUTPUT]\n"));
    assert_non_null(strstr(text, "Precedence: flags > environment > defaults.\n"));
    for (char *line = text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        assert_true(nl - line <= 80);
        line = nl + 1;
    }
    free(text);
}

/* The Markdown reference (docs/configuration.md) lists every row, flagless ones too, with its
 * key, flag, variable, type, default and help with range and choices; "|" is escaped. */
static void test_help_markdown_from_rows(void **state) {
    (void)state;
    char *text = help_of(&cli, true);
    static const char *const want[] = {
        "## tester\n\nUsage: `tester [options] [PATH]`\n\nTests the options.\n\n",
        ("| YAML key | flag | environment | type | default | description "
         "|\n|---|---|---|---|---|---|\n"),
        "| | `-c, --config` | | path | | YAML configuration file |\n",
        "| `s.size` | `--size` | `T_SIZE` | size | `4MiB` | piece size; 1MiB..1GiB |\n",
        "| `s.ttl` | `-t, --ttl` | `T_TTL` | duration | `1h` | 5m..168h |\n",
        "| `s.keep` | `--keep` | `T_KEEP` | bool | `false` |  |\n",
        "| `s.node` | `--node` | `T_NODE`, else `T_NODE2` |",
        "| `s.hidden` | | `T_HIDDEN` |",
        "| | `--set KEY=VALUE` | | | | set any configuration key (repeatable) |\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (strstr(text, want[i]) == NULL) {
            fprintf(stderr, "missing:\n%s\ngot:\n%s", want[i], text);
        }
        assert_non_null(strstr(text, want[i]));
    }
    free(text);

    /* dfc_cli_main() prints it for --help-markdown alone, and exits 0 without running. */
    struct out_cfg o = {0};
    char *argv[] = {"tester", "--help-markdown", NULL};
    assert_int_equal(main_quiet(STDOUT_FILENO, &out_cli, &o, 2, argv), 0);
    dfc_config_free(&out_schema, &o);
}

/* ---- address rows ---- */

#define PARSE_ADDR(f, a, ...) parse_v(f, &addr_cli, a, (const char *const[]){__VA_ARGS__, NULL})

static void test_addr_valid(void **state) {
    struct fx *f = *state;
    struct addr_cfg a = {0};
    assert_int_equal(PARSE_ADDR(f, &a, "--listen", "10.0.0.1:8002"), 0);
    assert_string_equal(a.listen, "10.0.0.1:8002");
    assert_string_equal(a.peer, ""); /* empty: off */
    assert_int_equal(PARSE_ADDR(f, &a, "--listen=[::1]:65535", "--peer", "sched.local:8002"), 0);
    assert_string_equal(a.listen, "[::1]:65535");
    assert_string_equal(a.peer, "sched.local:8002");
    assert_int_equal(PARSE_ADDR(f, &a, "--peer", "[fe80::1]:1"), 0);
    assert_string_equal(a.peer, "[fe80::1]:1");
    assert_string_equal(a.listen, "127.0.0.1:80"); /* the default */
    setenv("T_LISTEN", "[2001:db8::7]:9000", 1);
    assert_int_equal(PARSE_ADDR(f, &a, "--peer", ""), 0);
    assert_string_equal(a.listen, "[2001:db8::7]:9000");
    assert_string_equal(a.peer, "");
    dfc_config_free(&addr_schema, &a);
}

static void test_addr_errors_name_the_source(void **state) {
    struct fx *f = *state;
    static const struct {
        const char *flag, *value, *msg;
    } cases[] = {
        {"--listen", "10.0.0.1",
         "--listen: `10.0.0.1` is not IP:PORT (an IP address and a port 1-65535; [IPv6]:PORT)"},
        {"--listen", "10.0.0.1:",
         "--listen: `10.0.0.1:` is not IP:PORT (an IP address and a "
         "port 1-65535; [IPv6]:PORT)"},
        {"--listen", "localhost:80",
         "--listen: `localhost:80` is not IP:PORT (an IP address "
         "and a port 1-65535; [IPv6]:PORT)"},
        {"--listen", "::1]:80",
         "--listen: `::1]:80` is not IP:PORT (an IP address and a port "
         "1-65535; [IPv6]:PORT)"},
        {"--listen", "", "--listen must not be empty"},
        {"--peer", "h:0",
         "--peer: `h:0` is not HOST:PORT (a host and a port 1-65535; "
         "[IPv6]:PORT; empty = off)"},
        {"--peer", "h:65536",
         "--peer: `h:65536` is not HOST:PORT (a host and a port 1-65535; "
         "[IPv6]:PORT; empty = off)"},
        {"--peer", "h:8x",
         "--peer: `h:8x` is not HOST:PORT (a host and a port 1-65535; "
         "[IPv6]:PORT; empty = off)"},
        {"--peer", ":80",
         "--peer: `:80` is not HOST:PORT (a host and a port 1-65535; "
         "[IPv6]:PORT; empty = off)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct addr_cfg a = {0};
        int r = PARSE_ADDR(f, &a, cases[i].flag, cases[i].value);
        if (r != -EINVAL || strcmp(f->err.msg, cases[i].msg) != 0) {
            fprintf(stderr, "case %zu: got %d `%s`\n", i, r, f->err.msg);
        }
        assert_int_equal(r, -EINVAL);
        assert_string_equal(f->err.msg, cases[i].msg);
        assert_false(f->args.usage_error);
        dfc_config_free(&addr_schema, &a);
    }

    /* The environment and the file are named too. */
    struct addr_cfg a = {0};
    setenv("T_PEER", "nohost", 1);
    assert_int_equal(PARSE_ADDR(f, &a, "--listen", "[::1]:1"), -EINVAL);
    assert_string_equal(f->err.msg, "T_PEER: `nohost` is not HOST:PORT (a host and a port "
                                    "1-65535; [IPv6]:PORT; empty = off)");
    unsetenv("T_PEER");
    write_file(f, "a:\n  listen: 1.2.3.4:99999\n");
    assert_int_equal(PARSE_ADDR(f, &a, "-c", f->file), -EINVAL);
    char want[512];
    snprintf(want, sizeof(want),
             "%s:2:11: a.listen: `1.2.3.4:99999` is not IP:PORT (an IP address and a port "
             "1-65535; [IPv6]:PORT)",
             f->file);
    assert_string_equal(f->err.msg, want);
    dfc_config_free(&addr_schema, &a);

    /* dfc_cli_main() prints it and says exit 2, as for every option error. */
    char *argv[] = {"addr", "--peer", "h", NULL};
    assert_int_equal(main_quiet(STDERR_FILENO, &addr_cli, &a, 3, argv), 2);
    dfc_config_free(&addr_schema, &a);
}

static void test_addr_help_and_markdown(void **state) {
    (void)state;
    char *text = help_of(&addr_cli, false);
    assert_non_null(strstr(text, "      --peer HOST:PORT          a.peer: where the peer listens "
                                 "[T_PEER]\n"));
    assert_non_null(strstr(text, "      --listen IP:PORT          a.listen [127.0.0.1:80] "
                                 "[T_LISTEN]\n"));
    free(text);
    text = help_of(&addr_cli, true);
    assert_non_null(strstr(text, "| `a.peer` | `--peer` | `T_PEER` | address | `\"\"` | where the "
                                 "peer listens; HOST:PORT or [IPv6]:PORT |\n"));
    assert_non_null(strstr(text, "| `a.listen` | `--listen` | `T_LISTEN` | address | "
                                 "`127.0.0.1:80` | IP:PORT or [IPv6]:PORT; not empty |\n"));
    free(text);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_precedence_every_kind),
        T(test_forms_and_arguments),
        T(test_env_alt_and_empty),
        T(test_hidden_values_not_checked),
        T(test_errors),
        T(test_required_and_arguments),
        T(test_help_and_version_win),
        T(test_help_generated_from_rows),
        T(test_help_markdown_from_rows),
        T(test_addr_valid),
        T(test_addr_errors_name_the_source),
        T(test_addr_help_and_markdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
