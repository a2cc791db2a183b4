/*
 * pbtime.c - time conversions between nanoseconds, protobuf messages and timespecs.
 */
#include "dfc/pbtime.h"

#include <errno.h>
#include <stdbool.h>

/* Floor division and its non-negative remainder: (q, r) with ns = q * 1e9 + r, 0 <= r < 1e9. */
static void split_floor(int64_t ns, int64_t *q, int64_t *r) {
    *q = ns / DFC_NS_PER_SEC;
    *r = ns % DFC_NS_PER_SEC;
    if (*r < 0) {
        *q -= 1;
        *r += DFC_NS_PER_SEC;
    }
}

/* seconds * 1e9 + nanos, clamped; false when clamped. nanos is within (-1e9, 1e9) here. */
static bool sum_ns(int64_t seconds, int64_t nanos, int64_t *ret) {
    /* Give both parts one sign first, so the bounds below are exact (-9223372037 s plus
     * 145224192 ns is INT64_MIN, yet -9223372037 s alone is not an int64 of ns). */
    if (seconds < 0 && nanos > 0) {
        seconds += 1;
        nanos -= DFC_NS_PER_SEC;
    } else if (seconds > 0 && nanos < 0) {
        seconds -= 1;
        nanos += DFC_NS_PER_SEC;
    }
    if (seconds > INT64_MAX / DFC_NS_PER_SEC) {
        *ret = INT64_MAX;
        return false;
    }
    if (seconds < INT64_MIN / DFC_NS_PER_SEC) {
        *ret = INT64_MIN;
        return false;
    }
    int64_t base = seconds * DFC_NS_PER_SEC; /* fits: |seconds| <= INT64_MAX / 1e9 */
    if (nanos > 0 && base > INT64_MAX - nanos) {
        *ret = INT64_MAX;
        return false;
    }
    if (nanos < 0 && base < INT64_MIN - nanos) {
        *ret = INT64_MIN;
        return false;
    }
    *ret = base + nanos;
    return true;
}

void dfc_pb_duration_from_ns(int64_t ns, Google__Protobuf__Duration *d) {
    /* C division truncates toward zero, so quotient and remainder share the sign of ns. */
    d->seconds = ns / DFC_NS_PER_SEC;
    d->nanos = (int32_t)(ns % DFC_NS_PER_SEC);
}

/* Moves whole seconds out of *nanos into *seconds (saturating), leaving |*nanos| < 1e9. */
static void carry_seconds(int64_t *seconds, int64_t *nanos) {
    int64_t carry = *nanos / DFC_NS_PER_SEC;
    *nanos -= carry * DFC_NS_PER_SEC;
    if (carry > 0 && *seconds > INT64_MAX - carry) {
        *seconds = INT64_MAX;
    } else if (carry < 0 && *seconds < INT64_MIN - carry) {
        *seconds = INT64_MIN;
    } else {
        *seconds += carry;
    }
}

int dfc_pb_duration_to_ns(const Google__Protobuf__Duration *d, int64_t *ret_ns) {
    int64_t seconds = d->seconds, nanos = d->nanos;
    int r = 0;
    if (nanos <= -DFC_NS_PER_SEC || nanos >= DFC_NS_PER_SEC || (seconds > 0 && nanos < 0) ||
        (seconds < 0 && nanos > 0)) {
        r = -EINVAL;
    }
    carry_seconds(&seconds, &nanos);
    if (!sum_ns(seconds, nanos, ret_ns) && r == 0) {
        r = -ERANGE;
    }
    return r;
}

void dfc_pb_timestamp_from_ns(int64_t unix_ns, Google__Protobuf__Timestamp *t) {
    int64_t q, r;
    split_floor(unix_ns, &q, &r);
    t->seconds = q;
    t->nanos = (int32_t)r;
}

int dfc_pb_timestamp_to_ns(const Google__Protobuf__Timestamp *t, int64_t *ret_ns) {
    int64_t seconds = t->seconds, nanos = t->nanos;
    int r = nanos < 0 || nanos >= DFC_NS_PER_SEC ? -EINVAL : 0;
    carry_seconds(&seconds, &nanos);
    if (!sum_ns(seconds, nanos, ret_ns) && r == 0) {
        r = -ERANGE;
    }
    return r;
}

int64_t dfc_timespec_to_ns(const struct timespec *ts) {
    int64_t seconds = (int64_t)ts->tv_sec, nanos = (int64_t)ts->tv_nsec, ns;
    carry_seconds(&seconds, &nanos);
    (void)sum_ns(seconds, nanos, &ns);
    return ns;
}

struct timespec dfc_timespec_from_ns(int64_t ns) {
    int64_t q, r;
    split_floor(ns, &q, &r);
    return (struct timespec){.tv_sec = (time_t)q, .tv_nsec = (long)r};
}

struct timespec dfc_timespec_add_ns(struct timespec ts, int64_t ns) {
    int64_t q, r;
    split_floor(ns, &q, &r);
    int64_t sec = (int64_t)ts.tv_sec;
    int64_t nsec = (int64_t)ts.tv_nsec + r; /* < 2e9 for a normalised ts */
    if (nsec >= DFC_NS_PER_SEC) {
        nsec -= DFC_NS_PER_SEC;
        q += 1; /* q <= INT64_MAX / 1e9 + 1: no overflow */
    }
    if (q > 0 && sec > INT64_MAX - q) {
        return (struct timespec){.tv_sec = (time_t)INT64_MAX, .tv_nsec = DFC_NS_PER_SEC - 1};
    }
    if (q < 0 && sec < INT64_MIN - q) {
        return (struct timespec){.tv_sec = (time_t)INT64_MIN, .tv_nsec = 0};
    }
    return (struct timespec){.tv_sec = (time_t)(sec + q), .tv_nsec = (long)nsec};
}
