/*
 * log.h - one line per event, logfmt, to a pluggable sink (stderr by default).
 *
 *   DFC_LOG(DFC_LOG_INFO, "rpc.done", "method=%s code=%s ms=%.3f", m, c, ms);
 *   -> ts=2026-11-30T16:43:12.123Z level=info event=rpc.done method=... code=... ms=...
 *
 * The macro tests the level before evaluating its arguments. Control characters in the final
 * line are replaced with '?', so hostile input (a path with a newline) cannot forge events.
 * Library code logs only what the RPC layer alone sees: a failed call, a refused connection
 * and a failing accept() as warnings (a successful call at the server's log_level_ok, debug
 * by default), a worker that cannot start as an error; and dfc_server_main() logs a server
 * binary's failed start-up once for its main() (dfc/server_main.h). Everything else is returned
 * to the caller, and the daemon layers log each failure once.
 * Thread-safe: every line reaches the sink in a single call.
 */
#ifndef DFC_LOG_H
#define DFC_LOG_H

#include <stdatomic.h>
#include <stddef.h>

enum dfc_log_level {
    DFC_LOG_DEBUG = 0,
    DFC_LOG_INFO = 1,
    DFC_LOG_WARN = 2,
    DFC_LOG_ERROR = 3,
    DFC_LOG_OFF = 4,
};

/* Receives one complete line (with its trailing newline); line is borrowed. */
typedef void (*dfc_log_sink_fn)(int level, const char *line, size_t len, void *userdata);

extern _Atomic int dfc_log_threshold;

#define DFC_LOG(level, event, ...)                                                                 \
    do {                                                                                           \
        if ((level) >= dfc_log_threshold) {                                                        \
            dfc_log_write((level), (event), __VA_ARGS__);                                          \
        }                                                                                          \
    } while (0)

void dfc_log_write(int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sets the threshold; lines below it are dropped. */
void dfc_log_set_level(int level);

/* Parses "debug", "info", "warn" (or "warning"), "error", "off" (case-insensitive); -EINVAL
 * otherwise. */
int dfc_log_parse_level(const char *s, int *ret_level);

/* Every spelling dfc_log_parse_level() accepts, NULL-terminated: the choices of a DFC_CFG_ENUM
 * log-level row (dfc/config.h). */
extern const char *const dfc_log_level_choices[];

/* Replaces the sink (NULL restores stderr). Safe while other threads log, though a line
 * written at that very moment may reach the old sink with the new userdata: set it at
 * start-up, or with a userdata that both sinks accept. */
void dfc_log_set_sink(dfc_log_sink_fn sink, void *userdata);

#endif /* DFC_LOG_H */
