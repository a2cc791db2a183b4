/*
 * http_scrape.h - the tests' side of the HTTP endpoints (dfc/http.h): a raw-socket HTTP/1.0
 * request on 127.0.0.0/8, and a check of a /metrics body by a real Prometheus text-format parser
 * (Debian's python3-prometheus-client, text_string_to_metric_families), which also flattens the
 * samples into lines the tests look values up in.
 *
 * Ownership: bodies and parsed texts are malloc'ed and the caller's to free.
 */
#ifndef DFC_TEST_HTTP_SCRAPE_H
#define DFC_TEST_HTTP_SCRAPE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

static inline int test_http_request_(const char *ip, unsigned port, const char *method,
                                     const char *path, char **ret_body);

/* Sends "<method> <path> HTTP/1.0" to ip:port and reads the whole answer (at most 8 MiB, 10 s).
 * Returns the status code with *ret_body set to the body (NUL-terminated), or -errno with
 * *ret_body an empty string: the caller frees *ret_body either way, never NULL. */
static inline int test_http_request(const char *ip, unsigned port, const char *method,
                                    const char *path, char **ret_body) {
    int r = test_http_request_(ip, port, method, path, ret_body);
    if (*ret_body == NULL && (*ret_body = calloc(1, 1)) == NULL) {
        abort();
    }
    return r;
}

static inline int test_http_request_(const char *ip, unsigned port, const char *method,
                                     const char *path, char **ret_body) {
    *ret_body = NULL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        return -EINVAL;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    char req[512];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: %s\r\n\r\n", method, path, ip);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -EIO;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        abort();
    }
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10000) != 1) {
            free(buf);
            close(fd);
            return -ETIMEDOUT;
        }
        if (len + 1 >= cap) {
            if (cap >= (8u << 20)) {
                free(buf);
                close(fd);
                return -EFBIG;
            }
            cap *= 2;
            if ((buf = realloc(buf, cap)) == NULL) {
                abort();
            }
        }
        ssize_t k = read(fd, buf + len, cap - len - 1);
        if (k < 0) {
            free(buf);
            close(fd);
            return -EIO;
        }
        if (k == 0) {
            break;
        }
        len += (size_t)k;
    }
    close(fd);
    buf[len] = '\0';
    int status = 0;
    char *body = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || body == NULL) {
        free(buf);
        return -EBADMSG;
    }
    body += 4;
    memmove(buf, body, strlen(body) + 1);
    *ret_body = buf;
    return status;
}

/* A GET of path on 127.0.0.1:port, as test_http_request(). */
static inline int test_http_get(unsigned port, const char *path, char **ret_body) {
    return test_http_request("127.0.0.1", port, "GET", path, ret_body);
}

/* Slowloris against a real endpoint: 40 connections to 127.0.0.1:port, eight from each of
 * 127.0.0.1 .. 127.0.0.5, send their request a byte at a time and never finish it; meanwhile
 * five GET /healthz from 127.0.0.1, 300 ms apart. Returns how many of the probes were answered
 * 200 within a second each (the kubelet's default probe timeout). */
static inline int test_http_probes_under_slowloris(unsigned port) {
    enum { ADDRS = 5, N = 40, PROBES = 5 };
    int slow[N];
    for (int i = 0; i < N; i++) {
        char from[16];
        snprintf(from, sizeof(from), "127.0.0.%d", 1 + i % ADDRS);
        struct sockaddr_in b = {.sin_family = AF_INET};
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, from, &b.sin_addr);
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        slow[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (slow[i] < 0 || bind(slow[i], (struct sockaddr *)&b, sizeof(b)) < 0 ||
            connect(slow[i], (struct sockaddr *)&a, sizeof(a)) < 0) {
            abort();
        }
        (void)send(slow[i], "G", 1, MSG_NOSIGNAL);
    }
    usleep(200000);
    int answered = 0;
    const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
    for (int probe = 0; probe < PROBES; probe++) {
        for (int i = 0; i < N; i++) {
            (void)send(slow[i], "E", 1, MSG_NOSIGNAL);
        }
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
            abort();
        }
        char buf[512];
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t k = -1;
        if (write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1 && poll(&p, 1, 1000) == 1) {
            k = read(fd, buf, sizeof(buf) - 1);
        }
        if (k > 0) {
            buf[k] = '\0';
            answered += strstr(buf, " 200 ") != NULL;
        }
        close(fd);
        usleep(300000);
    }
    for (int i = 0; i < N; i++) {
        close(slow[i]);
    }
    return answered;
}

/* The parser: reads the exposition on stdin; on success prints one line per sample,
 * `name{k="v",...} value` with labels sorted by name and their values as JSON strings and the value
 * as %.17g, and exits 0; on a parse error, or a histogram whose buckets are not cumulative or whose
 * +Inf bucket differs from its _count, prints the fault on stderr and exits 1. */
static const char test_prom_parser[] =
    "import json, sys\n"
    "from prometheus_client.parser import text_string_to_metric_families\n"
    "text = sys.stdin.read()\n"
    "out = []\n"
    "for fam in text_string_to_metric_families(text):\n"
    "    assert fam.type in ('counter', 'gauge', 'histogram'), fam.type\n"
    "    buckets = {}\n"
    "    counts = {}\n"
    "    for s in fam.samples:\n"
    "        labels = dict(s.labels)\n"
    "        key = tuple(sorted((k, v) for k, v in labels.items() if k != 'le'))\n"
    "        if s.name.endswith('_bucket'):\n"
    "            buckets.setdefault(key, []).append((float(labels['le']), s.value))\n"
    "        if s.name.endswith('_count') and fam.type == 'histogram':\n"
    "            counts[key] = s.value\n"
    "        lab = ','.join('%s=%s' % (k, json.dumps(v)) for k, v in sorted(labels.items()))\n"
    "        out.append('%s{%s} %.17g' % (s.name, lab, s.value))\n"
    "    for key, bs in buckets.items():\n"
    "        bs.sort()\n"
    "        assert bs[-1][0] == float('inf'), 'no +Inf bucket in %s' % fam.name\n"
    "        for a, b in zip(bs, bs[1:]):\n"
    "            assert a[1] <= b[1], 'buckets of %s not cumulative' % fam.name\n"
    "        assert bs[-1][1] == counts[key], '+Inf bucket != _count in %s' % fam.name\n"
    "print('\\n'.join(out))\n";

/* Runs the parser over text. Returns 0 with *ret_flat set (the flattened samples, one a line,
 * each ending in a newline), or -1 when the parser refused the text (its message on stderr). */
static inline int test_prom_parse(const char *text, char **ret_flat) {
    *ret_flat = NULL;
    if (text == NULL) {
        return -1;
    }
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        /* Debian's interpreter, where python3-prometheus-client is installed. */
        execl("/usr/bin/python3", "python3", "-c", test_prom_parser, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* The parser reads all of stdin before it writes: write everything, then read. */
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t k = write(in[1], text + off, len - off);
        if (k <= 0) {
            break;
        }
        off += (size_t)k;
    }
    close(in[1]);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        abort();
    }
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            if ((buf = realloc(buf, cap)) == NULL) {
                abort();
            }
        }
        ssize_t k = read(out[0], buf + n, cap - n - 1);
        if (k <= 0) {
            break;
        }
        n += (size_t)k;
    }
    close(out[0]);
    buf[n] = '\0';
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        free(buf);
        return -1;
    }
    *ret_flat = buf;
    return 0;
}

/* The value of the sample `series` ("name{k=\"v\"}", labels sorted, `{}` for none) in a
 * flattened parse, or -1 when absent. */
static inline double test_prom_value(const char *flat, const char *series) {
    size_t n = strlen(series);
    for (const char *p = flat; p != NULL && *p != '\0';) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ') {
            return strtod(p + n + 1, NULL);
        }
        p = strchr(p, '\n');
        p = p != NULL ? p + 1 : NULL;
    }
    return -1;
}

/* The value of the sample named by fmt (printf-style, as test_prom_value's series) in a
 * flattened parse, 0 when absent. */
static inline double test_prom_sample(const char *flat, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline double test_prom_sample(const char *flat, const char *fmt, ...) {
    char series[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(series, sizeof(series), fmt, ap);
    va_end(ap);
    double v = test_prom_value(flat, series);
    return v < 0 ? 0 : v;
}

/* For cmocka tests (include <cmocka.h> first): GET /metrics on 127.0.0.1:port, which must
 * answer 200, checked and flattened by the real parser (the test fails when it refuses the
 * exposition). The flattened samples; the caller frees them. */
#ifdef cmocka_unit_test
static inline char *test_prom_scrape(unsigned port) {
    char *body, *flat;
    assert_int_equal(test_http_get(port, "/metrics", &body), 200);
    if (test_prom_parse(body, &flat) != 0) {
        fail_msg("the parser refused the exposition:\n%s", body);
    }
    free(body);
    return flat;
}
#endif

#endif /* DFC_TEST_HTTP_SCRAPE_H */
