/*
 * hostinfo.c - this host as common.v2.Host (see hostinfo.h): the figures upstream's dfdaemon
 * reads through sysinfo/gopsutil, read here straight from the kernel.
 *
 *   cpu      logical count from sysconf(_SC_NPROCESSORS_ONLN), physical cores as the distinct
 *            (physical id, core id) pairs of /proc/cpuinfo (else _SC_NPROCESSORS_CONF);
 *            percent and times from the "cpu" line of /proc/stat, process_percent from
 *            /proc/self/stat
 *   memory   /proc/meminfo (MemTotal, MemAvailable, MemFree); the process's RSS from
 *            /proc/self/statm
 *   disk     statvfs(storage.dir): bytes and inodes
 *   network  /proc/net/dev: rx/tx bytes per second over every interface but lo; idc and
 *            location from host.idc / host.location
 *   build    DFC_VERSION when the build defines it
 *   os       "linux", kernel_version from uname(2), platform family and version from
 *            /etc/os-release (ID, VERSION_ID) when it is readable
 *
 * DESIGN: percents and rates are deltas between two samples. The previous sample is kept in
 * one process-wide slot under a lock, so each announce reports the interval since the last
 * one; the first call, which has no previous sample, takes two SAMPLE_GAP_NS apart. Figures
 * that cannot be read (a /proc file missing in a sandbox) are reported as 0, never as an
 * error: the scheduler only needs them well-formed (cpu present, percents in 0..100).
 */
#include "hostinfo.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "dfc/cleanup.h"
#include "dfc/clock.h"
#include "dragonfly/common.pb-c.h"

#define SAMPLE_GAP_NS (200 * 1000 * 1000LL)

/* ---- samples ---- */

/* The cumulative counters that percents and rates are computed from. */
struct sample {
    bool valid;
    int64_t mono_ns;
    uint64_t cpu[10];    /* /proc/stat "cpu": user nice system idle iowait irq softirq steal
                            guest guest_nice, in clock ticks */
    uint64_t proc_ticks; /* utime + stime of this process */
    uint64_t rx, tx;     /* bytes over every interface but lo */
};

static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sample prev_sample;

static void read_proc_stat(struct sample *s) {
    _cleanup_fclose_ FILE *f = fopen("/proc/stat", "re");
    char line[512];
    if (f == NULL || fgets(line, sizeof(line), f) == NULL || strncmp(line, "cpu ", 4) != 0) {
        return;
    }
    char *p = line + 4;
    for (size_t i = 0; i < 10; i++) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno != 0) {
            break;
        }
        s->cpu[i] = v;
        p = end;
    }
}

/* utime and stime are fields 14 and 15 of /proc/self/stat; the comm field (2) may hold
 * spaces and parentheses, so counting starts after its last ')'. */
static void read_self_stat(struct sample *s) {
    _cleanup_fclose_ FILE *f = fopen("/proc/self/stat", "re");
    char line[1024];
    if (f == NULL || fgets(line, sizeof(line), f) == NULL) {
        return;
    }
    char *p = strrchr(line, ')');
    if (p == NULL) {
        return;
    }
    p++;
    unsigned long long utime = 0, stime = 0;
    /* After ')': state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15). */
    for (int field = 3; field <= 15; field++) {
        char *end;
        while (*p == ' ') {
            p++;
        }
        if (field == 3) {
            end = p + 1;
        } else {
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p || errno != 0) {
                return;
            }
            if (field == 14) {
                utime = v;
            } else if (field == 15) {
                stime = v;
            }
        }
        p = end;
    }
    s->proc_ticks = utime + stime;
}

static void read_net_dev(struct sample *s) {
    _cleanup_fclose_ FILE *f = fopen("/proc/net/dev", "re");
    char line[512];
    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *colon = strchr(line, ':');
        if (colon == NULL) {
            continue; /* the two header lines */
        }
        *colon = '\0';
        const char *name = line;
        while (*name == ' ') {
            name++;
        }
        if (strcmp(name, "lo") == 0) {
            continue;
        }
        /* rx: bytes packets errs drop fifo frame compressed multicast; then tx bytes. */
        unsigned long long v[9];
        char *p = colon + 1;
        size_t i;
        for (i = 0; i < 9; i++) {
            char *end;
            errno = 0;
            v[i] = strtoull(p, &end, 10);
            if (end == p || errno != 0) {
                break;
            }
            p = end;
        }
        if (i == 9) {
            s->rx += v[0];
            s->tx += v[8];
        }
    }
}

static void take_sample(struct sample *s) {
    memset(s, 0, sizeof(*s));
    s->mono_ns = dfc_mono_ns();
    read_proc_stat(s);
    read_self_stat(s);
    read_net_dev(s);
    s->valid = true;
}

static uint64_t delta(uint64_t now, uint64_t before) {
    return now > before ? now - before : 0;
}

/* The current sample and the one before it (taken now, SAMPLE_GAP_NS ago, when none is
 * kept); the kept one becomes cur. */
static void sample_pair(struct sample *ret_prev, struct sample *ret_cur) {
    pthread_mutex_lock(&sample_lock);
    if (!prev_sample.valid) {
        take_sample(&prev_sample);
        struct timespec gap = {.tv_sec = 0, .tv_nsec = SAMPLE_GAP_NS};
        while (nanosleep(&gap, &gap) < 0 && errno == EINTR) {
        }
    }
    *ret_prev = prev_sample;
    take_sample(ret_cur);
    prev_sample = *ret_cur;
    pthread_mutex_unlock(&sample_lock);
}

/* ---- the message ---- */

/* The Host and everything it points to, in one allocation (host first, so the Host pointer
 * is the box); strings are separate allocations freed by dfd_hostinfo_free(). */
struct host_box {
    Common__V2__Host host;
    Common__V2__CPU cpu;
    Common__V2__CPUTimes times;
    Common__V2__Memory memory;
    Common__V2__Network network;
    Common__V2__Disk disk;
    Common__V2__Build build;
};

static double percent_of(double part, double whole) {
    if (whole <= 0) {
        return 0;
    }
    double p = 100.0 * part / whole;
    return p < 0 ? 0 : (p > 100 ? 100 : p);
}

/* The number after "key<blanks>:" on a /proc/cpuinfo line, or -1. */
static long cpuinfo_value(const char *line, const char *key) {
    size_t len = strlen(key);
    if (strncmp(line, key, len) != 0) {
        return -1;
    }
    const char *p = line + len;
    p += strspn(p, " \t");
    if (*p != ':') {
        return -1;
    }
    char *end;
    errno = 0;
    long v = strtol(p + 1, &end, 10);
    return end == p + 1 || errno != 0 || v < 0 ? -1 : v;
}

/* Distinct (physical id, core id) pairs in /proc/cpuinfo; 0 when it names none. */
static uint32_t physical_cores(void) {
    _cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
    enum { MAX_CORES = 4096 };
    static uint64_t seen[MAX_CORES]; /* guarded by sample_lock, like the samples */
    size_t n = 0;
    long package = 0, v;
    char line[512];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if ((v = cpuinfo_value(line, "physical id")) >= 0) {
            package = v;
        } else if ((v = cpuinfo_value(line, "core id")) >= 0) {
            uint64_t key = (uint64_t)package << 32 | (uint64_t)v;
            size_t i = 0;
            while (i < n && seen[i] != key) {
                i++;
            }
            if (i == n && n < MAX_CORES) {
                seen[n++] = key;
            }
        }
    }
    return (uint32_t)n;
}

static void fill_cpu(struct host_box *b, const struct sample *prev, const struct sample *cur) {
    long ticks = sysconf(_SC_CLK_TCK);
    long online = sysconf(_SC_NPROCESSORS_ONLN), conf = sysconf(_SC_NPROCESSORS_CONF);
    double hz = ticks > 0 ? (double)ticks : 100.0;
    b->cpu.logical_count = online > 0 ? (uint32_t)online : 1;
    pthread_mutex_lock(&sample_lock);
    uint32_t cores = physical_cores();
    pthread_mutex_unlock(&sample_lock);
    b->cpu.physical_count = cores > 0 ? cores : (conf > 0 ? (uint32_t)conf : b->cpu.logical_count);

    uint64_t total = 0, idle;
    for (size_t i = 0; i < 8; i++) { /* guest and guest_nice are already in user and nice */
        total += delta(cur->cpu[i], prev->cpu[i]);
    }
    idle = delta(cur->cpu[3], prev->cpu[3]) + delta(cur->cpu[4], prev->cpu[4]);
    b->cpu.percent = percent_of((double)(total > idle ? total - idle : 0), (double)total);

    /* As gopsutil's Process.Percent: this process's CPU time over the wall time, so one busy
     * core is 100 (not divided by the number of CPUs). */
    double wall_s = (double)(cur->mono_ns - prev->mono_ns) / 1e9;
    double proc_s = (double)delta(cur->proc_ticks, prev->proc_ticks) / hz;
    b->cpu.process_percent = wall_s > 0 ? 100.0 * proc_s / wall_s : 0;

    double *t[10] = {&b->times.user,   &b->times.nice,      &b->times.system,  &b->times.idle,
                     &b->times.iowait, &b->times.irq,       &b->times.softirq, &b->times.steal,
                     &b->times.guest,  &b->times.guest_nice};
    for (size_t i = 0; i < 10; i++) {
        *t[i] = (double)cur->cpu[i] / hz;
    }
    b->cpu.times = &b->times;
}

/* The number after "key:" on a /proc/meminfo line (kB), when line is that key's. */
static bool meminfo_value(const char *line, const char *key, uint64_t *ret) {
    size_t len = strlen(key);
    if (strncmp(line, key, len) != 0 || line[len] != ':') {
        return false;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(line + len + 1, &end, 10);
    if (end == line + len + 1 || errno != 0) {
        return false;
    }
    *ret = v;
    return true;
}

static void fill_memory(Common__V2__Memory *m) {
    _cleanup_fclose_ FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    uint64_t total = 0, available = 0, free_kb = 0;
    bool have_available = false;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (!meminfo_value(line, "MemTotal", &total) && !meminfo_value(line, "MemFree", &free_kb) &&
            meminfo_value(line, "MemAvailable", &available)) {
            have_available = true;
        }
    }
    if (!have_available) {
        available = free_kb; /* kernels before 3.14 */
    }
    m->total = total * 1024;
    m->available = available * 1024;
    m->free = free_kb * 1024;
    m->used = m->total > m->available ? m->total - m->available : 0;
    m->used_percent = percent_of((double)m->used, (double)m->total);

    /* /proc/self/statm: size resident shared ... in pages. */
    _cleanup_fclose_ FILE *st = fopen("/proc/self/statm", "re");
    long page = sysconf(_SC_PAGESIZE);
    if (st != NULL && fgets(line, sizeof(line), st) != NULL && page > 0) {
        char *end, *p = line;
        errno = 0;
        (void)strtoull(p, &end, 10);
        p = end;
        unsigned long long rss = strtoull(p, &end, 10);
        if (end != p && errno == 0) {
            m->process_used_percent = percent_of((double)rss * (double)page, (double)m->total);
        }
    }
}

static void fill_disk(Common__V2__Disk *d, const char *dir) {
    struct statvfs sv;
    if (statvfs(dir, &sv) < 0) {
        return;
    }
    uint64_t frsize = sv.f_frsize != 0 ? sv.f_frsize : sv.f_bsize;
    d->total = (uint64_t)sv.f_blocks * frsize;
    d->free = (uint64_t)sv.f_bavail * frsize;
    uint64_t bfree = (uint64_t)sv.f_bfree * frsize;
    d->used = d->total > bfree ? d->total - bfree : 0;
    /* As df (and gopsutil): used over what non-root users can reach. */
    d->used_percent = percent_of((double)d->used, (double)(d->used + d->free));
    d->inodes_total = sv.f_files;
    d->inodes_free = sv.f_ffree;
    d->inodes_used = sv.f_files > sv.f_ffree ? sv.f_files - sv.f_ffree : 0;
    d->inodes_used_percent = percent_of((double)d->inodes_used, (double)d->inodes_total);
}

static void fill_network(Common__V2__Network *n, const struct sample *prev,
                         const struct sample *cur) {
    double s = (double)(cur->mono_ns - prev->mono_ns) / 1e9;
    n->opt_rx_bandwidth_case = COMMON__V2__NETWORK__OPT_RX_BANDWIDTH_RX_BANDWIDTH;
    n->opt_tx_bandwidth_case = COMMON__V2__NETWORK__OPT_TX_BANDWIDTH_TX_BANDWIDTH;
    n->rx_bandwidth = s > 0 ? (uint64_t)((double)delta(cur->rx, prev->rx) / s) : 0;
    n->tx_bandwidth = s > 0 ? (uint64_t)((double)delta(cur->tx, prev->tx) / s) : 0;
}

/* The value of KEY= in /etc/os-release, unquoted, into buf ("" when absent). */
static void os_release(const char *key, char *buf, size_t size) {
    _cleanup_fclose_ FILE *f = fopen("/etc/os-release", "re");
    char line[256];
    size_t klen = strlen(key);
    buf[0] = '\0';
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, klen) != 0 || line[klen] != '=') {
            continue;
        }
        char *v = line + klen + 1;
        v[strcspn(v, "\r\n")] = '\0';
        size_t len = strlen(v);
        if (len >= 2 && (v[0] == '"' || v[0] == '\'') && v[len - 1] == v[0]) {
            v[len - 1] = '\0';
            v++;
        }
        snprintf(buf, size, "%s", v);
        return;
    }
}

static char *dup_or_null(const char *s, bool *oom) {
    char *d = strdup(s != NULL ? s : "");
    *oom |= d == NULL;
    return d;
}

int dfd_hostinfo_fill(const struct dfd_config *cfg, const char *host_id, Common__V2__Host **ret,
                      struct dfc_error *err) {
    struct host_box *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    common__v2__host__init(&b->host);
    common__v2__cpu__init(&b->cpu);
    common__v2__cputimes__init(&b->times);
    common__v2__memory__init(&b->memory);
    common__v2__network__init(&b->network);
    common__v2__disk__init(&b->disk);
    common__v2__build__init(&b->build);

    struct sample prev, cur;
    sample_pair(&prev, &cur);
    fill_cpu(b, &prev, &cur);
    fill_memory(&b->memory);
    fill_disk(&b->disk, cfg->storage_dir);
    fill_network(&b->network, &prev, &cur);

    struct utsname uts;
    if (uname(&uts) < 0) {
        memset(&uts, 0, sizeof(uts));
    }
    char family[64], version[64];
    os_release("ID", family, sizeof(family));
    os_release("VERSION_ID", version, sizeof(version));
#ifdef DFC_VERSION
    const char *build_version = DFC_VERSION;
#else
    const char *build_version = "unknown";
#endif

    Common__V2__Host *h = &b->host;
    bool oom = false;
    h->id = dup_or_null(host_id, &oom);
    h->type = 0; /* normal: a seed peer is a separate deployment upstream */
    h->hostname = dup_or_null(cfg->hostname, &oom);
    h->name = dup_or_null(cfg->hostname, &oom);
    h->ip = dup_or_null(cfg->host_ip, &oom);
    h->port = (int32_t)cfg->upload_port;
    h->download_port = (int32_t)cfg->upload_port;
    h->os = dup_or_null("linux", &oom);
    h->platform = dup_or_null("linux", &oom);
    h->platform_family = dup_or_null(family, &oom);
    h->platform_version = dup_or_null(version, &oom);
    h->kernel_version = dup_or_null(uts.release, &oom);
    h->disable_shared = cfg->disable_shared;
    h->cpu = &b->cpu;
    h->memory = &b->memory;
    h->network = &b->network;
    h->disk = &b->disk;
    h->build = &b->build;
    b->build.git_version = dup_or_null(build_version, &oom);
    b->build.opt_platform_case = COMMON__V2__BUILD__OPT_PLATFORM_PLATFORM;
    b->build.platform = dup_or_null(uts.machine, &oom);
    if (cfg->idc != NULL && cfg->idc[0] != '\0') {
        b->network.opt_idc_case = COMMON__V2__NETWORK__OPT_IDC_IDC;
        b->network.idc = dup_or_null(cfg->idc, &oom);
    }
    if (cfg->location != NULL && cfg->location[0] != '\0') {
        b->network.opt_location_case = COMMON__V2__NETWORK__OPT_LOCATION_LOCATION;
        b->network.location = dup_or_null(cfg->location, &oom);
    }
    if (oom) {
        dfd_hostinfo_free(h);
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    *ret = h;
    return 0;
}

void dfd_hostinfo_free(Common__V2__Host *host) {
    if (host == NULL) {
        return;
    }
    struct host_box *b = (struct host_box *)host;
    char *strings[] = {host->id,
                       host->hostname,
                       host->name,
                       host->ip,
                       host->os,
                       host->platform,
                       host->platform_family,
                       host->platform_version,
                       host->kernel_version,
                       b->build.git_version,
                       b->build.platform,
                       b->network.idc,
                       b->network.location};
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        /* protobuf-c's init points unset strings at its shared empty string: never free it. */
        if (strings[i] != NULL && strings[i] != protobuf_c_empty_string) {
            free(strings[i]);
        }
    }
    free(b);
}
