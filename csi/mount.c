/*
 * mount.c - bind mounts through descriptors, and the mountinfo scanners.
 *
 * A publish never resolves the target again: the directory descriptor node.c opened beneath
 * the kubelet root is where move_mount attaches a detached clone of the socket directory
 * (open_tree), already read-only when asked, and an unpublish unmounts the mount a fresh
 * descriptor of the target sits on. Whether a target is mounted is a comparison of mount ids
 * (the target's against its parent's: a stat or st_dev comparison cannot see a bind mount of a
 * directory on the same filesystem); how many mounts are stacked there, and whether the top
 * one is read-only, comes from mountinfo, read with getline so that no line is too long (a
 * mount point spelled with many escaped spaces once slipped past an 8 KiB buffer).
 */
#include "mount.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "sys.h"

int csi_mountinfo_unescape(const char *in, size_t len, char *out, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '\\' && i + 3 < len && in[i + 1] >= '0' && in[i + 1] <= '3' && in[i + 2] >= '0' &&
            in[i + 2] <= '7' && in[i + 3] >= '0' && in[i + 3] <= '7') {
            c = (char)((in[i + 1] - '0') * 64 + (in[i + 2] - '0') * 8 + (in[i + 3] - '0'));
            i += 3;
        }
        if (o + 1 >= size) {
            return -ENAMETOOLONG;
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

/* One mountinfo line: "ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS ...". */
struct entry {
    uint64_t id, parent;
    const char *point; /* escaped, point_len bytes */
    size_t point_len;
    bool read_only;
};

/* Returns the n-th space-separated field of line (0-based) and its length. */
static const char *field(const char *line, int n, size_t *ret_len) {
    const char *p = line;
    for (int i = 0; i < n; i++) {
        p = strchr(p, ' ');
        if (p == NULL) {
            return NULL;
        }
        p++;
    }
    const char *end = strpbrk(p, " \n");
    *ret_len = end ? (size_t)(end - p) : strlen(p);
    return p;
}

static bool number(const char *p, size_t len, uint64_t *ret) {
    uint64_t v = 0;
    if (len == 0 || len > 19) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *ret = v;
    return true;
}

/* False for a line that is not a mountinfo entry (it is skipped, not misparsed). */
static bool parse(const char *line, struct entry *e) {
    size_t len;
    const char *p = field(line, 0, &len);
    if (p == NULL || !number(p, len, &e->id)) {
        return false;
    }
    p = field(line, 1, &len);
    if (p == NULL || !number(p, len, &e->parent)) {
        return false;
    }
    e->point = field(line, 4, &e->point_len);
    const char *opts = field(line, 5, &len);
    if (e->point == NULL || opts == NULL) {
        return false;
    }
    e->read_only = len >= 2 && strncmp(opts, "ro", 2) == 0 && (len == 2 || opts[2] == ',');
    return true;
}

int csi_mountinfo_scan(FILE *f, const char *path, struct csi_mount_state *ret) {
    memset(ret, 0, sizeof(*ret));
    char *line = NULL, *point = NULL;
    size_t cap = 0, point_cap = 0;
    int r = 0;
    while (getline(&line, &cap, f) >= 0) {
        struct entry e;
        if (!parse(line, &e)) {
            continue;
        }
        if (point_cap < e.point_len + 1) { /* unescaping only shrinks */
            char *p = realloc(point, e.point_len + 1);
            if (p == NULL) {
                r = -ENOMEM;
                break;
            }
            point = p;
            point_cap = e.point_len + 1;
        }
        if (csi_mountinfo_unescape(e.point, e.point_len, point, point_cap) < 0 ||
            strcmp(point, path) != 0) {
            continue;
        }
        ret->count++;
        ret->read_only = e.read_only;
    }
    if (r == 0 && ferror(f)) {
        r = -EIO;
    }
    free(point);
    free(line);
    return r;
}

struct link {
    uint64_t id, parent;
    bool read_only;
};

int csi_mountinfo_stack(FILE *f, uint64_t top_id, uint64_t under_id, struct csi_mount_state *ret) {
    memset(ret, 0, sizeof(*ret));
    struct link *links = NULL;
    size_t n_links = 0, links_cap = 0, n_lines = 0;
    char *line = NULL;
    size_t cap = 0;
    int r = 0;
    while (getline(&line, &cap, f) >= 0) {
        if (++n_lines > CSI_MOUNTINFO_MAX_LINES) {
            r = -E2BIG;
            break;
        }
        struct entry e;
        if (!parse(line, &e)) {
            continue;
        }
        if (n_links == links_cap) {
            size_t want = links_cap ? links_cap * 2 : 256;
            struct link *p = realloc(links, want * sizeof(*links));
            if (p == NULL) {
                r = -ENOMEM;
                break;
            }
            links = p;
            links_cap = want;
        }
        links[n_links++] = (struct link){e.id, e.parent, e.read_only};
    }
    if (r == 0 && ferror(f)) {
        r = -EIO;
    }
    /* Walk down from the top; bounded by the table's size, so a cycle cannot hang it. */
    uint64_t cur = top_id;
    while (r == 0 && cur != under_id && ret->count < n_links) {
        size_t i = 0;
        while (i < n_links && links[i].id != cur) {
            i++;
        }
        if (i == n_links) {
            break; /* gone from the table while we looked: count what was there */
        }
        if (ret->count == 0) {
            ret->read_only = links[i].read_only;
        }
        ret->count++;
        cur = links[i].parent;
    }
    free(links);
    free(line);
    return r;
}

static int linux_bind(const char *source, int target_fd, bool read_only) {
    int tree = csi_open_tree_clone(source);
    if (tree < 0) {
        return tree;
    }
    int r = read_only ? csi_mount_set_readonly(tree) : 0;
    if (r == 0) {
        r = csi_move_mount(tree, target_fd);
    }
    close(tree); /* a tree never attached goes away with its last descriptor */
    return r;
}

static int linux_unmount(int target_fd) {
    /* The magic link leads to exactly the mount and directory of the descriptor; the string
     * is ours, nothing of the request is resolved. */
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", target_fd);
    if (umount2(path, 0) == 0) {
        return 0;
    }
    if (errno == EBUSY && umount2(path, MNT_DETACH) == 0) {
        return 0;
    }
    return -errno;
}

static int linux_state(int parent_fd, int target_fd, struct csi_mount_state *ret) {
    uint64_t top, under;
    int r = csi_mount_id(target_fd, &top);
    if (r == 0) {
        r = csi_mount_id(parent_fd, &under);
    }
    if (r != 0) {
        return r;
    }
    if (top == under) {
        memset(ret, 0, sizeof(*ret)); /* the common case needs no mount table */
        return 0;
    }
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        return -errno;
    }
    r = csi_mountinfo_stack(f, top, under, ret);
    fclose(f);
    if (r == 0 && ret->count == 0) {
        ret->count = 1; /* the ids say it is a mount point, whatever the table said */
    }
    return r;
}

static int linux_bind_content(const char *source, int target_fd) {
    int tree = csi_open_tree_clone_nofollow(source);
    if (tree < 0) {
        return tree;
    }
    int r = csi_mount_seal(tree); /* sealed while detached: never visible writable */
    if (r == 0) {
        r = csi_move_mount(tree, target_fd);
    }
    close(tree);
    return r;
}

const struct csi_mount_ops csi_mount_ops_linux = {linux_bind, linux_unmount, linux_state,
                                                  linux_bind_content};
