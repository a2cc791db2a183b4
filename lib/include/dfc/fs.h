/*
 * fs.h - small filesystem helpers: directories, and writes that finish what they start.
 */
#ifndef DFC_FS_H
#define DFC_FS_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* mkdir -p: creates path and its missing parents with mode; existing directories are fine.
 * Negative errno (-ENAMETOOLONG beyond PATH_MAX). */
int dfc_mkdir_p(const char *path, mode_t mode);

/* dfc_mkdir_p() of the directory that holds path (nothing when path has no '/'). */
int dfc_mkdir_parent(const char *path, mode_t mode);

/* Writes all len bytes of buf at off, or at the file position when off < 0, across short
 * writes and EINTR. 0 or negative errno (-EIO when the file takes no more bytes). */
int dfc_write_all(int fd, const void *buf, size_t len, off_t off);

/* dfc_write_all() of the n buffers of iov (any n >= 0: they are written in batches of 64,
 * well under IOV_MAX). iov is only read. -EINVAL for n < 0. */
int dfc_writev_all(int fd, const struct iovec *iov, int n, off_t off);

#endif /* DFC_FS_H */
