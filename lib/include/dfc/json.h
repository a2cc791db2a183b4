/*
 * json.h - a small streaming JSON writer for machine output (dfcache --json).
 *
 * The caller opens and closes objects and arrays and writes keys and values in order; the
 * writer puts the commas, indents two spaces per level, and escapes strings: `"` and `\`,
 * control characters (\n \t \r \b \f short, the others as \u00XX), and invalid UTF-8 (stray
 * bytes, overlongs, surrogates, values past U+10FFFF) as U+FFFD, so the output is always valid
 * UTF-8 JSON whatever the strings held. Numbers are written exactly (64-bit integers).
 *
 * Ownership: the writer borrows out (it never closes it) and holds no memory. Misuse (a value
 * where a key is due, unbalanced ends, nesting past DFC_JSON_MAX_DEPTH) and write errors are
 * sticky: dfc_json_end() reports them.
 */
#ifndef DFC_JSON_H
#define DFC_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define DFC_JSON_MAX_DEPTH 16

struct dfc_json {
    FILE *out;
    int depth;
    int err;                               /* first error: -EINVAL misuse, -EIO write */
    bool has_item[DFC_JSON_MAX_DEPTH + 1]; /* the level has an item already */
    bool is_object[DFC_JSON_MAX_DEPTH + 1];
    bool want_value; /* a key was written: its value is due */
};

void dfc_json_init(struct dfc_json *j, FILE *out);

void dfc_json_object_begin(struct dfc_json *j);
void dfc_json_object_end(struct dfc_json *j);
void dfc_json_array_begin(struct dfc_json *j);
void dfc_json_array_end(struct dfc_json *j);

/* A key in the current object (escaped as a string). */
void dfc_json_key(struct dfc_json *j, const char *key);

/* Values. dfc_json_string(j, NULL) writes null. */
void dfc_json_string(struct dfc_json *j, const char *s);
void dfc_json_u64(struct dfc_json *j, uint64_t v);
void dfc_json_i64(struct dfc_json *j, int64_t v);
/* v / 10^scale written exactly, trailing fraction zeros dropped: (300500000000, 9) is 300.5,
 * (3600000000000, 9) is 3600. scale 0..18. */
void dfc_json_decimal(struct dfc_json *j, int64_t v, int scale);
void dfc_json_bool(struct dfc_json *j, bool v);
void dfc_json_null(struct dfc_json *j);

/* Ends the document with a newline and flushes. 0, or the first error (-EINVAL, -EIO). */
int dfc_json_end(struct dfc_json *j);

#endif /* DFC_JSON_H */
