/*
 * dfcache import - put a file into the node's persistent cache.
 *
 * By path when the daemon sees the very same file (same device and inode: the client sends
 * its identity and the daemon checks it); else by passing the open descriptor on the sibling
 * socket `<endpoint>.fd` (dfc/fdpass.h: the daemon reads what this process opened, which works
 * from inside a pod at the speed of a path import); else by streaming the bytes over the
 * socket. --transfer forces one; auto tries path -> fd -> stream, logging each fallback with
 * --log-level debug.
 *
 * PATH `-` is standard input: always streamed, its length unknown until the end (the
 * ImportStart carries no content_length; the ImportFinish gives the count read).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "dfc/cleanup.h"
#include "dfc/dragonfly.h"
#include "dfc/fdpass.h"
#include "dfc/import.pb-c.h"
#include "dfc/options.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_bulk.h"
#include "dfc/units.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dfcache.h"

#define CHUNK ((size_t)4 << 20)

struct import_opts {
    struct dfcache_common c;
    char *content_for_id; /* NULL: the task id is the file's SHA-256 */
    uint64_t replicas;
    uint64_t piece_length; /* 0: automatic */
    char *application;     /* NULL: not sent */
    char *tag;             /* NULL: not sent */
    int64_t ttl_ns;
    int64_t timeout_ns;
    const char *transfer; /* auto, path, fd, stream */
    const char *path;     /* the argument (borrowed from argv); "-": standard input */
};

static const char *const transfers[] = {"auto", "path", "fd", "stream", NULL};

#define O(member) offsetof(struct import_opts, member)

static const struct dfc_config_row rows[] = {
    {.type = DFC_CFG_STRING,
     .offset = O(content_for_id),
     .env = "DFCACHE_IMPORT_CONTENT_FOR_CALCULATING_TASK_ID",
     .flag = "content-for-calculating-task-id",
     .help = "the task id is SHA-256(STR) instead of the file's SHA-256 (faster for large files)",
     .flags = DFC_OPT_OPTIONAL | DFC_OPT_NONEMPTY},
    {.type = DFC_CFG_UINT,
     .offset = O(replicas),
     .def = "2",
     .env = "DFCACHE_IMPORT_PERSISTENT_REPLICA_COUNT",
     .flag = "persistent-replica-count",
     .help = "copies to keep across nodes",
     DFC_OPT_RANGE(DFC_REPLICA_COUNT_MIN, DFC_REPLICA_COUNT_MAX)},
    {.type = DFC_CFG_SIZE,
     .offset = O(piece_length),
     .env = "DFCACHE_IMPORT_PIECE_LENGTH",
     .flag = "piece-length",
     .help = "piece size, automatic when not given",
     DFC_OPT_RANGE(DFC_PIECE_LENGTH_MIN, DFC_PIECE_LENGTH_MAX),
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_STRING,
     .offset = O(application),
     .env = "DFCACHE_IMPORT_APPLICATION",
     .flag = "application",
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_STRING,
     .offset = O(tag),
     .env = "DFCACHE_IMPORT_TAG",
     .flag = "tag",
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_DURATION,
     .offset = O(ttl_ns),
     .def = "1h",
     .env = "DFCACHE_IMPORT_TTL",
     .flag = "ttl",
     .help = "time to live",
     DFC_OPT_RANGE(DFC_TTL_MIN_NS, DFC_TTL_MAX_NS)},
    {.type = DFC_CFG_DURATION,
     .offset = O(timeout_ns),
     .def = "30m",
     .env = "DFCACHE_IMPORT_TIMEOUT",
     .flag = "timeout",
     .help = "give up after",
     DFC_OPT_POSITIVE},
    {.type = DFC_CFG_ENUM,
     .offset = O(transfer),
     .def = "auto",
     .env = "DFCACHE_IMPORT_TRANSFER",
     .flag = "transfer",
     .metavar = "MODE",
     .help = "auto: by path when the daemon sees the same file, else pass the open descriptor "
             "on the socket's sibling <endpoint>.fd (a pod's file), else stream the bytes; each "
             "fallback is logged with --log-level debug; path; fd; stream",
     .choices = transfers},
    DFCACHE_COMMON_ROWS(struct import_opts, "DFCACHE_IMPORT_DFDAEMON_ENDPOINT"),
};

static const struct dfc_config_schema schema = {"dfcache import", rows,
                                                sizeof(rows) / sizeof(rows[0])};

static const struct dfc_cli cli = {
    .prog = "dfcache import",
    .usage = "[options] <PATH|->",
    .about = "Import a file (`-`: standard input) into the persistent cache of the node.",
    .schema = &schema,
    .min_args = 1,
    .max_args = 1,
    .arg_name = "PATH",
};

static void print_done(const Common__V2__PersistentCacheTask *t) {
    printf("Done: %s\n", t->id);
}

/* With --log-level debug: a line on stderr (how the transfer was chosen). */
static void debug(const struct import_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void debug(const struct import_opts *o, const char *fmt, ...) {
    if (o->c.log_level == NULL || strcmp(o->c.log_level, "debug") != 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fputs("dfcache import: debug: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* UploadPersistentCacheTask for abs with the metadata md[n] (a file identity or a token). */
static int upload(struct dfc_rpc_client *c, const struct import_opts *o, const char *abs,
                  const struct dfc_rpc_md *md, size_t n, struct dfc_error *err) {
    Dfdaemon__V2__UploadPersistentCacheTaskRequest req =
        DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    Google__Protobuf__Duration timeout = GOOGLE__PROTOBUF__DURATION__INIT;
    req.path = (char *)abs;
    req.persistent_replica_count = o->replicas;
    dfc_pb_duration_from_ns(o->ttl_ns, &ttl);
    req.ttl = &ttl;
    dfc_pb_duration_from_ns(o->timeout_ns, &timeout);
    req.timeout = &timeout;
    if (o->content_for_id) {
        req.opt_content_for_calculating_task_id_case =
            DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_CONTENT_FOR_CALCULATING_TASK_ID_CONTENT_FOR_CALCULATING_TASK_ID;
        req.content_for_calculating_task_id = (char *)o->content_for_id;
    }
    if (o->tag) {
        req.opt_tag_case = DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_TAG_TAG;
        req.tag = (char *)o->tag;
    }
    if (o->application) {
        req.opt_application_case =
            DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_APPLICATION_APPLICATION;
        req.application = (char *)o->application;
    }
    if (o->piece_length != 0) {
        req.opt_piece_length_case =
            DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_PIECE_LENGTH_PIECE_LENGTH;
        req.piece_length = o->piece_length;
    }
    ProtobufCMessage *resp = NULL;
    int r = dfc_rpc_unary_md(c, &dfcache_m.upload, &req.base, o->timeout_ns / 1000000, md, n, &resp,
                             err);
    if (r == 0) {
        print_done((Common__V2__PersistentCacheTask *)resp);
        dfc_rpc_msg_free(resp);
    }
    return r;
}

static int import_by_path(struct dfc_rpc_client *c, const struct import_opts *o, const char *abs,
                          const struct stat *st, struct dfc_error *err) {
    char identity[64];
    snprintf(identity, sizeof(identity), "%" PRIu64 ":%" PRIu64, (uint64_t)st->st_dev,
             (uint64_t)st->st_ino);
    const struct dfc_rpc_md md[] = {{DFC_FILE_IDENTITY_MD, identity}};
    return upload(c, o, abs, md, 1, err);
}

/* The daemon's socket path of the endpoint (a path or a unix: target). */
static const char *socket_of(const char *endpoint) {
    if (strncmp(endpoint, "unix://", 7) == 0) {
        return endpoint + 7;
    }
    return strncmp(endpoint, "unix:", 5) == 0 ? endpoint + 5 : endpoint;
}

/* Passes fd on the sibling socket, then imports by its token. *ret_passed tells whether the
 * descriptor was taken (a failure before it may fall back to streaming). */
static int import_by_fd(struct dfc_rpc_client *c, const struct import_opts *o, const char *abs,
                        int fd, bool *ret_passed, struct dfc_error *err) {
    char sock[PATH_MAX + 8], token[DFC_FDPASS_TOKEN_HEX + 1];
    *ret_passed = false;
    if (dfc_fdpass_path(socket_of(o->c.endpoint), sock, sizeof(sock)) < 0) {
        return dfc_error_set(err, -ENAMETOOLONG, "endpoint `%s` is too long", o->c.endpoint);
    }
    int r = dfc_fdpass_send(sock, fd, token, err);
    if (r < 0) {
        return r;
    }
    *ret_passed = true;
    debug(o, "passed the descriptor of `%s` on `%s`", o->path, sock);
    const struct dfc_rpc_md md[] = {{DFC_FD_TOKEN_MD, token}};
    return upload(c, o, abs, md, 1, err);
}

/* Reads up to size bytes, fewer only at the end of the input (a pipe gives a little at a
 * time; pieces of whole chunks keep the messages few). */
static ssize_t read_full(int fd, uint8_t *buf, size_t size) {
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Streams fd's bytes; st NULL: the length is unknown up front (standard input). */
static int import_by_stream(struct dfc_rpc_client *c, const struct import_opts *o, int fd,
                            const struct stat *st, struct dfc_error *err) {
    struct dfc_rpc_stream *s;
    int r = dfc_rpc_stream_open(c, &dfcache_m.import, o->timeout_ns / 1000000, &s, err);
    if (r < 0) {
        return r;
    }
    Dfc__Dfdaemon__V1__ImportStart start = DFC__DFDAEMON__V1__IMPORT_START__INIT;
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    dfc_pb_duration_from_ns(o->ttl_ns, &ttl);
    start.ttl = &ttl;
    start.persistent_replica_count = o->replicas;
    if (st != NULL) {
        start.opt_content_length_case =
            DFC__DFDAEMON__V1__IMPORT_START__OPT_CONTENT_LENGTH_CONTENT_LENGTH;
        start.content_length = (uint64_t)st->st_size;
    }
    if (o->content_for_id) {
        start.opt_content_for_calculating_task_id_case =
            DFC__DFDAEMON__V1__IMPORT_START__OPT_CONTENT_FOR_CALCULATING_TASK_ID_CONTENT_FOR_CALCULATING_TASK_ID;
        start.content_for_calculating_task_id = (char *)o->content_for_id;
    }
    if (o->tag) {
        start.opt_tag_case = DFC__DFDAEMON__V1__IMPORT_START__OPT_TAG_TAG;
        start.tag = (char *)o->tag;
    }
    if (o->application) {
        start.opt_application_case = DFC__DFDAEMON__V1__IMPORT_START__OPT_APPLICATION_APPLICATION;
        start.application = (char *)o->application;
    }
    if (o->piece_length != 0) {
        start.opt_piece_length_case =
            DFC__DFDAEMON__V1__IMPORT_START__OPT_PIECE_LENGTH_PIECE_LENGTH;
        start.piece_length = o->piece_length;
    }
    Dfc__Dfdaemon__V1__ImportPersistentCacheTaskRequest m =
        DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    m.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_START;
    m.start = &start;
    r = dfc_rpc_stream_send(s, &m.base, err);

    struct dfcache_progress prog;
    dfcache_progress_init(&prog, "import", st ? (uint64_t)st->st_size : 0, !o->c.no_progress);
    uint64_t sent = 0;
    if (st != NULL) {
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    while (r == 0) {
        /* Read straight into a buffer that is sent without another copy. */
        struct dfc_rpc_bulk *b = dfc_rpc_bulk_new(CHUNK);
        if (b == NULL) {
            r = dfc_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        ssize_t n = read_full(fd, dfc_rpc_bulk_data(b), CHUNK);
        if (n < 0) {
            r = dfc_error_errno(err, -errno, "read `%s`", st ? o->path : "standard input");
        } else if (n > 0) {
            dfc__dfdaemon__v1__import_persistent_cache_task_request__init(&m);
            m.request_case =
                DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_CONTENT;
            m.content.data = dfc_rpc_bulk_data(b);
            m.content.len = (size_t)n;
            r = dfc_rpc_stream_send_bulk(s, &m.base, b, err);
            sent += (uint64_t)n;
            dfcache_progress_add(&prog, (uint64_t)n);
        }
        dfc_rpc_bulk_free(b);
        if (n <= 0) {
            break;
        }
    }
    if (r == 0) {
        Dfc__Dfdaemon__V1__ImportFinish fin = DFC__DFDAEMON__V1__IMPORT_FINISH__INIT;
        fin.content_length = sent;
        dfc__dfdaemon__v1__import_persistent_cache_task_request__init(&m);
        m.request_case = DFC__DFDAEMON__V1__IMPORT_PERSISTENT_CACHE_TASK_REQUEST__REQUEST_FINISH;
        m.finish = &fin;
        r = dfc_rpc_stream_send(s, &m.base, err);
    }
    ProtobufCMessage *resp = NULL;
    if (r == 0 && (r = dfc_rpc_stream_close_send(s, err)) == 0) {
        r = dfc_rpc_stream_recv(s, dfcache_m.import.resp, &resp, err);
        if (r == 0) {
            r = dfc_error_set(err, -EBADMSG, "the daemon sent no task");
        }
    }
    if (r > 0) {
        r = dfc_rpc_stream_finish(s, err);
    }
    dfcache_progress_done(&prog);
    if (r == 0 && resp != NULL) {
        print_done((Common__V2__PersistentCacheTask *)resp);
    }
    dfc_rpc_msg_free(resp);
    dfc_rpc_stream_free(s);
    return r;
}

static int import_file(const struct import_opts *o);
static int import_stdin(const struct import_opts *o);

int dfcache_import(int argc, char **argv) {
    struct import_opts o = {0};
    struct dfc_cli_args args;
    int code = dfc_cli_main(&cli, &o, argc, argv, &args);
    if (code == DFC_CLI_RUN) {
        o.path = args.args[0];
        code = strcmp(o.path, "-") == 0 ? import_stdin(&o) : import_file(&o);
    }
    dfc_config_free(&schema, &o);
    return code;
}

static int import_file(const struct import_opts *o) {
    char abs[PATH_MAX];
    struct dfc_error err;
    int r;
    if (realpath(o->path, abs) == NULL) {
        dfc_error_errno(&err, errno == ENOENT ? -ENOENT : -errno, "`%s`", o->path);
        return dfcache_fail("import", &err);
    }
    /* A path import needs no read access checked here: the daemon opens the file acting as
     * this process (its uid and groups), so the kernel decides. */
    struct stat st;
    if (stat(abs, &st) < 0) {
        dfc_error_errno(&err, -errno, "stat `%s`", o->path);
        return dfcache_fail("import", &err);
    }
    if (!S_ISREG(st.st_mode)) {
        dfc_error_set(&err, -EINVAL, "`%s` is not a regular file", o->path);
        return dfcache_fail("import", &err);
    }
    if (o->content_for_id == NULL && st.st_size > (1 << 30) && !o->c.no_progress) {
        fprintf(stderr,
                "dfcache import: hashing all of `%s` for its task id; "
                "--content-for-calculating-task-id is faster for large files\n",
                o->path);
    }
    struct dfc_rpc_client *c;
    if (dfcache_connect(o->c.endpoint, &c, &err) < 0) {
        return dfcache_fail("import", &err);
    }
    bool is_auto = strcmp(o->transfer, "auto") == 0;
    const char *next = o->transfer; /* path, fd, stream: the transfer to try */
    if (is_auto) {
        next = "path";
    }
    r = 0;
    if (strcmp(next, "path") == 0) {
        r = import_by_path(c, o, abs, &st, &err);
        /* The daemon does not see this file (it lives in another mount namespace), or cannot
         * act for us (a daemon that is not root serves only its own uid): passing the
         * descriptor or streaming needs only our own access. */
        bool elsewhere = r == -ENOENT || r == DFC_E_FAILED_PRECONDITION || r == -EACCES;
        if (r < 0 && elsewhere && is_auto) {
            debug(o, "path import refused (%s): trying fd", dfc_error_msg(&err));
            next = "fd";
        }
    }
    if (strcmp(next, "fd") == 0 || strcmp(next, "stream") == 0) {
        _cleanup_close_ int fd = open(abs, O_RDONLY | O_CLOEXEC);
        struct stat fst;
        if (fd < 0 || fstat(fd, &fst) < 0) {
            r = dfc_error_errno(&err, -errno, "open `%s`", o->path);
        } else if (!S_ISREG(fst.st_mode)) {
            r = dfc_error_set(&err, -EINVAL, "`%s` is not a regular file", o->path);
        } else {
            bool passed = false;
            struct statfs fsf;
            if (strcmp(next, "fd") == 0 && is_auto && fstatfs(fd, &fsf) == 0 &&
                fsf.f_type == PROC_SUPER_MAGIC) {
                /* the daemon takes no procfs descriptor (it checks when the call takes it) */
                debug(o, "`%s` is on procfs: trying stream", o->path);
                next = "stream";
            }
            if (strcmp(next, "fd") == 0) {
                r = import_by_fd(c, o, abs, fd, &passed, &err);
                /* No sibling socket (an older daemon, or one not published into this pod),
                 * or the descriptor was refused before any import began: stream it. */
                if (r < 0 && !passed && is_auto) {
                    debug(o, "fd import not possible (%s): trying stream", dfc_error_msg(&err));
                    next = "stream";
                }
            }
            if (strcmp(next, "stream") == 0) {
                debug(o, "streaming `%s`", o->path);
                r = import_by_stream(c, o, fd, &fst, &err);
            }
        }
    }
    dfc_rpc_client_free(c);
    return r < 0 ? dfcache_fail("import", &err) : DFCACHE_OK;
}

static int import_stdin(const struct import_opts *o) {
    struct dfc_error err;
    if (strcmp(o->transfer, "path") == 0) {
        dfc_error_set(&err, -EINVAL,
                      "--transfer path: standard input (`-`) has no path the daemon can open; "
                      "use --transfer stream or auto");
        return dfc_cli_fail(&cli, &err);
    }
    struct dfc_rpc_client *c;
    if (dfcache_connect(o->c.endpoint, &c, &err) < 0) {
        return dfcache_fail("import", &err);
    }
    int r = import_by_stream(c, o, STDIN_FILENO, NULL, &err);
    dfc_rpc_client_free(c);
    return r < 0 ? dfcache_fail("import", &err) : DFCACHE_OK;
}
