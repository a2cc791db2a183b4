/*
 * cleanup.h - scope-bound cleanup for locals (gnu11 __attribute__((cleanup))) and named
 * ownership transfer, after crun and systemd.
 *
 *   _cleanup_free_ char *p = malloc(n);    freed when p goes out of scope
 *   _cleanup_close_ int fd = open(...);    closed when fd goes out of scope (if >= 0)
 *   return dfc_steal_ptr(&p);              hands p to the caller; the cleanup sees NULL
 */
#ifndef DFC_CLEANUP_H
#define DFC_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void dfc__freep(void *p) {
    free(*(void **)p);
}

static inline void dfc__closep(const int *fd) {
    if (*fd >= 0) {
        (void)close(*fd);
    }
}

static inline void dfc__fclosep(FILE **f) {
    if (*f != NULL) {
        (void)fclose(*f);
    }
}

#define _cleanup_free_   __attribute__((cleanup(dfc__freep)))
#define _cleanup_close_  __attribute__((cleanup(dfc__closep)))
#define _cleanup_fclose_ __attribute__((cleanup(dfc__fclosep)))

/* Returns *pp and sets *pp to NULL: the caller now owns the pointer. */
#define dfc_steal_ptr(pp)                                                                          \
    ({                                                                                             \
        typeof(*(pp)) dfc__p = *(pp);                                                              \
        *(pp) = NULL;                                                                              \
        dfc__p;                                                                                    \
    })

/* Returns *fdp and sets *fdp to -1: the caller now owns the descriptor. */
static inline int dfc_steal_fd(int *fdp) {
    int fd = *fdp;
    *fdp = -1;
    return fd;
}

#endif /* DFC_CLEANUP_H */
