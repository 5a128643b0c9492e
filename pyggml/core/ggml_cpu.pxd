# ggml-cpu's functions that pyggml uses, under their ggml names, reached through
# the CPU backend's registry entry (_cpu_api.h): in a dispatch build the CPU
# backend is a module chosen at import, not linked into the extension.
from pyggml.core.ggml cimport ggml_threadpool, ggml_threadpool_params, ggml_abort_callback
from pyggml.core.ggml_backend cimport ggml_backend_t

cdef extern from "_cpu_api.h" nogil:
    const int PYGGML_BACKEND_DL
    const char * pyggml_cpu_api_bind()
    int pyggml_module_score(const char * path, char * err, size_t n)
    int pyggml_module_check(const char * path, char * err, size_t n)

    ggml_threadpool * ggml_threadpool_new "pyggml_threadpool_new"(ggml_threadpool_params * params)
    void ggml_threadpool_free "pyggml_threadpool_free"(ggml_threadpool * threadpool)
    bint ggml_backend_is_cpu "pyggml_backend_is_cpu"(ggml_backend_t backend)
    void ggml_backend_cpu_set_n_threads "pyggml_cpu_set_n_threads"(ggml_backend_t backend_cpu, int n_threads)
    void ggml_backend_cpu_set_threadpool "pyggml_cpu_set_threadpool"(ggml_backend_t backend_cpu,
                                                                     ggml_threadpool * threadpool)
    # ggml/patches/0011: drop the pool without pausing it (a forked child); 0014 lists it
    # among the CPU backend's functions
    void ggml_backend_cpu_forget_threadpool "pyggml_cpu_forget_threadpool"(ggml_backend_t backend_cpu)
    void ggml_backend_cpu_set_abort_callback "pyggml_cpu_set_abort_callback"(
        ggml_backend_t backend_cpu, ggml_abort_callback abort_callback, void * abort_callback_data)
