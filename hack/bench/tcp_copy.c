/*
 * tcp_copy.c - the reference for the P2P benchmark (hack/bench/p2p.sh): a file copied over
 * plain TCP between the same loopback addresses the P2P fetch uses, with nothing dfdaemon adds
 * (no framing, CRC, scheduler, metadata). The file is cut into as many contiguous stripes as
 * there are senders; each sender listens on its own address, accepts one connection and
 * sendfile()s its stripe; the receiver connects to every sender from its own address (one
 * thread per sender), reads into 4 MiB buffers and pwrite()s each stripe at its offset in the
 * output, then fsyncs. Timed from the first connect to the end of the fsync.
 *
 *   usage: bench_tcp_copy [-b BYTES] SRC DST RECEIVER_IP SENDER_IP...
 *   prints "<bytes> <seconds>"
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK       ((size_t)4 << 20)
#define MAX_SENDERS 16

/* -b BYTES: SO_SNDBUF on each sender's and SO_RCVBUF on each receiver's socket
 * (before connect, so the window scale fits), as the Vortex client and server set them;
 * unset or 0: the kernel's autotuned defaults. */
static int sockbuf;

struct stripe {
    const char *src, *dst, *receiver_ip, *sender_ip;
    int listen_fd;
    uint16_t port;
    off_t offset;
    size_t length;
};

static void die(const char *what) {
    fprintf(stderr, "bench_tcp_copy: %s: %m\n", what);
    exit(1);
}

static struct sockaddr_in addr_of(const char *ip, uint16_t port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "bench_tcp_copy: %s is not an IPv4 address\n", ip);
        exit(2);
    }
    if ((ntohl(a.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "bench_tcp_copy: %s is outside 127.0.0.0/8\n", ip);
        exit(2);
    }
    return a;
}

/* Binds a listener on the sender's address, any free port. */
static void listen_on(struct stripe *s) {
    struct sockaddr_in a = addr_of(s->sender_ip, 0);
    socklen_t len = sizeof(a);
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(s->listen_fd, 1) < 0 || getsockname(s->listen_fd, (struct sockaddr *)&a, &len) < 0) {
        die("listen");
    }
    s->port = ntohs(a.sin_port);
}

static void *send_main(void *arg) {
    struct stripe *s = arg;
    int c = accept(s->listen_fd, NULL, NULL);
    int in = open(s->src, O_RDONLY | O_CLOEXEC);
    if (c >= 0 && sockbuf > 0 &&
        setsockopt(c, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf)) < 0) {
        die("SO_SNDBUF");
    }
    if (c < 0 || in < 0) {
        die("accept or open source");
    }
    off_t off = s->offset;
    size_t left = s->length;
    while (left > 0) {
        ssize_t n = sendfile(c, in, &off, left);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            die("sendfile");
        }
        left -= (size_t)n;
    }
    close(in);
    close(c);
    close(s->listen_fd);
    return NULL;
}

static void *recv_main(void *arg) {
    struct stripe *s = arg;
    struct sockaddr_in local = addr_of(s->receiver_ip, 0);
    struct sockaddr_in peer = addr_of(s->sender_ip, s->port);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (c < 0 || setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        (sockbuf > 0 && setsockopt(c, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf)) < 0) ||
        bind(c, (struct sockaddr *)&local, sizeof(local)) < 0 ||
        connect(c, (struct sockaddr *)&peer, sizeof(peer)) < 0) {
        die("connect");
    }
    int out = open(s->dst, O_WRONLY | O_CLOEXEC);
    char *buf = malloc(CHUNK);
    if (out < 0 || buf == NULL) {
        die("open destination");
    }
    off_t off = s->offset;
    size_t left = s->length;
    while (left > 0) {
        ssize_t n = read(c, buf, left < CHUNK ? left : CHUNK);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            die("read socket");
        }
        for (ssize_t done = 0; done < n;) {
            ssize_t k = pwrite(out, buf + done, (size_t)(n - done), off + done);
            if (k < 0) {
                die("write destination");
            }
            done += k;
        }
        off += n;
        left -= (size_t)n;
    }
    free(buf);
    close(out);
    close(c);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "-b") == 0) {
        char *end;
        long b = strtol(argv[2], &end, 10);
        if (end == argv[2] || *end != '\0' || b < 0 || b > (1L << 30)) {
            fprintf(stderr, "%s: -b `%s` is not a byte count\n", argv[0], argv[2]);
            return 2;
        }
        sockbuf = (int)b;
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
    }
    if (argc < 5 || argc - 4 > MAX_SENDERS) {
        fprintf(stderr, "usage: %s [-b BYTES] SRC DST RECEIVER_IP SENDER_IP... (1..%d senders)\n",
                argv[0], MAX_SENDERS);
        return 2;
    }
    const char *src = argv[1], *dst = argv[2];
    size_t n = (size_t)argc - 4;
    for (int i = 3; i < argc; i++) {
        (void)addr_of(argv[i], 0); /* exits on an address outside 127.0.0.0/8 */
    }
    struct stat st;
    if (stat(src, &st) < 0) {
        die("stat source");
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        die("create destination");
    }
    struct stripe stripes[MAX_SENDERS];
    size_t size = (size_t)st.st_size, per = (size / n + CHUNK - 1) / CHUNK * CHUNK;
    for (size_t i = 0; i < n; i++) {
        size_t start = i * per < size ? i * per : size;
        size_t end = start + per < size ? start + per : size;
        stripes[i] = (struct stripe){.src = src,
                                     .dst = dst,
                                     .receiver_ip = argv[3],
                                     .sender_ip = argv[4 + i],
                                     .offset = (off_t)start,
                                     .length = end - start};
        listen_on(&stripes[i]);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t senders[MAX_SENDERS], receivers[MAX_SENDERS];
    for (size_t i = 0; i < n; i++) {
        if (pthread_create(&senders[i], NULL, send_main, &stripes[i]) != 0 ||
            pthread_create(&receivers[i], NULL, recv_main, &stripes[i]) != 0) {
            die("pthread_create");
        }
    }
    for (size_t i = 0; i < n; i++) {
        pthread_join(receivers[i], NULL);
        pthread_join(senders[i], NULL);
    }
    if (fsync(out) < 0) {
        die("fsync");
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    close(out);
    printf("%zu %.6f\n", size,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    return 0;
}
