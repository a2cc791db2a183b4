/*
 * log.c - logfmt lines, built in a stack buffer and handed to the sink in one call so that
 * lines from different threads never interleave (a write(2) of one line to stderr is atomic
 * for the sizes used here).
 */
#include "dfc/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_LEN 2048

_Atomic int dfc_log_threshold = DFC_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

const char *const dfc_log_level_choices[] = {"debug", "info",    "warn", "error",
                                             "off",   "warning", NULL};

static void stderr_sink(int level, const char *line, size_t len, void *userdata) {
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, line, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        line += n;
        len -= (size_t)n;
    }
}

static _Atomic(dfc_log_sink_fn) sink = stderr_sink;
static _Atomic(void *) sink_userdata;

void dfc_log_set_level(int level) {
    dfc_log_threshold = level;
}

int dfc_log_parse_level(const char *s, int *ret_level) {
    for (int i = 0; i <= DFC_LOG_OFF; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *ret_level = i;
            return 0;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *ret_level = DFC_LOG_WARN;
        return 0;
    }
    return -EINVAL;
}

void dfc_log_set_sink(dfc_log_sink_fn fn, void *userdata) {
    atomic_store(&sink_userdata, userdata);
    atomic_store(&sink, fn != NULL ? fn : stderr_sink);
}

void dfc_log_write(int level, const char *event, const char *fmt, ...) {
    char line[LINE_MAX_LEN];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    if (level < 0 || level > DFC_LOG_ERROR) {
        level = DFC_LOG_ERROR;
    }
    int n =
        snprintf(line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s event=%s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, level_names[level], event);
    if (n < 0) {
        return;
    }
    size_t len = (size_t)n;
    if (len < sizeof(line)) {
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
        va_end(ap);
        if (m > 0) {
            len += (size_t)m;
        }
    }
    if (len > sizeof(line) - 2) {
        len = sizeof(line) - 2; /* truncated: keep room for the newline */
    }
    while (len > 0 && line[len - 1] == ' ') {
        len--;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f) {
            line[i] = '?';
        }
    }
    line[len++] = '\n';
    line[len] = '\0';
    dfc_log_sink_fn fn = atomic_load(&sink);
    fn(level, line, len, atomic_load(&sink_userdata));
}
