# cdef extern declarations for ggml-alloc.h: only what pyggml uses.
from pyggml.core.ggml cimport ggml_context
from pyggml.core.ggml_backend cimport ggml_backend_t, ggml_backend_buffer_t

cdef extern from "ggml-alloc.h" nogil:
    ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend)
