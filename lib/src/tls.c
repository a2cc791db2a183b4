/*
 * tls.c - TLS policy resolution, the check that each side's certificate files are given, and
 * the start-time read of those files (dfc/tls.h). Watching the files for rotation is the
 * transport's job (gRPC core, OpenSSL).
 */
#include "dfc/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *const dfc_tls_policy_choices[] = {"auto", "off", "server-auth", "mutual", NULL};

static bool given(const char *path) {
    return path != NULL && path[0] != '\0';
}

bool dfc_tls_files_any(const struct dfc_tls_files *f) {
    return given(f->ca_cert) || given(f->cert) || given(f->key);
}

enum dfc_tls_policy dfc_tls_policy_resolve(const char *choice, bool any_files) {
    if (strcasecmp(choice, "off") == 0) {
        return DFC_TLS_OFF;
    }
    if (strcasecmp(choice, "server-auth") == 0) {
        return DFC_TLS_SERVER_AUTH;
    }
    if (strcasecmp(choice, "mutual") == 0) {
        return DFC_TLS_MUTUAL;
    }
    return any_files ? DFC_TLS_MUTUAL : DFC_TLS_OFF;
}

const char *dfc_tls_policy_name(enum dfc_tls_policy p) {
    switch (p) {
    case DFC_TLS_SERVER_AUTH:
        return "server-auth";
    case DFC_TLS_MUTUAL:
        return "mutual";
    case DFC_TLS_OFF:
        break;
    }
    return "off";
}

int dfc_tls_files_check(enum dfc_tls_policy p, const struct dfc_tls_files *f, bool server,
                        const char *prefix, struct dfc_error *err) {
    if (p == DFC_TLS_OFF) {
        return 0;
    }
    bool mutual = p == DFC_TLS_MUTUAL;
    const char *missing = NULL;
    if ((server || mutual) && !given(f->cert)) {
        missing = "cert";
    } else if ((server || mutual) && !given(f->key)) {
        missing = "key";
    } else if ((!server || mutual) && !given(f->ca_cert)) {
        missing = "caCert";
    }
    if (missing != NULL) {
        return dfc_error_set(err, -EINVAL, "%s%s is required: the TLS policy is %s", prefix,
                             missing, dfc_tls_policy_name(p));
    }
    return 0;
}

/* Opens path for OpenSSL's PEM readers; the message names prefix+key. */
static int open_pem(const char *prefix, const char *key, const char *path, BIO **ret,
                    struct dfc_error *err) {
    FILE *fp = fopen(path, "re");
    if (fp == NULL) {
        const char *why = strerrordesc_np(errno); /* the libc text, as a shell would say it */
        return dfc_error_set(err, -EINVAL, "%s%s `%s`: cannot read it: %s", prefix, key, path,
                             why != NULL ? why : "unknown error");
    }
    *ret = BIO_new_fp(fp, BIO_CLOSE);
    if (*ret == NULL) {
        fclose(fp);
        return dfc_error_set(err, -ENOMEM, "%s%s `%s`: out of memory", prefix, key, path);
    }
    return 0;
}

/* Counts the PEM certificates in path (0 is an error); *first (may be NULL) gets the first. */
static int read_certs(const char *prefix, const char *key, const char *path, X509 **first,
                      struct dfc_error *err) {
    BIO *b = NULL;
    int r = open_pem(prefix, key, path, &b, err);
    if (r < 0) {
        return r;
    }
    int n = 0;
    X509 *x;
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
        if (n++ == 0 && first != NULL) {
            *first = x;
        } else {
            X509_free(x);
        }
    }
    ERR_clear_error(); /* the read past the last certificate */
    BIO_free(b);
    if (n == 0) {
        return dfc_error_set(err, -EINVAL, "%s%s `%s` holds no PEM certificate", prefix, key, path);
    }
    return n;
}

/* An encrypted key is refused, never prompted for. */
static int no_passphrase(char *buf, int size, int rwflag, void *u) {
    (void)rwflag, (void)u;
    if (size > 0) {
        buf[0] = '\0'; /* an empty passphrase, and 0: none given */
    }
    return 0;
}

int dfc_tls_files_read(const struct dfc_tls_files *f, const char *prefix, struct dfc_error *err) {
    X509 *cert = NULL;
    EVP_PKEY *pkey = NULL;
    BIO *b = NULL;
    int r = 0;
    if (given(f->ca_cert) && (r = read_certs(prefix, "caCert", f->ca_cert, NULL, err)) < 0) {
        return r;
    }
    if (given(f->cert) && (r = read_certs(prefix, "cert", f->cert, &cert, err)) < 0) {
        return r;
    }
    if (given(f->key)) {
        if ((r = open_pem(prefix, "key", f->key, &b, err)) < 0) {
            goto out;
        }
        pkey = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL);
        ERR_clear_error();
        BIO_free(b);
        if (pkey == NULL) {
            r = dfc_error_set(err, -EINVAL, "%skey `%s` holds no unencrypted PEM private key",
                              prefix, f->key);
            goto out;
        }
    }
    if (cert != NULL && pkey != NULL && X509_check_private_key(cert, pkey) != 1) {
        ERR_clear_error();
        r = dfc_error_set(err, -EINVAL, "%skey `%s` does not match %scert `%s`", prefix, f->key,
                          prefix, f->cert);
    }
out:
    X509_free(cert);
    EVP_PKEY_free(pkey);
    return r < 0 ? r : 0;
}
