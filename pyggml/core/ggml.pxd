# cdef extern declarations for ggml.h: only what pyggml uses.
from libc.stdint cimport int32_t, int64_t
from libc.stddef cimport size_t

cdef extern from "ggml.h" nogil:
    enum: GGML_MAX_DIMS
    enum: GGML_MAX_SRC
    enum: GGML_MAX_NAME
    enum: GGML_DEFAULT_GRAPH_SIZE

    cdef enum ggml_type:
        GGML_TYPE_F32
        GGML_TYPE_F16
        GGML_TYPE_I8
        GGML_TYPE_I32
        GGML_TYPE_I64
        GGML_TYPE_COUNT

    cdef enum ggml_status:
        GGML_STATUS_ALLOC_FAILED
        GGML_STATUS_FAILED
        GGML_STATUS_SUCCESS
        GGML_STATUS_ABORTED

    cdef enum ggml_log_level:
        GGML_LOG_LEVEL_NONE
        GGML_LOG_LEVEL_DEBUG
        GGML_LOG_LEVEL_INFO
        GGML_LOG_LEVEL_WARN
        GGML_LOG_LEVEL_ERROR
        GGML_LOG_LEVEL_CONT

    cdef enum ggml_tensor_flag:
        GGML_TENSOR_FLAG_INPUT
        GGML_TENSOR_FLAG_OUTPUT
        GGML_TENSOR_FLAG_PARAM
        GGML_TENSOR_FLAG_LOSS
        GGML_TENSOR_FLAG_NO_GRAD

    cdef enum ggml_op:
        GGML_OP_NONE
        GGML_OP_DUP
        GGML_OP_ADD
        GGML_OP_ADD1
        GGML_OP_ACC
        GGML_OP_SUB
        GGML_OP_MUL
        GGML_OP_DIV
        GGML_OP_SQR
        GGML_OP_SQRT
        GGML_OP_LOG
        GGML_OP_SIN
        GGML_OP_COS
        GGML_OP_SUM
        GGML_OP_SUM_ROWS
        GGML_OP_MEAN
        GGML_OP_ARGMAX
        GGML_OP_COUNT_EQUAL
        GGML_OP_REPEAT
        GGML_OP_REPEAT_BACK
        GGML_OP_CONCAT
        GGML_OP_SILU_BACK
        GGML_OP_NORM
        GGML_OP_RMS_NORM
        GGML_OP_RMS_NORM_BACK
        GGML_OP_MUL_MAT
        GGML_OP_OUT_PROD
        GGML_OP_SCALE
        GGML_OP_SET
        GGML_OP_CPY
        GGML_OP_CONT
        GGML_OP_RESHAPE
        GGML_OP_VIEW
        GGML_OP_PERMUTE
        GGML_OP_TRANSPOSE
        GGML_OP_GET_ROWS
        GGML_OP_GET_ROWS_BACK
        GGML_OP_SET_ROWS
        GGML_OP_DIAG_MASK_INF
        GGML_OP_DIAG_MASK_ZERO
        GGML_OP_SOFT_MAX
        GGML_OP_SOFT_MAX_BACK
        GGML_OP_ROPE
        GGML_OP_CLAMP
        GGML_OP_IM2COL
        GGML_OP_IM2COL_BACK
        GGML_OP_POOL_2D
        GGML_OP_POOL_2D_BACK
        GGML_OP_PAD
        GGML_OP_LEAKY_RELU
        GGML_OP_UNARY
        GGML_OP_CROSS_ENTROPY_LOSS
        GGML_OP_CROSS_ENTROPY_LOSS_BACK
        GGML_OP_OPT_STEP_ADAMW
        GGML_OP_OPT_STEP_SGD
        GGML_OP_POOL_1D
        GGML_OP_UPSCALE
        GGML_OP_GLU
        GGML_OP_ARGSORT
        # pyggml's ops (ggml/patches/0020)
        GGML_OP_UNARY_BACK
        GGML_OP_NORM_BACK
        GGML_OP_BIAS_ACT
        GGML_OP_BATCH_NORM
        GGML_OP_BATCH_NORM_BACK
        GGML_OP_POOL_CL
        GGML_OP_POOL_CL_BACK
        GGML_OP_CONV_CL
        GGML_OP_CONV_CL_BACK_INPUT
        GGML_OP_CONV_CL_BACK_FILTER
        GGML_OP_LSTM_CELL
        GGML_OP_LSTM_CELL_BACK
        GGML_OP_GRU_CELL
        GGML_OP_GRU_CELL_BACK
        GGML_OP_COUNT

    cdef enum ggml_unary_op:
        GGML_UNARY_OP_ABS
        GGML_UNARY_OP_SGN
        GGML_UNARY_OP_NEG
        GGML_UNARY_OP_STEP
        GGML_UNARY_OP_TANH
        GGML_UNARY_OP_ELU
        GGML_UNARY_OP_RELU
        GGML_UNARY_OP_SIGMOID
        GGML_UNARY_OP_GELU
        GGML_UNARY_OP_SILU
        GGML_UNARY_OP_EXP
        GGML_UNARY_OP_EXPM1
        GGML_UNARY_OP_SOFTPLUS
        GGML_UNARY_OP_GELU_ERF

    cdef enum ggml_sort_order:
        GGML_SORT_ORDER_ASC
        GGML_SORT_ORDER_DESC

    cdef enum ggml_scale_mode:
        GGML_SCALE_MODE_NEAREST

    cdef enum ggml_act:
        GGML_ACT_NONE
        GGML_ACT_RELU
        GGML_ACT_TANH
        GGML_ACT_SIGMOID
        GGML_ACT_ELU
        GGML_ACT_LEAKY_RELU
        GGML_ACT_SOFTPLUS
        GGML_ACT_GELU
        GGML_ACT_GELU_ERF
        GGML_ACT_SILU
        GGML_ACT_CLAMP

    cdef enum ggml_pool_cl_op:
        GGML_POOL_CL_MAX
        GGML_POOL_CL_AVG
        GGML_POOL_CL_AVG_PAD
        GGML_POOL_CL_SUM

    cdef enum ggml_op_pool:
        GGML_OP_POOL_MAX
        GGML_OP_POOL_AVG

    struct ggml_backend_buffer
    struct ggml_context
    struct ggml_cgraph

    struct ggml_tensor:
        ggml_type type
        ggml_backend_buffer * buffer
        int64_t ne[4]
        size_t nb[4]
        ggml_op op
        int32_t op_params[16]
        int32_t flags
        ggml_tensor * src[10]
        ggml_tensor * view_src
        size_t view_offs
        void * data
        char name[64]

    struct ggml_init_params:
        size_t mem_size
        void * mem_buffer
        bint no_alloc

    ctypedef bint (*ggml_abort_callback)(void * data) noexcept
    ctypedef void (*ggml_log_callback)(ggml_log_level level, const char * text, void * user_data) noexcept

    void ggml_log_set(ggml_log_callback log_callback, void * user_data)
    const char * ggml_version()
    const char * ggml_commit()

    size_t ggml_tensor_overhead()
    size_t ggml_graph_overhead_custom(size_t size, bint grads)
    size_t ggml_type_size(ggml_type type)
    const char * ggml_type_name(ggml_type type)
    const char * ggml_op_desc(const ggml_tensor * t)
    ggml_unary_op ggml_get_unary_op(const ggml_tensor * tensor)

    ggml_context * ggml_init(ggml_init_params params)
    void ggml_free(ggml_context * ctx)
    size_t ggml_used_mem(const ggml_context * ctx)
    size_t ggml_get_mem_size(const ggml_context * ctx)
    void * ggml_get_mem_buffer(const ggml_context * ctx)
    bint ggml_get_no_alloc(ggml_context * ctx)
    ggml_tensor * ggml_get_first_tensor(const ggml_context * ctx)
    ggml_tensor * ggml_get_next_tensor(const ggml_context * ctx, ggml_tensor * tensor)

    ggml_tensor * ggml_new_tensor(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne)
    int64_t ggml_nelements(const ggml_tensor * tensor)
    size_t ggml_nbytes(const ggml_tensor * tensor)
    int ggml_n_dims(const ggml_tensor * tensor)
    bint ggml_is_contiguous(const ggml_tensor * tensor)
    bint ggml_is_transposed(const ggml_tensor * tensor)
    bint ggml_are_same_shape(const ggml_tensor * t0, const ggml_tensor * t1)
    bint ggml_can_repeat(const ggml_tensor * t0, const ggml_tensor * t1)
    ggml_tensor * ggml_set_name(ggml_tensor * tensor, const char * name)
    const char * ggml_get_name(const ggml_tensor * tensor)
    void ggml_set_input(ggml_tensor * tensor)
    void ggml_set_output(ggml_tensor * tensor)
    void ggml_set_param(ggml_tensor * tensor)
    void ggml_set_loss(ggml_tensor * tensor)

    # operations
    ggml_tensor * ggml_dup(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_add(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_acc(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset)
    ggml_tensor * ggml_sub(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_mul(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_div(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_sqr(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sqrt(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_log(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sin(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_cos(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_exp(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_abs(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sgn(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_neg(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_step(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_relu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_silu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_softplus(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_tanh(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sigmoid(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_gelu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_elu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_leaky_relu(ggml_context * ctx, ggml_tensor * a, float negative_slope, bint inplace)
    ggml_tensor * ggml_sum(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sum_rows(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_mean(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_argmax(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_argsort(ggml_context * ctx, ggml_tensor * a, ggml_sort_order order)
    ggml_tensor * ggml_repeat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_concat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int dim)
    ggml_tensor * ggml_norm(ggml_context * ctx, ggml_tensor * a, float eps)
    ggml_tensor * ggml_rms_norm(ggml_context * ctx, ggml_tensor * a, float eps)
    ggml_tensor * ggml_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_out_prod(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_scale(ggml_context * ctx, ggml_tensor * a, float s)
    ggml_tensor * ggml_scale_bias(ggml_context * ctx, ggml_tensor * a, float s, float b)
    ggml_tensor * ggml_clamp(ggml_context * ctx, ggml_tensor * a, float mn, float mx)
    ggml_tensor * ggml_cpy(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_cast(ggml_context * ctx, ggml_tensor * a, ggml_type type)
    ggml_tensor * ggml_cont(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_reshape_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
    ggml_tensor * ggml_view_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                               size_t nb1, size_t nb2, size_t nb3, size_t offset)
    ggml_tensor * ggml_permute(ggml_context * ctx, ggml_tensor * a, int axis0, int axis1, int axis2, int axis3)
    ggml_tensor * ggml_transpose(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_get_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_soft_max(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_soft_max_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias)
    ggml_tensor * ggml_diag_mask_inf(ggml_context * ctx, ggml_tensor * a, int n_past)
    ggml_tensor * ggml_im2col(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1,
                              int d0, int d1, bint is_2D, ggml_type dst_type)
    ggml_tensor * ggml_pool_2d(ggml_context * ctx, ggml_tensor * a, ggml_op_pool op, int k0, int k1, int s0, int s1,
                               float p0, float p1)
    ggml_tensor * ggml_pad(ggml_context * ctx, ggml_tensor * a, int p0, int p1, int p2, int p3)
    ggml_tensor * ggml_cross_entropy_loss(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_gelu_erf(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_pool_1d(ggml_context * ctx, ggml_tensor * a, ggml_op_pool op, int k0, int s0, int p0)
    ggml_tensor * ggml_interpolate(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                                   int64_t ne3, unsigned int mode)
    ggml_tensor * ggml_pad_ext(ggml_context * ctx, ggml_tensor * a, int lp0, int rp0, int lp1, int rp1,
                               int lp2, int rp2, int lp3, int rp3)
    # pyggml's ops (ggml/patches/0020)
    ggml_tensor * ggml_unary_back(ggml_context * ctx, ggml_tensor * grad, ggml_tensor * b, ggml_act act,
                                  bint from_output, float alpha, float beta)
    ggml_tensor * ggml_norm_back(ggml_context * ctx, ggml_tensor * grad, ggml_tensor * a, float eps)
    ggml_tensor * ggml_silu_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_soft_max_ext_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float scale,
                                         float max_bias)
    ggml_tensor * ggml_bias_act(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_act act, float alpha)
    ggml_tensor * ggml_batch_norm(ggml_context * ctx, ggml_tensor * a, ggml_tensor * gamma, ggml_tensor * beta,
                                  ggml_tensor * stats, float eps, ggml_act act, float alpha)
    ggml_tensor * ggml_batch_norm_back(ggml_context * ctx, ggml_tensor * grad, ggml_tensor * a, ggml_tensor * y,
                                       ggml_tensor * gamma, ggml_tensor * stats, float eps, ggml_act act, float alpha)
    ggml_tensor * ggml_pool_cl(ggml_context * ctx, ggml_tensor * a, ggml_pool_cl_op op, int k0, int k1, int s0,
                               int s1, int p0, int p1, int64_t ow, int64_t oh)
    ggml_tensor * ggml_pool_cl_back(ggml_context * ctx, ggml_tensor * grad, ggml_tensor * a, ggml_pool_cl_op op,
                                    int k0, int k1, int s0, int s1, int p0, int p1)
    ggml_tensor * ggml_conv_cl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * w, ggml_tensor * b, int s0, int s1,
                               int p0, int p1, int d0, int d1, int64_t ow, int64_t oh, ggml_act act, float alpha)
    ggml_tensor * ggml_conv_cl_back_input(ggml_context * ctx, ggml_tensor * dy, ggml_tensor * w, int s0, int s1,
                                          int p0, int p1, int d0, int d1, int64_t iw, int64_t ih)
    ggml_tensor * ggml_conv_cl_back_filter(ggml_context * ctx, ggml_tensor * dy, ggml_tensor * a, int kw, int kh,
                                           int s0, int s1, int p0, int p1, int d0, int d1, bint with_bias)
    ggml_tensor * ggml_conv_cl_dw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * w, ggml_tensor * b, int s0,
                                  int s1, int p0, int p1, int d0, int d1, int64_t ow, int64_t oh, ggml_act act,
                                  float alpha)
    ggml_tensor * ggml_conv_cl_dw_back_input(ggml_context * ctx, ggml_tensor * dy, ggml_tensor * w, int s0, int s1,
                                             int p0, int p1, int d0, int d1, int64_t iw, int64_t ih)
    ggml_tensor * ggml_conv_cl_dw_back_filter(ggml_context * ctx, ggml_tensor * dy, ggml_tensor * a, int kw, int kh,
                                              int s0, int s1, int p0, int p1, int d0, int d1, bint with_bias)
    ggml_tensor * ggml_lstm_cell(ggml_context * ctx, ggml_tensor * zx, ggml_tensor * zh, ggml_tensor * c,
                                 ggml_tensor * h, ggml_tensor * mask)
    ggml_tensor * ggml_lstm_cell_back(ggml_context * ctx, ggml_tensor * grad, ggml_tensor * zx, ggml_tensor * zh,
                                      ggml_tensor * c, ggml_tensor * h, ggml_tensor * mask)
    ggml_tensor * ggml_gru_cell(ggml_context * ctx, ggml_tensor * xp, ggml_tensor * hp, ggml_tensor * h,
                                ggml_tensor * mask)
    ggml_tensor * ggml_gru_cell_back(ggml_context * ctx, ggml_tensor * grad, ggml_tensor * xp, ggml_tensor * hp,
                                     ggml_tensor * h, ggml_tensor * mask)
    ggml_tensor * ggml_opt_step_adamw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * m,
                                      ggml_tensor * v, ggml_tensor * adamw_params)
    ggml_tensor * ggml_opt_step_sgd(ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * sgd_params)

    # graphs
    ggml_cgraph * ggml_new_graph_custom(ggml_context * ctx, size_t size, bint grads)
    void ggml_build_forward_expand(ggml_cgraph * cgraph, ggml_tensor * tensor)
    void ggml_build_backward_expand(ggml_context * ctx, ggml_cgraph * cgraph, ggml_tensor ** grad_accs)
    int ggml_graph_size(ggml_cgraph * cgraph)
    int ggml_graph_n_nodes(ggml_cgraph * cgraph)
    ggml_tensor * ggml_graph_node(ggml_cgraph * cgraph, int i)
    ggml_tensor * ggml_graph_get_grad(const ggml_cgraph * cgraph, const ggml_tensor * node)
    void ggml_graph_reset(ggml_cgraph * cgraph)

    # threads
    struct ggml_threadpool_params:
        int n_threads
        int poll
    struct ggml_threadpool
    ggml_threadpool_params ggml_threadpool_params_default(int n_threads)
