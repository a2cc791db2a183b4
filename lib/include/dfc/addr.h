/*
 * addr.h - network addresses: "host:port" text and the sockaddrs made from an IP and a port.
 *
 * One parser for every binary: the option schema's address rows (DFC_CFG_ADDR, dfc/config.h:
 * the csi-plugin's IP:PORT endpoints), the configuration's host:port lists
 * (dfc_config_check_hostports: the scheduler addresses dfdaemon resolves, the scheduler's Redis
 * and Sentinel addresses) and a Sentinel's answer. The accepted forms:
 *   host:port      a host name or IPv4 address ("sched.local:8002", "10.0.0.1:8002")
 *   [ipv6]:port    brackets around the host, removed ("[::1]:8002")
 *   ipv6:port      a bare IPv6 address: the LAST colon separates the port ("::1:8002" is host
 *                  "::1", port 8002), as every parser here always did
 * The host is not empty and holds no '[' or ']' (other than the one pair around it); the port
 * is decimal digits only (no sign, no blanks) in 1..65535. Host names are not checked further
 * (resolving them is the caller's business); dfc_addr_parse_ip() also wants a numeric IP.
 *
 * No allocation, no global state; thread-safe. Errors are negative errno and carry no message:
 * every caller words its own (the messages users see are the callers').
 */
#ifndef DFC_ADDR_H
#define DFC_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define DFC_ADDR_HOST_MAX 256 /* a host with its NUL: DNS names are at most 253 bytes */
#define DFC_ADDR_STR_MAX  (DFC_ADDR_HOST_MAX + 8) /* "[host]:65535" with its NUL */

/* A parsed "host:port". */
struct dfc_hostport {
    char host[DFC_ADDR_HOST_MAX]; /* without brackets */
    unsigned port;                /* 1..65535 */
};

/* Parses s as above into *ret. 0; -EINVAL when s is NULL, empty, has no colon, an empty or
 * ill-bracketed host, or a port that is not digits; -ERANGE for a port of 0 or over 65535;
 * -ENAMETOOLONG for a host of DFC_ADDR_HOST_MAX bytes or more. *ret is undefined on error. */
int dfc_addr_parse(const char *s, struct dfc_hostport *ret);

/* dfc_addr_parse() whose host must be a numeric IPv4 or IPv6 address (-EINVAL otherwise). */
int dfc_addr_parse_ip(const char *s, struct dfc_hostport *ret);

/* true when s is a numeric IPv4 or IPv6 address (without brackets). */
bool dfc_addr_is_ip(const char *s);

/* A socket address ready for bind() or connect(). */
struct dfc_sockaddr {
    struct sockaddr_storage ss; /* a sockaddr_in or sockaddr_in6 */
    socklen_t len;              /* its size */
};

/* Builds *ret from a numeric IPv4 or IPv6 address (no brackets) and a port in 0..65535 (0: the
 * kernel picks one at bind). -EINVAL when ip is not one; -ERANGE for a port over 65535. */
int dfc_addr_sockaddr(const char *ip, unsigned port, struct dfc_sockaddr *ret);

/* The port of an AF_INET or AF_INET6 address (after getsockname), 0 for another family. */
unsigned dfc_addr_port(const struct sockaddr_storage *ss);

/* Writes the numeric IP of an AF_INET or AF_INET6 address into out (size at least
 * INET6_ADDRSTRLEN, 46), an IPv4-mapped IPv6 address as IPv4 text ("::ffff:10.0.0.1" is
 * "10.0.0.1"), so one host always reads the same. 0; -EAFNOSUPPORT for another family and
 * -ENOSPC when out is too small, out "" then. */
int dfc_addr_ip(const struct sockaddr *sa, char *out, size_t size);

/* Writes "host:port", or "[host]:port" when host contains a colon (IPv6), into buf
 * (truncated to size, always NUL-terminated when size > 0). */
void dfc_addr_format(const char *host, unsigned port, char *buf, size_t size);

#endif /* DFC_ADDR_H */
