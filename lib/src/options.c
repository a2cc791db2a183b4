/*
 * options.c - the command line and the environment of every binary, from its config schema.
 *
 * DESIGN: argv is scanned once, before any value is applied: built-in flags (--help,
 * --version, --config, --set, --print-config) are recognized, every other flag is matched to
 * its schema row and its text kept, positional arguments are collected. Only then are the
 * sources applied, lowest first (defaults, file, environment, flags in argv order), each value
 * through dfc_config_set_row() with the name of its source, so "last one wins" gives the
 * precedence flags > environment > file > defaults and an error names the flag, the variable
 * or file:line:column. --help anywhere wins over a bad value, as with getopt.
 *
 * This file is the only place that reads the environment (hack/lint.sh enforces it).
 */
#include "dfc/options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

#define NAME_MAX_LEN 300
#define HELP_COL     32 /* where help text starts */
#define HELP_WIDTH   80

/* ---- environment ---- */

/* getenv(name), with "" counting as unset (Kubernetes manifests often set `value: ""`). */
static const char *env_value(const char *name) {
    const char *v = name != NULL ? getenv(name) : NULL;
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The variable that sets row (env, else env_alt), or NULL; its name in *ret_name. */
static const char *row_env(const struct dfc_config_row *row, const char **ret_name) {
    *ret_name = row->env;
    const char *v = env_value(row->env);
    if (v == NULL && row->env_alt != NULL) {
        *ret_name = row->env_alt;
        v = env_value(row->env_alt);
    }
    return v;
}

int dfc_config_load_env(const struct dfc_config_schema *s, void *cfg, struct dfc_error *err) {
    return dfc__config_load_env_skip(s, cfg, NULL, err);
}

int dfc__config_load_env_skip(const struct dfc_config_schema *s, void *cfg, const bool *skip,
                              struct dfc_error *err) {
    for (size_t i = 0; i < s->n_rows; i++) {
        const struct dfc_config_row *row = &s->rows[i];
        const char *name;
        const char *v = row_env(row, &name);
        if (v == NULL || (skip != NULL && skip[i])) {
            continue;
        }
        int r = dfc_config_set_row(row, cfg, v, name, err);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* ---- argv ---- */

/* One flag (or --set) as given: applied after the file and the environment. */
struct given {
    const struct dfc_config_row *row; /* NULL: --set with an unknown key */
    const char *name;                 /* as typed ("--ttl", "-e", the --set key) ... */
    size_t name_len;                  /* ... and its length (it may be followed by "=v") */
    const char *value;
    bool is_flag; /* else --set */
};

static int usage_error(struct dfc_cli_args *ret, struct dfc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int usage_error(struct dfc_cli_args *ret, struct dfc_error *err, const char *fmt, ...) {
    char msg[DFC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ret->usage_error = true;
    return dfc_error_set(err, -EINVAL, "%s", msg);
}

static const struct dfc_config_row *find_long(const struct dfc_config_schema *s, const char *name,
                                              size_t len) {
    for (size_t i = 0; i < s->n_rows; i++) {
        const char *f = s->rows[i].flag;
        if (f != NULL && strncmp(f, name, len) == 0 && f[len] == '\0') {
            return &s->rows[i];
        }
    }
    return NULL;
}

static const struct dfc_config_row *find_short(const struct dfc_config_schema *s, char c) {
    for (size_t i = 0; i < s->n_rows; i++) {
        if (s->rows[i].short_flag != 0 && s->rows[i].short_flag == c) {
            return &s->rows[i];
        }
    }
    return NULL;
}

static bool name_is(const char *name, size_t len, const char *want) {
    return strlen(want) == len && strncmp(name, want, len) == 0;
}

enum builtin { B_NONE, B_HELP, B_VERSION, B_CONFIG, B_SET, B_PRINT };

static enum builtin find_builtin(const struct dfc_cli *cli, const char *name, size_t len,
                                 bool is_short) {
    if (is_short) {
        return *name == 'h'                                       ? B_HELP
               : *name == 'V' && cli->version != NULL             ? B_VERSION
               : *name == 'c' && (cli->features & DFC_CLI_CONFIG) ? B_CONFIG
                                                                  : B_NONE;
    }
    if (name_is(name, len, "help")) {
        return B_HELP;
    }
    if (cli->version != NULL && name_is(name, len, "version")) {
        return B_VERSION;
    }
    if ((cli->features & DFC_CLI_CONFIG) && name_is(name, len, "config")) {
        return B_CONFIG;
    }
    if ((cli->features & DFC_CLI_SET) && name_is(name, len, "set")) {
        return B_SET;
    }
    if ((cli->features & DFC_CLI_PRINT) && name_is(name, len, "print-config")) {
        return B_PRINT;
    }
    return B_NONE;
}

static const char *const builtin_names[] = {[B_HELP] = "help",
                                            [B_VERSION] = "version",
                                            [B_CONFIG] = "config",
                                            [B_SET] = "set",
                                            [B_PRINT] = "print-config"};

/* As getopt_long: a long flag may be abbreviated to a prefix only it has ("--print-con").
 * Sets *ret_b or *ret_row when exactly one flag matches; two or more are an error. */
static int find_prefix(const struct dfc_cli *cli, const char *name, size_t len, enum builtin *ret_b,
                       const struct dfc_config_row **ret_row, struct dfc_cli_args *ret,
                       struct dfc_error *err) {
    char seen[NAME_MAX_LEN] = "";
    size_t n = 0, used = 0;
    for (int b = B_HELP; b <= B_PRINT; b++) {
        const char *f = builtin_names[b];
        if (strncmp(f, name, len) == 0 &&
            find_builtin(cli, f, strlen(f), false) == (enum builtin)b) {
            *ret_b = (enum builtin)b;
            used += (size_t)snprintf(seen + used, used < sizeof(seen) ? sizeof(seen) - used : 0,
                                     "%s--%s", n++ ? ", " : "", f);
        }
    }
    const struct dfc_config_schema *s = cli->schema;
    for (size_t i = 0; i < s->n_rows; i++) {
        const char *f = s->rows[i].flag;
        if (f != NULL && strncmp(f, name, len) == 0) {
            *ret_row = &s->rows[i];
            used += (size_t)snprintf(seen + used, used < sizeof(seen) ? sizeof(seen) - used : 0,
                                     "%s--%s", n++ ? ", " : "", f);
        }
    }
    if (n > 1) {
        *ret_b = B_NONE;
        *ret_row = NULL;
        return usage_error(ret, err, "ambiguous flag `--%.*s`: %s", (int)len, name, seen);
    }
    return 0;
}

/* Scans argv into ret and given (argc entries). Returns 0, DFC_CLI_HELP, DFC_CLI_VERSION or a
 * negative code. */
static int scan(const struct dfc_cli *cli, int argc, char **argv, struct dfc_cli_args *ret,
                struct given *given, size_t *n_given, struct dfc_error *err) {
    const struct dfc_config_schema *s = cli->schema;
    const char *extra = NULL;
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || a[1] == '\0') {
            if (ret->n_args < DFC_CLI_ARGS_MAX && ret->n_args < cli->max_args) {
                ret->args[ret->n_args] = a;
            } else if (extra == NULL) {
                extra = a;
            }
            ret->n_args++;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options_done = true;
            continue;
        }
        bool is_short = a[1] != '-';
        const char *name = is_short ? a + 1 : a + 2;
        const char *inline_value = NULL;
        size_t len;
        if (is_short) {
            len = 1;
            inline_value = a[2] != '\0' ? a + 2 : NULL;
        } else {
            const char *eq = strchr(name, '=');
            len = eq != NULL ? (size_t)(eq - name) : strlen(name);
            inline_value = eq != NULL ? eq + 1 : NULL;
        }
        size_t typed_len = (size_t)(name - a) + len;
        enum builtin b = find_builtin(cli, name, len, is_short);
        const struct dfc_config_row *row = NULL;
        if (b == B_NONE) {
            row = is_short ? find_short(s, *name) : find_long(s, name, len);
        }
        if (b == B_NONE && row == NULL && !is_short) {
            int r = find_prefix(cli, name, len, &b, &row, ret, err);
            if (r < 0) {
                return r;
            }
        }
        if (b == B_NONE && row == NULL) {
            return usage_error(ret, err, "unknown flag `%.*s`", (int)typed_len, a);
        }
        bool takes_value =
            b == B_CONFIG || b == B_SET || (row != NULL && row->type != DFC_CFG_BOOL);
        if (!takes_value) {
            if (inline_value != NULL) {
                return usage_error(ret, err, "%.*s takes no value", (int)typed_len, a);
            }
        } else if (inline_value == NULL) {
            if (i + 1 >= argc) {
                return usage_error(ret, err, "%.*s needs a value", (int)typed_len, a);
            }
            inline_value = argv[++i];
        }
        switch (b) {
        case B_HELP:
            return DFC_CLI_HELP;
        case B_VERSION:
            return DFC_CLI_VERSION;
        case B_CONFIG:
            ret->config_path = inline_value;
            continue;
        case B_PRINT:
            ret->print_config = true;
            continue;
        case B_SET: {
            const char *eq = strchr(inline_value, '=');
            if (eq == NULL) {
                return dfc_error_set(err, -EINVAL, "--set wants KEY=VALUE, got `%s`", inline_value);
            }
            size_t klen = (size_t)(eq - inline_value);
            given[(*n_given)++] = (struct given){dfc_config_find_n(s, inline_value, klen),
                                                 inline_value, klen, eq + 1, false};
            continue;
        }
        case B_NONE:
            break;
        }
        given[(*n_given)++] =
            (struct given){row, a, typed_len, takes_value ? inline_value : "true", true};
    }
    bool one = cli->min_args == 1 && cli->max_args == 1;
    if (ret->n_args > cli->max_args) {
        return one ? usage_error(ret, err, "expects exactly one %s", cli->arg_name)
                   : usage_error(ret, err, "unexpected argument `%s`", extra);
    }
    if (ret->n_args < cli->min_args) {
        return one ? usage_error(ret, err, "expects exactly one %s", cli->arg_name)
                   : usage_error(ret, err, "expects at least %zu %s arguments", cli->min_args,
                                 cli->arg_name);
    }
    return 0;
}

/* "-O/--output", "--endpoint" or "-x": how --help and messages name a row's flag. */
static void flag_name(const struct dfc_config_row *row, char *buf, size_t size) {
    if (row->short_flag != 0 && row->flag != NULL) {
        snprintf(buf, size, "-%c/--%s", row->short_flag, row->flag);
    } else if (row->flag != NULL) {
        snprintf(buf, size, "--%s", row->flag);
    } else {
        snprintf(buf, size, "%s", row->key != NULL ? row->key : row->env);
    }
}

static int check_required(const struct dfc_config_schema *s, const void *cfg,
                          struct dfc_cli_args *ret, struct dfc_error *err) {
    for (size_t i = 0; i < s->n_rows; i++) {
        const struct dfc_config_row *row = &s->rows[i];
        if (!(row->flags & DFC_OPT_REQUIRED) ||
            *(char *const *)((const char *)cfg + row->offset) != NULL) {
            continue;
        }
        char name[NAME_MAX_LEN];
        flag_name(row, name, sizeof(name));
        if (row->env != NULL) {
            return usage_error(ret, err, "%s or %s is required", name, row->env);
        }
        return usage_error(ret, err, "%s is required", name);
    }
    return 0;
}

int dfc_cli_parse(const struct dfc_cli *cli, void *cfg, int argc, char **argv,
                  struct dfc_cli_args *ret, struct dfc_error *err) {
    *ret = (struct dfc_cli_args){0};
    dfc_error_clear(err);
    int r = dfc_config_defaults(cli->schema, cfg, err);
    if (r < 0) {
        return r;
    }
    struct given *given = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*given));
    if (given == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    /* Only the value that wins is parsed and checked: a flag hides the variable and the file's
     * value, a variable hides the file's value (the file's keys are all checked). */
    const struct dfc_config_schema *s = cli->schema;
    bool *by_flag = calloc(s->n_rows + 1, sizeof(*by_flag));
    bool *by_env = calloc(s->n_rows + 1, sizeof(*by_env));
    size_t n_given = 0;
    r = by_flag != NULL && by_env != NULL ? scan(cli, argc, argv, ret, given, &n_given, err)
                                          : dfc_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < n_given; i++) {
        if (given[i].row != NULL) {
            by_flag[given[i].row - s->rows] = true;
        }
    }
    for (size_t i = 0; r == 0 && i < s->n_rows; i++) {
        const char *name;
        by_env[i] = by_flag[i] || row_env(&s->rows[i], &name) != NULL;
    }
    if (r == 0 && ret->config_path != NULL) {
        r = dfc__config_load_file_skip(s, cfg, ret->config_path, by_env, err);
    }
    if (r == 0) {
        r = dfc__config_load_env_skip(s, cfg, by_flag, err);
    }
    free(by_flag);
    free(by_env);
    for (size_t i = 0; r == 0 && i < n_given; i++) {
        /* A value is named by its key (--set) or its long flag, however it was typed. */
        char name[NAME_MAX_LEN];
        if (given[i].is_flag && given[i].row->flag != NULL) {
            snprintf(name, sizeof(name), "--%s", given[i].row->flag);
        } else {
            snprintf(name, sizeof(name), "%.*s", (int)given[i].name_len, given[i].name);
        }
        if (given[i].row == NULL) {
            r = dfc_error_set(err, -ENOENT, "unknown %s config key `%s`", cli->schema->name, name);
        } else {
            r = dfc_config_set_row(given[i].row, cfg, given[i].value, name, err);
        }
    }
    free(given);
    if (r == 0) {
        r = check_required(cli->schema, cfg, ret, err);
    }
    if (r == 0) {
        r = dfc_config_validate(cli->schema, cfg, err);
    }
    return r;
}

int dfc_cli_fail(const struct dfc_cli *cli, const struct dfc_error *err) {
    fprintf(stderr, "%s: %s\n", cli->prog, dfc_error_msg(err));
    return 2;
}

int dfc_cli_main(const struct dfc_cli *cli, void *cfg, int argc, char **argv,
                 struct dfc_cli_args *ret) {
    if (argc == 2 && strcmp(argv[1], "--help-markdown") == 0) { /* hidden: hack/gen-docs.sh */
        memset(ret, 0, sizeof(*ret));
        dfc_cli_help_markdown(cli, stdout);
        return 0;
    }
    struct dfc_error err;
    int r = dfc_cli_parse(cli, cfg, argc, argv, ret, &err);
    if (r == DFC_CLI_HELP) {
        dfc_cli_help(cli, stdout);
        return 0;
    }
    if (r == DFC_CLI_VERSION) {
        printf("%s %s\n", cli->prog, cli->version);
        return 0;
    }
    if (r < 0) {
        dfc_cli_fail(cli, &err);
        if (ret->usage_error) {
            fprintf(stderr, "Usage: %s %s (`%s --help` lists the options)\n", cli->prog, cli->usage,
                    cli->prog);
        }
        return 2;
    }
    if (cli->finish != NULL && cli->finish(cfg, &err) < 0) {
        return dfc_cli_fail(cli, &err);
    }
    if ((cli->features & DFC_CLI_PRINT) != 0 && ret->print_config) {
        return dfc_config_print(cli->schema, cfg, stdout) < 0 ? 1 : 0;
    }
    return DFC_CLI_RUN;
}

/* ---- --help ---- */

static const char *metavar(const struct dfc_config_row *row) {
    if (row->metavar != NULL) {
        return row->metavar;
    }
    switch (row->type) {
    case DFC_CFG_STRING:
        return "STR";
    case DFC_CFG_PATH:
        return "PATH";
    case DFC_CFG_BOOL:
        return NULL;
    case DFC_CFG_INT:
    case DFC_CFG_UINT:
        return "N";
    case DFC_CFG_SIZE:
        return "SIZE";
    case DFC_CFG_DURATION:
        return "DURATION";
    case DFC_CFG_MODE:
        return "MODE";
    case DFC_CFG_ENUM:
        return "WORD";
    case DFC_CFG_STRING_LIST:
        return "A,B";
    case DFC_CFG_ADDR:
        return row->flags & DFC_OPT_IP ? "IP:PORT" : "HOST:PORT";
    }
    return "VALUE";
}

/* Writes text from column col (the cursor is there), wrapped at HELP_WIDTH with continuation
 * lines indented to indent; a bracketed group is never split. Ends the line. */
static void wrap(FILE *out, const char *text, size_t col, size_t indent) {
    const char *p = text;
    bool first = true;
    while (*p != '\0') {
        while (*p == ' ') {
            p++;
        }
        size_t len = strcspn(p, " ");
        if (*p == '[' && strchr(p, ']') != NULL) {
            len = (size_t)(strchr(p, ']') - p) + 1; /* "[A, else B]" stays on one line */
        }
        if (len == 0) {
            break;
        }
        if (!first && col + 1 + len > HELP_WIDTH) {
            fprintf(out, "\n%*s", (int)indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", (int)len, p);
        col += len;
        p += len;
        first = false;
    }
    fputc('\n', out);
}

/* One option: "  -x, --long META" and its help from HELP_COL. */
static void option_line(FILE *out, char short_flag, const char *flag, const char *meta,
                        const char *text) {
    char left[NAME_MAX_LEN];
    int n = snprintf(left, sizeof(left), "  %c%c%c --%s%s%s", short_flag ? '-' : ' ',
                     short_flag ? short_flag : ' ', short_flag ? ',' : ' ', flag,
                     meta != NULL ? " " : "", meta != NULL ? meta : "");
    fputs(left, out);
    if (n + 2 > HELP_COL) {
        fprintf(out, "\n%*s", HELP_COL, "");
    } else {
        fprintf(out, "%*s", HELP_COL - n, "");
    }
    wrap(out, text, HELP_COL, HELP_COL);
}

static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    if (*len >= size) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0) {
        *len += (size_t)n;
    }
}

/* The help text of a row: key and help, range, default, required, environment. */
static void row_text(const struct dfc_config_row *row, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    if (row->key != NULL) {
        append(buf, size, &len, "%s%s%s", row->key, row->help != NULL ? ": " : "",
               row->help != NULL ? row->help : "");
    } else if (row->help != NULL) {
        append(buf, size, &len, "%s", row->help);
    }
    if ((row->min != 0 || row->max != 0) && row->max != INT64_MAX) {
        char lo[64], hi[64];
        dfc__config_format_bound(row, row->min, lo, sizeof(lo));
        dfc__config_format_bound(row, row->max, hi, sizeof(hi));
        append(buf, size, &len, ", %s..%s", lo, hi);
    }
    bool has_default = !(row->flags & (DFC_OPT_OPTIONAL | DFC_OPT_REQUIRED)) && row->def != NULL &&
                       row->def[0] != '\0' &&
                       !(row->type == DFC_CFG_BOOL && strcmp(row->def, "false") == 0);
    if (has_default) {
        append(buf, size, &len, " [%s]", row->def);
    }
    if (row->flags & DFC_OPT_REQUIRED) {
        append(buf, size, &len, " (required)");
    }
    if (row->env != NULL && row->env_alt != NULL) {
        append(buf, size, &len, " [%s, else %s]", row->env, row->env_alt);
    } else if (row->env != NULL) {
        append(buf, size, &len, " [%s]", row->env);
    }
}

void dfc_cli_help(const struct dfc_cli *cli, FILE *out) {
    const struct dfc_config_schema *s = cli->schema;
    char text[4096]; /* the environment paragraph of a schema with many rows */
    fprintf(out, "Usage: %s %s\n", cli->prog, cli->usage);
    if (cli->about != NULL) {
        fprintf(out, "\n%s\n", cli->about);
    }
    fprintf(out, "\nOptions:\n");
    if (cli->features & DFC_CLI_CONFIG) {
        option_line(out, 'c', "config", "FILE",
                    cli->config_help != NULL ? cli->config_help : "YAML configuration file");
    }
    for (size_t i = 0; i < s->n_rows; i++) {
        const struct dfc_config_row *row = &s->rows[i];
        if (row->flag == NULL) {
            continue;
        }
        row_text(row, text, sizeof(text));
        option_line(out, row->short_flag, row->flag, metavar(row), text);
    }
    if (cli->features & DFC_CLI_SET) {
        option_line(out, 0, "set", "KEY=VALUE", "set any configuration key (repeatable)");
    }
    if (cli->features & DFC_CLI_PRINT) {
        option_line(out, 0, "print-config", NULL, "print the effective configuration and exit");
    }
    if (cli->version != NULL) {
        option_line(out, 'V', "version", NULL, "print the version and exit");
    }
    option_line(out, 'h', "help", NULL, "print this help and exit");

    /* Variables of settings that have no flag. */
    size_t len = 0;
    text[0] = '\0';
    for (size_t i = 0; i < s->n_rows; i++) {
        const struct dfc_config_row *row = &s->rows[i];
        if (row->env == NULL || row->flag != NULL) {
            continue;
        }
        append(text, sizeof(text), &len, "%s%s", len == 0 ? "Environment: " : ", ", row->env);
        if (row->key != NULL) {
            append(text, sizeof(text), &len, " (%s)", row->key);
        }
    }
    fputc('\n', out);
    if (len > 0) {
        append(text, sizeof(text), &len, ".");
        wrap(out, text, 0, 0);
    }
    wrap(out,
         cli->features & DFC_CLI_CONFIG ? "Precedence: flags > environment > file > defaults."
                                        : "Precedence: flags > environment > defaults.",
         0, 0);
}

/* ---- the schema as Markdown (docs/configuration.md, hack/gen-docs.sh) ---- */

static const char *type_name(enum dfc_config_type t) {
    static const char *const names[] = {
        [DFC_CFG_STRING] = "string",     [DFC_CFG_PATH] = "path",    [DFC_CFG_BOOL] = "bool",
        [DFC_CFG_INT] = "int",           [DFC_CFG_UINT] = "uint",    [DFC_CFG_SIZE] = "size",
        [DFC_CFG_DURATION] = "duration", [DFC_CFG_MODE] = "mode",    [DFC_CFG_ENUM] = "enum",
        [DFC_CFG_STRING_LIST] = "list",  [DFC_CFG_ADDR] = "address",
    };
    return (size_t)t < sizeof(names) / sizeof(names[0]) && names[t] != NULL ? names[t] : "?";
}

/* text in a table cell: "|" escaped, line breaks as spaces. */
static void md_cell(FILE *out, const char *text) {
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '|') {
            fputs("\\|", out);
        } else {
            fputc(*p == '\n' ? ' ' : *p, out);
        }
    }
}

static void md_code_cell(FILE *out, const char *text) {
    if (text == NULL || text[0] == '\0') {
        fputs(" |", out);
        return;
    }
    fputs(" `", out);
    md_cell(out, text);
    fputs("` |", out);
}

/* "; " between the parts of a description, nothing before the first. */
static void md_part(FILE *out, bool *first) {
    if (!*first) {
        fputs("; ", out);
    }
    *first = false;
}

static const char *md_default(const struct dfc_config_row *row) {
    if (row->flags & DFC_OPT_REQUIRED) {
        return "(required)";
    }
    if (row->flags & DFC_OPT_OPTIONAL) {
        return "(unset)";
    }
    if (row->def != NULL && row->def[0] != '\0') {
        return row->def;
    }
    switch (row->type) {
    case DFC_CFG_BOOL:
        return "false";
    case DFC_CFG_STRING_LIST:
        return "[]";
    case DFC_CFG_STRING:
    case DFC_CFG_PATH:
    case DFC_CFG_ENUM:
    case DFC_CFG_ADDR:
        return "\"\"";
    default:
        return "0";
    }
}

/* One row: key, flag, environment, type, default, and help with range, choices, emptiness. */
static void md_row(FILE *out, const struct dfc_config_row *row) {
    char flag[NAME_MAX_LEN] = "";
    if (row->flag != NULL && row->short_flag) {
        snprintf(flag, sizeof(flag), "-%c, --%s", row->short_flag, row->flag);
    } else if (row->flag != NULL) {
        snprintf(flag, sizeof(flag), "--%s", row->flag);
    }
    char env[NAME_MAX_LEN] = "";
    if (row->env != NULL) {
        snprintf(env, sizeof(env), "%s%s%s", row->env, row->env_alt != NULL ? "`, else `" : "",
                 row->env_alt != NULL ? row->env_alt : "");
    }
    fputs("|", out);
    md_code_cell(out, row->key);
    md_code_cell(out, flag);
    md_code_cell(out, env);
    fprintf(out, " %s |", type_name(row->type));
    const char *def = md_default(row);
    if (def[0] == '(') {
        fprintf(out, " %s |", def);
    } else {
        md_code_cell(out, def);
    }
    fputc(' ', out);
    bool first = true;
    if (row->help != NULL) {
        md_part(out, &first);
        md_cell(out, row->help);
    }
    char lo[64], hi[64];
    if (row->min != 0 || row->max != 0) {
        dfc__config_format_bound(row, row->min, lo, sizeof(lo));
        dfc__config_format_bound(row, row->max, hi, sizeof(hi));
        md_part(out, &first);
        if (row->max == INT64_MAX) {
            fprintf(out, "at least %s", lo);
        } else {
            fprintf(out, "%s..%s", lo, hi);
        }
    }
    for (size_t i = 0; row->choices != NULL && row->choices[i] != NULL; i++) {
        if (i == 0) {
            md_part(out, &first);
        }
        fprintf(out, "%s%s", i == 0 ? "one of " : ", ", row->choices[i]);
    }
    if (row->type == DFC_CFG_ADDR) {
        md_part(out, &first);
        fputs(row->flags & DFC_OPT_IP ? "IP:PORT or [IPv6]:PORT" : "HOST:PORT or [IPv6]:PORT", out);
    }
    if (row->flags & DFC_OPT_NONEMPTY) {
        md_part(out, &first);
        fputs("not empty", out);
    }
    fputs(" |\n", out);
}

void dfc_cli_help_markdown(const struct dfc_cli *cli, FILE *out) {
    fprintf(out, "## %s\n\nUsage: `%s %s`\n\n", cli->prog, cli->prog, cli->usage);
    if (cli->about != NULL) {
        md_cell(out, cli->about);
        fputs("\n\n", out);
    }
    fputs("| YAML key | flag | environment | type | default | description |\n"
          "|---|---|---|---|---|---|\n",
          out);
    if (cli->features & DFC_CLI_CONFIG) {
        fputs("| | `-c, --config` | | path | | ", out);
        md_cell(out, cli->config_help != NULL ? cli->config_help : "YAML configuration file");
        fputs(" |\n", out);
    }
    const struct dfc_config_schema *s = cli->schema;
    for (size_t i = 0; i < s->n_rows; i++) {
        md_row(out, &s->rows[i]);
    }
    if (cli->features & DFC_CLI_SET) {
        fputs("| | `--set KEY=VALUE` | | | | set any configuration key (repeatable) |\n", out);
    }
    if (cli->features & DFC_CLI_PRINT) {
        fputs("| | `--print-config` | | | | print the effective configuration and exit |\n", out);
    }
    fputc('\n', out);
}
