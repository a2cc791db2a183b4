/*
 * keycount.c - counts by a short text key, for the per-remote caps (dfc/keycount.h).
 */
#include "dfc/keycount.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct dfc_keycount_entry *find(const struct dfc_keycount *k, const char *key) {
    for (size_t i = 0; i < k->n; i++) {
        if (strncmp(k->v[i].key, key, DFC_KEYCOUNT_KEY_MAX - 1) == 0) {
            return &k->v[i];
        }
    }
    return NULL;
}

unsigned dfc_keycount_get(const struct dfc_keycount *k, const char *key) {
    const struct dfc_keycount_entry *e = find(k, key);
    return e != NULL ? e->n : 0;
}

int dfc_keycount_take(struct dfc_keycount *k, const char *key, unsigned max) {
    struct dfc_keycount_entry *e = find(k, key);
    if (e != NULL && ((max != 0 && e->n >= max) || e->n >= INT_MAX)) {
        return -EBUSY;
    }
    if (e == NULL) {
        if (k->n == k->cap) {
            size_t cap = k->cap != 0 ? k->cap * 2 : 16;
            struct dfc_keycount_entry *v = realloc(k->v, cap * sizeof(*v));
            if (v == NULL) {
                return -ENOMEM;
            }
            k->v = v;
            k->cap = cap;
        }
        e = &k->v[k->n++];
        snprintf(e->key, sizeof(e->key), "%s", key);
        e->n = 0;
    }
    return (int)++e->n;
}

void dfc_keycount_put(struct dfc_keycount *k, const char *key) {
    struct dfc_keycount_entry *e = find(k, key);
    if (e != NULL && --e->n == 0) {
        *e = k->v[--k->n];
    }
}

void dfc_keycount_free(struct dfc_keycount *k) {
    free(k->v);
    k->v = NULL;
    k->n = k->cap = 0;
}
