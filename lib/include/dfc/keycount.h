/*
 * keycount.h - counts by a short text key (a peer IP address, later a certificate identity):
 * what the per-remote caps count (connections per IP, streams per host).
 *
 * A count is an unsorted array of the keys that have something open; a key leaves it when its
 * count drops to zero, so its length is the number of distinct remotes holding something at
 * the moment, which the caps themselves bound (a key needs an open connection or stream to be
 * there). A linear scan is the lookup. No lock inside: the caller guards a struct dfc_keycount
 * with its own mutex.
 *
 * Ownership: the struct and its array are the caller's; dfc_keycount_free() frees the array.
 * Keys are copied (at most DFC_KEYCOUNT_KEY_MAX - 1 bytes; longer keys are cut, so two keys
 * that differ only beyond that share a count).
 */
#ifndef DFC_KEYCOUNT_H
#define DFC_KEYCOUNT_H

#include <stddef.h>

#define DFC_KEYCOUNT_KEY_MAX 128

struct dfc_keycount_entry {
    char key[DFC_KEYCOUNT_KEY_MAX];
    unsigned n;
};

struct dfc_keycount {
    struct dfc_keycount_entry *v;
    size_t n, cap;
};

/* The count of key; 0 when absent. */
unsigned dfc_keycount_get(const struct dfc_keycount *k, const char *key);

/* Adds one to key's count unless it is already at max (max 0: no limit); returns the new
 * count, -EBUSY at max (nothing changed), -ENOMEM when the array cannot grow. */
int dfc_keycount_take(struct dfc_keycount *k, const char *key, unsigned max);

/* Takes one from key's count (nothing when absent); the key leaves at zero. */
void dfc_keycount_put(struct dfc_keycount *k, const char *key);

/* Frees the array; k is empty and reusable after. */
void dfc_keycount_free(struct dfc_keycount *k);

#endif /* DFC_KEYCOUNT_H */
