/*
 * model_internal.h - the value codecs behind model.c's record tables: Go's strconv parsers
 * (model_codec.c) and encoding/json for a []string (model_json.c).
 * Private to scheduler/model*.c.
 */
#ifndef SCHED_MODEL_INTERNAL_H
#define SCHED_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* strconv.ParseInt(s, 10, bits) / ParseUint / ParseBool / ParseFloat(s, 64) over exactly len
 * bytes (no NUL needed). 0 or -EINVAL (syntax or range). */
int sched__parse_int(const char *s, size_t len, int bits, int64_t *out);
int sched__parse_uint(const char *s, size_t len, int bits, uint64_t *out);
int sched__parse_bool(const char *s, size_t len, bool *out);
int sched__parse_double(const char *s, size_t len, double *out);

/* json.Marshal of a []string: NULL list with null set = "null". Heap result, *out_len bytes
 * (NUL-terminated too). 0 or -ENOMEM. */
int sched__json_strings_encode(char *const *list, size_t n, bool null, char **out, size_t *out_len);
/* json.Unmarshal into a []string: "null" sets *null; elements that are JSON null become "".
 * At most max_items elements; -EBADMSG on bad syntax, a NUL in a string or too many items. */
int sched__json_strings_decode(const char *s, size_t len, size_t max_items, char ***list, size_t *n,
                               bool *null);
void sched__strings_free(char **list, size_t n);

#endif /* SCHED_MODEL_INTERNAL_H */
