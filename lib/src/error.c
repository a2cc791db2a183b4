/*
 * error.c - code names, messages and gRPC mapping, all generated from DFC_ERRNO_MAP.
 */
#include "dfc/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The definitions below, not error.h's analyzer-only wrappers of them. */
#undef dfc_error_set
#undef dfc_error_errno

struct row {
    int code;
    int grpc;
    const char *name;
    const char *msg;
};

static const struct row rows[] = {
#define ROW(name, code, grpc, msg) {code, DFC_GRPC_##grpc, #name, msg},
    DFC_ERRNO_MAP(ROW)
#undef ROW
};

static const struct row *find(int code) {
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (rows[i].code == code) {
            return &rows[i];
        }
    }
    return NULL;
}

const char *dfc_strerror(int code) {
    if (code >= 0) {
        return "success";
    }
    const struct row *r = find(code);
    if (r != NULL) {
        return r->msg;
    }
    const char *s = code > -DFC_E_BASE ? strerrordesc_np(-code) : NULL;
    return s != NULL ? s : "unknown error";
}

const char *dfc_error_name(int code) {
    const struct row *r = find(code);
    return r != NULL ? r->name : "E?";
}

int dfc_error_to_grpc(int code) {
    if (code >= 0) {
        return 0;
    }
    const struct row *r = find(code);
    return r != NULL ? r->grpc : DFC_GRPC_INTERNAL;
}

const char *dfc_grpc_code_name(int grpc_code) {
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    return grpc_code >= 0 && grpc_code <= 16 ? names[grpc_code] : "UNKNOWN";
}

int dfc_error_from_grpc(int grpc_code) {
    if (grpc_code == 0) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (rows[i].grpc == grpc_code) {
            return rows[i].code;
        }
    }
    return DFC_E_UNKNOWN;
}

static void vset(struct dfc_error *err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

static void vset(struct dfc_error *err, int code, const char *fmt, va_list ap) {
    err->code = code;
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
}

int dfc_error_set(struct dfc_error *err, int code, const char *fmt, ...) {
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vset(err, code, fmt, ap);
        va_end(ap);
    }
    return code;
}

int dfc_error_errno(struct dfc_error *err, int code, const char *fmt, ...) {
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vset(err, code, fmt, ap);
        va_end(ap);
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", dfc_strerror(code));
    }
    return code;
}

int dfc_error_prefix(struct dfc_error *err, const char *fmt, ...) {
    if (err == NULL) {
        return 0;
    }
    char prefix[DFC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    char joined[2 * DFC_ERROR_MSG_MAX + 2];
    snprintf(joined, sizeof(joined), "%s: %s", prefix, dfc_error_msg(err));
    memcpy(err->msg, joined, sizeof(err->msg) - 1);
    err->msg[sizeof(err->msg) - 1] = '\0';
    return err->code;
}

void dfc_error_clear(struct dfc_error *err) {
    err->code = 0;
    err->msg[0] = '\0';
}

const char *dfc_error_msg(const struct dfc_error *err) {
    return err->msg[0] ? err->msg : dfc_strerror(err->code);
}
