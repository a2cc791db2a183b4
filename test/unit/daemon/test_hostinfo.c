/*
 * Tests for daemon/hostinfo.c: the Host is built from this machine's real figures, carries
 * the configured identity and ports, and passes the scheduler's own AnnounceHost validation
 * (scheduler/validate.c, linked in).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "dragonfly/common.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"
#include "google/protobuf/duration.pb-c.h"
#include "hostinfo.h"
#include "scheduler/validate.h"
#include "test_support.h"

static struct dfd_config base_config(char *dir) {
    struct dfd_config cfg = {0};
    cfg.storage_dir = dir;
    cfg.host_ip = "127.0.0.9";
    cfg.hostname = "node-a";
    cfg.upload_port = 4000;
    cfg.idc = "";
    cfg.location = "";
    return cfg;
}

static void test_figures_are_real(void **state) {
    char dir[PATH_MAX];
    test_mkdtemp(dir, sizeof(dir), "hostinfo");
    struct dfd_config cfg = base_config(dir);
    Common__V2__Host *h = NULL;
    struct dfc_error err;
    assert_int_equal(dfd_hostinfo_fill(&cfg, "127.0.0.9-node-a", &h, &err), 0);
    assert_string_equal(h->id, "127.0.0.9-node-a");
    assert_string_equal(h->ip, "127.0.0.9");
    assert_string_equal(h->hostname, "node-a");
    assert_int_equal(h->port, 4000);
    assert_int_equal(h->download_port, 4000);
    assert_int_equal(h->type, 0);
    assert_string_equal(h->os, "linux");
    struct utsname uts;
    assert_int_equal(uname(&uts), 0);
    assert_string_equal(h->kernel_version, uts.release);
    assert_non_null(h->cpu);
    assert_true(h->cpu->logical_count >= 1);
    assert_true(h->cpu->logical_count == (uint32_t)sysconf(_SC_NPROCESSORS_ONLN));
    assert_true(h->cpu->physical_count >= 1);
    assert_true(h->cpu->physical_count <= (uint32_t)sysconf(_SC_NPROCESSORS_CONF));
    assert_true(h->cpu->percent >= 0 && h->cpu->percent <= 100);
    assert_non_null(h->cpu->times);
    assert_true(h->cpu->times->user + h->cpu->times->system + h->cpu->times->idle > 0);
    assert_non_null(h->memory);
    assert_true(h->memory->total > 0);
    assert_true(h->memory->available > 0 && h->memory->available <= h->memory->total);
    assert_true(h->memory->used_percent > 0 && h->memory->used_percent < 100);
    assert_true(h->memory->process_used_percent > 0);
    assert_non_null(h->disk);
    assert_true(h->disk->total > 0);
    assert_true(h->disk->inodes_total > 0 || h->disk->inodes_used == 0); /* btrfs has none */
    assert_true(h->disk->used_percent >= 0 && h->disk->used_percent <= 100);
    assert_non_null(h->network);
    assert_int_equal(h->network->opt_idc_case, 0);
    assert_int_equal(h->network->opt_location_case, 0);
    assert_non_null(h->build);
    assert_true(h->build->git_version[0] != '\0');
    assert_false(h->disable_shared);

    Scheduler__V2__AnnounceHostRequest req = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    req.host = h;
    assert_int_equal(sched_validate_announce_host(&req, &err), 0);
    dfd_hostinfo_free(h);
    test_rmtree(dir);
}

/* A busy process shows in process_percent between two fills. */
static void test_cpu_percent_from_samples(void **state) {
    char dir[PATH_MAX];
    test_mkdtemp(dir, sizeof(dir), "hostinfo");
    struct dfd_config cfg = base_config(dir);
    Common__V2__Host *h = NULL;
    struct dfc_error err;
    assert_int_equal(dfd_hostinfo_fill(&cfg, "h", &h, &err), 0);
    dfd_hostinfo_free(h);
    double start = test_now_ms();
    volatile uint64_t spin = 0;
    while (test_now_ms() - start < 300) {
        spin++;
    }
    assert_int_equal(dfd_hostinfo_fill(&cfg, "h", &h, &err), 0);
    assert_true(h->cpu->process_percent > 0);
    assert_true(h->cpu->percent > 0);
    dfd_hostinfo_free(h);
    test_rmtree(dir);
}

static void test_config_fields(void **state) {
    char dir[PATH_MAX];
    test_mkdtemp(dir, sizeof(dir), "hostinfo");
    struct dfd_config cfg = base_config(dir);
    cfg.idc = "idc-1";
    cfg.location = "cn|hz";
    cfg.disable_shared = true;
    cfg.upload_port = 65000;
    cfg.host_ip = "::1";
    Common__V2__Host *h = NULL;
    struct dfc_error err;
    assert_int_equal(dfd_hostinfo_fill(&cfg, "::1-node-a", &h, &err), 0);
    assert_int_equal(h->network->opt_idc_case, COMMON__V2__NETWORK__OPT_IDC_IDC);
    assert_string_equal(h->network->idc, "idc-1");
    assert_int_equal(h->network->opt_location_case, COMMON__V2__NETWORK__OPT_LOCATION_LOCATION);
    assert_string_equal(h->network->location, "cn|hz");
    assert_true(h->disable_shared);
    assert_int_equal(h->download_port, 65000);
    Scheduler__V2__AnnounceHostRequest req = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    req.host = h;
    assert_int_equal(sched_validate_announce_host(&req, &err), 0);
    dfd_hostinfo_free(h);

    /* A storage dir that is gone: the disk figures are 0, the Host is still valid. */
    test_rmtree(dir);
    assert_int_equal(dfd_hostinfo_fill(&cfg, "::1-node-a", &h, &err), 0);
    assert_true(h->disk->total == 0);
    req.host = h;
    assert_int_equal(sched_validate_announce_host(&req, &err), 0);
    dfd_hostinfo_free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures_are_real),
        cmocka_unit_test(test_cpu_percent_from_samples),
        cmocka_unit_test(test_config_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
