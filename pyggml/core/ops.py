"""ggml's operations as functions over ``pyggml.core.Tensor``.

Each checks shapes, types and the context's room before it reaches C.  Axes
and dims are ggml's (0 is the innermost, numpy's last axis).  Results are made
in the first argument's context unless ``ctx=`` names another.
"""

from pyggml.core._core import (  # noqa: F401
    abs, acc, add, argmax, cast, clamp, concat, cont, cos, cpy, cross_entropy_loss, diag_mask_inf, div,
    dup, elu, exp, gelu, get_rows, im2col, leaky_relu, log, matmul, mean, mul, mul_mat, neg, norm,
    opt_step_adamw, opt_step_sgd, out_prod, pad, permute, pool_2d, relu, repeat, reshape, rms_norm,
    scale, scale_bias, sgn, sigmoid, silu, sin, soft_max, soft_max_ext, softplus, sqr, sqrt, step, stop_gradient,
    sub, sum,
    sum_rows, tanh, transpose, view,
    # ggml/patches/0020: backward passes and fused CPU kernels
    batch_norm, batch_norm_back, bias_act, conv_2d_cl, conv_2d_cl_back_filter, conv_transpose_2d_cl, gelu_erf,
    conv_2d_cl_dw, conv_2d_cl_dw_back_filter, conv_2d_cl_dw_back_input,
    gru_cell, gru_cell_back, lstm_cell, lstm_cell_back, norm_back, pad_ext, pool_1d, pool_cl, pool_cl_back,
    unary_back, upscale,
    # ggml's own backward ops, which a second-order pass differentiates (patch 0042)
    silu_back, soft_max_back,
)
# ggml's argsort of rows (stable: patch 0044), named apart from Keras's ops.argsort (an axis)
from pyggml.core._core import argsort as argsort_rows  # noqa: F401, E402
