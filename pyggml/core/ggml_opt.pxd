# cdef extern declarations for ggml-opt.h (with pyggml's patch): only what pyggml uses.
from libc.stdint cimport int32_t, int64_t
from pyggml.core.ggml cimport ggml_context, ggml_tensor
from pyggml.core.ggml_backend cimport ggml_backend_sched_t

cdef extern from "ggml-opt.h" nogil:
    struct ggml_opt_context
    ctypedef ggml_opt_context * ggml_opt_context_t
    struct ggml_opt_result
    ctypedef ggml_opt_result * ggml_opt_result_t

    cdef enum ggml_opt_loss_type:
        GGML_OPT_LOSS_TYPE_MEAN
        GGML_OPT_LOSS_TYPE_SUM
        GGML_OPT_LOSS_TYPE_CROSS_ENTROPY
        GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR

    cdef enum ggml_opt_build_type:
        GGML_OPT_BUILD_TYPE_FORWARD
        GGML_OPT_BUILD_TYPE_GRAD
        GGML_OPT_BUILD_TYPE_OPT

    cdef enum ggml_opt_optimizer_type:
        GGML_OPT_OPTIMIZER_TYPE_ADAMW
        GGML_OPT_OPTIMIZER_TYPE_SGD

    struct _adamw_pars "ggml_opt_optimizer_params::adamw_t":
        pass

    struct ggml_opt_optimizer_params:
        pass

    ctypedef ggml_opt_optimizer_params (*ggml_opt_get_optimizer_params)(void * userdata) noexcept

    struct ggml_opt_params:
        ggml_backend_sched_t backend_sched
        ggml_context * ctx_compute
        ggml_tensor * inputs
        ggml_tensor * outputs
        ggml_opt_loss_type loss_type
        ggml_opt_build_type build_type
        int32_t opt_period
        ggml_opt_get_optimizer_params get_opt_pars
        void * get_opt_pars_ud
        ggml_opt_optimizer_type optimizer
        int64_t graph_size

    ggml_opt_params ggml_opt_default_params(ggml_backend_sched_t backend_sched, ggml_opt_loss_type loss_type)
    ggml_opt_context_t ggml_opt_init(ggml_opt_params params)
    void ggml_opt_free(ggml_opt_context_t opt_ctx)
    void ggml_opt_reset(ggml_opt_context_t opt_ctx, bint optimizer)
    ggml_tensor * ggml_opt_inputs(ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_outputs(ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_labels(ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_loss(ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_grad_acc(ggml_opt_context_t opt_ctx, ggml_tensor * node)
    ggml_tensor * ggml_opt_grad_m(ggml_opt_context_t opt_ctx, ggml_tensor * node)
    ggml_tensor * ggml_opt_grad_v(ggml_opt_context_t opt_ctx, ggml_tensor * node)
    int64_t ggml_opt_get_iter(ggml_opt_context_t opt_ctx)
    void ggml_opt_set_iter(ggml_opt_context_t opt_ctx, int64_t iter)
    int32_t ggml_opt_get_opt_i(ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_get_node_copy(ggml_opt_context_t opt_ctx, ggml_tensor * node)
    void ggml_opt_alloc(ggml_opt_context_t opt_ctx, bint backward)
    void ggml_opt_eval(ggml_opt_context_t opt_ctx, ggml_opt_result_t result)
