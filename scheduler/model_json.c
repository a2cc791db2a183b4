/*
 * model_json.c - encoding/json for the peer's block_parents ([]string), byte for byte as Go's
 * json.Marshal writes it (HTML-safe escapes, \b and \f as of Go 1.22, invalid UTF-8 as
 * U+FFFD) and as json.Unmarshal reads it (null, whitespace, escapes, surrogate pairs)
 * (docs/dragonfly-compat.md, "Scheduler on Redis"). The input comes from Redis: the item
 * count is bounded and every byte is checked against the length given.
 */
#include "model_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sbuf {
    char *p;
    size_t n, cap;
};

static int sb_put(struct sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) {
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            return -ENOMEM;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* One UTF-8 sequence as Go's utf8.DecodeRune accepts it (no overlongs, surrogates or values
 * above U+10FFFF): its length, or 0 when invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
        return 0;
    }
    *cp = v;
    return len;
}

/* Go's encodeState.string with escapeHTML (json.Marshal's default), as of Go 1.22. */
static int json_string(struct sbuf *b, const char *str) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    int r = sb_put(b, "\"", 1);
    for (size_t i = 0; r == 0 && i < n;) {
        unsigned char c = s[i];
        if (c < 0x80) {
            char esc[8];
            if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') {
                r = sb_put(b, (const char *)&s[i], 1);
            } else if (c == '"' || c == '\\') {
                esc[0] = '\\', esc[1] = (char)c;
                r = sb_put(b, esc, 2);
            } else if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
                esc[0] = '\\';
                esc[1] = (char)(c == '\b'   ? 'b'
                                : c == '\f' ? 'f'
                                : c == '\n' ? 'n'
                                : c == '\r' ? 'r'
                                            : 't');
                r = sb_put(b, esc, 2);
            } else {
                esc[0] = '\\', esc[1] = 'u', esc[2] = '0', esc[3] = '0';
                esc[4] = hex[c >> 4], esc[5] = hex[c & 0xf];
                r = sb_put(b, esc, 6);
            }
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = utf8_seq(s + i, n - i, &cp);
        if (len == 0) {
            r = sb_put(b, "\\ufffd", 6);
            i++;
        } else if (cp == 0x2028 || cp == 0x2029) {
            r = sb_put(b, cp == 0x2028 ? "\\u2028" : "\\u2029", 6);
            i += len;
        } else {
            r = sb_put(b, (const char *)s + i, len);
            i += len;
        }
    }
    return r < 0 ? r : sb_put(b, "\"", 1);
}

int sched__json_strings_encode(char *const *list, size_t n, bool null, char **out,
                               size_t *out_len) {
    struct sbuf b = {0};
    int r;
    if (null && n == 0) {
        r = sb_put(&b, "null", 4);
    } else {
        r = sb_put(&b, "[", 1);
        for (size_t i = 0; r == 0 && i < n; i++) {
            if (i > 0) {
                r = sb_put(&b, ",", 1);
            }
            if (r == 0) {
                r = json_string(&b, list[i]);
            }
        }
        if (r == 0) {
            r = sb_put(&b, "]", 1);
        }
    }
    if (r < 0) {
        free(b.p);
        return r;
    }
    *out = b.p;
    *out_len = b.n;
    return 0;
}

void sched__strings_free(char **list, size_t n) {
    for (size_t i = 0; list != NULL && i < n; i++) {
        free(list[i]);
    }
    free(list);
}

struct jparse {
    const char *s;
    size_t n, i;
};

static void skip_ws(struct jparse *p) {
    while (p->i < p->n &&
           (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) {
        p->i++;
    }
}

static bool take_word(struct jparse *p, const char *w) {
    size_t n = strlen(w);
    if (p->n - p->i >= n && memcmp(p->s + p->i, w, n) == 0) {
        p->i += n;
        return true;
    }
    return false;
}

static int hex4(struct jparse *p, uint32_t *v) {
    if (p->n - p->i < 4) {
        return -EBADMSG;
    }
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) {
            return -EBADMSG;
        }
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

static int put_utf8(struct sbuf *b, uint32_t cp) {
    char u[4];
    if (cp < 0x80) {
        u[0] = (char)cp;
        return sb_put(b, u, 1);
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f));
        return sb_put(b, u, 2);
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        return sb_put(b, u, 3);
    }
    u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[3] = (char)(0x80 | (cp & 0x3f));
    return sb_put(b, u, 4);
}

/* A JSON string at p->i (the opening quote) into a heap string; a NUL is refused because the
 * records hold C strings. */
static int json_parse_string(struct jparse *p, char **out) {
    struct sbuf b = {0};
    int r = sb_put(&b, "", 0);
    p->i++;
    while (r == 0) {
        if (p->i >= p->n) {
            r = -EBADMSG;
            break;
        }
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            *out = b.p;
            return 0;
        }
        if (c < 0x20) {
            r = -EBADMSG;
            break;
        }
        if (c >= 0x80) {
            /* Go's decoder turns each invalid UTF-8 byte into U+FFFD. */
            uint32_t cp;
            size_t len = utf8_seq((const unsigned char *)p->s + p->i, p->n - p->i, &cp);
            if (len == 0) {
                r = put_utf8(&b, 0xfffd);
                p->i++;
            } else {
                r = sb_put(&b, p->s + p->i, len);
                p->i += len;
            }
            continue;
        }
        if (c != '\\') {
            r = sb_put(&b, p->s + p->i++, 1);
            continue;
        }
        if (++p->i >= p->n) {
            r = -EBADMSG;
            break;
        }
        char e = p->s[p->i++];
        const char *simple = e == '"'    ? "\""
                             : e == '\\' ? "\\"
                             : e == '/'  ? "/"
                             : e == 'b'  ? "\b"
                             : e == 'f'  ? "\f"
                             : e == 'n'  ? "\n"
                             : e == 'r'  ? "\r"
                             : e == 't'  ? "\t"
                                         : NULL;
        if (simple != NULL) {
            r = sb_put(&b, simple, 1);
            continue;
        }
        uint32_t cp;
        if (e != 'u' || hex4(p, &cp) < 0) {
            r = -EBADMSG;
            break;
        }
        if (cp >= 0xd800 && cp < 0xdc00) {
            /* A surrogate pair; a lone half becomes U+FFFD, as Go's decoder does. */
            uint32_t lo;
            size_t save = p->i;
            if (take_word(p, "\\u") && hex4(p, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else {
                p->i = save;
                cp = 0xfffd;
            }
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            cp = 0xfffd;
        }
        if (cp == 0) {
            r = -EBADMSG;
            break;
        }
        r = put_utf8(&b, cp);
    }
    free(b.p);
    return r;
}

int sched__json_strings_decode(const char *s, size_t len, size_t max_items, char ***list, size_t *n,
                               bool *null) {
    struct jparse p = {s, len, 0};
    char **items = NULL;
    size_t count = 0;
    int r = 0;
    *list = NULL;
    *n = 0;
    *null = false;
    skip_ws(&p);
    if (take_word(&p, "null")) {
        skip_ws(&p);
        if (p.i != p.n) {
            return -EBADMSG;
        }
        *null = true;
        return 0;
    }
    if (p.i >= p.n || s[p.i] != '[') {
        return -EBADMSG;
    }
    p.i++;
    skip_ws(&p);
    if (p.i < p.n && s[p.i] == ']') {
        p.i++;
    } else {
        for (;;) {
            skip_ws(&p);
            char *item = NULL;
            if (count >= max_items) {
                r = -EBADMSG;
                break;
            }
            if (take_word(&p, "null")) {
                item = strdup("");
                r = item == NULL ? -ENOMEM : 0;
            } else if (p.i < p.n && s[p.i] == '"') {
                r = json_parse_string(&p, &item);
            } else {
                r = -EBADMSG;
            }
            if (r < 0) {
                break;
            }
            char **grown = realloc(items, (count + 1) * sizeof(char *));
            if (grown == NULL) {
                free(item);
                r = -ENOMEM;
                break;
            }
            items = grown;
            items[count++] = item;
            skip_ws(&p);
            if (p.i < p.n && s[p.i] == ',') {
                p.i++;
                continue;
            }
            if (p.i < p.n && s[p.i] == ']') {
                p.i++;
                break;
            }
            r = -EBADMSG;
            break;
        }
    }
    if (r == 0) {
        skip_ws(&p);
        if (p.i != p.n) {
            r = -EBADMSG;
        }
    }
    if (r < 0) {
        sched__strings_free(items, count);
        return r;
    }
    *list = items;
    *n = count;
    return 0;
}
