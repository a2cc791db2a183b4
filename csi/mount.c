/*
 * mount.c - bind mounts and the mountinfo scan.
 *
 * The scan is what makes NodePublishVolume idempotent: a stat or st_dev comparison cannot see a
 * bind mount of a directory on the same filesystem, mountinfo can. It reads line by line with a
 * bounded buffer and counts every mount stacked on the path, so that unpublish can take all of
 * them off (mounts duplicated by an older driver leave no residue).
 */
#include "mount.h"

#include <errno.h>
#include <string.h>
#include <sys/mount.h>

#define LINE_MAX_LEN 8192

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

int csi_mountinfo_scan(FILE *f, const char *path, struct csi_mount_state *ret) {
    char line[LINE_MAX_LEN], point[LINE_MAX_LEN];
    memset(ret, 0, sizeof(*ret));
    bool skipping = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        bool whole = strchr(line, '\n') != NULL || feof(f);
        if (skipping || !whole) {
            skipping = !whole; /* the rest of an overlong line */
            continue;
        }
        size_t len;
        const char *mp = field(line, 4, &len);
        if (mp == NULL || csi_mountinfo_unescape(mp, len, point, sizeof(point)) < 0 ||
            strcmp(point, path) != 0) {
            continue;
        }
        const char *opts = field(line, 5, &len);
        ret->count++;
        ret->read_only =
            opts != NULL && len >= 2 && strncmp(opts, "ro", 2) == 0 && (len == 2 || opts[2] == ',');
    }
    return ferror(f) ? -EIO : 0;
}

static int linux_bind(const char *source, const char *target, bool read_only) {
    if (mount(source, target, NULL, MS_BIND, NULL) < 0) {
        return -errno;
    }
    if (read_only && mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0) {
        int r = -errno;
        (void)umount2(target, MNT_DETACH);
        return r;
    }
    return 0;
}

static int linux_unmount(const char *target) {
    if (umount2(target, 0) == 0) {
        return 0;
    }
    if (errno == EBUSY && umount2(target, MNT_DETACH) == 0) {
        return 0;
    }
    return -errno;
}

static int linux_state(const char *path, struct csi_mount_state *ret) {
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        return -errno;
    }
    int r = csi_mountinfo_scan(f, path, ret);
    fclose(f);
    return r;
}

const struct csi_mount_ops csi_mount_ops_linux = {linux_bind, linux_unmount, linux_state};
