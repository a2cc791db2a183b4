/*
 * tls.h - the TLS settings of every TCP listener and client in the cluster: one policy per
 * binary and, per side, the files of a cert-manager Secret (ca.crt, tls.crt, tls.key). The gRPC
 * layer (rpc_*.c) and the Vortex transport both take them. See docs/trust-model.md.
 *
 * Ownership: struct dfc_tls_files borrows its paths (they belong to the binary's config struct).
 */
#ifndef DFC_TLS_H
#define DFC_TLS_H

#include <stdbool.h>

#include "dfc/error.h"

enum dfc_tls_policy {
    DFC_TLS_OFF,         /* plaintext and unauthenticated, as before TLS existed */
    DFC_TLS_SERVER_AUTH, /* servers prove their identity; clients present no certificate */
    DFC_TLS_MUTUAL,      /* both sides present a certificate that chains to the CA */
};

/* One side's files as paths ("" = not given). ca_cert verifies the other side; cert and key are
 * this side's identity. */
struct dfc_tls_files {
    const char *ca_cert;
    const char *cert;
    const char *key;
    /* A client's only: the name (DNS SAN) the server's certificate must hold instead of the
     * dialled address, for servers sharing one certificate (docs/trust-model.md); NULL or ""
     * = the dialled address. */
    const char *server_name;
};

/* The choices of a policy option row: "auto" (mutual when certificate files are given, else
 * off), "off", "server-auth", "mutual". */
extern const char *const dfc_tls_policy_choices[];

/* Resolves a policy option row's value: "auto" becomes DFC_TLS_MUTUAL when any_files, else
 * DFC_TLS_OFF. */
enum dfc_tls_policy dfc_tls_policy_resolve(const char *choice, bool any_files);

/* Whether any of f's paths is given. */
bool dfc_tls_files_any(const struct dfc_tls_files *f);

/* Checks that f holds what policy p needs on one side: a server needs cert and key (and ca_cert
 * when mutual, to verify clients); a client needs ca_cert (and cert and key when mutual).
 * prefix names the option keys in the message ("upload.server." -> "upload.server.caCert").
 * -EINVAL with err set when a file is missing from the settings. */
int dfc_tls_files_check(enum dfc_tls_policy p, const struct dfc_tls_files *f, bool server,
                        const char *prefix, struct dfc_error *err);

/* Reads every file of f that is given, as the transports will: caCert must hold at least one
 * PEM certificate, cert a PEM certificate (the first of a chain is the identity), key an
 * unencrypted PEM private key that matches cert when both are given. Run at start, so a bad
 * file is a settings error (exit 2) before anything is announced or bound; rotation later is
 * the transports' (a bad rotated file keeps the old identity). prefix names the option keys.
 * -EINVAL with err naming the key, the path and the problem; -ENOMEM. */
int dfc_tls_files_read(const struct dfc_tls_files *f, const char *prefix, struct dfc_error *err);

/* "off", "server-auth" or "mutual". */
const char *dfc_tls_policy_name(enum dfc_tls_policy p);

#endif /* DFC_TLS_H */
