/*
 * error.h - the project's one error convention.
 *
 * Every function that can fail returns 0 (or a count >= 0) on success and a negative error
 * code on failure: a negative errno, or one of the project's own codes below -DFC_E_BASE.
 * DFC_ERRNO_MAP is the single table that names each code, gives it a message and maps it to a
 * gRPC status code, so "ENOENT means NOT_FOUND" is written exactly once.
 *
 * Where a message must reach a human (an RPC status, a CLI line), callers pass a caller-owned
 * struct dfc_error. Its buffer is fixed, so reporting an error never allocates.
 */
#ifndef DFC_ERROR_H
#define DFC_ERROR_H

#include <errno.h>
#include <stddef.h>

#define DFC_E_BASE 10000

/* gRPC status codes, named here so that this header needs no gRPC include. */
enum dfc_grpc_code {
    DFC_GRPC_OK = 0,
    DFC_GRPC_CANCELLED = 1,
    DFC_GRPC_UNKNOWN = 2,
    DFC_GRPC_INVALID_ARGUMENT = 3,
    DFC_GRPC_DEADLINE_EXCEEDED = 4,
    DFC_GRPC_NOT_FOUND = 5,
    DFC_GRPC_ALREADY_EXISTS = 6,
    DFC_GRPC_PERMISSION_DENIED = 7,
    DFC_GRPC_RESOURCE_EXHAUSTED = 8,
    DFC_GRPC_FAILED_PRECONDITION = 9,
    DFC_GRPC_ABORTED = 10,
    DFC_GRPC_OUT_OF_RANGE = 11,
    DFC_GRPC_UNIMPLEMENTED = 12,
    DFC_GRPC_INTERNAL = 13,
    DFC_GRPC_UNAVAILABLE = 14,
    DFC_GRPC_DATA_LOSS = 15,
    DFC_GRPC_UNAUTHENTICATED = 16,
};

/* X(name, code, gRPC code, default message). The first row that carries a gRPC code is that
 * code's canonical error, which dfc_error_from_grpc() returns: keep those rows on top. */
#define DFC_ERRNO_MAP(X)                                                                           \
    X(ECANCELED, -ECANCELED, CANCELLED, "cancelled")                                               \
    X(UNKNOWN, -(DFC_E_BASE + 6), UNKNOWN, "unknown error")                                        \
    X(EINVAL, -EINVAL, INVALID_ARGUMENT, "invalid argument")                                       \
    X(ETIMEDOUT, -ETIMEDOUT, DEADLINE_EXCEEDED, "deadline exceeded")                               \
    X(ENOENT, -ENOENT, NOT_FOUND, "not found")                                                     \
    X(EEXIST, -EEXIST, ALREADY_EXISTS, "already exists")                                           \
    X(EACCES, -EACCES, PERMISSION_DENIED, "permission denied")                                     \
    X(ENOSPC, -ENOSPC, RESOURCE_EXHAUSTED, "no space left on device")                              \
    X(FAILED_PRECONDITION, -(DFC_E_BASE + 1), FAILED_PRECONDITION, "failed precondition")          \
    X(ABORTED, -(DFC_E_BASE + 2), ABORTED, "aborted")                                              \
    X(ERANGE, -ERANGE, OUT_OF_RANGE, "out of range")                                               \
    X(ENOSYS, -ENOSYS, UNIMPLEMENTED, "not implemented")                                           \
    X(INTERNAL, -(DFC_E_BASE + 5), INTERNAL, "internal error")                                     \
    X(ECONNREFUSED, -ECONNREFUSED, UNAVAILABLE, "unavailable")                                     \
    X(DATA_LOSS, -(DFC_E_BASE + 3), DATA_LOSS, "data loss")                                        \
    X(UNAUTHENTICATED, -(DFC_E_BASE + 4), UNAUTHENTICATED, "unauthenticated")                      \
    /* further errnos, each mapped once */                                                         \
    X(EPERM, -EPERM, PERMISSION_DENIED, "operation not permitted")                                 \
    X(EROFS, -EROFS, PERMISSION_DENIED, "read-only file system")                                   \
    X(EDQUOT, -EDQUOT, RESOURCE_EXHAUSTED, "disk quota exceeded")                                  \
    X(ENOMEM, -ENOMEM, RESOURCE_EXHAUSTED, "out of memory")                                        \
    X(EMSGSIZE, -EMSGSIZE, RESOURCE_EXHAUSTED, "message too large")                                \
    X(EMFILE, -EMFILE, RESOURCE_EXHAUSTED, "too many open files")                                  \
    X(EFBIG, -EFBIG, RESOURCE_EXHAUSTED, "file too large")                                         \
    X(EUSERS, -EUSERS, RESOURCE_EXHAUSTED, "too many users")                                       \
    X(ENOTSUP, -ENOTSUP, UNIMPLEMENTED, "operation not supported")                                 \
    X(EISDIR, -EISDIR, INVALID_ARGUMENT, "is a directory")                                         \
    X(ENOTDIR, -ENOTDIR, INVALID_ARGUMENT, "not a directory")                                      \
    X(ENAMETOOLONG, -ENAMETOOLONG, INVALID_ARGUMENT, "name too long")                              \
    X(EBADMSG, -EBADMSG, INVALID_ARGUMENT, "malformed message")                                    \
    X(E2BIG, -E2BIG, INVALID_ARGUMENT, "argument list too long")                                   \
    X(EXDEV, -EXDEV, FAILED_PRECONDITION, "cross-device link")                                     \
    X(EBUSY, -EBUSY, ABORTED, "busy")                                                              \
    X(EAGAIN, -EAGAIN, UNAVAILABLE, "resource temporarily unavailable")                            \
    X(EADDRINUSE, -EADDRINUSE, UNAVAILABLE, "address in use")                                      \
    X(EPIPE, -EPIPE, UNAVAILABLE, "broken pipe")                                                   \
    X(ECONNRESET, -ECONNRESET, UNAVAILABLE, "connection reset")                                    \
    X(EPROTOTYPE, -EPROTOTYPE, INTERNAL, "value of the wrong type")                                \
    X(EIO, -EIO, INTERNAL, "input/output error")

/* The project's own codes, as DFC_E_<NAME>. */
enum {
    DFC_E_FAILED_PRECONDITION = -(DFC_E_BASE + 1),
    DFC_E_ABORTED = -(DFC_E_BASE + 2),
    DFC_E_DATA_LOSS = -(DFC_E_BASE + 3),
    DFC_E_UNAUTHENTICATED = -(DFC_E_BASE + 4),
    DFC_E_INTERNAL = -(DFC_E_BASE + 5),
    DFC_E_UNKNOWN = -(DFC_E_BASE + 6),
};

#define DFC_ERROR_MSG_MAX 512

/* A caller-owned error report: a code from the table and a one-line human message. */
struct dfc_error {
    int code;
    char msg[DFC_ERROR_MSG_MAX];
};

/* Returns a static, never-NULL description of code (for unknown codes, the libc text). */
const char *dfc_strerror(int code);

/* Returns the table name of code ("ENOENT", "FAILED_PRECONDITION"), or "E?" when unknown. */
const char *dfc_error_name(int code);

/* Maps an error code to a gRPC status code (0 for code >= 0, INTERNAL for unknown codes). */
int dfc_error_to_grpc(int code);

/* "NOT_FOUND" for 5 and so on; "UNKNOWN" outside 0..16. */
const char *dfc_grpc_code_name(int grpc_code);

/* Maps a gRPC status code back to the canonical error code (0 for OK). */
int dfc_error_from_grpc(int grpc_code);

/* Records code and a printf-style message in err (which may be NULL); returns code, so that
 * `return dfc_error_set(err, -ENOENT, "task `%s` not found", id);` reads as one line. */
int dfc_error_set(struct dfc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like dfc_error_set(), with the message "<text>: <strerror(code)>". */
int dfc_error_errno(struct dfc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "<context>: " to err->msg; keeps err->code. Returns err->code. */
int dfc_error_prefix(struct dfc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __clang_analyzer__
/* For the static analyzer only (clang-tidy in hack/lint.sh): it reads one file at a time, so it
 * cannot see that the two calls above return their code, nor that every code is negative, and it
 * would follow "the error call returned 0" paths that cannot happen. These spell out that
 * contract; a build never sees them. */
#define dfc_error_set(err, code, ...)                                                              \
    __extension__({                                                                                \
        int dfc__code = (code);                                                                    \
        if (dfc__code >= 0) {                                                                      \
            __builtin_unreachable();                                                               \
        }                                                                                          \
        (void)dfc_error_set(err, dfc__code, __VA_ARGS__);                                          \
        dfc__code;                                                                                 \
    })
#define dfc_error_errno(err, code, ...)                                                            \
    __extension__({                                                                                \
        int dfc__code = (code);                                                                    \
        if (dfc__code >= 0) {                                                                      \
            __builtin_unreachable();                                                               \
        }                                                                                          \
        (void)dfc_error_errno(err, dfc__code, __VA_ARGS__);                                        \
        dfc__code;                                                                                 \
    })
#endif

/* Clears err to code 0 and an empty message. */
void dfc_error_clear(struct dfc_error *err);

/* Returns err->msg, or the table text of err->code when no message was set. */
const char *dfc_error_msg(const struct dfc_error *err);

#endif /* DFC_ERROR_H */
