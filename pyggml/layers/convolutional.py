"""Convolutions and pooling, channels-last, through an f32 im2col and mul_mat.

(ggml_conv_2d with an f32 kernel makes an f16 im2col, which skews training;
and the kernel given to im2col must not be a parameter, so a shape-only
tensor stands in for it.)
"""

import numpy as np

from pyggml.core import ops
from pyggml.layers.base import Layer
from pyggml.layers.core import _Activated, _positive_int, _cont

__all__ = ["Conv1D", "Conv2D", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
           "GlobalMaxPooling2D"]


def _pair(name, v):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v), int(v))
    t = tuple(v)
    if len(t) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
    return (_positive_int(name, t[0], 1 << 16), _positive_int(name, t[1], 1 << 16))


def _same_pads(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2, total - total // 2


def _pad_hw(x, g, top, bottom, left, right):
    """Zero-pad a [W, H, C, N] tensor (numpy (N, C, H, W)) with acc, which trains."""
    n, c, h, w = x.shape
    hp, wp = h + top + bottom, w + left + right
    zeros = g.const(np.zeros((n, c, hp, wp), dtype=np.float32))
    nb = (c * hp * wp * 4, hp * wp * 4, wp * 4, 4)
    return ops.acc(zeros, _cont(x, g), nb=nb, offset=(top * wp + left) * 4, ctx=g.ctx)


def to_chw(x, g):
    """channels-last (N, H, W, C) -> (N, C, H, W), i.e. ggml [W, H, C, N].

    A tensor that to_hwc made from a (N, C, H, W) one gives that one back: a
    pooling layer followed by a convolution then copies neither way (a copy
    nothing reads is left out of the graph)."""
    known = g.chw_of.get(id(x))
    if known is not None and known[0] is x:
        return known[1]
    return ops.cont(ops.permute(x, (2, 0, 1, 3), ctx=g.ctx), ctx=g.ctx)


def to_hwc(x, g):
    """(N, C, H, W) -> channels-last (N, H, W, C)."""
    y = ops.cont(ops.permute(x, (1, 2, 0, 3), ctx=g.ctx), ctx=g.ctx)
    g.chw_of[id(y)] = (y, x)
    return y


class _Conv(_Activated):
    def _common(self, padding, use_bias, kernel_initializer, bias_initializer):
        if padding not in ("valid", "same"):
            raise ValueError(f"padding must be 'valid' or 'same', got {padding!r}")
        self.padding = padding
        self.use_bias = bool(use_bias)
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer


class Conv2D(_Conv):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(activation=activation, **kwargs)
        self.filters = _positive_int("filters", filters, 1 << 20)
        self.kernel_size = _pair("kernel_size", kernel_size)
        self.strides = _pair("strides", strides)
        self._common(padding, use_bias, kernel_initializer, bias_initializer)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"Conv2D expects inputs of shape (H, W, C), got {input_shape}")
        h, w, _ = input_shape
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        if self.padding == "same":
            oh, ow = _same_pads(h, kh, sh)[0], _same_pads(w, kw, sw)[0]
        else:
            if h < kh or w < kw:
                raise ValueError(f"Conv2D: kernel {self.kernel_size} is larger than the input {input_shape[:2]}")
            oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        return (oh, ow, self.filters)

    def build(self, input_shape):
        c = input_shape[-1]
        self.add_weight("weight", (self.filters, c) + self.kernel_size, self.kernel_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer)

    def call_pre(self, g, x, training):
        h, w, c = self.input_shape
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        oh, ow, oc = self.output_shape
        xc = to_chw(x, g)
        ph = pw = 0
        if self.padding == "same":
            _, t, b = _same_pads(h, kh, sh)
            _, l, r = _same_pads(w, kw, sw)
            if t == b and l == r:
                ph, pw = t, l
            else:
                xc = _pad_hw(xc, g, t, b, l, r)
        kshape = g.shape_only((oc, c, kh, kw))
        cols = ops.im2col(kshape, xc, sw, sh, pw, ph, 1, 1, True, "f32", ctx=g.ctx)
        k = c * kh * kw
        cols = ops.reshape(cols, (g.batch * oh * ow, k), ctx=g.ctx)
        wmat = ops.reshape(g.weight(self, "weight"), (oc, k), ctx=g.ctx)
        y = ops.mul_mat(wmat, cols, ctx=g.ctx)
        if self.use_bias:
            y = ops.add(y, g.weight(self, "bias"), ctx=g.ctx)
        return ops.reshape(y, (g.batch, oh, ow, oc), ctx=g.ctx)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(filters=self.filters, kernel_size=self.kernel_size, strides=self.strides,
                   padding=self.padding, activation=self.activation, use_bias=self.use_bias)
        return cfg


class Conv1D(_Conv):
    """1-D convolution over (steps, channels) inputs; weight (filters, channels, k)."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(activation=activation, **kwargs)
        self.filters = _positive_int("filters", filters, 1 << 20)
        ks = kernel_size[0] if isinstance(kernel_size, (tuple, list)) else kernel_size
        st = strides[0] if isinstance(strides, (tuple, list)) else strides
        self.kernel_size = (_positive_int("kernel_size", ks, 1 << 16),)
        self.strides = (_positive_int("strides", st, 1 << 16),)
        self._common(padding, use_bias, kernel_initializer, bias_initializer)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 2:
            raise ValueError(f"Conv1D expects inputs of shape (steps, channels), got {input_shape}")
        n, _ = input_shape
        k, s = self.kernel_size[0], self.strides[0]
        if self.padding == "same":
            o = _same_pads(n, k, s)[0]
        else:
            if n < k:
                raise ValueError(f"Conv1D: kernel {k} is longer than the input ({n} steps)")
            o = (n - k) // s + 1
        return (o, self.filters)

    def build(self, input_shape):
        self.add_weight("weight", (self.filters, input_shape[-1], self.kernel_size[0]), self.kernel_initializer)
        if self.use_bias:
            self.add_weight("bias", (self.filters,), self.bias_initializer)

    def call_pre(self, g, x, training):
        steps, c = self.input_shape
        k, s = self.kernel_size[0], self.strides[0]
        o, oc = self.output_shape
        # as a 2-D convolution over an image of height 1: (N, 1, steps, C)
        xc = to_chw(ops.reshape(_cont(x, g), (g.batch, 1, steps, c), ctx=g.ctx), g)
        pw = 0
        if self.padding == "same":
            _, l, r = _same_pads(steps, k, s)
            if l == r:
                pw = l
            else:
                xc = _pad_hw(xc, g, 0, 0, l, r)
        kshape = g.shape_only((oc, c, 1, k))
        cols = ops.im2col(kshape, xc, s, 1, pw, 0, 1, 1, True, "f32", ctx=g.ctx)
        cols = ops.reshape(cols, (g.batch * o, c * k), ctx=g.ctx)
        wmat = ops.reshape(g.weight(self, "weight"), (oc, c * k), ctx=g.ctx)
        y = ops.mul_mat(wmat, cols, ctx=g.ctx)
        if self.use_bias:
            y = ops.add(y, g.weight(self, "bias"), ctx=g.ctx)
        return ops.reshape(y, (g.batch, o, oc), ctx=g.ctx)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(filters=self.filters, kernel_size=self.kernel_size, strides=self.strides,
                   padding=self.padding, activation=self.activation, use_bias=self.use_bias)
        return cfg


class _Pooling2D(Layer):
    op = "max"

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", **kwargs):
        super().__init__(**kwargs)
        self.pool_size = _pair("pool_size", pool_size)
        self.strides = self.pool_size if strides is None else _pair("strides", strides)
        if padding != "valid":
            raise ValueError("pooling supports padding='valid' (Keras' default)")
        self.padding = padding

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{type(self).__name__} expects inputs of shape (H, W, C), got {input_shape}")
        h, w, c = input_shape
        (kh, kw), (sh, sw) = self.pool_size, self.strides
        if h < kh or w < kw:
            raise ValueError(f"{type(self).__name__}: pool {self.pool_size} is larger than the input {(h, w)}")
        return ((h - kh) // sh + 1, (w - kw) // sw + 1, c)

    def call(self, g, x, training):
        (kh, kw), (sh, sw) = self.pool_size, self.strides
        y = ops.pool_2d(to_chw(x, g), self.op, kw, kh, sw, sh, 0, 0, ctx=g.ctx)
        return to_hwc(y, g)

    def get_config(self):
        c = super().get_config()
        c.update(pool_size=self.pool_size, strides=self.strides, padding=self.padding)
        return c


class MaxPooling2D(_Pooling2D):
    op = "max"


class AveragePooling2D(_Pooling2D):
    op = "avg"


class GlobalAveragePooling2D(Layer):
    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"GlobalAveragePooling2D expects (H, W, C) inputs, got {input_shape}")
        return (input_shape[-1],)

    def call(self, g, x, training):
        h, w, c = self.input_shape
        y = ops.reshape(_cont(x, g), (g.batch, h * w, c), ctx=g.ctx)
        y = ops.cont(ops.transpose(y, ctx=g.ctx), ctx=g.ctx)           # (N, C, HW)
        return ops.reshape(ops.scale(ops.sum_rows(y, ctx=g.ctx), 1.0 / (h * w), ctx=g.ctx), (g.batch, c), ctx=g.ctx)


class GlobalMaxPooling2D(Layer):
    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"GlobalMaxPooling2D expects (H, W, C) inputs, got {input_shape}")
        return (input_shape[-1],)

    def call(self, g, x, training):
        h, w, c = self.input_shape
        y = ops.pool_2d(to_chw(x, g), "max", w, h, w, h, 0, 0, ctx=g.ctx)
        return ops.reshape(ops.cont(y, ctx=g.ctx), (g.batch, c), ctx=g.ctx)
