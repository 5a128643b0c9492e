"""What the convolution and pooling layers share: padding arithmetic and the
channels-last <-> ggml channels-first conversions.

Images are channels-last (Keras's (N, H, W, C)); ggml's im2col and pool_2d
work on (N, C, H, W) (ggml [W, H, C, N]).  A pooling layer's (N, C, H, W)
result is remembered in the graph's cache, so that a convolution after it
takes it directly instead of permuting twice.
"""

import numpy as np

from pyggml import _scope, ops
from pyggml._conv_arith import same_pads, valid_size  # noqa: F401  (the layers import them from here)
from pyggml._validation import check_choice, int_tuple
from pyggml.layers._helpers import Activated, contiguous, set_weight_options, weight_options_config
from pyggml.layers._keras_weights import KerasKernel
from pyggml.initializers import config_value as _init_config

__all__ = ["same_pads", "pad_nchw", "to_chw", "to_hwc", "BaseConv"]


def pad_nchw(x, top, bottom, left, right):
    """Zero-pad an (N, C, H, W) tensor with acc, which trains."""
    n, c, h, w = x.shape
    hp, wp = h + top + bottom, w + left + right
    zeros = ops.constant(np.zeros((n, c, hp, wp), dtype=np.float32))
    nb = (c * hp * wp * 4, hp * wp * 4, wp * 4, 4)
    return ops.acc(zeros, contiguous(x), nb=nb, offset=(top * wp + left) * 4)


def to_chw(x):
    """(N, H, W, C) -> (N, C, H, W); a tensor to_hwc made gives its source back."""
    cache = _scope.require("to_chw").cache.setdefault("chw_of", {})
    known = cache.get(id(x))
    if known is not None and known[0] is x:
        return known[1]
    return ops.cont(ops.permute(x, (2, 0, 1, 3)))


def to_hwc(x):
    """(N, C, H, W) -> (N, H, W, C)."""
    y = ops.cont(ops.permute(x, (1, 2, 0, 3)))
    _scope.require("to_hwc").cache.setdefault("chw_of", {})[id(y)] = (y, x)
    return y


_OPTIONS = ("kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint")


class BaseConv(Activated):
    """Arguments shared by Conv1D, Conv2D and Conv3D (and their transposes).  The kernel's
    regularizer and constraint see it in Keras's layout: (kh, kw, in, filters) for
    a convolution, (kh, kw, filters, in) for a transposed one.  ``kernel`` is that view of
    ``weight``, PyTorch's (out, in, kh, kw)."""
    _config_activity_regularizer = True      # (Keras's config names it, None included)

    build_shape_rule = "last"        # a later call may have other lengths (Layer._fits_built)

    rank = 2
    kernel = KerasKernel("weight")

    def __init__(self, filters, kernel_size, strides=1, padding="valid", activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", dilation_rate=1,
                 data_format=None, kernel_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, **kwargs):
        super().__init__(activation=activation, **kwargs)
        set_weight_options(self, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                           kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        from pyggml._validation import check_positive_int
        self.filters = check_positive_int("filters", filters, 1 << 20)
        self.kernel_size = int_tuple("kernel_size", kernel_size, self.rank)
        self.strides = int_tuple("strides", strides, self.rank)
        self.dilation_rate = int_tuple("dilation_rate", dilation_rate, self.rank)
        # Keras takes the padding in any case ("VALID", keras-io's video transformer)
        padding = padding.lower() if isinstance(padding, str) else padding
        self.padding = check_choice("padding", padding, ("valid", "same", "causal") if self.rank == 1
                                    else ("valid", "same"))
        from pyggml.layers._channels_first import TransposesChannelsFirst, data_format_of
        fmt = data_format_of(data_format, type(self).__name__)
        if fmt == "channels_first" and not isinstance(self, TransposesChannelsFirst):
            raise ValueError(f"{type(self).__name__}: data_format must be 'channels_last' (Keras's default), "
                             f"got {data_format!r}")
        self.data_format = fmt
        self.use_bias = bool(use_bias)
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer

    def add_kernel(self, shape):
        """The kernel, (A, B, *kernel) in PyTorch's layout (Keras's: (*kernel, B, A)), and the bias."""
        self.weight = self.add_weight("weight", shape, self.kernel_initializer, regularizer=self.kernel_regularizer,
                                      constraint=self.kernel_constraint)
        self.weight.keras_axes = tuple(range(2, 2 + self.rank)) + (1, 0)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer, regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None

    def _out_size(self, size, i):
        k = (self.kernel_size[i] - 1) * self.dilation_rate[i] + 1
        s = self.strides[i]
        if size is None:
            return None
        if self.padding in ("same", "causal"):
            return -(-size // s) if self.padding == "same" else valid_size(size + k - 1, k, s)
        if size < k:
            raise ValueError(f"{type(self).__name__}: kernel {self.kernel_size} is larger than the input")
        return valid_size(size, k, s)

    def _pads(self, size, i):
        """(before, after) zero padding along spatial axis i."""
        k = (self.kernel_size[i] - 1) * self.dilation_rate[i] + 1
        if self.padding == "same":
            _, a, b = same_pads(size, k, self.strides[i])
            return a, b
        if self.padding == "causal":
            return k - 1, 0
        return 0, 0

    def get_config(self):
        cfg = super().get_config()
        cfg.update(filters=self.filters, kernel_size=self.kernel_size, strides=self.strides,
                   padding=self.padding, activation=self.activation_name, use_bias=self.use_bias,
                   dilation_rate=self.dilation_rate, data_format=self.data_format)
        cfg.update(weight_options_config(self, _OPTIONS))
        for k in ("kernel_initializer", "bias_initializer"):
            if _init_config(getattr(self, k)) is not None:      # a name or an Initializer instance
                cfg[k] = _init_config(getattr(self, k))
        return cfg
