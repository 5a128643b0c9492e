/* ggml's RPC backend for pyggml's core (rpc.pxi), or stand-ins that report its
 * absence when the build leaves it out (meson option rpc=disabled): then
 * libggml-rpc is not linked, and nothing may name its functions. */
#ifndef PYGGML_RPC_H
#define PYGGML_RPC_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "ggml-backend.h"

#ifdef PYGGML_RPC

#include "ggml-rpc.h"
#define PYGGML_HAS_RPC 1

#else

#define PYGGML_HAS_RPC 0
#define RPC_PROTO_MAJOR_VERSION 0
#define RPC_PROTO_MINOR_VERSION 0
#define RPC_PROTO_PATCH_VERSION 0

typedef struct ggml_backend_rpc_server * ggml_backend_rpc_server_t;

static inline ggml_backend_t ggml_backend_rpc_init(const char * endpoint, uint32_t device) {
    (void) endpoint; (void) device; return NULL;
}
static inline bool ggml_backend_is_rpc(ggml_backend_t backend) { (void) backend; return false; }
static inline ggml_backend_reg_t ggml_backend_rpc_add_server(const char * endpoint) { (void) endpoint; return NULL; }
static inline void ggml_backend_rpc_set_timeouts(const char * endpoint, int32_t c, int32_t io) {
    (void) endpoint; (void) c; (void) io;
}
static inline bool ggml_backend_rpc_endpoint_error(const char * endpoint, char * msg, size_t size) {
    (void) endpoint; (void) msg; (void) size; return false;
}
static inline bool ggml_backend_rpc_backend_error(ggml_backend_t backend, char * msg, size_t size) {
    (void) backend; (void) msg; (void) size; return false;
}
static inline bool ggml_backend_rpc_buffer_error(ggml_backend_buffer_t buffer, char * msg, size_t size) {
    (void) buffer; (void) msg; (void) size; return false;
}
static inline bool ggml_backend_rpc_get_stats(const char * endpoint, uint64_t * a, uint64_t * b, uint64_t * c, uint64_t * d) {
    (void) endpoint; (void) a; (void) b; (void) c; (void) d; return false;
}
static inline const char * ggml_backend_rpc_dev_endpoint(ggml_backend_dev_t dev) { (void) dev; return NULL; }
static inline ggml_backend_rpc_server_t ggml_backend_rpc_server_new(const char * host, int port, size_t n,
                                                                    ggml_backend_t * backends, char * msg, size_t size) {
    (void) host; (void) port; (void) n; (void) backends; (void) msg; (void) size; return NULL;
}
static inline int ggml_backend_rpc_server_port(ggml_backend_rpc_server_t s) { (void) s; return -1; }
static inline void ggml_backend_rpc_server_run(ggml_backend_rpc_server_t s, bool (*stop)(void *), void * data) {
    (void) s; (void) stop; (void) data;
}
static inline void ggml_backend_rpc_server_free(ggml_backend_rpc_server_t s) { (void) s; }

#endif

/* serve until *stop is set (another thread) or Ctrl-C (our SIGINT flag, _helpers.h) */
#include "_helpers.h"
static bool pyggml_rpc_should_stop(void * data) {
    return *(volatile int *) data != 0 || pyggml_sigint_pending != 0;
}
static void pyggml_rpc_server_run(ggml_backend_rpc_server_t server, int * stop) {
    ggml_backend_rpc_server_run(server, pyggml_rpc_should_stop, (void *) stop);
}

#endif
