/*
 * id.c - uuid, host and peer ids, and the node's preferred IP.
 */
#include "dfc/id.h"

#include <netinet/in.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

#include "dfc/addr.h"

void dfc_uuid_v4(char out[DFC_UUID_STR_LEN + 1]) {
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, out);
}

int dfc_host_id(const char *ip, const char *hostname, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s-%s", ip, hostname);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int dfc_peer_id(const char *ip, const char *hostname, char *buf, size_t size) {
    char uuid[DFC_UUID_STR_LEN + 1];
    dfc_uuid_v4(uuid);
    int n = snprintf(buf, size, "%s-%s-%s", ip, hostname, uuid);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

void dfc_local_ip(char out[DFC_IP_STR_MAX]) {
    struct ifaddrs *ifs = NULL;
    snprintf(out, DFC_IP_STR_MAX, "127.0.0.1");
    if (getifaddrs(&ifs) < 0) {
        return;
    }
    int found6 = 0;
    for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) {
            continue;
        }
        if (i->ifa_addr->sa_family == AF_INET) {
            dfc_addr_ip(i->ifa_addr, out, DFC_IP_STR_MAX);
            break;
        }
        if (i->ifa_addr->sa_family == AF_INET6 && !found6 &&
            !IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr)) {
            dfc_addr_ip(i->ifa_addr, out, DFC_IP_STR_MAX);
            found6 = 1;
        }
    }
    freeifaddrs(ifs);
}
