/*
 * tls_ssl.h - TLS 1.3 over a non-blocking TCP socket with OpenSSL, for the transports that are
 * not gRPC (Vortex, the scheduler's Redis and Sentinel client with dfc_tls_ctx_opts): a
 * context that builds an SSL_CTX from a policy and one side's files (dfc/tls.h) and rebuilds it
 * when the files change, the handshake, reads and writes bounded by a monotonic deadline, and
 * the peer's identity (its certificate's SAN IPs and URIs) for authority checks. See
 * docs/trust-model.md.
 *
 * Policy: TLS 1.3 only (dfc_tls_ctx_opts may allow 1.2, the system's roots, no verification). A
 * server presents its certificate; under mutual it requires a client certificate that chains to its
 * CA (the handshake fails without one), under server-auth it asks for none. A client verifies the
 * server's chain against its CA and the server's SAN against the address it dialled (an IP SAN for
 * a numeric address, else a DNS name, sent as SNI too); under mutual it presents its certificate.
 *
 * Rotation: dfc_tls_ctx_new() reads the files once (an error if they do not load). Afterwards
 * each handshake looks at the files' stat (inode, size, mtime) at most once per recheck
 * interval; when they changed, a new SSL_CTX is built (outside the lock, by one thread) and
 * swapped in under the context's lock. Connections hold a reference to the SSL_CTX they began
 * with (OpenSSL's refcount), so those in flight finish on the old one and the old one is freed
 * with the last of them. Files that do not load (a key that does not match the certificate, as
 * between the writes of a rotation) leave the current SSL_CTX in place, with a warning, and are
 * tried again at the next interval.
 *
 * Errors: negative errno with err set. A handshake that fails is -ECONNABORTED (or -ETIMEDOUT,
 * or the socket's errno) and err names the peer and OpenSSL's reason, e.g. "TLS handshake
 * with 127.0.0.12:4005 failed: certificate verify failed (certificate has expired)"; a TLS
 * alert received later (TLS 1.3 verifies a client certificate after the client's handshake
 * ended) comes from the first read in the same words.
 *
 * Threads and ownership: a struct dfc_tls_ctx is shared by every thread of its owner (its own
 * mutex guards the current SSL_CTX and the files' stamps); it copies the paths it is given and
 * must outlive its connections' handshakes (not the connections: they hold their SSL_CTX). A
 * struct dfc_tls_conn belongs to one thread at a time; it borrows its fd, which the caller
 * closes after dfc_tls_conn_free().
 */
#ifndef DFC_TLS_SSL_H
#define DFC_TLS_SSL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/error.h"
#include "dfc/tls.h"

/* How often, at most, a context looks at its files for a rotation. */
#define DFC_TLS_RECHECK_NS ((int64_t)5 * 1000 * 1000 * 1000)

struct dfc_tls_ctx;
struct dfc_tls_conn;

/* A context for one side of connections: server (accepts) or client (connects), under policy
 * p (not DFC_TLS_OFF) with files f (copied; dfc_tls_files_check() rules apply). recheck_ns
 * bounds how often the files are looked at (0: at every handshake). -EINVAL with err naming
 * the file and OpenSSL's reason when a file does not load. */
int dfc_tls_ctx_new(enum dfc_tls_policy p, const struct dfc_tls_files *f, bool server,
                    int64_t recheck_ns, struct dfc_tls_ctx **ret, struct dfc_error *err);

/* What a context for a service outside the cluster (Redis and its Sentinels) needs beyond the
 * cluster's policy; all zero is dfc_tls_ctx_new()'s context. */
struct dfc_tls_ctx_opts {
    bool tls12;        /* TLS 1.2 at least instead of 1.3 (1.3 still offered first) */
    bool system_roots; /* a client with no ca_cert verifies against the system's roots */
    bool skip_verify;  /* a client that checks neither the server's chain nor its name */
    /* Names a file that does not load by its option: "<prefix>caCert `<path>`: <reason>"
     * (also cert, key; and the prefix of dfc_tls_files_check's message); borrowed. NULL:
     * "TLS: cannot load the CA <path>: <reason>". */
    const char *option_prefix;
    /* Called, on the thread that looked, when a rotation was taken (err NULL) or its files did
     * not load (err says why; the loaded SSL_CTX stays), instead of the tls.reloaded and
     * tls.reload_failed lines. NULL: those lines. */
    void (*on_reload)(void *ud, const struct dfc_error *err);
    void *ud;
};

/* dfc_tls_ctx_new() with opts (NULL: none). */
int dfc_tls_ctx_new_opts(enum dfc_tls_policy p, const struct dfc_tls_files *f, bool server,
                         int64_t recheck_ns, const struct dfc_tls_ctx_opts *opts,
                         struct dfc_tls_ctx **ret, struct dfc_error *err);

/* Frees the context (its current SSL_CTX lives on in connections that still hold it). NULL is
 * fine. */
void dfc_tls_ctx_free(struct dfc_tls_ctx *c);

enum dfc_tls_policy dfc_tls_ctx_policy(const struct dfc_tls_ctx *c);

/* How many times the files were loaded (1 after dfc_tls_ctx_new, +1 per rotation taken). */
uint64_t dfc_tls_ctx_generation(struct dfc_tls_ctx *c);

/* As dfc_tls_ctx_generation, after looking at the files as a handshake does (at most once per
 * recheck interval): for a pool of connections that must not outlive a rotation although it
 * makes few handshakes. */
uint64_t dfc_tls_ctx_refresh(struct dfc_tls_ctx *c);

/* A number no other context of this process had or will have (contexts are numbered from 1 as
 * they are made): tells a context from a later one made at the same address. */
uint64_t dfc_tls_ctx_serial(const struct dfc_tls_ctx *c);

/* Server side: the TLS handshake on an accepted non-blocking socket, by deadline
 * (CLOCK_MONOTONIC ns, dfc_mono_ns). peer names the other end in errors ("ip:port"). */
int dfc_tls_accept(struct dfc_tls_ctx *c, int fd, const char *peer, int64_t deadline,
                   struct dfc_tls_conn **ret, struct dfc_error *err);

/* Client side: the TLS handshake on a connected non-blocking socket to host (a numeric IP or a
 * DNS name: the server's certificate must name it) at port, by deadline. */
int dfc_tls_connect(struct dfc_tls_ctx *c, int fd, const char *host, unsigned port,
                    int64_t deadline, struct dfc_tls_conn **ret, struct dfc_error *err);

/* Reads exactly n bytes by deadline; *ret_got (may be NULL) says how many arrived, also on
 * failure. -EPROTO when the peer closed first (cleanly or not), -ETIMEDOUT, -ECONNABORTED for
 * a TLS error or alert (err says which), or the socket's errno. */
int dfc_tls_read(struct dfc_tls_conn *t, void *buf, size_t n, int64_t deadline, size_t *ret_got,
                 struct dfc_error *err);

/* Reads what has arrived, at least 1 byte and at most n, waiting until deadline for it;
 * *ret_got says how many. Errors as dfc_tls_read. */
int dfc_tls_read_some(struct dfc_tls_conn *t, void *buf, size_t n, int64_t deadline,
                      size_t *ret_got, struct dfc_error *err);

/* Whether an idle connection can be used: no data, end or error waits on it. Records that carry
 * no data (TLS 1.3 session tickets) are consumed. Never waits (the socket is non-blocking). */
bool dfc_tls_conn_idle_ok(struct dfc_tls_conn *t);

/* Writes n bytes (records of OpenSSL's 16 KiB at most, coalesced into sends of up to 272 KiB and
 * all sent before it returns) by deadline; errors as dfc_tls_read. */
int dfc_tls_write(struct dfc_tls_conn *t, const void *buf, size_t n, int64_t deadline,
                  struct dfc_error *err);

/* Sends close_notify if the socket takes it at once (never waits). */
void dfc_tls_shutdown(struct dfc_tls_conn *t);

/* Frees the connection (not its fd). NULL is fine. */
void dfc_tls_conn_free(struct dfc_tls_conn *t);

/* The peer's identity from its certificate's subjectAltName: up to DFC_TLS_ID_MAX IP
 * addresses (as text) and URIs, in certificate order; more are left out. */
#define DFC_TLS_ID_MAX  8
#define DFC_TLS_IP_MAX  46 /* INET6_ADDRSTRLEN */
#define DFC_TLS_URI_MAX 256
struct dfc_tls_identity {
    bool has_cert; /* the peer presented a certificate (verified: the handshake succeeded) */
    unsigned n_ips, n_uris;
    char ips[DFC_TLS_ID_MAX][DFC_TLS_IP_MAX];
    char uris[DFC_TLS_ID_MAX][DFC_TLS_URI_MAX];
};
void dfc_tls_conn_identity(const struct dfc_tls_conn *t, struct dfc_tls_identity *ret);

#endif /* DFC_TLS_SSL_H */
