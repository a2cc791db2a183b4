/*
 * published.c - counting the published volumes in a mountinfo table (published.h).
 *
 * A bind mount of directory D shows, in mountinfo, the device of D's filesystem and as its
 * root D's path inside that filesystem. So the mount that holds socket_dir (the one with the
 * longest mount point above it, the last listed on a tie: it is on top) gives the pair to look
 * for: its MAJ:MIN, and its root joined with the rest of socket_dir's path.
 */
#include "published.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mount.h"

struct line {
    char dev[32];
    char *root;  /* unescaped */
    char *point; /* unescaped */
};

/* Splits a mountinfo line into its fields 2 (MAJ:MIN), 3 (root) and 4 (mount point), unescaped
 * into bufs of size each. False for a malformed line. */
static bool parse(const char *s, struct line *l, char *root, char *point, size_t size) {
    const char *f[6];
    size_t len[6];
    const char *p = s;
    for (int i = 0; i < 5; i++) {
        while (*p == ' ') {
            p++;
        }
        f[i] = p;
        while (*p != ' ' && *p != '\0' && *p != '\n') {
            p++;
        }
        len[i] = (size_t)(p - f[i]);
        if (len[i] == 0) {
            return false;
        }
    }
    if (len[2] >= sizeof(l->dev)) {
        return false;
    }
    memcpy(l->dev, f[2], len[2]);
    l->dev[len[2]] = '\0';
    l->root = root;
    l->point = point;
    return csi_mountinfo_unescape(f[3], len[3], root, size) == 0 &&
           csi_mountinfo_unescape(f[4], len[4], point, size) == 0;
}

/* The length of mount point m when it holds path (m is path or one of its parents), else 0. */
static size_t holds(const char *m, const char *path) {
    size_t n = strlen(m);
    if (strcmp(m, "/") == 0) {
        return 1;
    }
    return strncmp(path, m, n) == 0 && (path[n] == '\0' || path[n] == '/') ? n : 0;
}

int csi_published_count(FILE *f, const char *socket_dir, const char *kubelet_dir, uint64_t *ret) {
    size_t cap = strlen(socket_dir) + 4096;
    char *line = NULL, *root = NULL, *point = NULL;
    size_t lcap = 0;
    int r = 0;
    char dev[32] = "";
    char *want_root = NULL;
    size_t best = 0;
    uint64_t n = 0, lines = 0;
    for (int pass = 0; pass < 2 && r == 0; pass++) {
        rewind(f);
        ssize_t k;
        while ((k = getline(&line, &lcap, f)) >= 0) {
            if (++lines > 2 * (uint64_t)CSI_MOUNTINFO_MAX_LINES) {
                r = -E2BIG;
                break;
            }
            if ((size_t)k + 1 > cap) {
                cap = (size_t)k + 1;
                free(root);
                free(point);
                root = point = NULL;
            }
            if (root == NULL && ((root = malloc(cap)) == NULL || (point = malloc(cap)) == NULL)) {
                r = -ENOMEM;
                break;
            }
            struct line l;
            if (!parse(line, &l, root, point, cap)) {
                continue;
            }
            if (pass == 0) {
                size_t h = holds(l.point, socket_dir);
                if (h > 0 && h >= best) {
                    best = h;
                    snprintf(dev, sizeof(dev), "%s", l.dev);
                    const char *rest = socket_dir + (h == 1 ? 0 : h); /* "/x" below "/" */
                    free(want_root);
                    bool top = strcmp(l.root, "/") == 0;
                    if (asprintf(&want_root, "%s%s", top ? "" : l.root, rest) < 0) {
                        want_root = NULL;
                        r = -ENOMEM;
                        break;
                    }
                    if (want_root[0] == '\0') {
                        free(want_root);
                        if ((want_root = strdup("/")) == NULL) {
                            r = -ENOMEM;
                            break;
                        }
                    }
                }
                continue;
            }
            size_t kl = strlen(kubelet_dir);
            bool below = strncmp(l.point, kubelet_dir, kl) == 0 && l.point[kl] == '/';
            if (below && strcmp(l.dev, dev) == 0 && strcmp(l.root, want_root) == 0) {
                n++;
            }
        }
        if (r == 0 && pass == 0 && want_root == NULL) {
            r = -ENOENT;
        }
    }
    free(line);
    free(root);
    free(point);
    free(want_root);
    if (r == 0) {
        *ret = n;
    }
    return r;
}
