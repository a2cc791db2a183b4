/*
 * rpc_tls.h - TLS in the RPC layer, private to lib/: server and shared client credentials over
 * certificate files that core re-reads, the hand-over of accepted connections to core's TLS
 * listener, a call's peer address and identity (rpc_tls.c).
 *
 * Ownership: dfc__tls_server_creds() returns a reference the caller releases
 * (grpc_server_credentials_release); a struct dfc__tls_client is shared and reference-counted
 * (dfc__tls_client_get / dfc__tls_client_put), its credentials borrowed while it is held.
 */
#ifndef DFC_RPC_TLS_H
#define DFC_RPC_TLS_H

#include <stddef.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "dfc/error.h"
#include "dfc/rpc_server.h"
#include "dfc/tls.h"

/* Server credentials for policy p (not DFC_TLS_OFF) over f's files, re-read every refresh_s.
 * -ENOENT, or the errno of access(), with err naming the file when one cannot be read. */
int dfc__tls_server_creds(enum dfc_tls_policy p, const struct dfc_tls_files *f, unsigned refresh_s,
                          grpc_server_credentials **ret, struct dfc_error *err);

struct dfc__tls_client;

/* The shared client credentials for policy p (not DFC_TLS_OFF) over f's files; created on first
 * use. -ENOENT when a file cannot be read, -ENOMEM. */
int dfc__tls_client_get(enum dfc_tls_policy p, const struct dfc_tls_files *f, unsigned refresh_s,
                        struct dfc__tls_client **ret, struct dfc_error *err);

/* The credentials of t, borrowed while t is held. */
grpc_channel_credentials *dfc__tls_client_creds(struct dfc__tls_client *t);

/* Drops a reference from dfc__tls_client_get(); the last one frees the credentials. NULL is
 * fine. */
void dfc__tls_client_put(struct dfc__tls_client *t);

/* The name of the "external" listener through which rpc_listen.c hands accepted TCP
 * connections to core for their TLS handshake. */
#define DFC__TLS_EXTERNAL "external:dfc-tls"

/* The server channel arg by which core, when a listener is added at DFC__TLS_EXTERNAL with TLS
 * credentials, stores that listener's fd handler into *slot. */
void dfc__tls_handler_arg(void **slot, grpc_arg *ret);

/* Hands the accepted connection fd of listening socket listener_fd to core's TLS listener
 * through its fd handler (core owns fd from here, as with grpc_server_add_channel_from_fd):
 * core runs the TLS handshake within the server's handshake timeout. The connection is
 * remembered so that a refused handshake's log line names its peer; server names the server in
 * that line. */
void dfc__tls_handoff(void *handler, const char *server, int listener_fd, int fd);

/* The IP address in core's peer string of call ("ipv4:10.0.0.1:5000", "ipv6:[::1]:5000") as
 * dfc_rpc_call_peer_ip() gives it. -ENOENT for another kind of peer ("unix:", "fd:"). */
int dfc__tls_peer_ip(grpc_call *call, char *buf, size_t size);

/* The key by which rpc_listen.c knows a TCP connection in core until its first call: core's
 * own name for a plaintext one ("fd:<n>"), "<ip> <port>" of the peer for one handed to the TLS
 * listener (whose calls' peer is "ipv4:<ip>:<port>"). dfc__conn_key_tcp makes the latter from
 * an address (ip as dfc_addr_ip writes it); dfc__peer_conn_key reads either from a call.
 * -ENOENT for a call whose peer is neither, -ENAMETOOLONG when size is too small. */
#define DFC__CONN_KEY_MAX 64
int dfc__conn_key_tcp(const char *ip, unsigned port, char *buf, size_t size);
int dfc__peer_conn_key(grpc_call *call, char *buf, size_t size);

/* Fills ret from call's auth context (dfc_rpc_call_peer_identity). */
void dfc__tls_peer_identity(grpc_call *call, struct dfc_peer_identity *ret);

#endif /* DFC_RPC_TLS_H */
