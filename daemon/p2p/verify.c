/*
 * verify.c - the checks of a P2P download against the importers' records and the running
 * content hash (verify.h, docs/integrity.md).
 */
#include "p2p/verify.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define READ_CHUNK ((size_t)1 << 20)

bool dfd_verify_usable(const dfd_digest_record *rec, uint64_t piece_length,
                       uint64_t content_length) {
    if (rec == NULL || rec->piece_length != piece_length || rec->content_length != content_length ||
        piece_length == 0 || piece_length % 64 != 0 || rec->content_sha256.len != DFC_SHA256_LEN) {
        return false;
    }
    size_t n = rec->n_piece_sha256;
    if (n != dfd_piece_count(content_length, piece_length)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (rec->piece_sha256[i].len != DFC_SHA256_LEN) {
            return false;
        }
    }
    return n == 0 ||
           memcmp(rec->piece_sha256[n - 1].data, rec->content_sha256.data, DFC_SHA256_LEN) == 0;
}

int dfd_verify_resume(struct dfc_sha256c *c, const dfd_digest_record *rec, uint32_t number,
                      uint64_t piece_length) {
    const uint8_t *start = number > 0 ? rec->piece_sha256[number - 1].data : NULL;
    return dfc_sha256c_resume(c, start, (uint64_t)number * piece_length);
}

bool dfd_verify_end(struct dfc_sha256c *c, const dfd_digest_record *rec, uint32_t number) {
    uint8_t md[DFC_SHA256_LEN];
    if (number + 1 == rec->n_piece_sha256) {
        dfc_sha256c_final(c, md);
    } else if (dfc_sha256c_state(c, md) < 0) {
        return false;
    }
    return number < rec->n_piece_sha256 &&
           memcmp(rec->piece_sha256[number].data, md, DFC_SHA256_LEN) == 0;
}

int dfd_verify_content(const struct dfc_sha256c *content, const char *task_id, const char *tag,
                       const char *application, uint64_t piece_length, const dfd_digest_record *rec,
                       char content_hex[DFC_SHA256_HEX_LEN + 1], const char **ret_basis,
                       struct dfc_error *err) {
    struct dfc_sha256c h;
    uint8_t md[DFC_SHA256_LEN];
    if (dfc_sha256c_copy(&h, content) < 0) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    dfc_sha256c_final(&h, md);
    dfc_sha256c_done(&h);
    dfc_sha256_to_hex(md, content_hex);
    if (ret_basis != NULL) {
        *ret_basis = NULL;
    }
    /* A basis ending in "PERSISTENT_CACHE" may be the pre-image of a content-derived id (the
     * bytes of some file, then the suffix): whoever knows a file could record other bytes
     * under its id that way. Such a record does not decide; the id rule does. */
    const char *basis =
        rec != NULL && rec->id_basis != NULL && rec->id_basis[0] != '\0' ? rec->id_basis : NULL;
    size_t bl = basis != NULL ? strlen(basis) : 0;
    if (bl >= 16 && memcmp(basis + bl - 16, "PERSISTENT_CACHE", 16) == 0) {
        basis = NULL;
    }
    char id[DFC_SHA256_HEX_LEN + 1];
    if (basis != NULL) {
        if (dfc_sha256_hex(basis, strlen(basis), id) < 0) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
    }
    if (basis != NULL && strcmp(id, task_id) == 0) {
        if (memcmp(md, rec->content_sha256.data, DFC_SHA256_LEN) != 0) {
            return dfc_error_set(err, DFC_E_DATA_LOSS,
                                 "task %s: the content's SHA-256 %s is not the one its importer "
                                 "%s recorded",
                                 task_id, content_hex, rec->host_id != NULL ? rec->host_id : "-");
        }
        if (ret_basis != NULL) {
            *ret_basis = basis;
        }
        return 0;
    }
    /* The id must come from the content: SHA-256(content || tag || application || [piece
     * length] || "PERSISTENT_CACHE"), with the piece length only when the import gave one. */
    uint64_t pls[2] = {0, piece_length};
    for (int k = 0; k < 2; k++) {
        if (dfc_sha256c_copy(&h, content) < 0) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        dfd_task_id_finish(&h, tag, application, pls[k], id);
        dfc_sha256c_done(&h);
        if (strcmp(id, task_id) == 0) {
            return 0;
        }
    }
    return dfc_error_set(
        err, DFC_E_DATA_LOSS, "task %s: the content does not hash to the task id%s", task_id,
        rec != NULL ? " (nor to its recorded id basis)" : " (no digests recorded)");
}

/* ---- the prefix hash ---- */

struct dfd_prefix_hash {
    struct dfd_replica *rep;
    uint64_t piece_length, content_length;
    uint32_t n;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* broadcast on every change below */
    uint8_t *ready;    /* under mu: per piece, written and checked */
    uint32_t next;     /* under mu: pieces hashed */
    bool stop;         /* under mu */
    int error;         /* under mu: a read error, with err */
    struct dfc_error err;
    struct dfc_sha256c sha;            /* the hashing thread's (or finish's, without one) */
    uint8_t (*states)[DFC_SHA256_LEN]; /* borrowed: the chaining value at each piece end */
    uint8_t *buf;
    pthread_t th;
    bool threaded;
};

static int hash_piece(struct dfd_prefix_hash *h, uint32_t number, struct dfc_error *err) {
    uint64_t off = (uint64_t)number * h->piece_length;
    uint64_t end =
        off + h->piece_length < h->content_length ? off + h->piece_length : h->content_length;
    while (off < end) {
        size_t n = end - off < READ_CHUNK ? (size_t)(end - off) : READ_CHUNK;
        int r = dfd_replica_pread(h->rep, off, h->buf, n, err);
        if (r < 0) {
            return r;
        }
        dfc_sha256c_update(&h->sha, h->buf, n);
        off += n;
    }
    if (number + 1 < h->n && dfc_sha256c_state(&h->sha, h->states[number]) < 0) {
        memset(h->states[number], 0, DFC_SHA256_LEN); /* a piece length inside a block */
    }
    return 0;
}

static void *hash_main(void *arg) {
    struct dfd_prefix_hash *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop && h->error == 0 && h->next < h->n) {
        if (!h->ready[h->next]) {
            pthread_cond_wait(&h->cv, &h->mu);
            continue;
        }
        uint32_t number = h->next;
        pthread_mutex_unlock(&h->mu);
        struct dfc_error e;
        int r = hash_piece(h, number, &e);
        pthread_mutex_lock(&h->mu);
        if (r < 0) {
            h->error = r;
            h->err = e;
        } else {
            h->next++;
        }
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

int dfd_prefix_hash_new(struct dfd_replica *rep, uint64_t piece_length, uint64_t content_length,
                        uint8_t (*states)[DFC_SHA256_LEN], struct dfd_prefix_hash **ret,
                        struct dfc_error *err) {
    struct dfd_prefix_hash *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    h->rep = rep;
    h->states = states;
    h->piece_length = piece_length;
    h->content_length = content_length;
    h->n = dfd_piece_count(content_length, piece_length);
    h->ready = calloc(h->n ? h->n : 1, 1);
    h->buf = malloc(READ_CHUNK);
    if (h->ready == NULL || h->buf == NULL || dfc_sha256c_init(&h->sha) < 0) {
        free(h->ready);
        free(h->buf);
        free(h);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->threaded = h->n > 0 && pthread_create(&h->th, NULL, hash_main, h) == 0;
    *ret = h;
    return 0;
}

void dfd_prefix_hash_piece(struct dfd_prefix_hash *h, uint32_t number) {
    pthread_mutex_lock(&h->mu);
    if (number < h->n) {
        h->ready[number] = 1;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
}

int dfd_prefix_hash_finish(struct dfd_prefix_hash *h, struct dfc_sha256c *out,
                           struct dfc_error *err) {
    if (!h->threaded) {
        for (; h->error == 0 && h->next < h->n; h->next++) {
            if (!h->ready[h->next]) {
                return dfc_error_set(err, -EINVAL, "piece %u was not written", h->next);
            }
            h->error = hash_piece(h, h->next, &h->err);
        }
    }
    pthread_mutex_lock(&h->mu);
    while (h->threaded && h->error == 0 && h->next < h->n) {
        pthread_cond_wait(&h->cv, &h->mu);
    }
    int r = h->error;
    if (r < 0) {
        *err = h->err;
    }
    pthread_mutex_unlock(&h->mu);
    if (r == 0 && dfc_sha256c_copy(out, &h->sha) < 0) {
        r = dfc_error_set(err, -ENOMEM, "out of memory");
    }
    return r;
}

void dfd_prefix_hash_free(struct dfd_prefix_hash *h) {
    if (h == NULL) {
        return;
    }
    if (h->threaded) {
        pthread_mutex_lock(&h->mu);
        h->stop = true;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->th, NULL);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    dfc_sha256c_done(&h->sha);
    free(h->ready);
    free(h->buf);
    free(h);
}
