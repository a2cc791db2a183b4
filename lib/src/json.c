/*
 * json.c - the JSON writer of dfc/json.h.
 */
#include "dfc/json.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

void dfc_json_init(struct dfc_json *j, FILE *out) {
    memset(j, 0, sizeof(*j));
    j->out = out;
}

static void put(struct dfc_json *j, const char *s, size_t n) {
    if (j->err == 0 && n > 0 && fwrite(s, 1, n, j->out) != n) {
        j->err = -EIO;
    }
}

static void puts_(struct dfc_json *j, const char *s) {
    put(j, s, strlen(s));
}

static void newline_indent(struct dfc_json *j) {
    put(j, "\n", 1);
    for (int i = 0; i < j->depth; i++) {
        put(j, "  ", 2);
    }
}

/* Before any value or key: the comma and the indent of a new item, or misuse. */
static bool begin_item(struct dfc_json *j, bool is_key) {
    if (j->err != 0) {
        return false;
    }
    bool in_object = j->depth > 0 && j->is_object[j->depth];
    if (j->want_value) {
        if (is_key) {
            j->err = -EINVAL; /* a key where its value is due */
            return false;
        }
        j->want_value = false;
        return true; /* after "key": */
    }
    if (in_object != is_key || (j->depth == 0 && j->has_item[0])) {
        j->err = -EINVAL; /* a value without a key, a key outside an object, two documents */
        return false;
    }
    if (j->depth > 0) {
        if (j->has_item[j->depth]) {
            put(j, ",", 1);
        }
        newline_indent(j);
    }
    j->has_item[j->depth] = true;
    return true;
}

/* One UTF-8 sequence as RFC 3629 allows it (no overlongs, surrogates or values above
 * U+10FFFF): its length, or 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) {
        return 1;
    }
    /* The lead byte: the sequence's length, its payload bits, the smallest value it may hold. */
    size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0) {
        return 0;
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t min = min_of[len];
    uint32_t cp = c & (0x7fu >> len);
    if (n < len) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return len;
}

static void quoted(struct dfc_json *j, const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    put(j, "\"", 1);
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        char esc[8];
        const char *e = NULL;
        switch (c) {
        case '"':
            e = "\\\"";
            break;
        case '\\':
            e = "\\\\";
            break;
        case '\n':
            e = "\\n";
            break;
        case '\r':
            e = "\\r";
            break;
        case '\t':
            e = "\\t";
            break;
        case '\b':
            e = "\\b";
            break;
        case '\f':
            e = "\\f";
            break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof(esc), "\\u%04x", c);
                e = esc;
            }
        }
        if (e != NULL) {
            puts_(j, e);
            i++;
            continue;
        }
        size_t len = utf8_seq(s + i, n - i);
        if (len == 0) {
            puts_(j, "\xef\xbf\xbd"); /* U+FFFD for the one invalid byte */
            i++;
            continue;
        }
        put(j, (const char *)s + i, len);
        i += len;
    }
    put(j, "\"", 1);
}

static void open_(struct dfc_json *j, bool object) {
    if (!begin_item(j, false)) {
        return;
    }
    if (j->depth == DFC_JSON_MAX_DEPTH) {
        j->err = -EINVAL;
        return;
    }
    put(j, object ? "{" : "[", 1);
    j->depth++;
    j->is_object[j->depth] = object;
    j->has_item[j->depth] = false;
}

static void close_(struct dfc_json *j, bool object) {
    if (j->err != 0) {
        return;
    }
    if (j->depth == 0 || j->is_object[j->depth] != object || j->want_value) {
        j->err = -EINVAL;
        return;
    }
    bool had = j->has_item[j->depth];
    j->depth--;
    if (had) {
        newline_indent(j);
    }
    put(j, object ? "}" : "]", 1);
}

void dfc_json_object_begin(struct dfc_json *j) {
    open_(j, true);
}
void dfc_json_object_end(struct dfc_json *j) {
    close_(j, true);
}
void dfc_json_array_begin(struct dfc_json *j) {
    open_(j, false);
}
void dfc_json_array_end(struct dfc_json *j) {
    close_(j, false);
}

void dfc_json_key(struct dfc_json *j, const char *key) {
    if (key == NULL) {
        j->err = j->err ? j->err : -EINVAL;
        return;
    }
    if (begin_item(j, true)) {
        quoted(j, key);
        put(j, ": ", 2);
        j->want_value = true;
    }
}

void dfc_json_string(struct dfc_json *j, const char *s) {
    if (begin_item(j, false)) {
        if (s == NULL) {
            puts_(j, "null");
        } else {
            quoted(j, s);
        }
    }
}

void dfc_json_u64(struct dfc_json *j, uint64_t v) {
    if (begin_item(j, false)) {
        char b[24];
        snprintf(b, sizeof(b), "%" PRIu64, v);
        puts_(j, b);
    }
}

void dfc_json_i64(struct dfc_json *j, int64_t v) {
    if (begin_item(j, false)) {
        char b[24];
        snprintf(b, sizeof(b), "%" PRId64, v);
        puts_(j, b);
    }
}

void dfc_json_decimal(struct dfc_json *j, int64_t v, int scale) {
    if (scale < 0 || scale > 18) {
        j->err = j->err ? j->err : -EINVAL;
        return;
    }
    if (!begin_item(j, false)) {
        return;
    }
    uint64_t div = 1;
    for (int i = 0; i < scale; i++) {
        div *= 10;
    }
    /* The magnitude as unsigned, so INT64_MIN has one too. */
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint64_t whole = mag / div, frac = mag % div;
    char b[48];
    int n = snprintf(b, sizeof(b), "%s%" PRIu64, v < 0 ? "-" : "", whole);
    if (frac != 0) {
        int digits = scale;
        while (frac % 10 == 0) {
            frac /= 10;
            digits--;
        }
        snprintf(b + n, sizeof(b) - (size_t)n, ".%0*" PRIu64, digits, frac);
    }
    puts_(j, b);
}

void dfc_json_bool(struct dfc_json *j, bool v) {
    if (begin_item(j, false)) {
        puts_(j, v ? "true" : "false");
    }
}

void dfc_json_null(struct dfc_json *j) {
    if (begin_item(j, false)) {
        puts_(j, "null");
    }
}

int dfc_json_end(struct dfc_json *j) {
    if (j->err == 0 && (j->depth != 0 || j->want_value || !j->has_item[0])) {
        j->err = -EINVAL; /* unbalanced, or nothing written */
    }
    put(j, "\n", 1);
    if (j->err == 0 && fflush(j->out) != 0) {
        j->err = -EIO;
    }
    return j->err;
}
