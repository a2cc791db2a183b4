/*
 * rpc_test_service.h - the one-of-each-kind test service of proto/test/rpc_test.proto for the
 * RPC layer's tests: its server table, built from a test's own handlers, its client methods,
 * and the bidi handler every test uses as is.
 *
 * Ownership: the handlers struct is copied at registration; rt is static storage, filled by
 * rpc_test_resolve() at the start of main().
 */
#ifndef DFC_TEST_RPC_TEST_SERVICE_H
#define DFC_TEST_RPC_TEST_SERVICE_H

#include <stddef.h>

#include "dfc/error.h"
#include "dfc/rpc_client.h"
#include "dfc/rpc_server.h"

/* A test's handlers for the four methods (Echo unary, Put client-streaming, Get
 * server-streaming, Chat bidi); none may be NULL. */
struct rpc_test_handlers {
    dfc_rpc_handler_fn echo, put, get, chat;
};

/* The client side of the same four methods. */
struct rpc_test_methods {
    struct dfc_rpc_client_method echo, put, get, chat;
};
extern struct rpc_test_methods rt;

/* Resolves rt; prints the error and returns -1 when the .proto lacks a method. */
int rpc_test_resolve(void);

/* Registers dfc.test.v1.RpcTest on s with h's handlers and svc. */
int rpc_test_add_service(struct dfc_rpc_server *s, const struct rpc_test_handlers *h, void *svc,
                         struct dfc_error *err);

/* Chat: echoes every message with seq + 1000 until the client closes its side. */
int rpc_test_chat(void *svc, struct dfc_rpc_call *call, const ProtobufCMessage *req,
                  ProtobufCMessage *resp, struct dfc_error *err);

/* Starts counting the rpc.connection_refused lines the layer logs (a log sink). */
void rpc_test_refused_start(void);

/* Stops counting (removes the sink); returns the count, and the first line into first. */
int rpc_test_refused_stop(char *first, size_t size);

#endif /* DFC_TEST_RPC_TEST_SERVICE_H */
