/*
 * fsutil.c - the storage engine's path and directory helpers (storage_internal.h) and opening
 * a task's content (storage.h): below every other file of daemon/storage, which all use them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "dfc/cleanup.h"
#include "storage.h"
#include "storage_internal.h"

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. storage.dir is limited at
 * open so that every path built under it fits. */
int dfd__pathf(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int dfd__fsync_dir(const char *path) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        return -errno;
    }
    return 0;
}

void dfd__task_path(const struct dfd_storage *s, const char *id, char *buf, size_t size) {
    (void)dfd__pathf(buf, size, "%s/%.3s/%s", s->content_dir, id, id);
}

int dfd_storage_open_content(struct dfd_storage *s, const char *id, int *ret_fd,
                             struct dfc_error *err) {
    char path[PATH_MAX];
    dfd__task_path(s, id, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return dfc_error_errno(err, -errno, "open the content of task %s", id);
    }
    *ret_fd = fd;
    return 0;
}
