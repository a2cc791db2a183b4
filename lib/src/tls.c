/*
 * tls.c - TLS policy resolution and the check that each side's certificate files are given
 * (dfc/tls.h). Reading and watching the files is the transport's job (gRPC core, OpenSSL).
 */
#include "dfc/tls.h"

#include <errno.h>
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
