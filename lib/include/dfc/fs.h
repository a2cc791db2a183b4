/*
 * fs.h - small filesystem helpers: directories, writes that finish what they start, and the
 * one openat2() wrapper.
 */
#ifndef DFC_FS_H
#define DFC_FS_H

#include <stddef.h>
#include <stdint.h>
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

/* How many times dfc_openat2() tries in all while the kernel answers -EAGAIN. */
#define DFC_OPENAT2_TRIES 64

/* openat2(2) (Linux 5.6) of path relative to dirfd (AT_FDCWD: the working directory) with the
 * open(2) flags plus O_CLOEXEC and how.resolve = resolve (RESOLVE_* of <linux/openat2.h>).
 * The mode is 0: not for O_CREAT or O_TMPFILE. -EAGAIN, which RESOLVE_BENEATH and
 * RESOLVE_IN_ROOT give when a rename elsewhere raced the checks of a ".." (the kernel asks for
 * a retry), is retried, DFC_OPENAT2_TRIES times in all, so that a rename storm ends in -EAGAIN
 * rather than a spin. Returns the descriptor (the caller's) or a negative errno: -ENOSYS on a
 * kernel without openat2, -ELOOP, -EXDEV and the rest of open(2)'s and openat2(2)'s. */
int dfc_openat2(int dirfd, const char *path, int flags, uint64_t resolve);

#endif /* DFC_FS_H */
