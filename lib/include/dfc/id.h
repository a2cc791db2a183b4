/*
 * id.h - identifiers as Dragonfly builds them: uuid v4 (libuuid), host id "{ip}-{hostname}",
 * peer id "{ip}-{hostname}-{uuid}".
 */
#ifndef DFC_ID_H
#define DFC_ID_H

#include <stddef.h>

#define DFC_UUID_STR_LEN 36
#define DFC_IP_STR_MAX   46 /* INET6_ADDRSTRLEN */

/* Writes a random (v4) uuid in lowercase canonical form and a NUL. */
void dfc_uuid_v4(char out[DFC_UUID_STR_LEN + 1]);

/* Writes "{ip}-{hostname}" to buf. -ENAMETOOLONG when it does not fit. */
int dfc_host_id(const char *ip, const char *hostname, char *buf, size_t size);

/* Writes "{ip}-{hostname}-{uuid v4}" to buf. -ENAMETOOLONG when it does not fit. */
int dfc_peer_id(const char *ip, const char *hostname, char *buf, size_t size);

/* Finds the address Dragonfly would announce: the first non-loopback, up IPv4 address, else
 * the first such IPv6 address, else "127.0.0.1". Never fails. */
void dfc_local_ip(char out[DFC_IP_STR_MAX]);

#endif /* DFC_ID_H */
