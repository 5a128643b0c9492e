# cdef extern declarations for ggml-backend.h: only what pyggml uses.
from libc.stdint cimport int64_t
from pyggml.core.ggml cimport ggml_tensor, ggml_cgraph, ggml_status, ggml_backend_buffer

cdef extern from "ggml-backend.h" nogil:
    ctypedef ggml_backend_buffer * ggml_backend_buffer_t
    struct ggml_backend
    ctypedef ggml_backend * ggml_backend_t
    struct ggml_backend_buffer_type
    ctypedef ggml_backend_buffer_type * ggml_backend_buffer_type_t
    struct ggml_backend_device
    ctypedef ggml_backend_device * ggml_backend_dev_t
    struct ggml_backend_reg
    ctypedef ggml_backend_reg * ggml_backend_reg_t
    struct ggml_backend_sched
    ctypedef ggml_backend_sched * ggml_backend_sched_t

    cdef enum ggml_backend_dev_type:
        GGML_BACKEND_DEVICE_TYPE_CPU
        GGML_BACKEND_DEVICE_TYPE_GPU
        GGML_BACKEND_DEVICE_TYPE_IGPU
        GGML_BACKEND_DEVICE_TYPE_ACCEL

    # buffers
    const char * ggml_backend_buffer_name(ggml_backend_buffer_t buffer)
    void ggml_backend_buffer_free(ggml_backend_buffer_t buffer)
    size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer)
    void ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, unsigned char value)
    bint ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer)

    # backends
    const char * ggml_backend_name(ggml_backend_t backend)
    void ggml_backend_free(ggml_backend_t backend)
    ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend)
    void ggml_backend_synchronize(ggml_backend_t backend)
    bint ggml_backend_supports_op(ggml_backend_t backend, const ggml_tensor * op)
    ggml_status ggml_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * cgraph)
    void ggml_backend_tensor_set(ggml_tensor * tensor, const void * data, size_t offset, size_t size)
    void ggml_backend_tensor_get(const ggml_tensor * tensor, void * data, size_t offset, size_t size)
    void ggml_backend_tensor_copy(ggml_tensor * src, ggml_tensor * dst)

    # devices and the registry
    size_t ggml_backend_dev_count()
    ggml_backend_dev_t ggml_backend_dev_get(size_t index)
    ggml_backend_dev_t ggml_backend_dev_by_name(const char * name)
    const char * ggml_backend_dev_name(ggml_backend_dev_t device)
    const char * ggml_backend_dev_description(ggml_backend_dev_t device)
    ggml_backend_dev_type ggml_backend_dev_get_type "ggml_backend_dev_type"(ggml_backend_dev_t device)
    void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total)
    ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t device, const char * params)
    ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device)
    const char * ggml_backend_reg_name(ggml_backend_reg_t reg)

    # the scheduler
    ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts,
                                                int n_backends, size_t graph_size, bint parallel, bint op_offload)
    void ggml_backend_sched_free(ggml_backend_sched_t sched)
    bint ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, ggml_cgraph * graph)
    ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, ggml_cgraph * graph)
    void ggml_backend_sched_reset(ggml_backend_sched_t sched)
    int ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched)
    ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i)
    int ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched)
