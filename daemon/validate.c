/*
 * validate.c - request field checks.
 */
#include "validate.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "dfc/addr.h"
#include "dfc/dragonfly.h"
#include "dfc/pbtime.h"
#include "dfc/units.h"
#include "storage/piece.h"

int dfd_validate_path(const char *field, const char *path, struct dfc_error *err) {
    if (path == NULL || path[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "%s is required", field);
    }
    if (path[0] != '/') {
        return dfc_error_set(err, -EINVAL, "%s `%s` must be absolute", field, path);
    }
    if (strlen(path) >= PATH_MAX) {
        return dfc_error_set(err, -EINVAL, "%s is longer than %d bytes", field, PATH_MAX - 1);
    }
    for (const char *p = path; *p; p++) {
        if (p[0] == '/' && p[1] == '.' &&
            (p[2] == '/' || p[2] == '\0' || (p[2] == '.' && (p[3] == '/' || p[3] == '\0')))) {
            return dfc_error_set(err, -EINVAL, "%s `%s` must not contain . or .. components", field,
                                 path);
        }
    }
    return 0;
}

int dfd_validate_replica_count(uint64_t n, struct dfc_error *err) {
    if (n < DFC_REPLICA_COUNT_MIN || n > DFC_REPLICA_COUNT_MAX) {
        return dfc_error_set(err, -EINVAL,
                             "persistent_replica_count must be between %d and %d, got %llu",
                             DFC_REPLICA_COUNT_MIN, DFC_REPLICA_COUNT_MAX, (unsigned long long)n);
    }
    return 0;
}

int dfd_validate_piece_length(uint64_t n, struct dfc_error *err) {
    if (n < DFC_PIECE_LENGTH_MIN || n > DFC_PIECE_LENGTH_MAX) {
        return dfc_error_set(err, -EINVAL,
                             "piece_length must be between %llu (4MiB) and %llu (64MiB) bytes, "
                             "got %llu",
                             (unsigned long long)DFC_PIECE_LENGTH_MIN,
                             (unsigned long long)DFC_PIECE_LENGTH_MAX, (unsigned long long)n);
    }
    return 0;
}

int dfd_validate_ttl(int64_t seconds, int32_t nanos, int64_t *ret_ns, struct dfc_error *err) {
    Google__Protobuf__Duration d = GOOGLE__PROTOBUF__DURATION__INIT;
    d.seconds = seconds;
    d.nanos = nanos;
    int64_t ns;
    /* Not a normalised Duration, negative or past int64 ns: named as given. */
    if (dfc_pb_duration_to_ns(&d, &ns) < 0 || ns < 0) {
        return dfc_error_set(err, -EINVAL,
                             "ttl must be between 5m and 168h, got seconds=%lld nanos=%d",
                             (long long)seconds, (int)nanos);
    }
    if (ns < DFC_TTL_MIN_NS || ns > DFC_TTL_MAX_NS) {
        char b[32];
        dfc_format_duration(ns, b, sizeof(b));
        return dfc_error_set(err, -EINVAL, "ttl must be between 5m and 168h, got %s", b);
    }
    *ret_ns = ns;
    return 0;
}

int dfd_validate_label(const char *field, const char *s, size_t max, struct dfc_error *err) {
    if (s != NULL && strlen(s) > max) {
        return dfc_error_set(err, -EINVAL, "%s is longer than %zu bytes", field, max);
    }
    return 0;
}

int dfd_validate_task_id(const char *id, struct dfc_error *err) {
    if (id == NULL || id[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "task_id is required");
    }
    if (!dfd_task_id_valid(id)) {
        return dfc_error_set(err, -EINVAL,
                             "task_id must be 64 lowercase hex characters (a SHA-256), got `%.80s`",
                             id);
    }
    return 0;
}

int dfd_validate_ip(const char *field, const char *ip, struct dfc_error *err) {
    if (!dfc_addr_is_ip(ip)) {
        return dfc_error_set(err, -EINVAL, "%s `%.64s` is not an IP address", field, ip);
    }
    return 0;
}

static bool all_of(const char *s, const char *set) {
    return s[0] != '\0' && strspn(s, set) == strlen(s);
}

int dfd_validate_digest(const char *s, const char **ret_algo, const char **ret_value,
                        struct dfc_error *err) {
    static const char hex[] = "0123456789abcdefABCDEF";
    if (strncmp(s, "crc32:", 6) == 0) {
        uint64_t v;
        if (dfc_parse_u64(s + 6, &v) == 0 && v <= UINT32_MAX) {
            *ret_algo = "crc32";
            *ret_value = s + 6;
            return 0;
        }
    } else if (strncmp(s, "sha256:", 7) == 0) {
        if (strlen(s + 7) == 64 && all_of(s + 7, hex)) {
            *ret_algo = "sha256";
            *ret_value = s + 7;
            return 0;
        }
    } else if (strncmp(s, "sha512:", 7) == 0) {
        if (strlen(s + 7) == 128 && all_of(s + 7, hex)) {
            *ret_algo = "sha512";
            *ret_value = s + 7;
            return 0;
        }
    }
    return dfc_error_set(err, -EINVAL,
                         "digest `%.80s` must be crc32:<decimal>, sha256:<64 hex> or "
                         "sha512:<128 hex>",
                         s);
}
