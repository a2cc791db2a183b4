/*
 * rpc_test_service.c - the test service's table, client methods and shared bidi handler.
 */
#include "rpc_test_service.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dfc/log.h"
#include "test/rpc_test.pb-c.h"

struct rpc_test_methods rt;

static const struct dfc_rpc_client_row rows[] = {
    DFC_RPC_CLIENT_METHOD(dfc__test__v1__rpc_test, "Echo", &rt.echo),
    DFC_RPC_CLIENT_METHOD(dfc__test__v1__rpc_test, "Put", &rt.put),
    DFC_RPC_CLIENT_METHOD(dfc__test__v1__rpc_test, "Get", &rt.get),
    DFC_RPC_CLIENT_METHOD(dfc__test__v1__rpc_test, "Chat", &rt.chat),
};

int rpc_test_resolve(void) {
    struct dfc_error err;
    if (dfc_rpc_client_resolve(rows, DFC_RPC_N(rows), &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

int rpc_test_add_service(struct dfc_rpc_server *s, const struct rpc_test_handlers *h, void *svc,
                         struct dfc_error *err) {
    /* The server copies the rows, so a table on the stack is fine. */
    const struct dfc_rpc_method methods[] = {
        DFC_RPC_METHOD("Echo", DFC_RPC_UNARY, dfc__test__v1__chunk, dfc__test__v1__chunk, h->echo),
        DFC_RPC_METHOD("Put", DFC_RPC_CLIENT_STREAM, dfc__test__v1__chunk, dfc__test__v1__summary,
                       h->put),
        DFC_RPC_METHOD("Get", DFC_RPC_SERVER_STREAM, dfc__test__v1__chunk, dfc__test__v1__chunk,
                       h->get),
        DFC_RPC_METHOD("Chat", DFC_RPC_BIDI_STREAM, dfc__test__v1__chunk, dfc__test__v1__chunk,
                       h->chat),
    };
    return dfc_rpc_server_add_service(s, &dfc__test__v1__rpc_test__descriptor, methods,
                                      DFC_RPC_N(methods), svc, err);
}

int rpc_test_chat(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                  ProtobufCMessage *resp, struct dfc_error *err) {
    (void)svc;
    (void)req;
    (void)resp;
    ProtobufCMessage *m;
    int r;
    while ((r = dfc_rpc_call_recv(call, &m, err)) > 0) {
        Dfc__Test__V1__Chunk *c = (Dfc__Test__V1__Chunk *)m;
        c->seq += 1000;
        r = dfc_rpc_call_send(call, m, err);
        dfc_rpc_msg_free(m);
        if (r < 0) {
            return r;
        }
    }
    return r;
}

/* The rpc.connection_refused lines logged (by an accept thread); guarded by refused_mu. */
static char refused_line[512];
static int n_refused_lines;
static pthread_mutex_t refused_mu = PTHREAD_MUTEX_INITIALIZER;

static void capture_refused(int level, const char *line, size_t len, void *ud) {
    (void)level;
    (void)ud;
    if (strstr(line, "rpc.connection_refused") != NULL) {
        pthread_mutex_lock(&refused_mu);
        if (n_refused_lines++ == 0) {
            snprintf(refused_line, sizeof(refused_line), "%.*s", (int)len, line);
        }
        pthread_mutex_unlock(&refused_mu);
    }
}

void rpc_test_refused_start(void) {
    pthread_mutex_lock(&refused_mu);
    n_refused_lines = 0;
    refused_line[0] = '\0';
    pthread_mutex_unlock(&refused_mu);
    dfc_log_set_sink(capture_refused, NULL);
}

int rpc_test_refused_stop(char *first, size_t size) {
    dfc_log_set_sink(NULL, NULL);
    pthread_mutex_lock(&refused_mu);
    int n = n_refused_lines;
    snprintf(first, size, "%s", refused_line);
    pthread_mutex_unlock(&refused_mu);
    return n;
}
