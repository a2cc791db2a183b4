/*
 * raw_copy.c - the reference for the dfdaemon benchmark: copy a file to another file through a
 * Unix socket with plain read(2)/write(2) loops and 4 MiB buffers, one thread on each end.
 * That is the job a streamed import or a streamed export does, minus everything dfdaemon adds
 * (framing, hashing, digests, metadata).
 *
 *   usage: bench_raw_copy SRC DST     prints "<bytes> <seconds>"
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)4 << 20)

struct sender {
    int in_fd, sock;
};

static void die(const char *what) {
    fprintf(stderr, "bench_raw_copy: %s: %m\n", what);
    exit(1);
}

static void *send_main(void *arg) {
    struct sender *s = arg;
    char *buf = malloc(CHUNK);
    for (;;) {
        ssize_t n = read(s->in_fd, buf, CHUNK);
        if (n < 0) {
            die("read source");
        }
        if (n == 0) {
            break;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t k = write(s->sock, buf + off, (size_t)(n - off));
            if (k < 0) {
                die("write socket");
            }
            off += k;
        }
    }
    close(s->sock);
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SRC DST\n", argv[0]);
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
        die("socketpair");
    }
    struct sender s = {open(argv[1], O_RDONLY), sv[0]};
    int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (s.in_fd < 0 || out < 0) {
        die("open");
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t th;
    pthread_create(&th, NULL, send_main, &s);
    char *buf = malloc(CHUNK);
    size_t total = 0;
    for (;;) {
        ssize_t n = read(sv[1], buf, CHUNK);
        if (n < 0) {
            die("read socket");
        }
        if (n == 0) {
            break;
        }
        if (write(out, buf, (size_t)n) != n) {
            die("write destination");
        }
        total += (size_t)n;
    }
    pthread_join(th, NULL);
    if (fsync(out) < 0) {
        die("fsync");
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%zu %.6f\n", total,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    free(buf);
    return 0;
}
