/*
 * model_codec.c - the value encodings of upstream's Redis hashes, byte for byte as the Go
 * scheduler writes and reads them (docs/dragonfly-compat.md, "Scheduler on Redis"):
 * the bits-and-blooms bitset, RFC 3339 times in the local offset, Go's shortest 'f' floats,
 * and strconv's integer and bool parsers (encoding/json for block_parents: model_json.c).
 *
 * Everything read here comes from Redis, which any client may write: every length is checked
 * against the bytes present, and nothing is allocated from a length that was not verified.
 */
#include "model.h"
#include "model_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- bitset (github.com/bits-and-blooms/bitset, WriteTo/ReadFrom) ---- */

#define BITSET_MAX_LEN (UINT64_C(1) << 32)

static uint64_t words_needed(uint64_t len) {
    return (len + 63) / 64;
}

int sched_bitset_init(struct sched_bitset *b, uint64_t len) {
    b->len = 0;
    b->words = NULL;
    if (len > BITSET_MAX_LEN) {
        return -ERANGE;
    }
    if (len > 0) {
        b->words = calloc(words_needed(len), sizeof(uint64_t));
        if (b->words == NULL) {
            return -ENOMEM;
        }
    }
    b->len = len;
    return 0;
}

int sched_bitset_set(struct sched_bitset *b, uint64_t i) {
    if (i >= BITSET_MAX_LEN) {
        return -ERANGE;
    }
    if (i >= b->len) {
        uint64_t have = words_needed(b->len), need = words_needed(i + 1);
        if (need > have) {
            uint64_t *w = realloc(b->words, need * sizeof(uint64_t));
            if (w == NULL) {
                return -ENOMEM;
            }
            memset(w + have, 0, (need - have) * sizeof(uint64_t));
            b->words = w;
        }
        b->len = i + 1;
    }
    b->words[i / 64] |= UINT64_C(1) << (i % 64);
    return 0;
}

void sched_bitset_set_all(struct sched_bitset *b) {
    uint64_t n = words_needed(b->len);
    for (uint64_t i = 0; i < n; i++) {
        b->words[i] = UINT64_MAX;
    }
    if (b->len % 64 != 0) {
        b->words[n - 1] = (UINT64_C(1) << (b->len % 64)) - 1; /* bitset's cleanLastWord */
    }
}

bool sched_bitset_test(const struct sched_bitset *b, uint64_t i) {
    return i < b->len && (b->words[i / 64] >> (i % 64)) & 1;
}

uint64_t sched_bitset_count(const struct sched_bitset *b) {
    uint64_t n = words_needed(b->len), c = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t w = b->words[i];
        if (i == n - 1 && b->len % 64 != 0) {
            w &= (UINT64_C(1) << (b->len % 64)) - 1; /* bits past len are not members */
        }
        c += (uint64_t)__builtin_popcountll(w);
    }
    return c;
}

void sched_bitset_done(struct sched_bitset *b) {
    free(b->words);
    b->words = NULL;
    b->len = 0;
}

static void put_be64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t get_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

int sched_bitset_marshal(const struct sched_bitset *b, uint8_t **out, size_t *out_len) {
    uint64_t n = words_needed(b->len);
    size_t len = 8 + 8 * (size_t)n;
    uint8_t *buf = malloc(len);
    if (buf == NULL) {
        return -ENOMEM;
    }
    put_be64(buf, b->len);
    for (uint64_t i = 0; i < n; i++) {
        put_be64(buf + 8 + 8 * i, b->words[i]);
    }
    *out = buf;
    *out_len = len;
    return 0;
}

int sched_bitset_unmarshal(const uint8_t *buf, size_t len, struct sched_bitset *b) {
    b->len = 0;
    b->words = NULL;
    if (len < 8) {
        return -EBADMSG;
    }
    uint64_t bits = get_be64(buf);
    if (bits > BITSET_MAX_LEN) {
        return -EBADMSG;
    }
    uint64_t n = words_needed(bits);
    if ((len - 8) / 8 != n || (len - 8) % 8 != 0) {
        return -EBADMSG; /* checked before allocating anything */
    }
    if (n > 0) {
        b->words = malloc(n * sizeof(uint64_t));
        if (b->words == NULL) {
            return -ENOMEM;
        }
        for (uint64_t i = 0; i < n; i++) {
            b->words[i] = get_be64(buf + 8 + 8 * i);
        }
    }
    b->len = bits;
    return 0;
}

/* ---- times: Go's t.Format(time.RFC3339) in time.Local, and time.Parse(time.RFC3339) ---- */

int sched_format_time(int64_t unix_seconds, char *buf, size_t len) {
    time_t t = (time_t)unix_seconds;
    struct tm tm;
    if ((int64_t)t != unix_seconds || localtime_r(&t, &tm) == NULL) {
        return -ERANGE;
    }
    int year = tm.tm_year + 1900;
    if (year < 0 || year > 9999) {
        return -ERANGE;
    }
    char zone[32];
    long off = tm.tm_gmtoff;
    if (off == 0) {
        snprintf(zone, sizeof(zone), "Z");
    } else {
        /* Go prints hours and minutes of the offset; seconds are dropped (zone / 60). */
        long minutes = off / 60;
        char sign = '+';
        if (minutes < 0) {
            sign = '-';
            minutes = -minutes;
        }
        snprintf(zone, sizeof(zone), "%c%02ld:%02ld", sign, minutes / 60, minutes % 60);
    }
    int n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d%s", year, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, zone);
    if (n < 0 || (size_t)n >= len) {
        return -ENOSPC;
    }
    return 0;
}

static bool digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

static bool is_leap(int y) {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int sched_parse_time(const char *s, int64_t *unix_seconds) {
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (s == NULL) {
        return -EINVAL;
    }
    size_t len = strlen(s);
    int y, mo, d, h, mi, sec;
    if (len < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
        !digits(s + 8, 2, &d) || s[10] != 'T' || !digits(s + 11, 2, &h) || s[13] != ':' ||
        !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec)) {
        return -EINVAL;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && is_leap(y)) || h > 23 ||
        mi > 59 || sec > 59) {
        return -EINVAL;
    }
    const char *p = s + 19;
    if (*p == '.' && p[1] >= '0' && p[1] <= '9') {
        p++; /* Go accepts a fraction the layout does not name; seconds precision keeps none */
        while (*p >= '0' && *p <= '9') {
            p++;
        }
    }
    int64_t off = 0;
    if (p[0] == 'Z' && p[1] == '\0') {
        off = 0;
    } else if ((p[0] == '+' || p[0] == '-') && strlen(p) == 6 && p[3] == ':') {
        int oh, om;
        if (!digits(p + 1, 2, &oh) || !digits(p + 4, 2, &om) || oh > 23 || om > 59) {
            return -EINVAL;
        }
        off = (int64_t)oh * 3600 + om * 60;
        if (p[0] == '-') {
            off = -off;
        }
    } else {
        return -EINVAL;
    }
    *unix_seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
    return 0;
}

/* ---- floats: strconv.FormatFloat(v, 'f', -1, 64) and strconv.ParseFloat(s, 64) ---- */

/* The shortest digit string that reads back as v: the correctly rounded p-digit form for the
 * smallest p that round-trips, or (only possible next to a power of two, where the gap below v
 * is half the gap above) the p-digit neighbour one unit up. Digits go to dig (no dot), the
 * decimal exponent of the first digit to *exp10. */
static int shortest_digits(double v, char *dig, size_t dig_len, int *exp10) {
    char buf[64];
    for (int p = 1; p <= 17; p++) {
        for (int up = 0; up <= 1; up++) {
            snprintf(buf, sizeof(buf), "%.*e", p - 1, v);
            char *e = strchr(buf, 'e');
            if (e == NULL) {
                return -EINVAL;
            }
            int ex = (int)strtol(e + 1, NULL, 10);
            size_t n = 0;
            char d[32];
            for (char *q = buf; q < e; q++) {
                if (*q >= '0' && *q <= '9') {
                    d[n++] = *q;
                }
            }
            if (up) {
                /* Add one unit in the last place; a carry out of the first digit moves the
                 * exponent ("999" + 1 = "1000" = "100" one decade up). */
                size_t i = n;
                while (i > 0 && d[i - 1] == '9') {
                    d[--i] = '0';
                }
                if (i == 0) {
                    memmove(d + 1, d, n);
                    d[0] = '1';
                    ex++;
                } else {
                    d[i - 1]++;
                }
            }
            d[n] = '\0';
            snprintf(buf, sizeof(buf), "%c.%se%d", d[0], d + 1, ex);
            if (strtod(buf, NULL) == v) {
                while (n > 1 && d[n - 1] == '0') {
                    n--;
                }
                if (n + 1 > dig_len) {
                    return -ENOSPC;
                }
                memcpy(dig, d, n);
                dig[n] = '\0';
                *exp10 = ex;
                return 0;
            }
        }
    }
    return -EINVAL; /* unreachable: 17 digits always round-trip a double */
}

int sched_format_double(double v, char *buf, size_t len) {
    if (isnan(v)) {
        return snprintf(buf, len, "NaN") < (int)len ? 0 : -ENOSPC;
    }
    if (isinf(v)) {
        return snprintf(buf, len, "%sInf", v > 0 ? "+" : "-") < (int)len ? 0 : -ENOSPC;
    }
    size_t o = 0;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 >= len) {                                                                        \
            return -ENOSPC;                                                                        \
        }                                                                                          \
        buf[o++] = (c);                                                                            \
    } while (0)
    if (signbit(v)) {
        PUT('-');
        v = -v;
    }
    if (v == 0) {
        PUT('0');
        buf[o] = '\0';
        return 0;
    }
    char dig[32] = {0};
    int ex = 0;
    int r = shortest_digits(v, dig, sizeof(dig), &ex);
    if (r < 0) {
        return r;
    }
    int nd = (int)strlen(dig);
    if (ex >= 0) {
        /* Integer part: the first ex + 1 digits, padded with zeros. */
        for (int i = 0; i <= ex; i++) {
            PUT(i < nd ? dig[i] : '0');
        }
        if (nd > ex + 1) {
            PUT('.');
            for (int i = ex + 1; i < nd; i++) {
                PUT(dig[i]);
            }
        }
    } else {
        PUT('0');
        PUT('.');
        for (int i = 0; i < -ex - 1; i++) {
            PUT('0');
        }
        for (int i = 0; i < nd; i++) {
            PUT(dig[i]);
        }
    }
#undef PUT
    buf[o] = '\0';
    return 0;
}

static bool ieq(const char *s, size_t len, const char *word) {
    return strlen(word) == len && strncasecmp(s, word, len) == 0;
}

int sched__parse_double(const char *s, size_t len, double *out) {
    char buf[128];
    size_t i = 0;
    if (len == 0 || len >= sizeof(buf) || memchr(s, '\0', len) != NULL) {
        return -EINVAL;
    }
    if (s[0] == '+' || s[0] == '-') {
        i = 1;
    }
    /* The special values as strconv spells them (case-insensitive). */
    if (ieq(s + i, len - i, "inf") || ieq(s + i, len - i, "infinity")) {
        *out = s[0] == '-' ? -INFINITY : INFINITY;
        return 0;
    }
    if (i == 0 && ieq(s, len, "nan")) {
        *out = NAN;
        return 0;
    }
    /* Otherwise decimal only: digits with at most one dot, at least one digit, and an
     * optional exponent. strtod alone would also take spaces, hex and "nan(...)". */
    size_t j = i, nd = 0;
    bool dot = false;
    for (; j < len; j++) {
        if (s[j] >= '0' && s[j] <= '9') {
            nd++;
        } else if (s[j] == '.' && !dot) {
            dot = true;
        } else {
            break;
        }
    }
    if (nd == 0) {
        return -EINVAL;
    }
    if (j < len && (s[j] == 'e' || s[j] == 'E')) {
        j++;
        if (j < len && (s[j] == '+' || s[j] == '-')) {
            j++;
        }
        size_t start = j;
        while (j < len && s[j] >= '0' && s[j] <= '9') {
            j++;
        }
        if (j == start) {
            return -EINVAL;
        }
    }
    if (j != len) {
        return -EINVAL;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    double v = strtod(buf, NULL);
    if (errno == ERANGE && isinf(v)) {
        return -EINVAL; /* strconv: ErrRange above the largest double; underflow is fine */
    }
    *out = v;
    return 0;
}

/* ---- integers and bools: strconv.ParseInt / ParseUint (base 10) / ParseBool ---- */

int sched__parse_uint(const char *s, size_t len, int bits, uint64_t *out) {
    uint64_t max = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1, v = 0;
    if (len == 0) {
        return -EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -EINVAL;
        }
        unsigned dgt = (unsigned)(s[i] - '0');
        if (v > (max - dgt) / 10) {
            return -EINVAL;
        }
        v = v * 10 + dgt;
    }
    *out = v;
    return 0;
}

int sched__parse_int(const char *s, size_t len, int bits, int64_t *out) {
    bool neg = false;
    if (len > 0 && (s[0] == '+' || s[0] == '-')) {
        neg = s[0] == '-';
        s++;
        len--;
    }
    uint64_t lim = UINT64_C(1) << (bits - 1), v; /* |min| */
    int r = sched__parse_uint(s, len, 64, &v);
    if (r < 0 || v > lim || (!neg && v == lim)) {
        return -EINVAL;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

int sched__parse_bool(const char *s, size_t len, bool *out) {
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strlen(yes[i]) == len && memcmp(s, yes[i], len) == 0) {
            *out = true;
            return 0;
        }
        if (strlen(no[i]) == len && memcmp(s, no[i], len) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}
