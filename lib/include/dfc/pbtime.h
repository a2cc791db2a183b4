/*
 * pbtime.h - time conversions: nanoseconds <-> google.protobuf.Duration, Timestamp and
 * struct timespec.
 *
 * Pure functions: no clock, no allocation. The caller owns every struct passed in or out.
 *
 * protobuf's rules (google/protobuf/duration.proto, timestamp.proto): a Duration's seconds and
 * nanos carry the same sign and |nanos| < 1e9; a Timestamp's nanos lie in [0, 1e9) even when
 * seconds is negative (before 1970). Every int64 count of nanoseconds (about +-292 years) is a
 * valid Duration and Timestamp, so the from_ns direction cannot fail. The to_ns direction can:
 * a message may hold more than an int64 of nanoseconds, or nanos that break the rules above.
 */
#ifndef DFC_PBTIME_H
#define DFC_PBTIME_H

#include <stdint.h>
#include <time.h>

#include "dfc/units.h" /* DFC_NS_PER_SEC, DFC_NS_PER_MS */
#include "google/protobuf/duration.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"

/* Sets d to ns, normalised (nanos has the sign of seconds). */
void dfc_pb_duration_from_ns(int64_t ns, Google__Protobuf__Duration *d);

/* Writes seconds * 1e9 + nanos to *ret_ns, clamped to [INT64_MIN, INT64_MAX]. Returns 0, or
 * -EINVAL when |nanos| >= 1e9 or its sign differs from that of seconds (the sum is still
 * written), or -ERANGE when the value did not fit (the clamped value is written). */
int dfc_pb_duration_to_ns(const Google__Protobuf__Duration *d, int64_t *ret_ns);

/* Sets t to unix_ns nanoseconds since the epoch; nanos is in [0, 1e9). */
void dfc_pb_timestamp_from_ns(int64_t unix_ns, Google__Protobuf__Timestamp *t);

/* Like dfc_pb_duration_to_ns(): -EINVAL when nanos is outside [0, 1e9), -ERANGE when the time
 * is outside int64 nanoseconds (clamped). */
int dfc_pb_timestamp_to_ns(const Google__Protobuf__Timestamp *t, int64_t *ret_ns);

/* tv_sec * 1e9 + tv_nsec, clamped to [INT64_MIN, INT64_MAX]. */
int64_t dfc_timespec_to_ns(const struct timespec *ts);

/* ns as a timespec with tv_nsec in [0, 1e9) (tv_sec rounds down for negative ns). */
struct timespec dfc_timespec_from_ns(int64_t ns);

/* ts + ns, normalised; tv_sec saturates instead of wrapping (a deadline "never"). */
struct timespec dfc_timespec_add_ns(struct timespec ts, int64_t ns);

#endif /* DFC_PBTIME_H */
