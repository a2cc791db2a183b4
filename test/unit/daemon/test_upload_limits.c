/*
 * Tests for daemon/p2p/upload_limits.c and its use by the Vortex server and client: a real
 * store in a temp dir, a real server on 127.0.0.1:0, the real client and raw sockets. A server
 * with upload.rateLimit sends no faster than its rate, a client with download.rateLimit reads
 * no faster than its own, storage.server.maxConcurrentUploads queues a request behind a
 * running upload and refuses it with Error Internal after request_timeout, and stop ends waits
 * for tokens and slots at once. Durations are only checked from below (the limits' point), or
 * against bounds many times what is expected, so that a loaded machine cannot fail them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "dfc/clock.h"
#include "dfc/ratelimit.h"
#include "p2p/vortex.h"
#include "p2p/vortex_client.h"
#include "p2p/vortex_server.h"
#include "storage/storage.h"
#include "test_support.h"

#define KiB     ((uint64_t)1 << 10)
#define MiB     ((uint64_t)1 << 20)
#define SEC     INT64_C(1000000000)
#define MS      INT64_C(1000000)
#define TIMEOUT (30 * SEC)
#define CONTENT (2 * 4 * MiB + 12345) /* three pieces of 4 MiB, the last one short */

struct fx {
    char dir[256];
    char store[300];
    struct dfd_storage *s;
    uint8_t *content;
    struct dfd_task_meta task;
    struct dfd_piece_meta *pieces;
    size_t npieces;
    struct dfd_vortex_server *v;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "uplimits");
    snprintf(f->store, sizeof(f->store), "%s/store", f->dir);
    struct dfd_storage_opts o = {.dir = f->store, .keep = true};
    struct dfc_error err;
    assert_int_equal(dfd_storage_open(&o, &f->s, NULL, &err), 0);
    f->content = malloc(CONTENT);
    uint32_t x = 777;
    for (uint64_t i = 0; i < CONTENT; i++) {
        x = x * 1103515245 + 12345;
        f->content[i] = (uint8_t)(x >> 16);
    }
    char src[400];
    snprintf(src, sizeof(src), "%s/src", f->dir);
    int fd = open(src, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, f->content, CONTENT), (ssize_t)CONTENT);
    struct dfd_import_params p = {.piece_length = 4 * MiB,
                                  .replica_count = 1,
                                  .ttl_ns = 3600 * SEC,
                                  .persistent = true,
                                  .expected_length = -1};
    bool existed = false;
    assert_int_equal(dfd_storage_import_fd(f->s, &p, fd, INT64_C(1700000000) * SEC, NULL, NULL,
                                           &f->task, &existed, NULL, &err),
                     0);
    close(fd);
    assert_int_equal(dfd_storage_pieces(f->s, f->task.id, &f->pieces, &f->npieces, &err), 0);
    assert_int_equal(f->npieces, 3);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfd_vortex_server_stop(f->v);
    free(f->pieces);
    dfd_task_meta_done(&f->task);
    dfd_storage_close(f->s);
    free(f->content);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

static void start(struct fx *f, uint64_t rate, unsigned max_uploads, int64_t request_timeout) {
    struct dfd_vortex_server_opts o = {.ip = "127.0.0.1",
                                       .port = 0,
                                       .max_conns = 8,
                                       .request_timeout_ns = request_timeout,
                                       .answer_timeout_ns = 120 * SEC,
                                       .parent_id = "host-1",
                                       .rate_limit = rate,
                                       .max_uploads = max_uploads};
    struct dfc_error err = {0};
    assert_int_equal(dfd_vortex_server_start(f->s, &o, &f->v, &err), 0);
}

/* Fetches piece i with the real client, through rate (NULL: unlimited); checks the bytes on
 * success. */
static int fetch(struct fx *f, struct dfc_ratelimit *rate, size_t i, struct dfc_error *err) {
    const struct dfd_piece_meta *pm = &f->pieces[i];
    uint8_t *buf = malloc(4 * MiB);
    int r = dfd_vortex_fetch(NULL, rate, "127.0.0.1", dfd_vortex_server_port(f->v), f->task.id,
                             pm->number, pm->offset, pm->length, buf, TIMEOUT, NULL, err);
    if (r == 0) {
        assert_memory_equal(buf, f->content + pm->offset, pm->length);
    }
    free(buf);
    return r;
}

/* upload.rateLimit 8 MiB/s (a burst of 1 MiB): the whole content, 8 MiB and 12345 bytes, to
 * two clients at once cannot arrive in less than (8 MiB - 1 MiB) / 8 MiB/s = 875 ms, and each
 * piece arrives intact. */
struct fetch_job {
    struct fx *f;
    size_t first, last;
    int r;
};

static void *fetch_main(void *arg) {
    struct fetch_job *j = arg;
    for (size_t i = j->first; i <= j->last && j->r == 0; i++) {
        struct dfc_error err = {0};
        j->r = fetch(j->f, NULL, i, &err);
        if (j->r != 0) {
            fprintf(stderr, "piece %zu: %s\n", i, err.msg);
        }
    }
    return NULL;
}

static void test_upload_rate(void **state) {
    struct fx *f = *state;
    start(f, 8 * MiB, 0, 10 * SEC);
    int64_t t0 = dfc_mono_ns();
    struct fetch_job jobs[2] = {{.f = f, .first = 0, .last = 0}, {.f = f, .first = 1, .last = 2}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, fetch_main, &jobs[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].r, 0);
    }
    int64_t took = dfc_mono_ns() - t0;
    if (took < 875 * MS) {
        fail_msg("8 MiB at 8 MiB/s took %lld ms", (long long)(took / MS));
    }
}

/* download.rateLimit 8 MiB/s on the client, an unlimited server: the same bound; and a limit
 * that cannot deliver a piece within the fetch's timeout fails it at once with -ETIMEDOUT
 * naming the setting. */
static void test_download_rate(void **state) {
    struct fx *f = *state;
    start(f, 0, 0, 10 * SEC);
    struct dfc_ratelimit rate;
    dfc_ratelimit_init(&rate, 8 * MiB, 0);
    int64_t t0 = dfc_mono_ns();
    struct dfc_error err = {0};
    for (size_t i = 0; i < f->npieces; i++) {
        int r = fetch(f, &rate, i, &err);
        if (r != 0) {
            fail_msg("piece %zu: %s", i, err.msg);
        }
    }
    int64_t took = dfc_mono_ns() - t0;
    if (took < 875 * MS) {
        fail_msg("8 MiB at 8 MiB/s took %lld ms", (long long)(took / MS));
    }
    dfc_ratelimit_destroy(&rate);
    /* 1 MiB/s, 4 MiB in 1 s: no. */
    dfc_ratelimit_init(&rate, MiB, 0);
    const struct dfd_piece_meta *pm = &f->pieces[0];
    uint8_t *buf = malloc(4 * MiB);
    int r = dfd_vortex_fetch(NULL, &rate, "127.0.0.1", dfd_vortex_server_port(f->v), f->task.id,
                             pm->number, pm->offset, pm->length, buf, SEC, NULL, &err);
    assert_int_equal(r, -ETIMEDOUT);
    assert_non_null(strstr(err.msg, "download.rateLimit"));
    free(buf);
    dfc_ratelimit_destroy(&rate);
}

/* A raw connection asking for piece i; returns once the content packet's header arrived, i.e.
 * the server holds an upload slot for it. */
static int begin_raw(struct fx *f, size_t i, struct dfd_vortex_header *h) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(dfd_vortex_server_port(f->v)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {.tv_sec = 60};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    uint8_t req[DFD_VORTEX_REQUEST_PACKET_LEN];
    struct dfc_error err;
    assert_int_equal(dfd_vortex_request_encode(1, f->task.id, f->pieces[i].number, req, &err), 0);
    assert_int_equal(send(fd, req, sizeof(req), MSG_NOSIGNAL), (ssize_t)sizeof(req));
    uint8_t hb[DFD_VORTEX_HEADER_LEN];
    assert_int_equal(recv(fd, hb, sizeof(hb), MSG_WAITALL), (ssize_t)sizeof(hb));
    dfd_vortex_header_decode(hb, h);
    assert_int_equal(h->tag, DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT);
    return fd;
}

/* Reads the rest of a raw answer (metadata and bytes) on its own thread. */
struct drain_job {
    int fd;
    uint64_t want, got;
};

static void *drain_main(void *arg) {
    struct drain_job *d = arg;
    uint8_t b[65536];
    while (d->got < d->want) {
        ssize_t k = recv(d->fd, b, sizeof(b), 0);
        if (k <= 0) {
            break;
        }
        d->got += (uint64_t)k;
    }
    return NULL;
}

/* One upload at once, 1 MiB/s: a raw client's 4 MiB piece holds the slot for at least 3.8 s;
 * a fetch meanwhile waits request_timeout (1 s) and is refused with Error Internal naming
 * storage.server.maxConcurrentUploads (the client's DFC_E_INTERNAL). */
static void test_cap_refuses(void **state) {
    struct fx *f = *state;
    start(f, MiB, 1, SEC);
    struct dfd_vortex_header h;
    int fd = begin_raw(f, 0, &h);
    struct drain_job d = {.fd = fd, .want = h.length + f->pieces[0].length};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drain_main, &d), 0);
    int64_t t0 = dfc_mono_ns();
    struct dfc_error err = {0};
    int r = fetch(f, NULL, 2, &err);
    int64_t waited = dfc_mono_ns() - t0;
    if (r != DFC_E_INTERNAL) {
        fail_msg("fetch: %d %s", r, err.msg);
    }
    assert_non_null(strstr(err.msg, "storage.server.maxConcurrentUploads"));
    assert_non_null(strstr(err.msg, "Error Internal (3)"));
    assert_true(waited >= 900 * MS); /* it waited for a slot first */
    pthread_join(th, NULL);
    assert_int_equal(d.got, d.want); /* the running upload was not disturbed */
    close(fd);
    /* The slot is free again. */
    assert_int_equal(fetch(f, NULL, 2, &err), 0);
}

/* One upload at once, 1 MiB/s, request_timeout 20 s: a fetch made while a 4 MiB piece is being
 * sent waits for it and then succeeds, so it cannot end before that piece could be sent
 * ((4 MiB - 128 KiB burst) / 1 MiB/s = 3.875 s after the piece was asked for). */
static void test_cap_queues(void **state) {
    struct fx *f = *state;
    start(f, MiB, 1, 20 * SEC);
    int64_t t0 = dfc_mono_ns();
    struct dfd_vortex_header h;
    int fd = begin_raw(f, 0, &h);
    struct drain_job d = {.fd = fd, .want = h.length + f->pieces[0].length};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drain_main, &d), 0);
    struct dfc_error err = {0};
    int r = fetch(f, NULL, 2, &err);
    if (r != 0) {
        fail_msg("fetch: %s", err.msg);
    }
    int64_t took = dfc_mono_ns() - t0;
    if (took < 3800 * MS) {
        fail_msg("the queued fetch ended %lld ms after the first piece was asked for",
                 (long long)(took / MS));
    }
    pthread_join(th, NULL);
    assert_int_equal(d.got, d.want);
    close(fd);
}

/* Stop ends an upload sleeping for tokens (128 KiB/s: its 4 MiB piece would take 30 s) and a
 * request waiting for its slot (request_timeout 60 s) at once. */
struct refused_job {
    struct fx *f;
    int r;
};

static void *queued_main(void *arg) {
    struct refused_job *j = arg;
    struct dfc_error err = {0};
    j->r = fetch(j->f, NULL, 2, &err);
    return NULL;
}

static void test_stop_ends_waits(void **state) {
    struct fx *f = *state;
    start(f, 128 * KiB, 1, 60 * SEC);
    struct dfd_vortex_header h;
    int fd = begin_raw(f, 0, &h);
    struct drain_job d = {.fd = fd, .want = h.length + f->pieces[0].length};
    pthread_t drainer, queued;
    assert_int_equal(pthread_create(&drainer, NULL, drain_main, &d), 0);
    struct refused_job q = {.f = f};
    assert_int_equal(pthread_create(&queued, NULL, queued_main, &q), 0);
    usleep(300 * 1000); /* the queued fetch reaches its wait (if not, stop refuses it anyway) */
    int64_t t0 = dfc_mono_ns();
    dfd_vortex_server_stop(f->v);
    f->v = NULL;
    int64_t took = dfc_mono_ns() - t0;
    pthread_join(queued, NULL);
    pthread_join(drainer, NULL);
    assert_true(q.r < 0);
    assert_true(d.got < d.want);
    if (took >= 10 * SEC) {
        fail_msg("stop took %lld ms", (long long)(took / MS));
    }
    close(fd);
}

int main(void) {
    (void)signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_upload_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_download_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_queues, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_ends_waits, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
