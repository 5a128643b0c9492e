# cdef extern declarations for gguf.h: only what pyggml uses.
from libc.stdint cimport int64_t, uint32_t
from pyggml.core.ggml cimport ggml_context, ggml_tensor, ggml_type

cdef extern from "gguf.h" nogil:
    struct gguf_context

    cdef enum gguf_type:
        GGUF_TYPE_UINT8
        GGUF_TYPE_INT8
        GGUF_TYPE_UINT16
        GGUF_TYPE_INT16
        GGUF_TYPE_UINT32
        GGUF_TYPE_INT32
        GGUF_TYPE_FLOAT32
        GGUF_TYPE_BOOL
        GGUF_TYPE_STRING
        GGUF_TYPE_ARRAY
        GGUF_TYPE_UINT64
        GGUF_TYPE_INT64
        GGUF_TYPE_FLOAT64
        GGUF_TYPE_COUNT

    struct gguf_init_params:
        bint no_alloc
        ggml_context ** ctx

    gguf_context * gguf_init_empty()
    gguf_context * gguf_init_from_file(const char * fname, gguf_init_params params)
    void gguf_free(gguf_context * ctx)
    uint32_t gguf_get_version(const gguf_context * ctx)
    size_t gguf_get_alignment(const gguf_context * ctx)
    size_t gguf_get_data_offset(const gguf_context * ctx)
    int64_t gguf_get_n_kv(const gguf_context * ctx)
    int64_t gguf_find_key(const gguf_context * ctx, const char * key)
    const char * gguf_get_key(const gguf_context * ctx, int64_t key_id)
    gguf_type gguf_get_kv_type(const gguf_context * ctx, int64_t key_id)
    gguf_type gguf_get_arr_type(const gguf_context * ctx, int64_t key_id)
    const void * gguf_get_val_data(const gguf_context * ctx, int64_t key_id)
    const char * gguf_get_val_str(const gguf_context * ctx, int64_t key_id)
    size_t gguf_get_arr_n(const gguf_context * ctx, int64_t key_id)
    const void * gguf_get_arr_data(const gguf_context * ctx, int64_t key_id)
    const char * gguf_get_arr_str(const gguf_context * ctx, int64_t key_id, size_t i)
    int64_t gguf_get_n_tensors(const gguf_context * ctx)
    int64_t gguf_find_tensor(const gguf_context * ctx, const char * name)
    size_t gguf_get_tensor_offset(const gguf_context * ctx, int64_t tensor_id)
    const char * gguf_get_tensor_name(const gguf_context * ctx, int64_t tensor_id)
    const int64_t * gguf_get_tensor_ne(const gguf_context * ctx, int64_t tensor_id)
    ggml_type gguf_get_tensor_type(const gguf_context * ctx, int64_t tensor_id)
    size_t gguf_get_tensor_size(const gguf_context * ctx, int64_t tensor_id)
    # (patch 0015) the dimensions a file holds for a tensor, trailing sizes of 1 included
    unsigned int gguf_get_tensor_n_dims(const gguf_context * ctx, int64_t tensor_id)
    void gguf_set_tensor_n_dims(gguf_context * ctx, const char * name, unsigned int n_dims)

    void gguf_set_val_u32(gguf_context * ctx, const char * key, unsigned int val)
    void gguf_set_val_i32(gguf_context * ctx, const char * key, int val)
    void gguf_set_val_i64(gguf_context * ctx, const char * key, int64_t val)
    void gguf_set_val_f32(gguf_context * ctx, const char * key, float val)
    void gguf_set_val_f64(gguf_context * ctx, const char * key, double val)
    void gguf_set_val_bool(gguf_context * ctx, const char * key, bint val)
    void gguf_set_val_str(gguf_context * ctx, const char * key, const char * val)
    void gguf_set_arr_data(gguf_context * ctx, const char * key, gguf_type type, const void * data, size_t n)
    void gguf_set_arr_str(gguf_context * ctx, const char * key, const char ** data, size_t n)
    void gguf_add_tensor(gguf_context * ctx, const ggml_tensor * tensor)
    bint gguf_write_to_file(const gguf_context * ctx, const char * fname, bint only_meta)
