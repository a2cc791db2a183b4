/*
 * test_peer_role.c - the roles a verified certificate holds (dfc/peer_role.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "dfc/peer_role.h"

static struct dfc_peer_identity ident(const char *cn, const char *uri, const char *ip) {
    struct dfc_peer_identity id;
    memset(&id, 0, sizeof(id));
    id.tls = id.authenticated = true;
    snprintf(id.common_name, sizeof(id.common_name), "%s", cn);
    if (uri != NULL) {
        snprintf(id.uris[id.n_uris++], sizeof(id.uris[0]), "%s", uri);
    }
    if (ip != NULL) {
        snprintf(id.ips[id.n_ips++], sizeof(id.ips[0]), "%s", ip);
    }
    return id;
}

static void test_scheduler(void **state) {
    (void)state;
    struct dfc_peer_identity id = ident("x", "dragonfly://scheduler", NULL);
    assert_true(dfc_peer_is_scheduler(&id));
    id = ident("dfc-scheduler", NULL, NULL);
    assert_true(dfc_peer_is_scheduler(&id));
    id = ident("dfc-node", "dragonfly://node", "127.0.0.1");
    assert_true(!dfc_peer_is_scheduler(&id));
    id = ident("x", "dragonfly://schedulerx", NULL);
    assert_true(!dfc_peer_is_scheduler(&id));
    id = ident("dfc-scheduler", "dragonfly://scheduler", NULL);
    id.authenticated = false;
    assert_true(!dfc_peer_is_scheduler(&id));
    assert_true(dfc_peer_host_authority(&id, "h1", "127.0.0.1") == DFC_HOST_NONE);
}

static void test_host(void **state) {
    (void)state;
    /* per-node: by URI (any address) or by SAN IP */
    struct dfc_peer_identity id = ident("n", "dragonfly://host/h1", NULL);
    assert_true(dfc_peer_host_authority(&id, "h1", "127.0.0.9") == DFC_HOST_OWN);
    assert_true(dfc_peer_host_authority(&id, "h2", "127.0.0.9") == DFC_HOST_NONE);
    assert_true(dfc_peer_host_authority(&id, "h", "127.0.0.9") == DFC_HOST_NONE);
    id = ident("n", NULL, "127.0.0.9");
    assert_true(dfc_peer_host_authority(&id, "h2", "127.0.0.9") == DFC_HOST_OWN);
    assert_true(dfc_peer_host_authority(&id, "h2", "127.0.0.8") == DFC_HOST_NONE);
    assert_true(dfc_peer_host_authority(&id, "h2", NULL) == DFC_HOST_NONE);

    /* the shared role: by URI or CN, for any host; its own address still wins */
    id = ident("dfc-node", NULL, NULL);
    assert_true(dfc_peer_host_authority(&id, "h1", "127.0.0.1") == DFC_HOST_SHARED);
    id = ident("other", "dragonfly://node", "127.0.0.5");
    assert_true(dfc_peer_host_authority(&id, "h1", "127.0.0.1") == DFC_HOST_SHARED);
    assert_true(dfc_peer_host_authority(&id, "h1", "127.0.0.5") == DFC_HOST_OWN);
    id = ident("dfc-nodes", "dragonfly://node/x", NULL);
    assert_true(dfc_peer_host_authority(&id, "h1", "127.0.0.1") == DFC_HOST_NONE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheduler),
        cmocka_unit_test(test_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
