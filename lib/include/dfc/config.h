/*
 * config.h - table-driven configuration: defaults -> YAML file -> environment -> flags.
 *
 * A binary declares one static schema, a table of rows (dotted camelCase key, type, offset into
 * its config struct, default text, env name, validator). This module fills the struct from the
 * defaults, a YAML file (libyaml), environment variables and "key=value" overrides, in that
 * order; an unknown YAML key is an error that names file:line:column. The same table prints
 * the effective configuration back as YAML.
 *
 * Ownership: string fields (STRING, PATH) and lists (STRING_LIST) are heap copies owned by the
 * config struct; free them with dfc_config_free(). Everything else is stored by value.
 */
#ifndef DFC_CONFIG_H
#define DFC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dfc/error.h"

enum dfc_config_type {
    DFC_CFG_STRING,      /* char *; may be empty */
    DFC_CFG_PATH,        /* char *; must be absolute when non-empty */
    DFC_CFG_BOOL,        /* bool; true/false/yes/no/on/off/1/0 */
    DFC_CFG_INT,         /* int64_t */
    DFC_CFG_UINT,        /* uint64_t */
    DFC_CFG_SIZE,        /* uint64_t bytes; "4MiB" */
    DFC_CFG_DURATION,    /* int64_t nanoseconds; "1h30m" */
    DFC_CFG_MODE,        /* uint32_t file mode; octal "0660" */
    DFC_CFG_STRING_LIST, /* struct dfc_config_list; a YAML sequence of strings, or "a,b" as text
                            (defaults, env, set: comma-separated, blanks around items dropped) */
};

/* A list of strings (DFC_CFG_STRING_LIST): n heap strings, owned by the config struct. */
struct dfc_config_list {
    size_t n;
    char **items;
};

struct dfc_config_row {
    const char *key; /* "download.server.socketPath"; rows sharing a prefix are adjacent */
    enum dfc_config_type type;
    size_t offset;   /* offsetof(struct your_config, field) */
    const char *def; /* default, written as it would be in YAML; NULL means "" / 0 */
    const char *env; /* environment variable overriding the row, or NULL */
    /* Optional extra check on the parsed field; returns 0 or a negative code with err set. */
    int (*validate)(const struct dfc_config_row *row, const void *field, struct dfc_error *err);
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

/* Applies every row's environment variable that is set. */
int dfc_config_load_env(const struct dfc_config_schema *s, void *cfg, struct dfc_error *err);

/* Sets one row from text ("gc.interval", "10m"); -ENOENT for an unknown key. */
int dfc_config_set(const struct dfc_config_schema *s, void *cfg, const char *key, const char *value,
                   struct dfc_error *err);

/* Runs every row's validator. */
int dfc_config_validate(const struct dfc_config_schema *s, const void *cfg, struct dfc_error *err);

/* Writes cfg as nested YAML, in table order. */
int dfc_config_print(const struct dfc_config_schema *s, const void *cfg, FILE *out);

/* Frees the string fields; leaves the struct reusable with dfc_config_defaults(). */
void dfc_config_free(const struct dfc_config_schema *s, void *cfg);

/* Looks up a row by key; NULL when unknown. Borrowed. */
const struct dfc_config_row *dfc_config_find(const struct dfc_config_schema *s, const char *key);

#endif /* DFC_CONFIG_H */
