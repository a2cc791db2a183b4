/*
 * fdpass.h - the client side of descriptor passing to dfdaemon (the sibling socket
 * `<download.server.socketPath>.fd`, served by daemon/fdpass.c).
 *
 * Protocol (one exchange per connection): the client sends one message of one byte carrying
 * one descriptor (SCM_RIGHTS); the daemon answers one line and closes:
 *   "ok <32 hex digits>\n"          the one-time token for the x-dfc-fd-token metadata
 *   "error <grpc code> <text>\n"    the descriptor was refused, and why
 * The caller keeps its own descriptor (the kernel duplicates it into the daemon).
 */
#ifndef DFC_FDPASS_H
#define DFC_FDPASS_H

#include <stddef.h>

#include "dfc/error.h"

/* The sibling socket's suffix and the token's length in hex digits. */
#define DFC_FDPASS_SUFFIX    ".fd"
#define DFC_FDPASS_TOKEN_HEX 32

/* Writes `<socket_path>.fd` into buf; -ENAMETOOLONG when it does not fit. */
int dfc_fdpass_path(const char *socket_path, char *buf, size_t size);

/* Passes fd on the sibling socket at path and stores the token (DFC_FDPASS_TOKEN_HEX + 1
 * bytes) in token. Errors: -ENOENT or -ECONNREFUSED when no daemon serves path (the caller may
 * fall back), the daemon's refusal as its code with its text, -EBADMSG on a malformed answer. */
int dfc_fdpass_send(const char *path, int fd, char token[DFC_FDPASS_TOKEN_HEX + 1],
                    struct dfc_error *err);

#endif /* DFC_FDPASS_H */
