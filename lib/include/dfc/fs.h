/*
 * fs.h - small filesystem helpers.
 */
#ifndef DFC_FS_H
#define DFC_FS_H

#include <sys/types.h>

/* mkdir -p: creates path and its missing parents with mode; existing directories are fine.
 * Negative errno (-ENAMETOOLONG beyond PATH_MAX). */
int dfc_mkdir_p(const char *path, mode_t mode);

/* dfc_mkdir_p() of the directory that holds path (nothing when path has no '/'). */
int dfc_mkdir_parent(const char *path, mode_t mode);

#endif /* DFC_FS_H */
