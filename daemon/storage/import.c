/*
 * import.c - the import engine of the storage engine: spool, digest in one pass (through the
 * pipeline of import_pipe.c: SHA-256 on one thread, CRC-32 and the spool write on another,
 * overlapping the caller's receive or read), then commit (fsync, rename, metadata row).
 * See storage.h for the contract and storage.c for the DESIGN notes.
 *
 * DESIGN: the store holds only inodes nobody outside the daemon can change. A path import
 * used to hard-link the caller's inode: the caller could then rewrite the cache under every
 * later reader, and have root's later import of the genuine bytes answered with its inode.
 * Now a path import reflinks (FICLONE: as cheap as a link where the filesystem can, and
 * private: a later write to the source unshares its blocks) and hashes the clone, or else
 * copies; it links only inodes the daemon's uid owns with no write or set-id bit.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dfc/cleanup.h"
#include "dfc/fs.h"
#include "import_pipe.h"
#include "storage.h"
#include "storage_internal.h"

/* ---- imports ---- */

/* Smaller writes before the pipeline is running are digested and written inline. */
#define PIPE_MIN ((size_t)64 << 10)
/* Read buffers of a copying path import (DFD_IO_CHUNK each). */
#define PATH_BUFS 3

struct dfd_import {
    struct dfd_storage *s;
    struct dfd_import_params p;
    char *tag, *application, *content_for_id; /* owned copies */
    char peer_id[DFD_PEER_ID_MAX];
    char tmp_path[PATH_MAX];
    int fd;           /* the spool, or -1 when the content is a hard link */
    bool linked;      /* tmp_path is a hard link to the source file */
    bool write_spool; /* fed bytes go to fd (false: fd already holds them, a reflink) */
    struct dfd_digester dg;
    uint64_t written;       /* bytes accepted (queued or done) */
    uint64_t limit;         /* the most bytes this import may write */
    struct dfd__pipe *pipe; /* the SHA and CRC + write stages, once started */
    bool inline_only;       /* no thread could be started: feed in the caller's thread */
};

/* The digests and spool write of n buffers, inline: both stages' work in the caller's thread. */
static int feed_inline(struct dfd_import *imp, const struct iovec *iov, int n) {
    for (int i = 0; i < n; i++) {
        dfd_digester_update_sha(&imp->dg, iov[i].iov_base, iov[i].iov_len);
        int r = dfd_digester_update_crc(&imp->dg, iov[i].iov_base, iov[i].iov_len);
        if (r < 0) {
            return r;
        }
    }
    return imp->write_spool ? dfc_writev_all(imp->fd, iov, n, -1) : 0;
}

/* Hands the n buffers of iov (len bytes) to the digests and the spool, which own them (and
 * iov, when n > 1) until release(arg) (NULL: none) is called: through the pipeline (started
 * by the first large slice) or, before it runs or when no thread can be made, inline. *seq is
 * the slice to dfd__pipe_wait() for, -1 when it is already done. 0 or the (earlier or inline)
 * stage error. */
static int feed(struct dfd_import *imp, const struct iovec *iov, int n, size_t len,
                void (*release)(void *), void *arg, int64_t *seq) {
    *seq = -1;
    if (imp->pipe == NULL && !imp->inline_only && len >= PIPE_MIN &&
        dfd__pipe_start(&imp->dg, imp->write_spool ? imp->fd : -1, &imp->pipe) < 0) {
        imp->inline_only = true;
    }
    if (imp->pipe == NULL) {
        int r = feed_inline(imp, iov, n);
        if (release != NULL) {
            release(arg);
        }
        return r;
    }
    int64_t q = dfd__pipe_push(imp->pipe, iov, n, len, release, arg);
    if (q < 0) {
        return (int)q;
    }
    *seq = q;
    return 0;
}

/* Waits until both stages are done with slice seq; 0 or the first stage error. */
static int feed_wait(struct dfd_import *imp, int64_t seq) {
    return imp->pipe == NULL || seq < 0 ? 0 : dfd__pipe_wait(imp->pipe, seq);
}

void dfd_import_abort(struct dfd_import *imp) {
    if (imp == NULL) {
        return;
    }
    (void)dfd__pipe_stop(imp->pipe, false); /* joins both stages, drops what is queued */
    imp->pipe = NULL;
    dfd__spool_remove(imp->tmp_path, &imp->fd);
    dfd_digester_done(&imp->dg);
    free(imp->tag);
    free(imp->application);
    free(imp->content_for_id);
    free(imp);
}

/* Allocates an import; creates no file yet. */
static int import_new(struct dfd_storage *s, const struct dfd_import_params *p,
                      struct dfd_import **ret, struct dfc_error *err) {
    if (p->peer_id != NULL && strlen(p->peer_id) >= DFD_PEER_ID_MAX) {
        return dfc_error_set(err, -EINVAL, "peer_id: longer than %d bytes", DFD_PEER_ID_MAX - 1);
    }
    struct dfd_import *imp = calloc(1, sizeof(*imp));
    if (imp == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    bool oom = false;
    imp->s = s;
    imp->fd = -1;
    imp->p = *p;
    imp->tag = dfd__dup_or_null(p->tag, &oom);
    imp->application = dfd__dup_or_null(p->application, &oom);
    imp->content_for_id = dfd__dup_or_null(p->content_for_id, &oom);
    imp->p.tag = imp->tag;
    imp->p.application = imp->application;
    imp->p.content_for_id = imp->content_for_id;
    snprintf(imp->peer_id, sizeof(imp->peer_id), "%s", p->peer_id != NULL ? p->peer_id : "");
    imp->p.peer_id = imp->peer_id;
    /* With the length known up front the automatic piece length is too: CRC and SHA-256 per
     * piece in the pass itself (piece.h). */
    struct dfd_digest_params dp = {.hash_content = p->content_for_id == NULL,
                                   .tag = imp->tag,
                                   .application = imp->application,
                                   .piece_length = p->piece_length,
                                   .unit = p->piece_length == 0 && p->expected_length >= 0
                                               ? dfd_piece_length_auto((uint64_t)p->expected_length)
                                               : 0};
    if (oom || dfd_digester_init(&imp->dg, &dp) < 0) {
        dfd_import_abort(imp);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    dfd__spool_name(s, "import", imp->tmp_path);
    *ret = imp;
    return 0;
}

static int create_spool(struct dfd_import *imp, struct dfc_error *err) {
    return dfd__spool_open(imp->tmp_path, &imp->fd, err);
}

/* Free bytes in the store now. */
static int free_space(struct dfd_storage *s, uint64_t *ret, struct dfc_error *err) {
    struct statvfs vfs;
    if (statvfs(s->dir, &vfs) < 0) {
        return dfc_error_errno(err, -errno, "statvfs `%s`", s->dir);
    }
    *ret = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    return 0;
}

int dfd_import_begin(struct dfd_storage *s, const struct dfd_import_params *p,
                     struct dfd_import **ret, struct dfc_error *err) {
    uint64_t avail = 0;
    if (p->expected_length >= 0) {
        int r = dfd__check_space(s, (uint64_t)p->expected_length, err);
        if (r < 0) {
            return r;
        }
    } else {
        int r = free_space(s, &avail, err);
        if (r < 0) {
            return r;
        }
    }
    struct dfd_import *imp;
    int r = import_new(s, p, &imp, err);
    if (r < 0) {
        return r;
    }
    /* A stream of unknown length may not outgrow the space that was free when it began. */
    imp->limit = p->expected_length >= 0 ? (uint64_t)p->expected_length : avail;
    if ((r = create_spool(imp, err)) < 0) {
        dfd_import_abort(imp);
        return r;
    }
    imp->write_spool = true;
    *ret = imp;
    return 0;
}

static int feed_error(struct dfd_import *imp, int r, struct dfc_error *err) {
    return r == -ENOSPC || r == -EDQUOT
               ? dfc_error_set(err, r, "no space left in `%s` while importing", imp->s->dir)
               : dfc_error_errno(err, r, "spool an import into `%s`", imp->tmp_path);
}

/* The checks before bytes are accepted: the announced length and the space. */
static int write_check(struct dfd_import *imp, size_t len, struct dfc_error *err) {
    if (imp->p.expected_length >= 0 && imp->written + len > (uint64_t)imp->p.expected_length) {
        return dfc_error_set(err, -EINVAL, "more content than the announced %lld bytes",
                             (long long)imp->p.expected_length);
    }
    if (imp->limit > 0 && imp->written + len > imp->limit) {
        return dfc_error_set(err, -ENOSPC,
                             "the import outgrew the %llu bytes that were free in `%s` when it "
                             "began",
                             (unsigned long long)imp->limit, imp->s->dir);
    }
    return 0;
}

int dfd_import_write(struct dfd_import *imp, const void *buf, size_t len, struct dfc_error *err) {
    int r = write_check(imp, len, err);
    if (r < 0) {
        return r;
    }
    int64_t seq;
    struct iovec one = {(void *)buf, len};
    if ((r = feed(imp, &one, 1, len, NULL, NULL, &seq)) < 0 || (r = feed_wait(imp, seq)) < 0) {
        return feed_error(imp, r, err);
    }
    imp->written += len;
    return 0;
}

int dfd_import_writev_owned(struct dfd_import *imp, const struct iovec *iov, int n,
                            void (*release)(void *arg), void *arg, struct dfc_error *err) {
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        len += iov[i].iov_len;
    }
    int r = write_check(imp, len, err);
    if (r < 0) {
        if (release != NULL) {
            release(arg);
        }
        return r;
    }
    int64_t seq;
    if ((r = feed(imp, iov, n, len, release, arg, &seq)) < 0) {
        return feed_error(imp, r, err);
    }
    imp->written += len;
    return 0;
}

uint64_t dfd_import_written(const struct dfd_import *imp) {
    return imp->written;
}

static int fill_task(struct dfd_import *imp, const struct dfd_digest_result *dr, const char *id,
                     int64_t now_ns, struct dfd_task_meta *t, struct dfd_piece_meta **ret_pieces,
                     struct dfc_error *err) {
    memset(t, 0, sizeof(*t));
    snprintf(t->id, sizeof(t->id), "%s", id);
    t->persistent = imp->p.persistent;
    t->replica_count = imp->p.replica_count;
    t->piece_length = dr->piece_length;
    t->content_length = dr->content_length;
    t->piece_count = dr->piece_count;
    t->ttl_ns = imp->p.ttl_ns;
    t->created_at_ns = t->updated_at_ns = t->finished_at_ns = now_ns;
    t->hard_linked = imp->linked;
    t->owner_uid = (uint32_t)imp->p.owner_uid;
    t->id_origin = imp->content_for_id != NULL ? DFD_ID_ORIGIN_STRING : DFD_ID_ORIGIN_CONTENT;
    snprintf(t->peer_id, sizeof(t->peer_id), "%s", imp->peer_id);
    bool oom = false;
    t->tag = dfd__dup_or_null(imp->tag, &oom);
    t->application = dfd__dup_or_null(imp->application, &oom);
    t->id_basis = dfd__dup_or_null(imp->content_for_id, &oom);
    dfc_sha256_to_hex(dr->content_sha256, t->content_sha256);
    if (oom || (*ret_pieces = dfd__pieces_new(
                    t, dr->piece_crcs, (const uint8_t(*)[DFC_SHA256_LEN])dr->piece_shas)) == NULL) {
        dfd_task_meta_done(t);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

/* May the store keep the source inode itself? Only when nobody but the daemon can change it:
 * owned by the daemon's euid with no write bit for anyone (then no ACL can grant a write
 * either: the group bits are the ACL mask). Never a setuid/setgid file: a link to it placed
 * in a caller's directory by an export would hand out a set-id binary. */
static bool may_share_inode(const struct dfd_storage *s, const struct stat *st) {
    if ((st->st_mode & (S_ISUID | S_ISGID)) != 0) {
        return false;
    }
    return s->unsafe_shared_inode_imports || (st->st_uid == geteuid() && (st->st_mode & 0222) == 0);
}

/* May this import be answered with the task old that holds its id? Only when old stores the
 * same bytes. Equal length, piece length and piece CRCs (checked by dfd__spool_commit) are
 * necessary, not sufficient: CRC-32 is linear, so anyone can craft other bytes with the same
 * piece CRCs. Equal ids settle it only when both are content-derived (SHA-256 over the
 * content). An id from content_for_calculating_task_id says nothing about the bytes (and a
 * caller who knows a file can pass that file's id pre-image as the string), nor does a
 * replica's (the scheduler's id, bytes checked only by CRC), so such a task is shared only
 * between imports by the same uid; rows from before origins were recorded count as such. */
static int may_share_task(void *arg, const struct dfd_task_meta *old, struct dfc_error *err) {
    const struct dfd_import *imp = arg;
    /* A hard link made by an older version may still be the importer's writable inode: its
     * bytes may no longer be the ones its digests describe. */
    char path[PATH_MAX];
    struct stat st;
    dfd__task_path(imp->s, old->id, path, sizeof(path));
    if (old->hard_linked && (stat(path, &st) < 0 || !may_share_inode(imp->s, &st))) {
        return dfc_error_set(err, -EEXIST,
                             "task id %s is already taken by a hard link to a file its owner can "
                             "still change; delete the task and import again",
                             old->id);
    }
    bool both_from_content = imp->content_for_id == NULL && old->id_origin == DFD_ID_ORIGIN_CONTENT;
    if (!both_from_content && old->owner_uid != (uint32_t)imp->p.owner_uid &&
        old->id_origin == DFD_ID_ORIGIN_PEER) {
        return dfc_error_set(err, -EEXIST,
                             "task id %s is already taken by a replica fetched from peers (its "
                             "bytes are checked by piece CRC only); delete the task and import "
                             "again",
                             old->id);
    }
    if (!both_from_content && old->owner_uid != (uint32_t)imp->p.owner_uid) {
        return dfc_error_set(err, -EEXIST,
                             "task id %s is already taken by another user's import whose id "
                             "does not come from its content (content_for_calculating_task_id)",
                             old->id);
    }
    return 0;
}

int dfd_import_commit(struct dfd_import *imp, int64_t now_ns, struct dfd_task_meta *ret_task,
                      bool *ret_existed, struct dfc_error *err) {
    struct dfd_digest_result dr = {0};
    struct dfd_piece_meta *pieces = NULL;
    char id[DFD_TASK_ID_LEN + 1];
    int r;

    r = dfd__pipe_stop(imp->pipe, true); /* every queued slice is hashed and written */
    imp->pipe = NULL;
    if (r < 0) {
        feed_error(imp, r, err);
        goto out;
    }
    if (imp->p.expected_length >= 0 && imp->written != (uint64_t)imp->p.expected_length) {
        r = dfc_error_set(err, -EINVAL, "the import ended after %llu of %lld announced bytes",
                          (unsigned long long)imp->written, (long long)imp->p.expected_length);
        goto out;
    }
    if ((r = dfd_digester_finish(&imp->dg, &dr)) < 0) {
        dfc_error_set(err, r, r == -ENOMEM ? "out of memory" : "digest the import");
        goto out;
    }
    if (imp->fd < 0) {
        imp->fd = open(imp->tmp_path, O_RDONLY | O_CLOEXEC); /* a hard link: fsync it too */
    }
    if (imp->content_for_id != NULL) {
        dfd_task_id_from_string(imp->content_for_id, id);
    } else {
        memcpy(id, dr.task_id, sizeof(id));
    }
    if ((r = fill_task(imp, &dr, id, now_ns, ret_task, &pieces, err)) < 0) {
        goto out;
    }
    struct dfd__spool sp = {.tmp_path = imp->tmp_path,
                            .fd = imp->fd,
                            .pieces = pieces,
                            .may_share = may_share_task,
                            .may_share_arg = imp,
                            .before_commit = imp->p.before_commit,
                            .before_commit_arg = imp->p.before_commit_arg};
    r = dfd__spool_commit(imp->s, &sp, ret_task, ret_existed, err);
out:
    free(pieces);
    dfd_digest_result_done(&dr);
    dfd_import_abort(imp); /* removes the spool unless it became the content */
    return r;
}

const char *dfd_import_mode_name(enum dfd_import_mode m) {
    return m == DFD_IMPORT_HARDLINK ? "hardlink" : m == DFD_IMPORT_REFLINK ? "reflink" : "copy";
}

int dfd_storage_import_fd(struct dfd_storage *s, const struct dfd_import_params *p, int fd,
                          int64_t now_ns, bool (*should_stop)(void *), void *arg,
                          struct dfd_task_meta *ret_task, bool *ret_existed,
                          enum dfd_import_mode *ret_mode, struct dfc_error *err) {
    struct stat st;
    if (fstat(fd, &st) < 0) {
        return dfc_error_errno(err, -errno, "stat the source");
    }
    if (!S_ISREG(st.st_mode)) {
        return dfc_error_set(err, -EINVAL, "the source is not a regular file");
    }
    struct dfd_import *imp;
    struct dfd_import_params sized = *p;
    sized.expected_length = st.st_size;
    int r = import_new(s, &sized, &imp, err);
    if (r < 0) {
        return r;
    }
    enum dfd_import_mode mode = DFD_IMPORT_COPY;
    int src = fd; /* what is read and hashed */
    /* Link exactly the file that was opened (not whatever the path names now). */
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    if (may_share_inode(s, &st) &&
        linkat(AT_FDCWD, self, AT_FDCWD, imp->tmp_path, AT_SYMLINK_FOLLOW) == 0) {
        imp->linked = true;
        mode = DFD_IMPORT_HARDLINK;
    } else {
        if ((r = create_spool(imp, err)) < 0) {
            dfd_import_abort(imp);
            return r;
        }
        if (ioctl(imp->fd, FICLONE, fd) == 0) {
            /* Hash the clone, not the source: the caller cannot change it any more. */
            if (fstat(imp->fd, &st) < 0) {
                r = dfc_error_errno(err, -errno, "stat `%s`", imp->tmp_path);
                dfd_import_abort(imp);
                return r;
            }
            mode = DFD_IMPORT_REFLINK;
            src = imp->fd;
        } else if ((r = dfd__check_space(s, (uint64_t)st.st_size, err)) < 0) {
            dfd_import_abort(imp);
            return r;
        } else {
            imp->write_spool = true; /* a copy: the bytes read are written to the spool */
        }
    }
    imp->p.expected_length = st.st_size;
    (void)posix_fadvise(src, 0, 0, POSIX_FADV_SEQUENTIAL);
    /* PATH_BUFS buffers in turn: the next chunks are read here while the SHA stage hashes
     * and the writer stage writes and CRCs the ones before; a buffer is read into again
     * only once both stages are done with it. */
    uint8_t *bufs[PATH_BUFS] = {0};
    int64_t seqs[PATH_BUFS];
    for (unsigned b = 0; b < PATH_BUFS; b++) {
        seqs[b] = -1;
        if ((bufs[b] = malloc(DFD_IO_CHUNK)) == NULL) {
            for (unsigned k = 0; k < b; k++) {
                free(bufs[k]);
            }
            dfd_import_abort(imp);
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
    }
    for (unsigned b = 0;;) {
        if (should_stop != NULL && should_stop(arg)) {
            r = dfc_error_set(err, -ECANCELED, "the import was cancelled");
            break;
        }
        if ((r = feed_wait(imp, seqs[b])) < 0) {
            feed_error(imp, r, err);
            break;
        }
        ssize_t n = pread(src, bufs[b], DFD_IO_CHUNK, (off_t)imp->written);
        if (n < 0 && errno == EINTR) {
            continue; /* retry into the same buffer */
        }
        if (n < 0) {
            r = dfc_error_errno(err, -errno, "read the source");
            break;
        }
        if (n == 0) {
            break;
        }
        if (imp->written + (uint64_t)n > (uint64_t)st.st_size) {
            r = dfc_error_set(err, -EAGAIN, "the source grew while it was being imported");
            break;
        }
        struct iovec one = {bufs[b], (size_t)n};
        if ((r = feed(imp, &one, 1, (size_t)n, NULL, NULL, &seqs[b])) < 0) {
            feed_error(imp, r, err);
            break;
        }
        imp->written += (uint64_t)n;
        b = (b + 1) % PATH_BUFS;
    }
    /* Nothing may still use the buffers: drain the stages (or stop them, on failure). */
    if (r == 0) {
        if ((r = dfd__pipe_stop(imp->pipe, true)) < 0) {
            feed_error(imp, r, err);
        }
    } else {
        (void)dfd__pipe_stop(imp->pipe, false);
    }
    imp->pipe = NULL;
    for (unsigned b = 0; b < PATH_BUFS; b++) {
        free(bufs[b]);
    }
    if (r < 0) {
        dfd_import_abort(imp);
        return r;
    }
    if (imp->written != (uint64_t)st.st_size) {
        dfd_import_abort(imp);
        return dfc_error_set(err, -EAGAIN, "the source shrank while it was being imported");
    }
    if (ret_mode != NULL) {
        *ret_mode = mode;
    }
    return dfd_import_commit(imp, now_ns, ret_task, ret_existed, err);
}
