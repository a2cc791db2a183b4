/*
 * addr.c - "host:port" parsing and sockaddr building (dfc/addr.h).
 */
#include "dfc/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dfc/units.h"

int dfc_addr_parse(const char *s, struct dfc_hostport *ret) {
    const char *colon = s != NULL ? strrchr(s, ':') : NULL;
    if (colon == NULL) {
        return -EINVAL;
    }
    const char *host = s;
    size_t len = (size_t)(colon - s);
    if (len >= 2 && s[0] == '[' && colon[-1] == ']') {
        host++;
        len -= 2;
    }
    if (len == 0 || memchr(host, '[', len) != NULL || memchr(host, ']', len) != NULL) {
        return -EINVAL;
    }
    uint64_t port;
    int r = dfc_parse_u64(colon + 1, &port); /* -EINVAL: not digits; -ERANGE: too many */
    if (r < 0) {
        return r;
    }
    if (port < 1 || port > 65535) {
        return -ERANGE;
    }
    if (len >= sizeof(ret->host)) {
        return -ENAMETOOLONG;
    }
    memcpy(ret->host, host, len);
    ret->host[len] = '\0';
    ret->port = (unsigned)port;
    return 0;
}

bool dfc_addr_is_ip(const char *s) {
    unsigned char buf[sizeof(struct in6_addr)];
    return s != NULL && (inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1);
}

int dfc_addr_parse_ip(const char *s, struct dfc_hostport *ret) {
    int r = dfc_addr_parse(s, ret);
    if (r == 0 && !dfc_addr_is_ip(ret->host)) {
        return -EINVAL;
    }
    return r;
}

int dfc_addr_sockaddr(const char *ip, unsigned port, struct dfc_sockaddr *ret) {
    memset(ret, 0, sizeof(*ret));
    if (port > 65535) {
        return -ERANGE;
    }
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ret->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ret->ss;
    if (ip != NULL && inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        ret->len = sizeof(*v4);
    } else if (ip != NULL && inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        ret->len = sizeof(*v6);
    } else {
        memset(ret, 0, sizeof(*ret));
        return -EINVAL;
    }
    return 0;
}

unsigned dfc_addr_port(const struct sockaddr_storage *ss) {
    if (ss->ss_family == AF_INET) {
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    }
    if (ss->ss_family == AF_INET6) {
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    }
    return 0;
}

int dfc_addr_ip(const struct sockaddr *sa, char *out, size_t size) {
    const void *src = NULL;
    int family = sa->sa_family;
    if (family == AF_INET) {
        src = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    } else if (family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        src = a;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            family = AF_INET;
            src = &a->s6_addr[12];
        }
    }
    if (size > 0) {
        out[0] = '\0';
    }
    if (src == NULL) {
        return -EAFNOSUPPORT;
    }
    if (size > (socklen_t)-1 || inet_ntop(family, src, out, (socklen_t)size) == NULL) {
        if (size > 0) {
            out[0] = '\0';
        }
        return -ENOSPC;
    }
    return 0;
}

void dfc_addr_format(const char *host, unsigned port, char *buf, size_t size) {
    if (size > 0) {
        snprintf(buf, size, strchr(host, ':') != NULL ? "[%s]:%u" : "%s:%u", host, port);
    }
}
