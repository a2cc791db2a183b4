/* Tests for lib/src/addr.c: host:port parsing, sockaddr building and formatting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dfc/addr.h"

static void test_parse_good(void **state) {
    static const struct {
        const char *in, *host;
        unsigned port;
    } ok[] = {
        {"127.0.0.1:8002", "127.0.0.1", 8002},
        {"sched.local:1", "sched.local", 1},
        {"localhost:65535", "localhost", 65535},
        {"[::1]:8002", "::1", 8002},
        {"[fe80::1%eth0]:80", "fe80::1%eth0", 80},
        {"::1:8002", "::1", 8002}, /* bare IPv6: the last colon takes the port */
        {"2001:db8::7:443", "2001:db8::7", 443},
        {"[10.0.0.1]:80", "10.0.0.1", 80},
        {"h:007", "h", 7},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct dfc_hostport hp;
        memset(&hp, 'x', sizeof(hp));
        assert_int_equal(dfc_addr_parse(ok[i].in, &hp), 0);
        assert_string_equal(hp.host, ok[i].host);
        assert_int_equal(hp.port, ok[i].port);
    }
    (void)state;
}

static void test_parse_bad(void **state) {
    static const struct {
        const char *in;
        int want;
    } bad[] = {
        {"", -EINVAL},
        {"localhost", -EINVAL},                 /* missing port */
        {"10.0.0.1:", -EINVAL},                 /* empty port */
        {":8002", -EINVAL},                     /* empty host */
        {"[]:8002", -EINVAL},                   /* empty host in brackets */
        {"[::1:8002", -EINVAL},                 /* unclosed bracket */
        {"::1]:8002", -EINVAL},                 /* stray bracket */
        {"[::1]x:80", -EINVAL},                 /* junk after the bracket */
        {"a[b]:80", -EINVAL},                   /* brackets inside a name */
        {"[[::1]]:80", -EINVAL},                /* doubled brackets */
        {"h:http", -EINVAL},                    /* a service name is not a port */
        {"h:80x", -EINVAL},                     /* trailing junk */
        {"h: 80", -EINVAL},                     /* blanks */
        {"h:+80", -EINVAL},                     /* a sign */
        {"h:-1", -EINVAL},                      /* negative */
        {"h:0", -ERANGE},                       /* port 0 */
        {"h:65536", -ERANGE},                   /* one past the last port */
        {"h:99999999999999999999999", -ERANGE}, /* overflows 64 bits */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct dfc_hostport hp;
        int r = dfc_addr_parse(bad[i].in, &hp);
        if (r != bad[i].want) {
            fprintf(stderr, "`%s`: got %d, want %d\n", bad[i].in, r, bad[i].want);
        }
        assert_int_equal(r, bad[i].want);
    }
    struct dfc_hostport hp;
    assert_int_equal(dfc_addr_parse(NULL, &hp), -EINVAL);
    /* The longest host that fits, and one byte more. */
    char s[DFC_ADDR_HOST_MAX + 16];
    memset(s, 'a', DFC_ADDR_HOST_MAX - 1);
    memcpy(s + DFC_ADDR_HOST_MAX - 1, ":80", 4);
    assert_int_equal(dfc_addr_parse(s, &hp), 0);
    assert_int_equal(strlen(hp.host), DFC_ADDR_HOST_MAX - 1);
    memset(s, 'a', DFC_ADDR_HOST_MAX);
    memcpy(s + DFC_ADDR_HOST_MAX, ":80", 4);
    assert_int_equal(dfc_addr_parse(s, &hp), -ENAMETOOLONG);
    (void)state;
}

static void test_parse_ip(void **state) {
    struct dfc_hostport hp;
    assert_int_equal(dfc_addr_parse_ip("127.0.0.1:9", &hp), 0);
    assert_string_equal(hp.host, "127.0.0.1");
    assert_int_equal(hp.port, 9);
    assert_int_equal(dfc_addr_parse_ip("[::]:9810", &hp), 0);
    assert_string_equal(hp.host, "::");
    assert_int_equal(dfc_addr_parse_ip("::1:9810", &hp), 0);
    assert_string_equal(hp.host, "::1");
    assert_int_equal(dfc_addr_parse_ip("localhost:9", &hp), -EINVAL);
    assert_int_equal(dfc_addr_parse_ip("1.2.3:9", &hp), -EINVAL);
    assert_int_equal(dfc_addr_parse_ip("[::g]:9", &hp), -EINVAL);
    assert_int_equal(dfc_addr_parse_ip("127.0.0.1:0", &hp), -ERANGE);
    assert_int_equal(dfc_addr_parse_ip("127.0.0.1", &hp), -EINVAL);

    assert_true(dfc_addr_is_ip("0.0.0.0"));
    assert_true(dfc_addr_is_ip("::ffff:10.0.0.1"));
    assert_false(dfc_addr_is_ip("[::1]"));
    assert_false(dfc_addr_is_ip(""));
    assert_false(dfc_addr_is_ip(NULL));
    (void)state;
}

static void test_sockaddr(void **state) {
    struct dfc_sockaddr sa;
    assert_int_equal(dfc_addr_sockaddr("127.0.0.1", 8002, &sa), 0);
    assert_int_equal(sa.ss.ss_family, AF_INET);
    assert_int_equal(sa.len, sizeof(struct sockaddr_in));
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&sa.ss;
    assert_int_equal(ntohl(v4->sin_addr.s_addr), INADDR_LOOPBACK);
    assert_int_equal(dfc_addr_port(&sa.ss), 8002);

    assert_int_equal(dfc_addr_sockaddr("::1", 0, &sa), 0);
    assert_int_equal(sa.ss.ss_family, AF_INET6);
    assert_int_equal(sa.len, sizeof(struct sockaddr_in6));
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&sa.ss;
    assert_memory_equal(&v6->sin6_addr, &in6addr_loopback, sizeof(struct in6_addr));
    assert_int_equal(dfc_addr_port(&sa.ss), 0);
    assert_int_equal(dfc_addr_sockaddr("::1", 65535, &sa), 0);
    assert_int_equal(dfc_addr_port(&sa.ss), 65535);

    assert_int_equal(dfc_addr_sockaddr("127.0.0.1", 65536, &sa), -ERANGE);
    assert_int_equal(dfc_addr_sockaddr("[::1]", 1, &sa), -EINVAL);
    assert_int_equal(dfc_addr_sockaddr("localhost", 1, &sa), -EINVAL);
    assert_int_equal(dfc_addr_sockaddr("", 1, &sa), -EINVAL);
    assert_int_equal(dfc_addr_sockaddr(NULL, 1, &sa), -EINVAL);
    assert_int_equal(sa.len, 0);
    struct sockaddr_storage unix_ss = {.ss_family = AF_UNIX};
    assert_int_equal(dfc_addr_port(&unix_ss), 0);
    (void)state;
}

/* A built address is one the kernel binds, and getsockname's port reads back. */
static void test_sockaddr_binds(void **state) {
    struct dfc_sockaddr sa;
    assert_int_equal(dfc_addr_sockaddr("127.0.0.1", 0, &sa), 0);
    int fd = socket(sa.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa.ss, sa.len), 0);
    struct sockaddr_storage got;
    socklen_t len = sizeof(got);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&got, &len), 0);
    assert_int_equal(len, sa.len);
    assert_true(dfc_addr_port(&got) > 0);
    close(fd);
    (void)state;
}

/* The IP of a built address reads back; an IPv4-mapped one reads as IPv4. */
static void test_ip_text(void **state) {
    /* pairs: what the address is built from, how its IP reads */
    static const char *const ips[] = {"10.0.0.1",        "10.0.0.1", "2001:db8::1", "2001:db8::1",
                                      "::ffff:10.0.0.1", "10.0.0.1", "::1",         "::1"};
    char out[INET6_ADDRSTRLEN];
    for (size_t i = 0; i < sizeof(ips) / sizeof(ips[0]); i += 2) {
        struct dfc_sockaddr sa;
        assert_int_equal(dfc_addr_sockaddr(ips[i], 80, &sa), 0);
        assert_int_equal(dfc_addr_ip((const struct sockaddr *)&sa.ss, out, sizeof(out)), 0);
        assert_string_equal(out, ips[i + 1]);
    }
    struct dfc_sockaddr sa;
    assert_int_equal(dfc_addr_sockaddr("192.168.100.200", 80, &sa), 0);
    assert_int_equal(dfc_addr_ip((const struct sockaddr *)&sa.ss, out, 8), -ENOSPC);
    assert_string_equal(out, "");
    struct sockaddr_storage unix_ss = {.ss_family = AF_UNIX};
    snprintf(out, sizeof(out), "x");
    assert_int_equal(dfc_addr_ip((const struct sockaddr *)&unix_ss, out, sizeof(out)),
                     -EAFNOSUPPORT);
    assert_string_equal(out, "");
    (void)state;
}

static void test_format(void **state) {
    char buf[DFC_ADDR_STR_MAX];
    dfc_addr_format("10.0.0.1", 8002, buf, sizeof(buf));
    assert_string_equal(buf, "10.0.0.1:8002");
    dfc_addr_format("::1", 65000, buf, sizeof(buf));
    assert_string_equal(buf, "[::1]:65000");
    dfc_addr_format("sched.local", 1, buf, sizeof(buf));
    assert_string_equal(buf, "sched.local:1");
    dfc_addr_format("::1", 80, buf, 4);
    assert_string_equal(buf, "[::");
    /* What is formatted parses back. */
    struct dfc_hostport hp;
    dfc_addr_format("fe80::2", 443, buf, sizeof(buf));
    assert_int_equal(dfc_addr_parse(buf, &hp), 0);
    assert_string_equal(hp.host, "fe80::2");
    assert_int_equal(hp.port, 443);
    (void)state;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),     cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_parse_ip),       cmocka_unit_test(test_sockaddr),
        cmocka_unit_test(test_sockaddr_binds), cmocka_unit_test(test_format),
        cmocka_unit_test(test_ip_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
