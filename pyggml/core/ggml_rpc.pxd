# cdef extern declarations for ggml-rpc.h (with our patches 0050 and 0051): only
# what pyggml uses.  Through _rpc.h, which includes the real header when the build
# has the RPC backend and declares stand-ins that report its absence otherwise.
from libc.stdint cimport int32_t, uint32_t, uint64_t
from pyggml.core.ggml_backend cimport ggml_backend_t, ggml_backend_buffer_t, ggml_backend_dev_t, ggml_backend_reg_t

cdef extern from "_rpc.h" nogil:
    int PYGGML_HAS_RPC
    int RPC_PROTO_MAJOR_VERSION
    int RPC_PROTO_MINOR_VERSION
    int RPC_PROTO_PATCH_VERSION

    # the client
    ggml_backend_t ggml_backend_rpc_init(const char * endpoint, uint32_t device)
    bint ggml_backend_is_rpc(ggml_backend_t backend)
    ggml_backend_reg_t ggml_backend_rpc_add_server(const char * endpoint)
    void ggml_backend_rpc_set_timeouts(const char * endpoint, int32_t connect_timeout_ms, int32_t io_timeout_ms)
    bint ggml_backend_rpc_endpoint_error(const char * endpoint, char * msg, size_t size)
    bint ggml_backend_rpc_backend_error(ggml_backend_t backend, char * msg, size_t size)
    bint ggml_backend_rpc_buffer_error(ggml_backend_buffer_t buffer, char * msg, size_t size)
    bint ggml_backend_rpc_get_stats(const char * endpoint, uint64_t * commands, uint64_t * round_trips,
                                    uint64_t * bytes_sent, uint64_t * bytes_received)
    const char * ggml_backend_rpc_dev_endpoint(ggml_backend_dev_t dev)

    # the server
    struct ggml_backend_rpc_server
    ctypedef ggml_backend_rpc_server * ggml_backend_rpc_server_t
    ggml_backend_rpc_server_t ggml_backend_rpc_server_new(const char * host, int port, size_t n_backends,
                                                          ggml_backend_t * backends, char * msg, size_t size)
    int ggml_backend_rpc_server_port(ggml_backend_rpc_server_t server)
    # ggml_backend_rpc_server_run with a stop test of _rpc.h: *stop set, or Ctrl-C
    void pyggml_rpc_server_run(ggml_backend_rpc_server_t server, int * stop)
    void ggml_backend_rpc_server_free(ggml_backend_rpc_server_t server)
