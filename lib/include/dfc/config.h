/*
 * config.h - table-driven configuration: defaults -> YAML file -> environment -> flags.
 *
 * A binary declares one static schema, a table of rows. A row declares one setting: its dotted
 * camelCase YAML key (when it has one), type (the parser), offset into the binary's config
 * struct, default text, environment variable, command-line flag, range or choices, and its
 * --help line. This module fills the struct from the defaults, a YAML file (libyaml),
 * environment variables and "key=value" overrides, in that order; an unknown YAML key is an
 * error that names file:line:column. The same table prints the effective configuration back as
 * YAML; dfc/options.h parses the command line and generates --help from it.
 *
 * Every value is checked where it is given (type, range, choices, emptiness), so an error
 * names its source: the flag, the environment variable, "file:line:col: key", or the key.
 *
 * Ownership: string fields (STRING, PATH, ADDR) and lists (STRING_LIST) are heap copies owned by
 * the config struct; free them with dfc_config_free(). ENUM fields point into the row's static
 * choices (never freed). Everything else is stored by value.
 */
#ifndef DFC_CONFIG_H
#define DFC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dfc/error.h"

enum dfc_config_type {
    DFC_CFG_STRING,   /* char *; may be empty */
    DFC_CFG_PATH,     /* char *; must be absolute when non-empty */
    DFC_CFG_BOOL,     /* bool; true/false/yes/no/on/off/1/0 */
    DFC_CFG_INT,      /* int64_t */
    DFC_CFG_UINT,     /* uint64_t */
    DFC_CFG_SIZE,     /* uint64_t bytes; "4MiB" */
    DFC_CFG_DURATION, /* int64_t nanoseconds; "1h30m" */
    DFC_CFG_MODE,     /* uint32_t file mode; octal "0660" */
    DFC_CFG_ENUM,     /* const char *: one of row->choices (case-insensitive), stored canonical */
    DFC_CFG_STRING_LIST, /* struct dfc_config_list; a YAML sequence of strings, or "a,b" as text
                            (defaults, env, flags, set: comma-separated, blanks around items
                            dropped, "" the empty list) */
    DFC_CFG_ADDR,        /* char *: "host:port" or "[ipv6]:port" as dfc_addr_parse() takes it
                            (dfc/addr.h), port 1..65535, or "" (unset: off); with DFC_OPT_IP
                            the host is a numeric IP address. Stored as given. */
};

/* A list of strings (DFC_CFG_STRING_LIST): n heap strings, owned by the config struct. */
struct dfc_config_list {
    size_t n;
    char **items;
};

/* Row flags. */
enum {
    DFC_OPT_OPTIONAL = 1 << 0, /* no default: the field stays zero (NULL) until a source sets it */
    DFC_OPT_REQUIRED = 1 << 1, /* a string some source must set (implies OPTIONAL) */
    DFC_OPT_NONEMPTY = 1 << 2, /* a string that must not be empty wherever it is given */
    DFC_OPT_IP = 1 << 3,       /* an ADDR whose host must be an IP address ("IP:PORT") */
};

/* .min/.max: INT, UINT, SIZE and DURATION rows accept min..max (both 0: any value). */
#define DFC_OPT_RANGE(lo, hi) .min = (lo), .max = (hi)
#define DFC_OPT_POSITIVE      DFC_OPT_RANGE(1, INT64_MAX)

/* Declare rows with designated initializers; every field but type and offset is optional. */
struct dfc_config_row {
    /* "download.server.socketPath"; rows sharing a prefix are adjacent. NULL: no YAML key (the
     * row is set only by its flag or environment variable and is not printed). */
    const char *key;
    enum dfc_config_type type;
    size_t offset;   /* offsetof(struct your_config, field) */
    const char *def; /* default, written as it would be in YAML; NULL means "" / 0 / false */
    const char *env; /* environment variable overriding the row, or NULL; "" counts as unset */
    /* Optional extra check on the final field (dfc_config_validate); returns 0 or a negative
     * code with err set. Prefer min/max, choices and flags, which name the value's source. */
    int (*validate)(const struct dfc_config_row *row, const void *field, struct dfc_error *err);

    /* ---- command line (dfc/options.h) ---- */
    const char *flag;    /* long flag without "--" ("socket-path"), or NULL */
    char short_flag;     /* 'l', or 0 */
    const char *metavar; /* the value's name in --help ("PATH"); NULL: from the type */
    const char *help;    /* --help text; wrapped, followed by the range, default and env */

    /* ---- checks applied wherever a value is given ---- */
    int64_t min, max;           /* DFC_OPT_RANGE(lo, hi) */
    const char *const *choices; /* ENUM: NULL-terminated, canonical spelling */
    const char *env_alt;        /* read when env is unset ("NODE_NAME" after "CSI_NODE_ID") */
    unsigned flags;             /* DFC_OPT_* */
};

struct dfc_config_schema {
    const char *name; /* "dfdaemon": used in messages */
    const struct dfc_config_row *rows;
    size_t n_rows;
};

/* Maximum accepted config file size and string value length: every input has a limit. */
#define DFC_CONFIG_FILE_MAX  (1 << 20)
#define DFC_CONFIG_VALUE_MAX 4096
#define DFC_CONFIG_LIST_MAX  64 /* items of a STRING_LIST */

/* Sets every row to its default. cfg must be zero-initialized (or released with
 * dfc_config_free()), since string fields are replaced and freed. */
int dfc_config_defaults(const struct dfc_config_schema *s, void *cfg, struct dfc_error *err);

/* Applies a YAML file on top of cfg. Errors name "path:line:col". */
int dfc_config_load_file(const struct dfc_config_schema *s, void *cfg, const char *path,
                         struct dfc_error *err);

/* Applies a YAML document held in memory (name is used in error messages). */
int dfc_config_load_string(const struct dfc_config_schema *s, void *cfg, const char *name,
                           const char *yaml, size_t len, struct dfc_error *err);

/* Applies every row's environment variable that is set and not empty (env, else env_alt).
 * Errors name the variable. The only place the environment is read (lib/src/options.c). */
int dfc_config_load_env(const struct dfc_config_schema *s, void *cfg, struct dfc_error *err);

/* Sets one row from text ("gc.interval", "10m"); -ENOENT for an unknown key. */
int dfc_config_set(const struct dfc_config_schema *s, void *cfg, const char *key, const char *value,
                   struct dfc_error *err);

/* Sets row from text, naming the value's source as name in errors ("--ttl", "DFCACHE_IMPORT_TTL",
 * "file.yaml:3:5: gc.interval"): "<name>: `v` is not a duration such as 1h30m", "<name> must be
 * between 5m and 168h, got `1m`", "<name> must be auto, path or stream, got `x`". */
int dfc_config_set_row(const struct dfc_config_row *row, void *cfg, const char *value,
                       const char *name, struct dfc_error *err);

/* Runs every row's validator. */
int dfc_config_validate(const struct dfc_config_schema *s, const void *cfg, struct dfc_error *err);

/* Row validators (.validate) shared by the binaries. dfc_config_check_ip: a STRING row that is
 * an IPv4 or IPv6 address, or empty (NONEMPTY rows refuse that earlier).
 * dfc_config_check_hostports: a STRING_LIST row of host:port items, a non-empty host and a port
 * in 1..65535 (IPv6 as [addr]:port); errors name the item ("scheduler.addrs[1]: `x` is not
 * host:port"). */
int dfc_config_check_ip(const struct dfc_config_row *row, const void *field, struct dfc_error *err);
int dfc_config_check_hostports(const struct dfc_config_row *row, const void *field,
                               struct dfc_error *err);

/* Writes cfg as nested YAML, in table order. */
int dfc_config_print(const struct dfc_config_schema *s, const void *cfg, FILE *out);

/* Frees the string fields; leaves the struct reusable with dfc_config_defaults(). */
void dfc_config_free(const struct dfc_config_schema *s, void *cfg);

/* Looks up a row by key (len bytes of it); NULL when unknown. Borrowed. */
const struct dfc_config_row *dfc_config_find(const struct dfc_config_schema *s, const char *key);
const struct dfc_config_row *dfc_config_find_n(const struct dfc_config_schema *s, const char *key,
                                               size_t len);

#endif /* DFC_CONFIG_H */
