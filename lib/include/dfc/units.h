/*
 * units.h - human sizes ("4MiB", "64mb", "1024") and durations ("1h30m", "300s", "500ms").
 *
 * Sizes follow Dragonfly's bytesize parsing: KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB
 * (and the bare K/M/G/T) powers of 1024; case-insensitive, optional space before the unit.
 * Durations follow humantime: a sequence of <number><unit> with units ns, us, ms, s/sec/second(s),
 * m/min/minute(s), h/hr/hour(s), d/day(s), w/week(s); a bare number means seconds.
 */
#ifndef DFC_UNITS_H
#define DFC_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define DFC_NS_PER_SEC INT64_C(1000000000)
#define DFC_NS_PER_MS  INT64_C(1000000)

/* Parses s into bytes. -EINVAL on syntax, -ERANGE on overflow. */
int dfc_parse_size(const char *s, uint64_t *ret_bytes);

/* Formats bytes with the largest binary unit that divides it ("4MiB", "1536KiB", "7B"). */
void dfc_format_size(uint64_t bytes, char *buf, size_t size);

/* Parses s into nanoseconds. -EINVAL on syntax, -ERANGE on overflow. */
int dfc_parse_duration(const char *s, int64_t *ret_ns);

/* Formats ns as "1h30m", "5m", "1.5s", "250ms", "0s". */
void dfc_format_duration(int64_t ns, char *buf, size_t size);

/* Parses a decimal unsigned integer with no sign, no trailing junk. -EINVAL / -ERANGE. */
int dfc_parse_u64(const char *s, uint64_t *ret);

/* Parses a decimal signed integer, no trailing junk. -EINVAL / -ERANGE. */
int dfc_parse_i64(const char *s, int64_t *ret);

#endif /* DFC_UNITS_H */
