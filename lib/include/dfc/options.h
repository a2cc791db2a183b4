/*
 * options.h - the command line of every binary, from its config schema (dfc/config.h).
 *
 * A program describes itself once (struct dfc_cli: name, usage line, schema, which built-in
 * flags it takes) and calls dfc_cli_main(). Each schema row with a .flag becomes --flag (and -x
 * with .short_flag); --help is generated from the rows. Values are applied in one order for
 * every binary: defaults < YAML file (--config) < environment < flags (--set KEY=VALUE counts
 * as a flag), so flags > environment > file > defaults.
 *
 * Accepted forms: --flag VALUE, --flag=VALUE, -x VALUE, -xVALUE; a boolean flag takes no value
 * and sets true; "--" ends the options; other arguments are positional and may come anywhere.
 *
 * Errors are one line naming what was wrong and where: "unknown flag `--bogus`", "--ttl needs
 * a value", "--ttl must be between 5m and 168h, got `1m`", "DFCACHE_IMPORT_TTL: `x` is not a
 * duration such as 1h30m", "f.yaml:3:3: unknown key `storage.kepp`". dfc_cli_main() prints it
 * as "<prog>: <message>" (plus a usage line when the command line itself was malformed) and
 * the program exits 2.
 *
 * Ownership: cfg is filled as dfc_config_*() do; release it with dfc_config_free() whatever the
 * outcome. struct dfc_cli_args borrows from argv.
 */
#ifndef DFC_OPTIONS_H
#define DFC_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "dfc/config.h"
#include "dfc/error.h"

/* Built-in flags a program may take (struct dfc_cli.features). */
enum {
    DFC_CLI_CONFIG = 1 << 0, /* -c, --config FILE: a YAML file over the defaults */
    DFC_CLI_SET = 1 << 1,    /* --set KEY=VALUE: any YAML key, repeatable */
    DFC_CLI_PRINT = 1 << 2,  /* --print-config: sets dfc_cli_args.print_config */
};

#define DFC_CLI_ARGS_MAX 8

struct dfc_cli {
    const char *prog;  /* "dfdaemon", "dfcache import": messages and --help */
    const char *usage; /* what follows prog on the usage line: "[options] <PATH>" */
    const char *about; /* a paragraph for --help, or NULL */
    const struct dfc_config_schema *schema;
    const char *version;       /* non-NULL: -V/--version prints "<prog> <version>" */
    unsigned features;         /* DFC_CLI_* */
    const char *config_help;   /* --help text of --config; NULL: "YAML configuration file" */
    size_t min_args, max_args; /* positional arguments, at most DFC_CLI_ARGS_MAX */
    const char *arg_name;      /* "PATH": "expects exactly one PATH" */
    /* Optional: cross-setting checks and derived values, run by dfc_cli_main() after a
     * successful parse and before --print-config; a negative return (err set) exits 2. */
    int (*finish)(void *cfg, struct dfc_error *err);
};

struct dfc_cli_args {
    const char *config_path; /* --config, or NULL */
    bool print_config;       /* --print-config */
    size_t n_args;
    const char *args[DFC_CLI_ARGS_MAX]; /* positional arguments, in order */
    bool usage_error; /* the error is about the command line's shape (unknown flag, ...) */
};

enum {
    DFC_CLI_HELP = 1,    /* dfc_cli_parse(): --help was given */
    DFC_CLI_VERSION = 2, /* dfc_cli_parse(): --version was given */
};

/* Returned by dfc_cli_main() when the program should go on. */
#define DFC_CLI_RUN (-1)

/* Parses argv (argv[0] is skipped) and fills cfg (zero-initialized by the caller): defaults,
 * the --config file, the environment, then the flags in order, then required rows, then every
 * row's validate. Prints nothing. Returns 0, DFC_CLI_HELP or DFC_CLI_VERSION (at the first
 * such flag, before any value is applied), or a negative code with err set (and
 * ret->usage_error when the command line was malformed). */
int dfc_cli_parse(const struct dfc_cli *cli, void *cfg, int argc, char **argv,
                  struct dfc_cli_args *ret, struct dfc_error *err);

/* dfc_cli_parse() for a main(), then cli->finish when set: prints --help or --version on
 * stdout and returns 0; prints an error on stderr and returns 2; with DFC_CLI_PRINT and
 * --print-config, prints the effective configuration and returns 0 (1 when writing fails);
 * else returns DFC_CLI_RUN. cfg is the caller's to free in every case. */
int dfc_cli_main(const struct dfc_cli *cli, void *cfg, int argc, char **argv,
                 struct dfc_cli_args *ret);

/* Writes the --help text generated from cli and its schema. */
void dfc_cli_help(const struct dfc_cli *cli, FILE *out);

/* Writes cli and every row of its schema (flagless ones too) as a Markdown section: usage,
 * about, a table of YAML key, flag, environment variable, type, default and description.
 * dfc_cli_main() prints it for the hidden flag --help-markdown when it is the only argument
 * (hack/gen-docs.sh builds docs/configuration.md from it). */
void dfc_cli_help_markdown(const struct dfc_cli *cli, FILE *out);

/* Prints "<prog>: <message>" on stderr for an error found after parsing (a rule across
 * settings); returns 2, the usage exit code. */
int dfc_cli_fail(const struct dfc_cli *cli, const struct dfc_error *err);

#endif /* DFC_OPTIONS_H */
