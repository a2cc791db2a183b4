/*
 * config_internal.h - what config.c shares with options.c (not part of the public API).
 */
#ifndef DFC_CONFIG_INTERNAL_H
#define DFC_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dfc/config.h"

/* Formats a range bound the way the row's values are written ("4MiB", "5m", "100"). */
void dfc__config_format_bound(const struct dfc_config_row *row, int64_t v, char *buf, size_t size);

/* dfc_config_load_file(), ignoring the values of rows whose skip[] is true (a higher source
 * sets them); their keys are still known keys. skip may be NULL. */
int dfc__config_load_file_skip(const struct dfc_config_schema *s, void *cfg, const char *path,
                               const bool *skip, struct dfc_error *err);

/* dfc_config_load_env(), ignoring rows whose skip[] is true. */
int dfc__config_load_env_skip(const struct dfc_config_schema *s, void *cfg, const bool *skip,
                              struct dfc_error *err);

#endif /* DFC_CONFIG_INTERNAL_H */
