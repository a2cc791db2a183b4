/*
 * dfcache export - write a persistent cache task to a file.
 *
 * By default the daemon writes the file itself (a hard link into its store when possible,
 * else a copy). With --transfer-from-dfdaemon the daemon streams the pieces over the socket
 * and dfcache writes them, which works where the daemon cannot see the output path (a pod):
 * into a temporary file beside the output, renamed into place only when every byte arrived.
 *
 * -O - writes the bytes to standard output (the pieces come over the socket, as with
 * --transfer-from-dfdaemon) and nothing else goes there. A pipe is written in order: pieces
 * from peers may arrive out of order, so a piece ahead of the next offset is held until the
 * gap is filled, at most REORDER_MAX bytes held (beyond that the export fails: export to a
 * file instead). Pieces from the node's own store always arrive in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/id.h"
#include "dfc/dragonfly.h"
#include "dfc/fs.h"
#include "dfc/options.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_bulk.h"
#include "dfc/thread.h"
#include "dfc/units.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dfcache.h"

struct export_opts {
    struct dfcache_common c;
    char *output;
    bool from_daemon, overwrite, force_hard_link;
    char *application, *tag, *digest; /* digest: NULL when not given */
    int64_t timeout_ns;
    const char *id; /* the argument (borrowed from argv) */
};

#define O(member) offsetof(struct export_opts, member)

static const struct dfc_config_row rows[] = {
    {.type = DFC_CFG_STRING,
     .offset = O(output),
     .env = "DFCACHE_EXPORT_OUTPUT",
     .flag = "output",
     .short_flag = 'O',
     .metavar = "PATH",
     .help = "where to write (`-`: standard output)",
     .flags = DFC_OPT_OPTIONAL}, /* required, with the message dfcache always gave */
    {.type = DFC_CFG_BOOL,
     .offset = O(from_daemon),
     .env = "DFCACHE_EXPORT_TRANSFER_FROM_DFDAEMON",
     .flag = "transfer-from-dfdaemon",
     .help = "receive the bytes over the socket and write them here (for a daemon that cannot "
             "see OUTPUT)"},
    {.type = DFC_CFG_BOOL,
     .offset = O(overwrite),
     .env = "DFCACHE_EXPORT_OVERWRITE",
     .flag = "overwrite",
     .help = "replace an existing OUTPUT"},
    {.type = DFC_CFG_BOOL,
     .offset = O(force_hard_link),
     .env = "DFCACHE_EXPORT_FORCE_HARD_LINK",
     .flag = "force-hard-link",
     .help = "fail rather than copy when a hard link is impossible"},
    {.type = DFC_CFG_STRING,
     .offset = O(digest),
     .env = "DFCACHE_EXPORT_DIGEST",
     .flag = "digest",
     .metavar = "ALGO:VALUE",
     .help = "verify crc32:, sha256: or sha512:",
     .flags = DFC_OPT_OPTIONAL},
    {.type = DFC_CFG_STRING,
     .offset = O(application),
     .env = "DFCACHE_EXPORT_APPLICATION",
     .flag = "application"},
    {.type = DFC_CFG_STRING, .offset = O(tag), .env = "DFCACHE_EXPORT_TAG", .flag = "tag"},
    {.type = DFC_CFG_DURATION,
     .offset = O(timeout_ns),
     .def = "2h",
     .env = "DFCACHE_EXPORT_TIMEOUT",
     .flag = "timeout",
     .help = "give up after",
     DFC_OPT_POSITIVE},
    DFCACHE_COMMON_ROWS(struct export_opts, "DFCACHE_EXPORT_DFDAEMON_ENDPOINT"),
};

static const struct dfc_config_schema schema = {"dfcache export", rows,
                                                sizeof(rows) / sizeof(rows[0])};

static const struct dfc_cli cli = {
    .prog = "dfcache export",
    .usage = "[options] -O <OUTPUT|-> <ID>",
    .about = "Export a persistent cache task to a file.",
    .schema = &schema,
    .min_args = 1,
    .max_args = 1,
    .arg_name = "task ID",
};

/* Absolute output path whose directory exists; refuses an existing file without --overwrite. */
static int resolve_output(const struct export_opts *o, char *abs, size_t size,
                          struct dfc_error *err) {
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(o->output, '/');
    const char *base = slash ? slash + 1 : o->output;
    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        return dfc_error_set(err, -EINVAL, "`%s` does not name a file", o->output);
    }
    if (slash == NULL) {
        snprintf(dir, sizeof(dir), ".");
    } else {
        snprintf(dir, sizeof(dir), "%.*s", slash == o->output ? 1 : (int)(slash - o->output),
                 o->output);
    }
    if (realpath(dir, real) == NULL) {
        return dfc_error_errno(err, -errno, "the directory of `%s`", o->output);
    }
    if ((size_t)snprintf(abs, size, "%s/%s", strcmp(real, "/") ? real : "", base) >= size) {
        return dfc_error_set(err, -ENAMETOOLONG, "`%s` is too long", o->output);
    }
    struct stat st;
    if (!o->overwrite && lstat(abs, &st) == 0) {
        return dfc_error_set(err, -EEXIST, "`%s` already exists (use --overwrite)", abs);
    }
    return 0;
}

/* ---- a received piece: its message, and its bytes where gRPC received them ---- */

struct piece_in {
    ProtobufCMessage *m;        /* a DownloadPieceFinished response */
    struct dfc_rpc_bulk_in *in; /* its content, when left in gRPC's slices; or NULL */
};

static Common__V2__Piece *piece_of(ProtobufCMessage *m) {
    return ((Dfdaemon__V2__DownloadPersistentCacheTaskResponse *)m)
        ->download_piece_finished_response->piece;
}

/* Writes pc's content at off (< 0: at the file position). */
static int piece_write(int fd, const struct piece_in *pc, off_t off) {
    struct iovec one;
    const struct iovec *iov;
    int n = dfc_rpc_bulk_in_iov(pc->in, &piece_of(pc->m)->content, &one, &iov);
    return dfc_writev_all(fd, iov, n, off);
}

static void piece_free(struct piece_in *pc) {
    dfc_rpc_bulk_in_free(pc->in);
    dfc_rpc_msg_free(pc->m);
}

/* ---- the writer thread: pieces are written while the next ones arrive ---- */

#define QUEUE_DEPTH 4

struct writer {
    struct dfc_thread thread;           /* its mu guards the fields below; stop = no more pieces */
    struct piece_in queue[QUEUE_DEPTH]; /* owned until written */
    size_t head, n;
    int fd;
    int error; /* the first write error, as a negative errno */
};

/* ---- standard output: pieces written in order, a bounded number held back ---- */

#define REORDER_MAX ((uint64_t)256 << 20)

struct reorder {
    struct piece_in *held; /* owned; pieces whose offset lies ahead of next */
    size_t n, cap;
    uint64_t next, held_bytes;
};

static int reorder_write(struct reorder *ro, struct piece_in *pc, struct dfc_error *err) {
    int r = piece_write(STDOUT_FILENO, pc, -1);
    ro->next += piece_of(pc->m)->length;
    piece_free(pc);
    return r < 0 ? dfc_error_errno(err, r, "write standard output") : 0;
}

/* Takes pc over: writes it when it is next, then every held piece it makes next; else holds
 * it. */
static int reorder_put(struct reorder *ro, struct piece_in pc, struct dfc_error *err) {
    Common__V2__Piece *p = piece_of(pc.m);
    if (p->offset < ro->next) {
        unsigned number = p->number;
        piece_free(&pc);
        return dfc_error_set(err, -EBADMSG, "piece %u overlaps bytes already written", number);
    }
    if (p->offset > ro->next) {
        if (ro->held_bytes + p->length > REORDER_MAX) {
            unsigned number = p->number;
            piece_free(&pc);
            return dfc_error_set(err, -ENOBUFS,
                                 "piece %u arrived more than %llu MiB ahead of the next one to "
                                 "write; export to a file instead of standard output",
                                 number, (unsigned long long)(REORDER_MAX >> 20));
        }
        if (ro->n == ro->cap) {
            size_t cap = ro->cap ? ro->cap * 2 : 8;
            struct piece_in *h = realloc(ro->held, cap * sizeof(*h));
            if (h == NULL) {
                piece_free(&pc);
                return dfc_error_set(err, -ENOMEM, "out of memory");
            }
            ro->held = h;
            ro->cap = cap;
        }
        ro->held[ro->n++] = pc;
        ro->held_bytes += p->length;
        return 0;
    }
    int r = reorder_write(ro, &pc, err);
    for (size_t i = 0; r == 0 && i < ro->n;) {
        Common__V2__Piece *h = piece_of(ro->held[i].m);
        if (h->offset != ro->next) {
            i++;
            continue;
        }
        struct piece_in held = ro->held[i];
        ro->held[i] = ro->held[--ro->n];
        ro->held_bytes -= h->length;
        r = reorder_write(ro, &held, err);
        i = 0; /* the next one may lie anywhere */
    }
    return r;
}

static void reorder_free(struct reorder *ro) {
    for (size_t i = 0; i < ro->n; i++) {
        piece_free(&ro->held[i]);
    }
    free(ro->held);
}

/* ---- the writer thread ---- */

static void *writer_main(void *arg) {
    struct writer *w = arg;
    pthread_mutex_lock(&w->thread.mu);
    for (;;) {
        while (w->n == 0 && !w->thread.stop) {
            dfc_thread_wait_locked(&w->thread, NULL);
        }
        if (w->n == 0) {
            break; /* stopped, and everything queued is written */
        }
        struct piece_in pc = w->queue[w->head];
        pthread_mutex_unlock(&w->thread.mu);
        int r = w->error == 0 ? piece_write(w->fd, &pc, (off_t)piece_of(pc.m)->offset) : 0;
        piece_free(&pc);
        pthread_mutex_lock(&w->thread.mu);
        if (r < 0 && w->error == 0) {
            w->error = r;
        }
        w->head = (w->head + 1) % QUEUE_DEPTH;
        w->n--;
        dfc_thread_wake_locked(&w->thread);
    }
    pthread_mutex_unlock(&w->thread.mu);
    return NULL;
}

/* Queues pc for writing (taking it over); waits while the queue is full. */
static int writer_push(struct writer *w, struct piece_in pc) {
    pthread_mutex_lock(&w->thread.mu);
    while (w->n == QUEUE_DEPTH) {
        dfc_thread_wait_locked(&w->thread, NULL);
    }
    w->queue[(w->head + w->n) % QUEUE_DEPTH] = pc;
    w->n++;
    int r = w->error;
    dfc_thread_wake_locked(&w->thread);
    pthread_mutex_unlock(&w->thread.mu);
    return r;
}

/* Writes what is queued, stops the thread, returns the first write error. */
static int writer_finish(struct writer *w) {
    dfc_thread_stop(&w->thread); /* the thread drains the queue before it returns */
    return w->error;
}

static int export_task(const struct export_opts *o);

/* export_task's answer when the daemon does not write output paths for us (we run in another
 * mount namespace, a pod): nothing was written, and receiving the pieces will do. */
#define EXPORT_ELSEWHERE 100

int dfcache_export(int argc, char **argv) {
    struct export_opts o = {0};
    struct dfc_cli_args args;
    int code = dfc_cli_main(&cli, &o, argc, argv, &args);
    struct dfc_error err;
    if (code == DFC_CLI_RUN && o.output == NULL) {
        dfc_error_set(&err, -EINVAL, "-O/--output is required");
        code = dfc_cli_fail(&cli, &err);
    } else if (code == DFC_CLI_RUN && strcmp(o.output, "-") == 0 && o.force_hard_link) {
        dfc_error_set(&err, -EINVAL, "--force-hard-link: standard output (-O -) is no file");
        code = dfc_cli_fail(&cli, &err);
    } else if (code == DFC_CLI_RUN && o.from_daemon && o.force_hard_link) {
        dfc_error_set(&err, -EINVAL,
                      "--force-hard-link and --transfer-from-dfdaemon exclude each other");
        code = dfc_cli_fail(&cli, &err);
    } else if (code == DFC_CLI_RUN) {
        o.id = args.args[0];
        code = export_task(&o);
        if (code == EXPORT_ELSEWHERE) {
            o.from_daemon = true;
            code = export_task(&o);
        }
    }
    dfc_config_free(&schema, &o);
    return code;
}

static int export_task(const struct export_opts *o) {
    struct dfc_error err;
    int r;
    char abs[PATH_MAX] = "-", tmp[PATH_MAX + 64];
    bool to_stdout = strcmp(o->output, "-") == 0;
    if (!to_stdout && resolve_output(o, abs, sizeof(abs), &err) < 0) {
        return dfcache_fail("export", &err);
    }
    if (to_stdout) {
        /* A closed reader is a write error (EPIPE), reported, not a silent death. */
        (void)signal(SIGPIPE, SIG_IGN);
    }
    struct dfc_rpc_client *c;
    if (dfcache_connect(o->c.endpoint, &c, &err) < 0) {
        return dfcache_fail("export", &err);
    }
    Dfdaemon__V2__DownloadPersistentCacheTaskRequest req =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    Google__Protobuf__Duration timeout = GOOGLE__PROTOBUF__DURATION__INIT;
    dfc_pb_duration_from_ns(o->timeout_ns, &timeout);
    req.task_id = (char *)o->id;
    req.persistent = 0; /* as upstream dfcache: a user's export is not a persistent replica */
    req.opt_tag_case = DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_TAG_TAG;
    req.tag = (char *)o->tag;
    req.opt_application_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_APPLICATION_APPLICATION;
    req.application = (char *)o->application;
    req.timeout = &timeout;
    req.overwrite = o->overwrite;
    req.force_hard_link = o->force_hard_link;
    if (o->digest) {
        req.opt_digest_case =
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_DIGEST_DIGEST;
        req.digest = (char *)o->digest;
    }
    int fd = -1;
    struct reorder ro = {0};
    if (to_stdout) {
        req.need_piece_content = 1;
    } else if (o->from_daemon) {
        req.need_piece_content = 1;
        char uuid[DFC_UUID_STR_LEN + 1];
        dfc_uuid_v4(uuid);
        snprintf(tmp, sizeof(tmp), "%.*s/.dfcache-%s", (int)(strrchr(abs, '/') - abs), abs, uuid);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            dfc_rpc_client_free(c);
            dfc_error_errno(&err, -errno, "create a file beside `%s`", abs);
            return dfcache_fail("export", &err);
        }
    } else {
        req.opt_output_path_case =
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_OUTPUT_PATH_OUTPUT_PATH;
        req.output_path = abs;
    }

    struct writer w = {.fd = fd};
    bool writing = false;
    if (fd >= 0) {
        writing = dfc_thread_start(&w.thread, writer_main, &w) == 0; /* else written inline */
    }
    struct dfc_rpc_stream *s = NULL;
    struct dfcache_progress prog;
    uint64_t content_length = 0, got = 0;
    bool started = false;
    r = dfc_rpc_stream_open(c, &dfcache_m.download, o->timeout_ns / 1000000, &s, &err);
    if (r == 0 && (r = dfc_rpc_stream_send(s, &req.base, &err)) == 0) {
        r = dfc_rpc_stream_close_send(s, &err);
    }
    ProtobufCMessage *m;
    struct dfc_rpc_bulk_in *in; /* a piece's content, left in gRPC's slices */
    while (r == 0 &&
           (r = dfc_rpc_stream_recv_bulk(s, dfcache_m.download.resp, &m, &in, &err)) > 0) {
        Dfdaemon__V2__DownloadPersistentCacheTaskResponse *resp = (void *)m;
        r = 0;
        if (resp->response_case ==
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE) {
            content_length = resp->download_persistent_cache_task_started_response->content_length;
            if (content_length > (uint64_t)INT64_MAX) { /* every offset must fit an off_t */
                r = dfc_error_set(&err, -EBADMSG, "the task's content length %llu is too large",
                                  (unsigned long long)content_length);
            } else {
                started = true;
                dfcache_progress_init(&prog, "export", content_length, !o->c.no_progress);
            }
        } else if (
            resp->response_case ==
            DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PIECE_FINISHED_RESPONSE) {
            Common__V2__Piece *p = resp->download_piece_finished_response->piece;
            if (!started || p == NULL) {
                r = dfc_error_set(&err, -EBADMSG, "a piece arrived before the task started");
            } else if (fd >= 0 || to_stdout) {
                if (p->opt_content_case == 0 || p->content.len != p->length) {
                    r = dfc_error_set(&err, -EBADMSG, "piece %u came without its bytes", p->number);
                } else if (p->length > content_length ||
                           p->offset > content_length - p->length) { /* no wrap-around */
                    r = dfc_error_set(&err, -EBADMSG, "piece %u lies past the content length",
                                      p->number);
                } else if (to_stdout) {
                    got += p->length;
                    dfcache_progress_add(&prog, p->length);
                    r = reorder_put(&ro, (struct piece_in){m, in}, &err);
                    continue; /* reorder_put frees m and in */
                } else if (writing) {
                    got += p->length;
                    dfcache_progress_add(&prog, p->length);
                    if ((r = writer_push(&w, (struct piece_in){m, in})) < 0) {
                        dfc_error_errno(&err, r, "write `%s`", tmp);
                    }
                    continue; /* the writer frees m and in */
                } else if ((r = piece_write(fd, &(struct piece_in){m, in}, (off_t)p->offset)) < 0) {
                    dfc_error_errno(&err, r, "write `%s`", tmp);
                }
            }
            if (r == 0 && p != NULL) {
                got += p->length;
                dfcache_progress_add(&prog, p->length);
            }
        }
        dfc_rpc_bulk_in_free(in);
        dfc_rpc_msg_free(m);
    }
    if (writing) {
        int wr = writer_finish(&w);
        if (r == 0 && wr < 0) {
            r = dfc_error_errno(&err, wr, "write `%s`", tmp);
        }
    }
    if (started) {
        dfcache_progress_done(&prog);
    }
    if (r == 0 && to_stdout && ro.n > 0) {
        r = dfc_error_set(&err, -EIO, "the bytes after offset %llu never arrived",
                          (unsigned long long)ro.next);
    }
    reorder_free(&ro);
    if (r == 0 && got != content_length) {
        r = dfc_error_set(&err, -EIO, "received %llu of %llu bytes", (unsigned long long)got,
                          (unsigned long long)content_length);
    }
    if (fd >= 0) {
        if (r == 0 && (fsync(fd) < 0 || rename(tmp, abs) < 0)) {
            r = dfc_error_errno(&err, -errno, "finish `%s`", abs);
        }
        close(fd);
        if (r < 0) {
            (void)unlink(tmp);
        }
    }
    /* The daemon names why it refused in a trailer: in another mount namespace, the export
     * falls back to receiving the pieces. */
    char reason[32];
    bool other_ns = r == DFC_E_FAILED_PRECONDITION && s != NULL &&
                    dfc_rpc_stream_trailer(s, DFC_REASON_MD, reason, sizeof(reason)) >= 0 &&
                    strcmp(reason, DFC_REASON_OTHER_MOUNT_NS) == 0;
    dfc_rpc_stream_free(s);
    dfc_rpc_client_free(c);
    if (other_ns && !o->from_daemon && !to_stdout && !o->force_hard_link) {
        if (o->c.log_level != NULL && strcmp(o->c.log_level, "debug") == 0) {
            fprintf(stderr, "dfcache export: debug: %s: receiving the pieces instead\n",
                    dfc_error_msg(&err));
        }
        return EXPORT_ELSEWHERE;
    }
    if (r < 0) {
        return dfcache_fail("export", &err);
    }
    if (to_stdout) {
        return DFCACHE_OK; /* nothing but the bytes on standard output */
    }
    printf("Done: %s\n", abs);
    return DFCACHE_OK;
}
