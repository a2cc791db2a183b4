/*
 * config.c - schema-driven configuration over libyaml's document API.
 *
 * DESIGN: the YAML file is loaded into a libyaml document tree and walked depth first; nested
 * mapping keys are joined with '.' into the schema's dotted keys, so the table stays flat and
 * the file keeps Dragonfly's nesting. Each scalar is parsed by its row's type straight into
 * the struct at the row's offset. The first error stops the walk and carries the libyaml mark.
 */
#include "dfc/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "config_internal.h"
#include "dfc/addr.h"
#include "dfc/cleanup.h"
#include "dfc/units.h"

#define KEY_MAX 256

const struct dfc_config_row *dfc_config_find_n(const struct dfc_config_schema *s, const char *key,
                                               size_t len) {
    for (size_t i = 0; i < s->n_rows; i++) {
        const char *k = s->rows[i].key;
        if (k != NULL && strncmp(k, key, len) == 0 && k[len] == '\0') {
            return &s->rows[i];
        }
    }
    return NULL;
}

const struct dfc_config_row *dfc_config_find(const struct dfc_config_schema *s, const char *key) {
    return dfc_config_find_n(s, key, strlen(key));
}

/* True when some row's key starts with "<prefix>." (prefix names a section). */
static bool is_section(const struct dfc_config_schema *s, const char *prefix) {
    size_t n = strlen(prefix);
    for (size_t i = 0; i < s->n_rows; i++) {
        const char *k = s->rows[i].key;
        if (k != NULL && strncmp(k, prefix, n) == 0 && k[n] == '.') {
            return true;
        }
    }
    return false;
}

static int parse_bool(const char *v, bool *ret) {
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return -EINVAL;
}

static int parse_mode(const char *v, uint32_t *ret) {
    if (*v == '\0' || strlen(v) > 5) {
        return -EINVAL;
    }
    uint32_t m = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '7') {
            return -EINVAL;
        }
        m = m * 8 + (uint32_t)(*p - '0');
    }
    if (m > 07777) {
        return -ERANGE;
    }
    *ret = m;
    return 0;
}

/* What a row wants, for its error message. */
static const char *type_hint(const struct dfc_config_row *row) {
    bool off = !(row->flags & DFC_OPT_NONEMPTY);
    switch (row->type) {
    case DFC_CFG_STRING:
        return "a string";
    case DFC_CFG_PATH:
        return "an absolute path";
    case DFC_CFG_BOOL:
        return "true or false";
    case DFC_CFG_INT:
        return "an integer";
    case DFC_CFG_UINT:
        return "a non-negative integer";
    case DFC_CFG_SIZE:
        return "a size such as 4MiB";
    case DFC_CFG_DURATION:
        return "a duration such as 1h30m";
    case DFC_CFG_MODE:
        return "an octal file mode such as 0660";
    case DFC_CFG_ENUM:
        return "one of the choices";
    case DFC_CFG_STRING_LIST:
        return "a list of strings";
    case DFC_CFG_ADDR:
        if (row->flags & DFC_OPT_IP) {
            return off ? "IP:PORT (an IP address and a port 1-65535; [IPv6]:PORT; empty = off)"
                       : "IP:PORT (an IP address and a port 1-65535; [IPv6]:PORT)";
        }
        return off ? "HOST:PORT (a host and a port 1-65535; [IPv6]:PORT; empty = off)"
                   : "HOST:PORT (a host and a port 1-65535; [IPv6]:PORT)";
    }
    return "a value";
}

/* The text checks of the string kinds: an absolute path, an address; "" passes both. */
static bool text_ok(const struct dfc_config_row *row, const char *v) {
    struct dfc_hostport hp;
    if (*v == '\0' || row->type == DFC_CFG_STRING) {
        return true;
    }
    if (row->type == DFC_CFG_PATH) {
        return *v == '/';
    }
    return (row->flags & DFC_OPT_IP ? dfc_addr_parse_ip(v, &hp) : dfc_addr_parse(v, &hp)) == 0;
}

static bool is_string(const struct dfc_config_row *row) {
    return row->type == DFC_CFG_STRING || row->type == DFC_CFG_PATH || row->type == DFC_CFG_ADDR;
}

void dfc__config_format_bound(const struct dfc_config_row *row, int64_t v, char *buf, size_t size) {
    if (row->type == DFC_CFG_SIZE) {
        dfc_format_size((uint64_t)v, buf, size);
    } else if (row->type == DFC_CFG_DURATION) {
        dfc_format_duration(v, buf, size);
    } else {
        snprintf(buf, size, "%lld", (long long)v);
    }
}

/* Checks the parsed field against the row's range; v is the text, for the message. */
static int check_range(const struct dfc_config_row *row, const void *field, const char *v,
                       const char *where, const char *what, struct dfc_error *err) {
    if (row->min == 0 && row->max == 0) {
        return 0;
    }
    bool ok;
    if (row->type == DFC_CFG_INT || row->type == DFC_CFG_DURATION) {
        int64_t x = *(const int64_t *)field;
        ok = x >= row->min && x <= row->max;
    } else if (row->type == DFC_CFG_UINT || row->type == DFC_CFG_SIZE) {
        uint64_t x = *(const uint64_t *)field;
        ok = x >= (uint64_t)row->min && x <= (uint64_t)row->max;
    } else {
        return 0;
    }
    if (ok) {
        return 0;
    }
    char lo[64], hi[64];
    dfc__config_format_bound(row, row->min, lo, sizeof(lo));
    dfc__config_format_bound(row, row->max, hi, sizeof(hi));
    if (row->max == INT64_MAX) {
        if (row->min == 1) {
            return dfc_error_set(err, -ERANGE, "%s%s must be a positive %s, got `%s`", where, what,
                                 row->type == DFC_CFG_DURATION ? "duration"
                                 : row->type == DFC_CFG_SIZE   ? "size"
                                                               : "integer",
                                 v);
        }
        return dfc_error_set(err, -ERANGE, "%s%s must be at least %s, got `%s`", where, what, lo,
                             v);
    }
    return dfc_error_set(err, -ERANGE, "%s%s must be between %s and %s, got `%s`", where, what, lo,
                         hi, v);
}

/* ENUM: stores the canonical choice matching v, else names them all. */
static int set_enum(const struct dfc_config_row *row, const char **field, const char *v,
                    const char *where, const char *what, struct dfc_error *err) {
    char list[512] = "";
    size_t n = 0, len = 0;
    for (const char *const *c = row->choices; c != NULL && *c != NULL; c++, n++) {
        if (strcasecmp(*c, v) == 0) {
            *field = *c;
            return 0;
        }
    }
    for (size_t i = 0; i < n && len < sizeof(list); i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", sep, row->choices[i]);
    }
    return dfc_error_set(err, -EINVAL, "%sbad %s `%s`: must be %s", where, what, v, list);
}

/* ---- string lists ---- */

static void list_clear(struct dfc_config_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i]);
    }
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

/* Appends a copy of len bytes of v; the caller checks the item count first. */
static int list_push(struct dfc_config_list *l, const char *v, size_t len) {
    char **items = realloc(l->items, (l->n + 1) * sizeof(*items));
    if (items == NULL) {
        return -ENOMEM;
    }
    l->items = items;
    char *copy = strndup(v, len);
    if (copy == NULL) {
        return -ENOMEM;
    }
    l->items[l->n++] = copy;
    return 0;
}

/* Replaces *field with the comma-separated items of v ("" is the empty list); items are
 * trimmed of blanks and must not be empty. On error *field is unchanged. */
static int set_list_text(struct dfc_config_list *field, const char *v, const char *where,
                         const char *what, struct dfc_error *err) {
    struct dfc_config_list l = {0, NULL};
    const char *p = v;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        if (end == NULL) {
            end = p + strlen(p);
        }
        const char *b = p, *e = end;
        while (b < e && (*b == ' ' || *b == '\t')) {
            b++;
        }
        while (e > b && (e[-1] == ' ' || e[-1] == '\t')) {
            e--;
        }
        int r = 0;
        if (b == e) {
            r = dfc_error_set(err, -EINVAL, "%s%s: empty item in `%s`", where, what, v);
        } else if (l.n >= DFC_CONFIG_LIST_MAX) {
            r = dfc_error_set(err, -EINVAL, "%s%s: more than %d items", where, what,
                              DFC_CONFIG_LIST_MAX);
        } else if (list_push(&l, b, (size_t)(e - b)) < 0) {
            r = dfc_error_set(err, -ENOMEM, "%s%s: out of memory", where, what);
        }
        if (r < 0) {
            list_clear(&l);
            return r;
        }
        p = *end == ',' ? end + 1 : end;
    }
    list_clear(field);
    *field = l;
    return 0;
}

/* Parses text into the row's field and checks it. Messages start with where ("" or
 * "file:line:col: ") and name what was set (a key, a flag, a variable). */
static int set_row(const struct dfc_config_row *row, void *cfg, const char *v, const char *where,
                   const char *what, struct dfc_error *err) {
    char *field = (char *)cfg + row->offset;
    int r = 0;
    if (strlen(v) > DFC_CONFIG_VALUE_MAX) {
        return dfc_error_set(err, -EINVAL, "%s%s: value longer than %d bytes", where, what,
                             DFC_CONFIG_VALUE_MAX);
    }
    if ((row->flags & DFC_OPT_NONEMPTY) && *v == '\0') {
        return dfc_error_set(err, -EINVAL, "%s%s must not be empty", where, what);
    }
    switch (row->type) {
    case DFC_CFG_PATH:
    case DFC_CFG_ADDR:
    case DFC_CFG_STRING: {
        if (!text_ok(row, v)) {
            return dfc_error_set(err, -EINVAL, "%s%s: `%s` is not %s", where, what, v,
                                 type_hint(row));
        }
        char *copy = strdup(v);
        if (copy == NULL) {
            return dfc_error_set(err, -ENOMEM, "%s%s: out of memory", where, what);
        }
        free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    case DFC_CFG_ENUM:
        return set_enum(row, (const char **)field, v, where, what, err);
    case DFC_CFG_STRING_LIST:
        return set_list_text((struct dfc_config_list *)field, v, where, what, err);
    case DFC_CFG_BOOL:
        r = parse_bool(v, (bool *)field);
        break;
    case DFC_CFG_INT:
        r = dfc_parse_i64(v, (int64_t *)field);
        break;
    case DFC_CFG_UINT:
        r = dfc_parse_u64(v, (uint64_t *)field);
        break;
    case DFC_CFG_SIZE:
        r = dfc_parse_size(v, (uint64_t *)field);
        break;
    case DFC_CFG_DURATION:
        r = dfc_parse_duration(v, (int64_t *)field);
        break;
    case DFC_CFG_MODE:
        r = parse_mode(v, (uint32_t *)field);
        break;
    }
    if (r < 0) {
        return dfc_error_set(err, -EINVAL, "%s%s: `%s` is not %s", where, what, v, type_hint(row));
    }
    return check_range(row, field, v, where, what, err);
}

int dfc_config_set_row(const struct dfc_config_row *row, void *cfg, const char *value,
                       const char *name, struct dfc_error *err) {
    return set_row(row, cfg, value, "", name, err);
}

/* Zeroes the row's field (freeing a string): the state of an optional row nothing set. */
static void unset_row(const struct dfc_config_row *row, void *cfg) {
    char *field = (char *)cfg + row->offset;
    switch (row->type) {
    case DFC_CFG_STRING:
    case DFC_CFG_PATH:
    case DFC_CFG_ADDR:
        free(*(char **)field);
        *(char **)field = NULL;
        break;
    case DFC_CFG_ENUM:
        *(const char **)field = NULL;
        break;
    case DFC_CFG_STRING_LIST:
        list_clear((struct dfc_config_list *)field);
        break;
    case DFC_CFG_BOOL:
        *(bool *)field = false;
        break;
    case DFC_CFG_INT:
    case DFC_CFG_DURATION:
        *(int64_t *)field = 0;
        break;
    case DFC_CFG_UINT:
    case DFC_CFG_SIZE:
        *(uint64_t *)field = 0;
        break;
    case DFC_CFG_MODE:
        *(uint32_t *)field = 0;
        break;
    }
}

int dfc_config_defaults(const struct dfc_config_schema *s, void *cfg, struct dfc_error *err) {
    for (size_t i = 0; i < s->n_rows; i++) {
        const struct dfc_config_row *row = &s->rows[i];
        const char *def = row->def;
        if (row->flags & (DFC_OPT_OPTIONAL | DFC_OPT_REQUIRED)) {
            unset_row(row, cfg); /* zero (NULL) until a source sets it */
            continue;
        }
        if (def == NULL) {
            def = is_string(row) || row->type == DFC_CFG_STRING_LIST ? "" : "0";
        }
        if (row->type == DFC_CFG_BOOL && row->def == NULL) {
            def = "false";
        }
        char name[KEY_MAX];
        snprintf(name, sizeof(name), "default of %s",
                 row->key != NULL    ? row->key
                 : row->flag != NULL ? row->flag
                                     : "?");
        int r = set_row(row, cfg, def, "", name, err);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int dfc_config_set(const struct dfc_config_schema *s, void *cfg, const char *key, const char *value,
                   struct dfc_error *err) {
    const struct dfc_config_row *row = dfc_config_find(s, key);
    if (row == NULL) {
        return dfc_error_set(err, -ENOENT, "unknown %s config key `%s`", s->name, key);
    }
    return set_row(row, cfg, value, "", key, err);
}

/* ---- YAML walk ---- */

struct walk {
    const struct dfc_config_schema *schema;
    void *cfg;
    const char *name;
    yaml_document_t *doc;
    struct dfc_error *err;
    const bool *skip; /* per row: a higher source sets it, so the file's value is ignored */
};

static int mark_error(struct walk *w, int code, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int mark_error(struct walk *w, int code, const yaml_node_t *n, const char *fmt, ...) {
    char msg[DFC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return dfc_error_set(w->err, code, "%s:%zu:%zu: %s", w->name, n->start_mark.line + 1,
                         n->start_mark.column + 1, msg);
}

/* A YAML sequence of scalars into a STRING_LIST row; on error the field is unchanged. */
static int walk_list(struct walk *w, const struct dfc_config_row *row, yaml_node_t *seq) {
    struct dfc_config_list l = {0, NULL};
    int r = 0;
    for (yaml_node_item_t *it = seq->data.sequence.items.start;
         r == 0 && it < seq->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        if (item == NULL || item->type != YAML_SCALAR_NODE) {
            r = mark_error(w, -EINVAL, item != NULL ? item : seq, "%s: items must be strings",
                           row->key);
        } else if (item->data.scalar.length == 0 ||
                   item->data.scalar.length > DFC_CONFIG_VALUE_MAX ||
                   memchr(item->data.scalar.value, '\0', item->data.scalar.length) != NULL) {
            r = mark_error(w, -EINVAL, item,
                           "%s: items must be non-empty strings of at most %d bytes", row->key,
                           DFC_CONFIG_VALUE_MAX);
        } else if (l.n >= DFC_CONFIG_LIST_MAX) {
            r = mark_error(w, -EINVAL, item, "%s: more than %d items", row->key,
                           DFC_CONFIG_LIST_MAX);
        } else if (list_push(&l, (const char *)item->data.scalar.value, item->data.scalar.length) <
                   0) {
            r = mark_error(w, -ENOMEM, item, "%s: out of memory", row->key);
        }
    }
    if (r < 0) {
        list_clear(&l);
        return r;
    }
    struct dfc_config_list *field = (struct dfc_config_list *)((char *)w->cfg + row->offset);
    list_clear(field);
    *field = l;
    return 0;
}

static int walk_mapping(struct walk *w, yaml_node_t *map, const char *prefix) {
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
        if (k == NULL || v == NULL || k->type != YAML_SCALAR_NODE) {
            return mark_error(w, -EINVAL, k != NULL ? k : map, "%s", "keys must be plain strings");
        }
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *earlier = yaml_document_get_node(w->doc, q->key);
            if (earlier != NULL && earlier->type == YAML_SCALAR_NODE &&
                strcmp((const char *)earlier->data.scalar.value,
                       (const char *)k->data.scalar.value) == 0) {
                return mark_error(w, -EINVAL, k, "`%s` appears twice (also at line %zu)",
                                  (const char *)k->data.scalar.value, earlier->start_mark.line + 1);
            }
        }
        char key[KEY_MAX];
        int n = snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "." : "",
                         (const char *)k->data.scalar.value);
        if (n < 0 || (size_t)n >= sizeof(key)) {
            return mark_error(w, -EINVAL, k, "%s", "key too long");
        }
        const struct dfc_config_row *row = dfc_config_find(w->schema, key);
        if (v->type == YAML_MAPPING_NODE) {
            if (!is_section(w->schema, key)) {
                if (row != NULL) {
                    return mark_error(w, -EINVAL, k, "`%s` takes a value, not a mapping", key);
                }
                return mark_error(w, -EINVAL, k, "unknown key `%s`", key);
            }
            int r = walk_mapping(w, v, key);
            if (r < 0) {
                return r;
            }
            continue;
        }
        if (v->type == YAML_SEQUENCE_NODE && row != NULL && row->type == DFC_CFG_STRING_LIST) {
            if (w->skip != NULL && w->skip[row - w->schema->rows]) {
                continue;
            }
            int r = walk_list(w, row, v);
            if (r < 0) {
                return r;
            }
            continue;
        }
        if (v->type != YAML_SCALAR_NODE) {
            return mark_error(w, -EINVAL, k, "`%s`: lists are not supported here", key);
        }
        const char *text = (const char *)v->data.scalar.value;
        bool null_value = v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                          (*text == '\0' || strcmp(text, "~") == 0 || strcmp(text, "null") == 0);
        if (row == NULL) {
            if (is_section(w->schema, key) && null_value) {
                continue; /* an empty section such as "gc:" keeps the defaults */
            }
            return mark_error(w, -EINVAL, k, "unknown key `%s`", key);
        }
        if (w->skip != NULL && w->skip[row - w->schema->rows]) {
            continue;
        }
        if (null_value && !is_string(row)) {
            continue; /* "key:" with no value keeps the default */
        }
        char where[KEY_MAX + 64];
        snprintf(where, sizeof(where), "%s:%zu:%zu: ", w->name, v->start_mark.line + 1,
                 v->start_mark.column + 1);
        int r = set_row(row, w->cfg, null_value ? "" : text, where, key, w->err);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int load_string(const struct dfc_config_schema *s, void *cfg, const char *name,
                       const char *yaml, size_t len, const bool *skip, struct dfc_error *err) {
    yaml_parser_t parser;
    yaml_document_t doc;
    if (len > DFC_CONFIG_FILE_MAX) {
        return dfc_error_set(err, -EFBIG, "%s: larger than %d bytes", name, DFC_CONFIG_FILE_MAX);
    }
    if (!yaml_parser_initialize(&parser)) {
        return dfc_error_set(err, -ENOMEM, "%s: cannot initialize the YAML parser", name);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    if (!yaml_parser_load(&parser, &doc)) {
        int r = dfc_error_set(err, -EINVAL, "%s:%zu:%zu: %s", name, parser.problem_mark.line + 1,
                              parser.problem_mark.column + 1,
                              parser.problem != NULL ? parser.problem : "invalid YAML");
        yaml_parser_delete(&parser);
        return r;
    }
    int r = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root != NULL) {
        struct walk w = {s, cfg, name, &doc, err, skip};
        if (root->type == YAML_MAPPING_NODE) {
            r = walk_mapping(&w, root, "");
        } else if (!(root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)) {
            r = mark_error(&w, -EINVAL, root, "%s", "the document must be a mapping");
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return r;
}

int dfc_config_load_string(const struct dfc_config_schema *s, void *cfg, const char *name,
                           const char *yaml, size_t len, struct dfc_error *err) {
    return load_string(s, cfg, name, yaml, len, NULL, err);
}

int dfc_config_load_file(const struct dfc_config_schema *s, void *cfg, const char *path,
                         struct dfc_error *err) {
    return dfc__config_load_file_skip(s, cfg, path, NULL, err);
}

int dfc__config_load_file_skip(const struct dfc_config_schema *s, void *cfg, const char *path,
                               const bool *skip, struct dfc_error *err) {
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (f == NULL) {
        return dfc_error_errno(err, -errno, "open config `%s`", path);
    }
    struct stat st;
    if (fstat(fileno(f), &st) < 0) {
        return dfc_error_errno(err, -errno, "stat config `%s`", path);
    }
    if (!S_ISREG(st.st_mode)) {
        return dfc_error_set(err, -EINVAL, "config `%s` is not a regular file", path);
    }
    if (st.st_size > DFC_CONFIG_FILE_MAX) {
        return dfc_error_set(err, -EFBIG, "config `%s` is larger than %d bytes", path,
                             DFC_CONFIG_FILE_MAX);
    }
    _cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        return dfc_error_set(err, -ENOMEM, "config `%s`: out of memory", path);
    }
    size_t n = fread(buf, 1, (size_t)st.st_size, f);
    if (ferror(f)) {
        return dfc_error_errno(err, -EIO, "read config `%s`", path);
    }
    return load_string(s, cfg, path, buf, n, skip, err);
}

int dfc_config_check_ip(const struct dfc_config_row *row, const void *field,
                        struct dfc_error *err) {
    const char *v = *(char *const *)field;
    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    if (!dfc_addr_is_ip(v)) {
        return dfc_error_set(err, -EINVAL, "%s: `%s` is not an IP address", row->key, v);
    }
    return 0;
}

int dfc_config_check_hostports(const struct dfc_config_row *row, const void *field,
                               struct dfc_error *err) {
    const struct dfc_config_list *l = field;
    for (size_t i = 0; i < l->n; i++) {
        const char *a = l->items[i];
        struct dfc_hostport hp;
        if (dfc_addr_parse(a, &hp) < 0) {
            return dfc_error_set(err, -EINVAL, "%s[%zu]: `%s` is not host:port", row->key, i, a);
        }
    }
    return 0;
}

int dfc_config_validate(const struct dfc_config_schema *s, const void *cfg, struct dfc_error *err) {
    for (size_t i = 0; i < s->n_rows; i++) {
        const struct dfc_config_row *row = &s->rows[i];
        if (row->validate == NULL) {
            continue;
        }
        int r = row->validate(row, (const char *)cfg + row->offset, err);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* ---- printing ---- */

static void print_string(FILE *out, const char *v) {
    fputc('"', out);
    for (const char *p = v; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(out, "\\x%02x", c);
        } else {
            fputc(c, out);
        }
    }
    fputc('"', out);
}

static void print_value(FILE *out, const struct dfc_config_row *row, const void *cfg) {
    const char *field = (const char *)cfg + row->offset;
    char buf[64];
    switch (row->type) {
    case DFC_CFG_STRING:
    case DFC_CFG_PATH:
    case DFC_CFG_ADDR:
        print_string(out, *(char *const *)field ? *(char *const *)field : "");
        break;
    case DFC_CFG_BOOL:
        fputs(*(const bool *)field ? "true" : "false", out);
        break;
    case DFC_CFG_INT:
        fprintf(out, "%lld", (long long)*(const int64_t *)field);
        break;
    case DFC_CFG_UINT:
        fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case DFC_CFG_SIZE:
        dfc_format_size(*(const uint64_t *)field, buf, sizeof(buf));
        fputs(buf, out);
        break;
    case DFC_CFG_DURATION:
        dfc_format_duration(*(const int64_t *)field, buf, sizeof(buf));
        fputs(buf, out);
        break;
    case DFC_CFG_MODE:
        fprintf(out, "\"%04o\"", *(const uint32_t *)field);
        break;
    case DFC_CFG_ENUM:
        print_string(out, *(const char *const *)field ? *(const char *const *)field : "");
        break;
    case DFC_CFG_STRING_LIST: {
        const struct dfc_config_list *l = (const struct dfc_config_list *)field;
        fputc('[', out);
        for (size_t i = 0; i < l->n; i++) {
            if (i > 0) {
                fputs(", ", out);
            }
            print_string(out, l->items[i]);
        }
        fputc(']', out);
        break;
    }
    }
}

int dfc_config_print(const struct dfc_config_schema *s, const void *cfg, FILE *out) {
    const char *prev = "";
    for (size_t i = 0; i < s->n_rows; i++) {
        const char *key = s->rows[i].key;
        if (key == NULL) {
            continue; /* a command-line setting, not configuration */
        }
        /* Find the shared leading components with the previous key. */
        size_t common = 0, depth = 0;
        for (size_t j = 0; key[j] && prev[j] == key[j]; j++) {
            if (key[j] == '.') {
                common = j + 1;
                depth++;
            }
        }
        const char *p = key + common;
        for (;;) {
            const char *dot = strchr(p, '.');
            size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
            fprintf(out, "%*s%.*s:", (int)(depth * 2), "", (int)len, p);
            if (dot == NULL) {
                fputc(' ', out);
                print_value(out, &s->rows[i], cfg);
                fputc('\n', out);
                break;
            }
            fputc('\n', out);
            depth++;
            p = dot + 1;
        }
        prev = key;
    }
    return ferror(out) ? -EIO : 0;
}

void dfc_config_free(const struct dfc_config_schema *s, void *cfg) {
    for (size_t i = 0; i < s->n_rows; i++) {
        const struct dfc_config_row *row = &s->rows[i];
        if (is_string(row)) {
            char **field = (char **)((char *)cfg + row->offset);
            free(*field);
            *field = NULL;
        } else if (row->type == DFC_CFG_STRING_LIST) {
            list_clear((struct dfc_config_list *)((char *)cfg + row->offset));
        }
    }
}
