/*
 * rpc_stream.c - throughput of the RPC layer against a raw Unix-socket copy, in one run.
 *
 * Moves the same bytes (default 1 GiB in 4 MiB messages) over real Unix sockets, each way three
 * times, and prints the median MB/s and the ratio to the raw copy.
 *
 * memory to memory (the transport alone):
 *   raw     a write(2) loop into a Unix socket, a read(2) loop out of it (the reference)
 *   put     client-streaming RPC: the client sends, the handler receives and discards
 *   get     server-streaming RPC: the handler sends, the client receives and discards
 * Both RPC directions send with the zero-copy bulk path (rpc_bulk.h), as the daemon does for
 * piece content, and receive with it (*_recv_bulk: the bytes stay in gRPC's slices), as the
 * daemon's streamed import and dfcache's streamed export do.
 *
 * file to file (what a streamed import does; files in /dev/shm so the disk does not decide):
 *   raw     read(2) the source file into a buffer, write(2) it to the socket; the other side
 *           read(2)s the socket and write(2)s the destination file (the reference)
 *   put     pread(2) the source into a bulk buffer per message, send it zero-copy; the
 *           handler writev(2)s each message's bytes, from gRPC's slices, to the destination
 *
 *   usage: bench_rpc_stream [total_MiB [chunk_KiB]]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dfc/fs.h"
#include "dfc/rpc_bulk.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"
#include "test/rpc_test.pb-c.h"

#define RUNS 3

static size_t total_bytes = (size_t)1 << 30;
static size_t chunk_bytes = (size_t)4 << 20;
static uint8_t *chunk;
static struct dfc_rpc_bulk *bulk;         /* the same bytes, for the zero-copy send path */
static char src_path[256], dst_path[256]; /* file-to-file mode */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_rpc_stream: %s: %m\n", what);
    exit(1);
}

/* ---- raw Unix-socket copy ---- */

struct raw_reader {
    int listen_fd;
    int out_fd; /* -1: discard */
    size_t got;
};

static void *raw_read_main(void *arg) {
    struct raw_reader *r = arg;
    int fd = accept(r->listen_fd, NULL, NULL);
    if (fd < 0) {
        die("accept");
    }
    uint8_t *buf = malloc(chunk_bytes);
    for (;;) {
        ssize_t n = read(fd, buf, chunk_bytes);
        if (n <= 0) {
            break;
        }
        r->got += (size_t)n;
        if (r->out_fd >= 0 && write(r->out_fd, buf, (size_t)n) != n) {
            die("write destination");
        }
    }
    free(buf);
    close(fd);
    return NULL;
}

/* from_file: read the source file instead of sending the in-memory chunk; the reader then
 * writes what it gets to the destination file. */
static double run_raw(const char *dir, bool from_file) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/raw.sock", dir);
    unlink(sa.sun_path);
    struct raw_reader r = {.listen_fd = socket(AF_UNIX, SOCK_STREAM, 0), .out_fd = -1};
    int in_fd = -1;
    uint8_t *buf = chunk;
    if (from_file) {
        r.out_fd = open(dst_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        in_fd = open(src_path, O_RDONLY);
        buf = malloc(chunk_bytes);
        if (r.out_fd < 0 || in_fd < 0 || buf == NULL) {
            die("open bench files");
        }
    }
    if (bind(r.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(r.listen_fd, 1) < 0) {
        die("bind raw socket");
    }
    pthread_t th;
    pthread_create(&th, NULL, raw_read_main, &r);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        die("connect raw socket");
    }
    double t0 = now_s();
    for (size_t sent = 0; sent < total_bytes; sent += chunk_bytes) {
        if (from_file && read(in_fd, buf, chunk_bytes) != (ssize_t)chunk_bytes) {
            die("read source");
        }
        for (size_t off = 0; off < chunk_bytes;) {
            ssize_t n = write(fd, buf + off, chunk_bytes - off);
            if (n < 0) {
                die("write");
            }
            off += (size_t)n;
        }
    }
    close(fd);
    pthread_join(th, NULL);
    double dt = now_s() - t0;
    if (from_file) {
        close(in_fd);
        close(r.out_fd);
        free(buf);
    }
    close(r.listen_fd);
    unlink(sa.sun_path);
    if (r.got != total_bytes) {
        fprintf(stderr, "raw copy moved %zu of %zu bytes\n", r.got, total_bytes);
        exit(1);
    }
    return (double)total_bytes / dt / 1e6;
}

/* ---- RPC handlers ---- */

static int put(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
               ProtobufCMessage *resp, struct dfc_error *err) {
    /* A first message with bulk set asks for the bytes to be written to the destination. */
    Dfc__Test__V1__Summary *out = (Dfc__Test__V1__Summary *)resp;
    ProtobufCMessage *m;
    struct dfc_rpc_bulk_in *in; /* the chunk's bytes, left in gRPC's slices (as an import) */
    int r, fd = -1;
    while ((r = dfc_rpc_call_recv_bulk(call, &m, &in, err)) > 0) {
        Dfc__Test__V1__Chunk *c = (Dfc__Test__V1__Chunk *)m;
        if (out->count == 0 && c->bulk) {
            fd = open(dst_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0) {
                die("open destination");
            }
        }
        struct iovec one;
        const struct iovec *iov;
        int n = dfc_rpc_bulk_in_iov(in, &c->data, &one, &iov);
        if (fd >= 0 && dfc_writev_all(fd, iov, n, -1) < 0) {
            die("write destination");
        }
        out->bytes += c->data.len;
        out->count++;
        dfc_rpc_bulk_in_free(in);
        dfc_rpc_msg_free(m);
    }
    if (fd >= 0) {
        close(fd);
    }
    return r;
}

static int get(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
               ProtobufCMessage *resp, struct dfc_error *err) {
    const Dfc__Test__V1__Chunk *in = (const Dfc__Test__V1__Chunk *)req;
    for (uint64_t i = 0; i < in->seq; i++) {
        Dfc__Test__V1__Chunk out = DFC__TEST__V1__CHUNK__INIT;
        out.seq = i;
        out.data.data = dfc_rpc_bulk_data(bulk);
        out.data.len = chunk_bytes;
        int r = dfc_rpc_call_send_bulk(call, &out.base, bulk, err);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int unused(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                  ProtobufCMessage *resp, struct dfc_error *err) {
    return -ENOSYS;
}

static const struct dfc_rpc_method methods[] = {
    DFC_RPC_METHOD("Echo", DFC_RPC_UNARY, dfc__test__v1__chunk, dfc__test__v1__chunk, unused),
    DFC_RPC_METHOD("Put", DFC_RPC_CLIENT_STREAM, dfc__test__v1__chunk, dfc__test__v1__summary, put),
    DFC_RPC_METHOD("Get", DFC_RPC_SERVER_STREAM, dfc__test__v1__chunk, dfc__test__v1__chunk, get),
    DFC_RPC_METHOD("Chat", DFC_RPC_BIDI_STREAM, dfc__test__v1__chunk, dfc__test__v1__chunk, unused),
};

/* The methods the client calls, resolved in main(). */
static struct dfc_rpc_client_method put_m, get_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(dfc__test__v1__rpc_test, "Put", &put_m),
    DFC_RPC_CLIENT_METHOD(dfc__test__v1__rpc_test, "Get", &get_m),
};

static void check(int r, const struct dfc_error *err, const char *what) {
    if (r < 0) {
        fprintf(stderr, "bench_rpc_stream: %s: %s\n", what, dfc_error_msg(err));
        exit(1);
    }
}

static double run_put(struct dfc_rpc_client *c, bool from_file) {
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    int in_fd = from_file ? open(src_path, O_RDONLY) : -1;
    if (from_file && in_fd < 0) {
        die("open source");
    }
    double t0 = now_s();
    check(dfc_rpc_stream_open(c, &put_m, 600000, &st, &err), &err, "open");
    for (size_t sent = 0; sent < total_bytes; sent += chunk_bytes) {
        Dfc__Test__V1__Chunk m = DFC__TEST__V1__CHUNK__INIT;
        struct dfc_rpc_bulk *b = bulk;
        if (from_file) { /* a fresh buffer per message, filled straight from the file */
            b = dfc_rpc_bulk_new(chunk_bytes);
            if (pread(in_fd, dfc_rpc_bulk_data(b), chunk_bytes, (off_t)sent) !=
                (ssize_t)chunk_bytes) {
                die("pread source");
            }
            m.bulk = sent == 0;
        }
        m.data.data = dfc_rpc_bulk_data(b);
        m.data.len = chunk_bytes;
        check(dfc_rpc_stream_send_bulk(st, &m.base, b, &err), &err, "send");
        if (b != bulk) {
            dfc_rpc_bulk_free(b);
        }
    }
    check(dfc_rpc_stream_close_send(st, &err), &err, "close_send");
    ProtobufCMessage *resp;
    check(dfc_rpc_stream_recv(st, put_m.resp, &resp, &err), &err, "recv");
    check(dfc_rpc_stream_finish(st, &err), &err, "finish");
    double dt = now_s() - t0;
    if (((Dfc__Test__V1__Summary *)resp)->bytes != total_bytes) {
        fprintf(stderr, "put moved the wrong byte count\n");
        exit(1);
    }
    dfc_rpc_msg_free(resp);
    dfc_rpc_stream_free(st);
    if (in_fd >= 0) {
        close(in_fd);
    }
    return (double)total_bytes / dt / 1e6;
}

static double run_get(struct dfc_rpc_client *c) {
    struct dfc_error err;
    struct dfc_rpc_stream *st;
    Dfc__Test__V1__Chunk req = DFC__TEST__V1__CHUNK__INIT;
    req.seq = total_bytes / chunk_bytes;
    double t0 = now_s();
    check(dfc_rpc_stream_open(c, &get_m, 600000, &st, &err), &err, "open");
    check(dfc_rpc_stream_send(st, &req.base, &err), &err, "send");
    check(dfc_rpc_stream_close_send(st, &err), &err, "close_send");
    size_t got = 0;
    ProtobufCMessage *m;
    int r;
    struct dfc_rpc_bulk_in *in;
    while ((r = dfc_rpc_stream_recv_bulk(st, get_m.resp, &m, &in, &err)) > 0) {
        got += ((Dfc__Test__V1__Chunk *)m)->data.len;
        dfc_rpc_bulk_in_free(in);
        dfc_rpc_msg_free(m);
    }
    check(r, &err, "recv");
    double dt = now_s() - t0;
    dfc_rpc_stream_free(st);
    if (got != total_bytes) {
        fprintf(stderr, "get moved %zu of %zu bytes\n", got, total_bytes);
        exit(1);
    }
    return (double)total_bytes / dt / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v) {
    qsort(v, RUNS, sizeof(double), cmp_double);
    return v[RUNS / 2];
}

int main(int argc, char **argv) {
    if (argc > 1) {
        total_bytes = (size_t)strtoull(argv[1], NULL, 10) << 20;
    }
    if (argc > 2) {
        chunk_bytes = (size_t)strtoull(argv[2], NULL, 10) << 10;
    }
    if (total_bytes == 0 || chunk_bytes == 0 || total_bytes % chunk_bytes != 0) {
        fprintf(stderr, "usage: %s [total_MiB [chunk_KiB]] (total a multiple of chunk)\n", argv[0]);
        return 2;
    }
    chunk = malloc(chunk_bytes);
    for (size_t i = 0; i < chunk_bytes; i++) {
        chunk[i] = (uint8_t)(i * 131 + 7);
    }
    bulk = dfc_rpc_bulk_new(chunk_bytes);
    memcpy(dfc_rpc_bulk_data(bulk), chunk, chunk_bytes);
    char dir[] = "/tmp/dfc-bench-rpc-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        die("mkdtemp");
    }
    char addr[128];
    snprintf(addr, sizeof(addr), "unix:%s/rpc.sock", dir);

    struct dfc_error err;
    struct dfc_rpc_server *s;
    struct dfc_rpc_client *c;
    check(dfc_rpc_client_resolve(client_methods, DFC_RPC_N(client_methods), &err), &err,
          "client methods");
    check(dfc_rpc_server_new(NULL, &s, &err), &err, "server");
    check(dfc_rpc_server_add_service(s, &dfc__test__v1__rpc_test__descriptor, methods,
                                     DFC_RPC_N(methods), NULL, &err),
          &err, "add_service");
    check(dfc_rpc_server_listen(s, addr, &err), &err, "listen");
    check(dfc_rpc_server_start(s, &err), &err, "start");
    check(dfc_rpc_client_new(addr, NULL, &c, &err), &err, "client");

    /* The file-to-file source: the same pattern, written once, in tmpfs. */
    char shm[] = "/dev/shm/dfc-bench-rpc-XXXXXX";
    if (mkdtemp(shm) == NULL) {
        die("mkdtemp /dev/shm");
    }
    snprintf(src_path, sizeof(src_path), "%s/src", shm);
    snprintf(dst_path, sizeof(dst_path), "%s/dst", shm);
    int fd = open(src_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (size_t n = 0; n < total_bytes; n += chunk_bytes) {
        if (fd < 0 || write(fd, chunk, chunk_bytes) != (ssize_t)chunk_bytes) {
            die("write source");
        }
    }
    close(fd);

    double raw[RUNS], putv[RUNS], getv[RUNS], fraw[RUNS], fput[RUNS];
    (void)run_put(c, false); /* warm up: connect, grow buffers */
    for (int i = 0; i < RUNS; i++) {
        raw[i] = run_raw(dir, false);
        putv[i] = run_put(c, false);
        getv[i] = run_get(c);
        fraw[i] = run_raw(dir, true);
        fput[i] = run_put(c, true);
    }
    double r = median(raw), p = median(putv), g = median(getv);
    double fr = median(fraw), fp = median(fput);
    printf("rpc-stream: %zu MiB in %zu KiB messages over a Unix socket, median of %d runs\n",
           total_bytes >> 20, chunk_bytes >> 10, RUNS);
    printf(" memory to memory\n");
    printf("  raw unix-socket copy         %8.0f MB/s  (reference)\n", r);
    printf("  client-streaming rpc (put)   %8.0f MB/s  ratio %.2fx raw\n", p, p / r);
    printf("  server-streaming rpc (get)   %8.0f MB/s  ratio %.2fx raw\n", g, g / r);
    printf(" file to file (tmpfs)\n");
    printf("  raw unix-socket copy         %8.0f MB/s  (reference)\n", fr);
    printf("  client-streaming rpc (put)   %8.0f MB/s  ratio %.2fx raw\n", fp, fp / fr);
    unlink(src_path);
    unlink(dst_path);
    rmdir(shm);

    dfc_rpc_client_free(c);
    dfc_rpc_server_free(s);
    rmdir(dir);
    dfc_rpc_bulk_free(bulk);
    free(chunk);
    return 0;
}
