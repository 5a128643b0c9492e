# cdef extern declarations for ggml-cpu.h: only what pyggml uses.
from pyggml.core.ggml cimport ggml_threadpool, ggml_threadpool_params, ggml_abort_callback
from pyggml.core.ggml_backend cimport ggml_backend_t

cdef extern from "ggml-cpu.h" nogil:
    ggml_threadpool * ggml_threadpool_new(ggml_threadpool_params * params)
    void ggml_threadpool_free(ggml_threadpool * threadpool)
    bint ggml_backend_is_cpu(ggml_backend_t backend)
    void ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads)
    void ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool * threadpool)
    # ggml/patches/0011: drop the pool without pausing it (a forked child)
    void ggml_backend_cpu_forget_threadpool(ggml_backend_t backend_cpu)
    void ggml_backend_cpu_set_abort_callback(ggml_backend_t backend_cpu, ggml_abort_callback abort_callback,
                                             void * abort_callback_data)
