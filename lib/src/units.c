/*
 * units.c - parsing and formatting of sizes, durations and integers.
 */
#include "dfc/units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int dfc_parse_u64(const char *s, uint64_t *ret) {
    if (s == NULL || *s == '\0') {
        return -EINVAL;
    }
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) {
            return -EINVAL;
        }
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return -ERANGE;
        }
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int dfc_parse_i64(const char *s, int64_t *ret) {
    if (s == NULL) {
        return -EINVAL;
    }
    int neg = *s == '-';
    uint64_t v;
    int r = dfc_parse_u64(s + neg, &v);
    if (r < 0) {
        return r;
    }
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg) {
        return -ERANGE;
    }
    *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

struct unit {
    const char *name;
    uint64_t mult;
};

static const struct unit size_units[] = {
    {"", 1},
    {"b", 1},
    {"k", 1ULL << 10},
    {"ki", 1ULL << 10},
    {"kib", 1ULL << 10},
    {"kb", 1000ULL},
    {"m", 1ULL << 20},
    {"mi", 1ULL << 20},
    {"mib", 1ULL << 20},
    {"mb", 1000ULL * 1000},
    {"g", 1ULL << 30},
    {"gi", 1ULL << 30},
    {"gib", 1ULL << 30},
    {"gb", 1000ULL * 1000 * 1000},
    {"t", 1ULL << 40},
    {"ti", 1ULL << 40},
    {"tib", 1ULL << 40},
    {"tb", 1000ULL * 1000 * 1000 * 1000},
};

int dfc_parse_size(const char *s, uint64_t *ret_bytes) {
    if (s == NULL) {
        return -EINVAL;
    }
    const char *p = s;
    uint64_t v = 0;
    if (!isdigit((unsigned char)*p)) {
        return -EINVAL;
    }
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return -ERANGE;
        }
        v = v * 10 + d;
    }
    while (*p == ' ') {
        p++;
    }
    for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]); i++) {
        if (strcasecmp(p, size_units[i].name) == 0) {
            if (v > UINT64_MAX / size_units[i].mult) {
                return -ERANGE;
            }
            *ret_bytes = v * size_units[i].mult;
            return 0;
        }
    }
    return -EINVAL;
}

void dfc_format_size(uint64_t bytes, char *buf, size_t size) {
    static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (i < 4 && bytes != 0 && bytes % 1024 == 0) {
        bytes /= 1024;
        i++;
    }
    snprintf(buf, size, "%llu%s", (unsigned long long)bytes, names[i]);
}

#define NS_S ((unsigned long long)DFC_NS_PER_SEC)

static const struct unit duration_units[] = {
    {"ns", 1},
    {"nsec", 1},
    {"us", 1000},
    {"usec", 1000},
    {"ms", DFC_NS_PER_MS},
    {"msec", DFC_NS_PER_MS},
    {"s", NS_S},
    {"sec", NS_S},
    {"secs", NS_S},
    {"second", NS_S},
    {"seconds", NS_S},
    {"m", 60 * NS_S},
    {"min", 60 * NS_S},
    {"mins", 60 * NS_S},
    {"minute", 60 * NS_S},
    {"minutes", 60 * NS_S},
    {"h", 3600 * NS_S},
    {"hr", 3600 * NS_S},
    {"hrs", 3600 * NS_S},
    {"hour", 3600 * NS_S},
    {"hours", 3600 * NS_S},
    {"d", 86400 * NS_S},
    {"day", 86400 * NS_S},
    {"days", 86400 * NS_S},
    {"w", 7 * 86400 * NS_S},
    {"week", 7 * 86400 * NS_S},
    {"weeks", 7 * 86400 * NS_S},
};

int dfc_parse_duration(const char *s, int64_t *ret_ns) {
    if (s == NULL || *s == '\0') {
        return -EINVAL;
    }
    uint64_t total = 0;
    const char *p = s;
    uint64_t v;
    int r = dfc_parse_u64(s, &v);
    if (r == 0) { /* a bare number: seconds */
        if (v > (uint64_t)INT64_MAX / DFC_NS_PER_SEC) {
            return -ERANGE;
        }
        *ret_ns = (int64_t)v * DFC_NS_PER_SEC;
        return 0;
    }
    while (*p) {
        while (*p == ' ') {
            p++;
        }
        if (!isdigit((unsigned char)*p)) {
            return -EINVAL;
        }
        v = 0;
        for (; isdigit((unsigned char)*p); p++) {
            unsigned d = (unsigned)(*p - '0');
            if (v > (UINT64_MAX - d) / 10) {
                return -ERANGE;
            }
            v = v * 10 + d;
        }
        const char *u = p;
        while (isalpha((unsigned char)*p)) {
            p++;
        }
        size_t ulen = (size_t)(p - u);
        if (ulen == 0) {
            return -EINVAL;
        }
        uint64_t mult = 0;
        for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
            if (strlen(duration_units[i].name) == ulen &&
                strncasecmp(u, duration_units[i].name, ulen) == 0) {
                mult = duration_units[i].mult;
                break;
            }
        }
        if (mult == 0) {
            return -EINVAL;
        }
        if (v > (uint64_t)INT64_MAX / mult || total > (uint64_t)INT64_MAX - v * mult) {
            return -ERANGE;
        }
        total += v * mult;
        while (*p == ' ') {
            p++;
        }
    }
    *ret_ns = (int64_t)total;
    return 0;
}

void dfc_format_duration(int64_t ns, char *buf, size_t size) {
    if (ns == 0) {
        snprintf(buf, size, "0s");
        return;
    }
    const char *sign = ns < 0 ? "-" : "";
    uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (v < (uint64_t)DFC_NS_PER_SEC) {
        if (v % DFC_NS_PER_MS == 0) {
            snprintf(buf, size, "%s%llums", sign, (unsigned long long)(v / DFC_NS_PER_MS));
        } else {
            snprintf(buf, size, "%s%lluns", sign, (unsigned long long)v);
        }
        return;
    }
    uint64_t secs = v / DFC_NS_PER_SEC, frac = v % DFC_NS_PER_SEC;
    uint64_t h = secs / 3600, m = secs / 60 % 60, s = secs % 60;
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "%s", sign);
    if (h != 0 && n < size) {
        n += (size_t)snprintf(buf + n, size - n, "%lluh", (unsigned long long)h);
    }
    if (m != 0 && n < size) {
        n += (size_t)snprintf(buf + n, size - n, "%llum", (unsigned long long)m);
    }
    if ((s != 0 || frac != 0) && n < size) {
        if (frac != 0 && frac % DFC_NS_PER_MS == 0) {
            snprintf(buf + n, size - n, "%llu.%03llus", (unsigned long long)s,
                     (unsigned long long)(frac / DFC_NS_PER_MS));
        } else {
            snprintf(buf + n, size - n, "%llus", (unsigned long long)s);
        }
    }
}
