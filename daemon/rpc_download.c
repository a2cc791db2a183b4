/*
 * rpc_download.c - dfdaemon.v2.DfdaemonDownload (the Unix socket API of Dragonfly's dfdaemon)
 * and the persistent-cache methods of dfdaemon.v2.DfdaemonUpload, as method tables with thin
 * handlers. Standalone, every answer comes from the local store; with a scheduler, an export
 * of a task that is not stored here fetches it from peers first (rpc_fetch.c, p2p/download.c),
 * and the socket's StatPersistentCacheTask answers from the scheduler (the cluster's view).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "caller.h"
#include "dfc/cleanup.h"
#include "dfc/dragonfly.h"
#include "dfc/fdpass.h"
#include "dfc/id.h"
#include "dfc/log.h"
#include "dfc/pbtime.h"
#include "dfc/rpc_bulk.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "export.h"
#include "metrics.h"
#include "fdpass.h"
#include "google/protobuf/empty.pb-c.h"
#include "pathfd.h"
#include "registration.h"
#include "rpc_fetch.h"
#include "scheduler_client.h"
#include "service.h"
#include "storage/pins.h"
#include "validate.h"

#define OPT(msg, field) ((msg)->opt_##field##_case != 0 ? (msg)->field : NULL)

/* The caller at the other end of the Unix socket; -EACCES when it is unknown. */
static int get_caller(struct dfc_rpc_call *call, struct dfd_caller *ret, struct dfc_error *err) {
    struct ucred cred;
    if (dfc_rpc_call_peer_cred(call, &cred) < 0) {
        return dfc_error_set(err, -EACCES,
                             "permission denied: the caller's credentials are unknown (only "
                             "Unix-socket callers may name files)");
    }
    dfd_caller_init(ret, cred.pid, cred.uid, cred.gid);
    return 0;
}

/* Destructive calls (delete, update, turning persistence on): only the uid that imported the
 * task, root, or the daemon's own uid. Callers without credentials are refused. */
static int check_owner(struct dfc_rpc_call *call, const struct dfd_task_meta *t, const char *verb,
                       struct dfc_error *err) {
    struct ucred cred;
    if (dfc_rpc_call_peer_cred(call, &cred) < 0) {
        return dfc_error_set(err, -EACCES,
                             "permission denied: the caller's credentials are unknown; only "
                             "Unix-socket callers may %s",
                             verb);
    }
    if (cred.uid == 0 || cred.uid == geteuid() || cred.uid == t->owner_uid) {
        return 0;
    }
    return dfc_error_set(err, -EACCES, "task %s belongs to uid %u; only its owner or root may %s",
                         t->id, (unsigned)t->owner_uid, verb);
}

static bool call_cancelled(void *call) {
    return dfc_rpc_call_cancelled(call);
}

/* ---- UploadPersistentCacheTask: import by path ---- */

/* With the DFC_FILE_IDENTITY_MD metadata ("<st_dev>:<st_ino>"), the file the daemon opened must
 * be the client's: a different file at that path is FAILED_PRECONDITION, which is how dfcache
 * learns that it runs in another mount namespace (a pod) and streams instead. */
static int check_identity(struct dfc_rpc_call *call, int fd, const char *path,
                          struct dfc_error *err) {
    char want[64];
    if (dfc_rpc_call_metadata(call, DFC_FILE_IDENTITY_MD, want, sizeof(want)) < 0) {
        return 0;
    }
    struct stat st;
    char have[64];
    if (fstat(fd, &st) < 0) {
        return dfc_error_errno(err, -errno, "stat `%s`", path);
    }
    snprintf(have, sizeof(have), "%" PRIu64 ":%" PRIu64, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
    if (strcmp(want, have) != 0) {
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "the daemon sees a different file at `%s` (client %s, daemon %s)",
                             path, want, have);
    }
    return 0;
}

/* dfd_caller_enter() for call: a caller in another mount namespace also gets the typed
 * reason DFC_REASON_OTHER_MOUNT_NS in the trailing metadata, which dfcache acts on (the
 * message is for people). */
static int enter_caller(struct dfc_rpc_call *call, const struct dfd_caller *caller,
                        struct dfd_caller_saved *saved, struct dfc_error *err) {
    int r = dfd_caller_enter(caller, saved, err);
    if (r == DFC_E_FAILED_PRECONDITION) {
        (void)dfc_rpc_call_set_trailer(call, DFC_REASON_MD, DFC_REASON_OTHER_MOUNT_NS);
    }
    return r;
}

/* Opens the caller's file acting as the caller: the kernel decides (ACLs included), and the
 * caller learns only what it could learn itself. */
static int open_source(struct dfc_rpc_call *call, const struct dfd_caller *caller, const char *path,
                       int *ret_fd, struct dfc_error *err) {
    struct dfd_caller_saved saved;
    int r = enter_caller(call, caller, &saved, err);
    if (r == 0) {
        r = dfd_pathfd_open_file(path, caller->uid, ret_fd, err);
        dfd_caller_leave(&saved);
    }
    return r;
}

/* The descriptor passed on the sibling socket with the DFC_FD_TOKEN_MD token, taken (one
 * use) only by the process that passed it: 1 with *ret_fd set; 0 when the call has no token
 * (a path import). */
static int take_passed_fd(struct dfd_service *svc, struct dfc_rpc_call *call,
                          const struct dfd_caller *caller, int *ret_fd, struct dfc_error *err) {
    char token[DFC_FDPASS_TOKEN_HEX + 2];
    if (dfc_rpc_call_metadata(call, DFC_FD_TOKEN_MD, token, sizeof(token)) < 0) {
        return 0;
    }
    if (svc->fdpass == NULL) {
        return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                             "this daemon takes no passed descriptors (" DFC_FD_TOKEN_MD ")");
    }
    int r = dfd_fdpass_take(svc->fdpass, token, caller->pid, caller->uid, ret_fd, err);
    return r < 0 ? r : 1;
}

/* The import; *ret_src, *ret_how and *ret_bytes say what it was, for the metrics. */
static int upload_task_run(struct dfd_service *svc, struct dfc_rpc_call *call,
                           const ProtobufCMessage *req_, ProtobufCMessage *resp_,
                           enum dfd_import_source *ret_src, enum dfd_import_how *ret_how,
                           uint64_t *ret_bytes, struct dfc_error *err) {
    const Dfdaemon__V2__UploadPersistentCacheTaskRequest *req = (const void *)req_;
    struct dfd_import_params p;
    int r = dfd_validate_path("path", req->path, err);
    if (r == 0) {
        r = dfd__import_params(svc, OPT(req, content_for_calculating_task_id),
                               req->persistent_replica_count, OPT(req, tag), OPT(req, application),
                               req->opt_piece_length_case != 0, req->piece_length, req->ttl, &p,
                               err);
    }
    if (r == 0 && req->opt_remote_ip_case != 0) {
        r = dfd_validate_ip("remote_ip", req->remote_ip, err);
    }
    struct dfd_caller caller;
    if (r == 0) {
        r = get_caller(call, &caller, err);
    }
    _cleanup_close_ int fd = -1;
    bool passed = false; /* an fd import: no path is resolved */
    if (r == 0) {
        r = take_passed_fd(svc, call, &caller, &fd, err);
        passed = r == 1;
        *ret_src = passed ? DFD_SOURCE_FD : DFD_SOURCE_PATH;
        r = r < 0 ? r : 0;
    }
    if (r == 0 && !passed) {
        r = open_source(call, &caller, req->path, &fd, err);
    }
    if (r == 0 && !passed) {
        r = check_identity(call, fd, req->path, err);
    }
    if (r != 0) {
        return r;
    }
    p.owner_uid = caller.uid;
    struct dfd_registration reg;
    if ((r = dfd_registration_prepare(&reg, svc->sched, svc->cfg, &p, err)) < 0) {
        return r;
    }
    struct dfd_task_meta t;
    bool existed = false;
    enum dfd_import_mode mode = DFD_IMPORT_COPY;
    r = dfd_storage_import_fd(svc->storage, &p, fd, dfd__now(svc), call_cancelled, call, &t,
                              &existed, &mode, err);
    r = dfd_registration_end(&reg, svc->storage, r, &t, existed, err);
    if (r < 0) {
        return r;
    }
    DFC_LOG(DFC_LOG_INFO, "import.done",
            "task_id=%s mode=%s bytes=%" PRIu64 " pieces=%u existed=%d uid=%d source=%s", t.id,
            dfd_import_mode_name(mode), t.content_length, t.piece_count, existed, (int)caller.uid,
            passed ? "fd" : "path");
    *ret_how = mode == DFD_IMPORT_HARDLINK  ? DFD_IMPORT_HOW_HARDLINK
               : mode == DFD_IMPORT_REFLINK ? DFD_IMPORT_HOW_REFLINK
                                            : DFD_IMPORT_HOW_COPY;
    *ret_bytes = t.content_length;
    r = dfd__task_to_proto(call, &t, (Common__V2__PersistentCacheTask *)resp_, err);
    dfd_task_meta_done(&t);
    return r;
}

static int upload_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                       ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    enum dfd_import_source src = DFD_SOURCE_PATH;
    enum dfd_import_how how = DFD_IMPORT_HOW_COPY;
    uint64_t bytes = 0;
    int r = upload_task_run(svc, call, req_, resp_, &src, &how, &bytes, err);
    dfd_metrics_import(svc->metrics, src, r >= 0, how, bytes);
    return r;
}

/* ---- DownloadPersistentCacheTask: export ---- */

static int open_output_dir(struct dfc_rpc_call *call, const struct dfd_caller *caller,
                           const char *output, int *ret_dirfd, char *base, size_t size,
                           struct dfc_error *err) {
    struct dfd_caller_saved saved;
    int r = enter_caller(call, caller, &saved, err);
    if (r == 0) {
        r = dfd_pathfd_open_parent("output_path", output, caller->uid, ret_dirfd, base, size, err);
        dfd_caller_leave(&saved);
    }
    return r;
}

/* The request's fields; *ret_algo and *ret_want (into req) stay NULL without a digest. */
static int validate_download(const Dfdaemon__V2__DownloadPersistentCacheTaskRequest *req,
                             const char **ret_algo, const char **ret_want, struct dfc_error *err) {
    const char *output = OPT(req, output_path);
    int r = dfd_validate_task_id(req->task_id, err);
    if (r == 0 && output != NULL) {
        r = dfd_validate_path("output_path", output, err);
    }
    if (r == 0 && req->opt_digest_case != 0) {
        r = dfd_validate_digest(req->digest, ret_algo, ret_want, err);
    }
    if (r == 0 && req->opt_remote_ip_case != 0) {
        r = dfd_validate_ip("remote_ip", req->remote_ip, err);
    }
    if (r == 0 && req->force_hard_link && output == NULL) {
        r = dfc_error_set(err, -EINVAL, "force_hard_link needs an output_path");
    }
    return r;
}

/* What an export did, for the metrics. */
struct export_outcome {
    bool remote, linked, to_path, streamed;
    uint64_t bytes;
};

static int download_task_run(struct dfd_service *svc, struct dfc_rpc_call *call,
                             const ProtobufCMessage *req_, struct export_outcome *ret,
                             struct dfc_error *err) {
    const Dfdaemon__V2__DownloadPersistentCacheTaskRequest *req = (const void *)req_;
    const char *output = OPT(req, output_path);
    const char *algo = NULL, *want = NULL;
    int r = validate_download(req, &algo, &want, err);
    /* The output's directory is resolved once, as the caller; every later step works on it. */
    struct dfd_caller caller;
    _cleanup_close_ int dirfd = -1;
    char base[NAME_MAX + 1];
    if (r == 0 && output != NULL) {
        r = get_caller(call, &caller, err);
        if (r == 0) {
            r = open_output_dir(call, &caller, output, &dirfd, base, sizeof(base), err);
        }
    }
    if (r < 0) {
        return r;
    }
    struct dfd_fetch f;
    if ((r = dfd__fetch_init(&f, svc, call, req->task_id, req->need_piece_content, err)) < 0) {
        return r;
    }
    struct dfd_task_meta t;
    bool remote = false;
    r = dfd__load_task(svc, req->task_id, &t, err);
    if (r == -ENOENT && svc->p2p != NULL) {
        /* Not stored here: the P2P engine fetches it from peers into the store, and the stream
         * reports Started and each piece as it is written; the export below then works on the
         * committed task as for a local one. */
        remote = true;
        r = dfd__fetch_remote(&f, req->persistent, OPT(req, tag), OPT(req, application), &t, err);
    }
    if (r < 0) {
        dfd__fetch_done(&f);
        return r;
    }
    _cleanup_close_ int fd = -1;
    /* persistent=true turns persistence on: the owner's call, refused before the export. A
     * fetched replica was made persistent by the engine as asked. */
    if (!remote && req->persistent && (r = check_owner(call, &t, "make it persistent", err)) < 0) {
        goto out;
    }
    if ((r = dfd_storage_open_content(svc->storage, t.id, &fd, err)) < 0) {
        goto out;
    }
    /* Verify before anything leaves when nothing else reads the bytes; while streaming the
     * per-piece CRCs guard each piece. */
    if (algo != NULL && (r = dfd_storage_verify_digest(fd, algo, want, err)) < 0) {
        goto out;
    }
    if ((r = dfd__fetch_started(&f, t.content_length, err)) < 0) {
        goto out;
    }
    bool linked = false;
    if (output != NULL) {
        struct dfd_export_opts o = {req->overwrite, req->force_hard_link, output, caller.uid};
        struct dfd_caller_saved saved;
        if ((r = enter_caller(call, &caller, &saved, err)) < 0) {
            goto out;
        }
        r = dfd_export_into(fd, dirfd, base, &o, &linked, err);
        dfd_caller_leave(&saved);
        if (r < 0) {
            goto out;
        }
    }
    if ((r = dfd__fetch_send_stored(&f, fd, &t, err)) < 0) {
        goto out;
    }
    struct dfc_error e;
    if (req->persistent && !remote) { /* promote only: never demotes a persistent replica */
        (void)dfd_storage_set_persistent(svc->storage, t.id, true, dfd__now(svc), &e);
    } else {
        (void)dfd_storage_touch(svc->storage, t.id, dfd__now(svc), &e);
    }
    DFC_LOG(DFC_LOG_INFO, "export.done",
            "task_id=%s output=%s mode=%s pieces=%u content=%d source=%s", t.id,
            output ? output : "-", output ? (linked ? "hardlink" : "copy") : "stream",
            t.piece_count, req->need_piece_content, remote ? "peers" : "local");
    *ret = (struct export_outcome){.remote = remote,
                                   .linked = linked,
                                   .to_path = output != NULL,
                                   .streamed = req->need_piece_content,
                                   .bytes = t.content_length};
out:
    dfd__fetch_done(&f);
    dfd_task_meta_done(&t);
    return r;
}

static int download_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                         ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    struct export_outcome o = {0};
    int r = download_task_run(svc, call, req_, &o, err);
    dfd_metrics_export(svc->metrics, r >= 0, o.remote, o.linked, o.to_path, o.streamed, o.bytes);
    if (r >= 0 && ((const Dfdaemon__V2__DownloadPersistentCacheTaskRequest *)req_)->persistent) {
        dfd_metrics_store_changed(svc->metrics); /* a task may have been made persistent */
    }
    return r;
}

/* ---- stat, list, delete, update ---- */

int dfd__stat_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                   ProtobufCMessage *resp_, struct dfc_error *err) {
    const Dfdaemon__V2__StatPersistentCacheTaskRequest *req = (const void *)req_;
    struct dfd_task_meta t;
    int r = dfd__load_task(svc_, req->task_id, &t, err); /* -ENOENT names the task */
    if (r == 0) {
        r = dfd__task_to_proto(call, &t, (Common__V2__PersistentCacheTask *)resp_, err);
        dfd_task_meta_done(&t);
    }
    return r;
}

/* A copy of src in the call's arena (NULL stays NULL; *ok false when out of memory). */
static void *arena_copy(struct dfc_rpc_call *call, const void *src, size_t size, bool *ok) {
    if (src == NULL) {
        return NULL;
    }
    ProtobufCMessage *m = dfc_rpc_call_alloc(call, size);
    if (m == NULL) {
        *ok = false;
        return NULL;
    }
    memcpy(m, src, size);
    m->n_unknown_fields = 0;
    m->unknown_fields = NULL;
    return m;
}

int dfd__sched_task_to_proto(struct dfc_rpc_call *call, const Common__V2__PersistentCacheTask *st,
                             Common__V2__PersistentCacheTask *out, struct dfc_error *err) {
    out->id = dfc_rpc_call_strdup(call, st->id);
    out->persistent_replica_count = st->persistent_replica_count;
    out->current_persistent_replica_count = st->current_persistent_replica_count;
    out->current_replica_count = st->current_replica_count;
    out->opt_tag_case = COMMON__V2__PERSISTENT_CACHE_TASK__OPT_TAG_TAG;
    out->tag = dfc_rpc_call_strdup(call, st->opt_tag_case != 0 && st->tag ? st->tag : "");
    out->opt_application_case = COMMON__V2__PERSISTENT_CACHE_TASK__OPT_APPLICATION_APPLICATION;
    out->application = dfc_rpc_call_strdup(
        call, st->opt_application_case != 0 && st->application ? st->application : "");
    out->piece_length = st->piece_length;
    out->content_length = st->content_length;
    out->piece_count = st->piece_count;
    out->state = dfc_rpc_call_strdup(call, st->state);
    bool ok = true;
    out->ttl = arena_copy(call, st->ttl, sizeof(*st->ttl), &ok);
    out->created_at = arena_copy(call, st->created_at, sizeof(*st->created_at), &ok);
    out->updated_at = arena_copy(call, st->updated_at, sizeof(*st->updated_at), &ok);
    if (!ok || !out->id || !out->tag || !out->application || !out->state) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

/* StatPersistentCacheTask on the Unix socket: with a scheduler, the cluster's view of the task
 * (as upstream, which forwards it); the scheduler UNAVAILABLE, the local copy when stored here,
 * else the scheduler's error. Standalone: the local store. */
static int stat_task_cluster(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                             ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const Dfdaemon__V2__StatPersistentCacheTaskRequest *req = (const void *)req_;
    if (svc->sched == NULL) {
        return dfd__stat_task(svc_, call, req_, resp_, err);
    }
    int r = dfd_validate_task_id(req->task_id, err);
    if (r < 0) {
        return r;
    }
    Common__V2__PersistentCacheTask *st = NULL;
    r = dfd_sched_stat_task(svc->sched, req->task_id, &st, err);
    if (r == 0) {
        r = dfd__sched_task_to_proto(call, st, (Common__V2__PersistentCacheTask *)resp_, err);
        dfc_rpc_msg_free(&st->base);
        return r;
    }
    if (dfc_error_to_grpc(r) != DFC_GRPC_UNAVAILABLE) {
        return r;
    }
    struct dfc_error e;
    struct dfd_task_meta t;
    if (dfd__load_task(svc_, req->task_id, &t, &e) < 0) {
        return r; /* not here either: the scheduler's code and message */
    }
    DFC_LOG(DFC_LOG_DEBUG, "stat.local_fallback", "task_id=%s error=\"%s\"", req->task_id,
            dfc_error_msg(err));
    r = dfd__task_to_proto(call, &t, (Common__V2__PersistentCacheTask *)resp_, err);
    dfd_task_meta_done(&t);
    return r;
}

static int stat_local_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                           ProtobufCMessage *resp_, struct dfc_error *err) {
    const Dfdaemon__V2__StatLocalPersistentCacheTaskRequest *req = (const void *)req_;
    struct dfd_task_meta t;
    int r = dfd__load_task(svc_, req->task_id, &t, err);
    if (r == 0) {
        r = dfd__task_to_local(call, &t,
                               (Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *)resp_, err);
        dfd_task_meta_done(&t);
    }
    return r;
}

static int list_local_tasks(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                            ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    Dfdaemon__V2__ListLocalPersistentCacheTasksResponse *resp = (void *)resp_;
    struct dfd_task_meta *tasks;
    size_t n;
    int r = dfd_storage_list(svc->storage, &tasks, &n, err);
    if (r < 0) {
        return r;
    }
    resp->tasks = dfc_rpc_call_alloc(
        call, (n ? n : 1) * sizeof(Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *));
    r = resp->tasks == NULL ? dfc_error_set(err, -ENOMEM, "out of memory") : 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        resp->tasks[i] = (Dfdaemon__V2__StatLocalPersistentCacheTaskResponse *)dfc_rpc_call_new_msg(
            call, &dfdaemon__v2__stat_local_persistent_cache_task_response__descriptor);
        r = resp->tasks[i] == NULL ? dfc_error_set(err, -ENOMEM, "out of memory")
                                   : dfd__task_to_local(call, &tasks[i], resp->tasks[i], err);
    }
    resp->n_tasks = r == 0 ? n : 0;
    dfd_task_meta_list_free(tasks, n);
    return r;
}

/* A deleted task that content volumes still pin is hidden, not gone: say so (its space comes
 * back at the last unpublish, docs/content-volumes.md). */
static void log_pinned(struct dfd_service *svc, const char *task_id) {
    char(*ids)[DFD_PIN_ID_MAX + 1] = NULL;
    size_t n = 0;
    struct dfc_error e;
    if (dfd_storage_task_pins(svc->storage, task_id, &ids, &n, &e) == 0 && n > 0) {
        DFC_LOG(DFC_LOG_INFO, "delete.pinned",
                "task_id=%s pins=%zu first=%s: hidden; its volumes keep the content until the "
                "last is unpublished",
                task_id, n, ids[0]);
    }
    free(ids);
}

static int delete_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                       ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const Dfdaemon__V2__DeletePersistentCacheTaskRequest *req = (const void *)req_;
    struct dfd_task_meta t;
    int r = dfd__load_task(svc, req->task_id, &t, err);
    if (r == -ENOENT) {
        return 0; /* deleting an absent task is fine, as before */
    }
    if (r < 0) {
        return r;
    }
    r = check_owner(call, &t, "delete it", err);
    bool deleted = false; /* only the task whose owner was checked, not a newer import */
    if (r == 0) {
        r = dfd_storage_delete_task(svc->storage, &t, false, &deleted, err);
    }
    if (r == 0 && deleted) {
        dfd_registration_forget(svc->sched, &t);
        log_pinned(svc, req->task_id);
    }
    dfd_task_meta_done(&t);
    if (r == 0) {
        DFC_LOG(DFC_LOG_INFO, "delete.done", "task_id=%s", req->task_id);
        dfd_metrics_store_changed(svc->metrics);
    }
    return r;
}

static int update_task(void *svc_, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                       ProtobufCMessage *resp_, struct dfc_error *err) {
    struct dfd_service *svc = svc_;
    const Dfdaemon__V2__UpdatePersistentCacheTaskRequest *req = (const void *)req_;
    struct dfd_task_meta t;
    int r = dfd__load_task(svc, req->task_id, &t, err);
    if (r == -ENOENT && !req->persistent) {
        return 0; /* persistent=false is a no-op, as upstream */
    }
    if (r < 0) {
        return r;
    }
    r = check_owner(call, &t, "update it", err);
    dfd_task_meta_done(&t);
    if (r < 0 || !req->persistent) {
        return r; /* persistent=false is a no-op, as upstream (for the owner) */
    }
    dfd_metrics_store_changed(svc->metrics);
    return dfd_storage_set_persistent(svc->storage, req->task_id, true, dfd__now(svc), err);
}

const struct dfc_rpc_method dfd__download_methods[] = {
    DFC_RPC_METHOD("UploadPersistentCacheTask", DFC_RPC_UNARY,
                   dfdaemon__v2__upload_persistent_cache_task_request,
                   common__v2__persistent_cache_task, upload_task),
    DFD_METHOD_DOWNLOAD_TASK(download_task),
    DFD_METHOD_STAT_TASK(stat_task_cluster),
    DFC_RPC_METHOD("StatLocalPersistentCacheTask", DFC_RPC_UNARY,
                   dfdaemon__v2__stat_local_persistent_cache_task_request,
                   dfdaemon__v2__stat_local_persistent_cache_task_response, stat_local_task),
    DFC_RPC_METHOD("ListLocalPersistentCacheTasks", DFC_RPC_UNARY,
                   dfdaemon__v2__list_local_persistent_cache_tasks_request,
                   dfdaemon__v2__list_local_persistent_cache_tasks_response, list_local_tasks),
};
const size_t dfd__n_download_methods = DFC_RPC_N(dfd__download_methods);

const struct dfc_rpc_method dfd__upload_methods[] = {
    DFD_METHOD_DOWNLOAD_TASK(download_task),
    DFD_METHOD_UPDATE_TASK(update_task),
    DFD_METHOD_STAT_TASK(dfd__stat_task),
    DFD_METHOD_DELETE_TASK(delete_task),
};
const size_t dfd__n_upload_methods = DFC_RPC_N(dfd__upload_methods);
