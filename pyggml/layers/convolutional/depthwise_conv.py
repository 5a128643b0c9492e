"""DepthwiseConv1D and DepthwiseConv2D: every input channel convolved with its own
``depth_multiplier`` kernels (Keras's output channel ``c * depth_multiplier + m``).

How it is computed.  On the CPU (channels last, one kernel per channel): pyggml's
depthwise op (patch 0043), a direct convolution with the bias fused, and its two
gradients.  Otherwise, with ops that train on every backend: the images are moved to
(C, N, H, W) and unfolded one channel at a time (an im2col of C * N one-channel
images: rows of kh * kw taps), so that the taps of channel c form the batch
slice c of a (C, N * OH * OW, kh * kw) tensor; one batched mul_mat with the
kernels as (C, M, kh * kw) gives every channel's M outputs at once.  Each
output costs kh * kw multiply-adds, as a depthwise convolution should (a dense
convolution with a block-diagonal kernel would cost C times more).  mul_mat's
batch slices match one to one (no broadcast), so its backward pass (out_prod)
gives both gradients; the kernel handed to im2col is a shape-only tensor (the
kernel parameter there would crash ggml's backward pass).

Weights, PyTorch's layout of ``Conv2d(C, C * M, k, groups=C)``: ``weight``
(C * M, 1, kh, kw) (Conv1D: (C * M, 1, k)), ``bias`` (C * M,).  Keras's kernel
(kh, kw, C, M) is ``weight.reshape(C, M, kh, kw).transpose(2, 3, 0, 1)``.
"""

import numpy as np

from pyggml import _scope, initializers, ops
from pyggml._validation import check_choice, check_positive_int, int_tuple
from pyggml.layers._helpers import Activated, contiguous, set_weight_options, weight_options_config
from pyggml.layers._keras_weights import KerasKernel
from pyggml.layers.convolutional.base_conv import pad_nchw, same_pads, valid_size
from pyggml.saving.object_registration import register_builtin

__all__ = ["DepthwiseConv1D", "DepthwiseConv2D", "BaseDepthwise", "depthwise_rows", "drawn_with_fans"]


def drawn_with_fans(initializer, fan_shape):
    """An initializer for a weight whose fans are those of a PyTorch-layout weight of
    ``fan_shape`` (out, in, *kernel): a named initializer draws in that shape and the
    values are reshaped to the weight's (Keras's fans for a depthwise or pointwise
    kernel; the layouts differ only in order, and the draws are independent).
    A callable is used as it is."""
    if not isinstance(initializer, (str, dict, initializers.Initializer)):
        return initializer
    fn = initializers.drawer(initializer)

    def draw(shape, rng, layout="out_in"):
        return np.asarray(fn(tuple(fan_shape), rng, "out_in"), dtype=np.float32).reshape(shape)
    return draw


def data_format_of(value, name):
    fmt = "channels_last" if value is None else (value.lower() if isinstance(value, str) else value)
    if fmt not in ("channels_last", "channels_first"):
        raise ValueError(f"{name}: data_format must be 'channels_last' or 'channels_first', got {value!r}")
    return fmt


def padding_of(value, name):
    return check_choice(f"{name}: padding", value.lower() if isinstance(value, str) else value, ("valid", "same"))


def depthwise_rows(x, kernel, rank, channels_first, kernel_size, strides, dilation, padding):
    """Depthwise convolution of x ((N, *spatial, C), or (N, C, *spatial) when
    ``channels_first``) with ``kernel`` (C, M, prod(kernel_size)).
    Returns (rows (N * prod(out spatial), C * M), out spatial sizes)."""
    shape = tuple(x.shape)
    n = shape[0]
    if channels_first:
        c, spatial = shape[1], shape[2:]
        perm = (1, 0) + tuple(range(2, 2 + rank))
    else:
        c, spatial = shape[-1], shape[1:-1]
        perm = (rank + 1, 0) + tuple(range(1, 1 + rank))
    xc = ops.permute_axes(contiguous(x), perm)                         # (C, N, *spatial)
    if rank == 1:
        spatial, kernel_size, strides, dilation = (1,) + spatial, (1,) + kernel_size, (1,) + strides, \
            (1,) + dilation
    h, w = spatial
    (kh, kw), (sh, sw), (dh, dw) = kernel_size, strides, dilation
    xc = ops.reshape(contiguous(xc), (c * n, 1, h, w))                 # C * N one-channel images
    pads = []
    for size, k, s, d in zip((h, w), (kh, kw), (sh, sw), (dh, dw)):
        span = (k - 1) * d + 1
        pads.append(same_pads(size, span, s)[1:] if padding == "same" else (0, 0))
    (t, b), (l, r) = pads
    ph = pw = 0
    if t == b and l == r:
        ph, pw = t, l
    else:
        xc = pad_nchw(xc, t, b, l, r)
    taps = _scope.require("a depthwise convolution").ctx.new_tensor((1, 1, kh, kw))   # its shape only
    cols = ops.im2col(taps, xc, sw, sh, pw, ph, dw, dh, True, "f32")  # (C * N, OH, OW, kh * kw)
    oh, ow = cols.shape[1], cols.shape[2]
    cols = ops.reshape(cols, (c, n * oh * ow, kh * kw))
    m = kernel.shape[1]
    y = ops.mul_mat(kernel, cols)                                      # (C, N * OH * OW, M)
    y = ops.permute_axes(y, (1, 0, 2))                                 # (N * OH * OW, C, M)
    rows = ops.reshape(y, (n * oh * ow, c * m))
    return rows, ((ow,) if rank == 1 else (oh, ow))


def rows_to_output(rows, n, out_spatial, channels, channels_first):
    """(N * prod(spatial), channels) rows -> the layer's output layout."""
    y = ops.reshape(rows, (n,) + tuple(out_spatial) + (channels,))
    if not channels_first:
        return y
    flat = ops.reshape(y, (n, int(np.prod(out_spatial)), channels))
    return ops.reshape(ops.permute_axes(flat, (0, 2, 1)), (n, channels) + tuple(out_spatial))


class BaseDepthwise(Activated):
    """What the depthwise and separable convolutions share: Keras's geometry arguments,
    data_format, the depthwise kernel's options and the output-shape arithmetic."""
    _config_activity_regularizer = True      # (Keras's config names it, None included)

    rank = 2

    def __init__(self, kernel_size, strides=1, padding="valid", depth_multiplier=1, data_format=None,
                 dilation_rate=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, bias_regularizer=None,
                 depthwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(activation=activation, **kwargs)
        name = type(self).__name__
        set_weight_options(self, depthwise_regularizer=depthwise_regularizer, bias_regularizer=bias_regularizer,
                           depthwise_constraint=depthwise_constraint, bias_constraint=bias_constraint)
        self.kernel_size = int_tuple(f"{name}: kernel_size", kernel_size, self.rank)
        self.strides = int_tuple(f"{name}: strides", strides, self.rank)
        self.dilation_rate = int_tuple(f"{name}: dilation_rate", dilation_rate, self.rank)
        self.padding = padding_of(padding, name)
        self.depth_multiplier = check_positive_int(f"{name}: depth_multiplier", depth_multiplier, 1 << 16)
        self.data_format = data_format_of(data_format, name)
        self.use_bias = bool(use_bias)
        for what, init in (("depthwise_initializer", depthwise_initializer), ("bias_initializer", bias_initializer)):
            try:
                initializers.get(init)
            except ValueError as e:
                raise ValueError(f"{name}: {what}: {e}") from None
        self.depthwise_initializer, self.bias_initializer = depthwise_initializer, bias_initializer

    # --- shapes ---------------------------------------------------------------------------
    @property
    def channels_first(self):
        return self.data_format == "channels_first"

    def split_shape(self, input_shape):
        """(channels, spatial sizes) of an input shape (batch first), checked."""
        name = type(self).__name__
        shape = tuple(input_shape)
        if len(shape) != self.rank + 2:
            what = "(steps, channels)" if self.rank == 1 else "(height, width, channels)"
            if self.channels_first:
                what = "(channels, steps)" if self.rank == 1 else "(channels, height, width)"
            raise ValueError(f"{name} expects inputs of shape {what} (data_format={self.data_format!r}), "
                             f"got {shape[1:]}")
        c, spatial = (shape[1], shape[2:]) if self.channels_first else (shape[-1], shape[1:-1])
        if c is None:
            raise ValueError(f"{name}: the channel axis of the input must be known, got {shape[1:]}")
        return c, spatial

    def spatial_out(self, spatial):
        out = []
        for i, size in enumerate(spatial):
            span = (self.kernel_size[i] - 1) * self.dilation_rate[i] + 1
            if size is None:
                out.append(None)
            elif self.padding == "same":
                out.append(-(-size // self.strides[i]))
            else:
                if size < span:
                    raise ValueError(f"{type(self).__name__}: the kernel {self.kernel_size} (dilation "
                                     f"{self.dilation_rate}) is larger than the input {tuple(spatial)} "
                                     f"(padding='valid')")
                out.append(valid_size(size, span, self.strides[i]))
        return tuple(out)

    def output_shape_for(self, input_shape, channels_out):
        _, spatial = self.split_shape(input_shape)
        out = self.spatial_out(spatial)
        if self.channels_first:
            return (input_shape[0], channels_out) + out
        return (input_shape[0],) + out + (channels_out,)

    # --- computing ------------------------------------------------------------------------
    def depthwise_kernel_cmk(self):
        """The depthwise kernel as (C, M, prod(kernel_size)) for depthwise_rows."""
        raise NotImplementedError

    def depthwise(self, inputs):
        """(rows (N * prod(out spatial), C * M), out spatial) of the depthwise step."""
        shape = tuple(inputs.shape)
        c, spatial = self.split_shape(shape)
        if c != self.in_channels:
            raise ValueError(f"{type(self).__name__} was built for {self.in_channels} input channels, got {c}")
        out = self.spatial_out(spatial)
        direct = self.depthwise_direct(inputs)
        if direct is not None:
            return ops.reshape(direct, (shape[0] * int(np.prod(out)), c)), out
        return depthwise_rows(inputs, self.depthwise_kernel_cmk(), self.rank, self.channels_first,
                              self.kernel_size, self.strides, self.dilation_rate, self.padding)

    def depthwise_direct(self, inputs, bias=None):
        """The depthwise step (plus ``bias``) as pyggml's channels-last depthwise CPU op (patch
        0043), (N, *out spatial, C), while the graph computes on the CPU: channels last, one
        kernel per channel, at most 256 taps; else None (depthwise_rows composes it)."""
        taps = int(np.prod(self.kernel_size))
        if not _scope.fused() or self.channels_first or self.depth_multiplier != 1 or taps > 256 or \
                inputs.dtype != "f32":
            return None
        shape = tuple(inputs.shape)
        n, c = shape[0], shape[-1]
        if self.rank == 1:
            k, s, d = (1,) + self.kernel_size, (1,) + self.strides, (1,) + self.dilation_rate
            x = ops.reshape(contiguous(inputs), (n, 1, shape[1], c))
        else:
            k, s, d = self.kernel_size, self.strides, self.dilation_rate
            x = contiguous(inputs)
        # the kernel (C, 1, taps) as (1, KH, KW, C): the channels last, as the input's
        w = ops.permute_axes(ops.reshape(self.depthwise_kernel_cmk(), (c, taps)), (1, 0))
        w = ops.reshape(contiguous(w), (1,) + tuple(k) + (c,))
        y = ops.conv_2d_cl_dw(x, w, bias, s, self.padding, d)
        if self.rank == 1:
            y = ops.reshape(y, (n, y.shape[2], c))
        return y

    def geometry_config(self):
        cfg = super().get_config()
        cfg.update(kernel_size=self.kernel_size, strides=self.strides, padding=self.padding,
                   data_format=self.data_format, dilation_rate=self.dilation_rate,
                   depth_multiplier=self.depth_multiplier, activation=self.activation_name, use_bias=self.use_bias)
        return cfg

    def initializers_config(self, names):
        return {k: initializers.config_value(getattr(self, k)) for k in names
                if initializers.config_value(getattr(self, k)) is not None}


class _DepthwiseConv(BaseDepthwise):
    depthwise_kernel = KerasKernel("weight")     # Keras's (*kernel, in, multiplier)
    kernel = depthwise_kernel                    # Keras 3's name for it too

    def __init__(self, kernel_size, strides=1, padding="valid", depth_multiplier=1, data_format=None,
                 dilation_rate=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, bias_regularizer=None,
                 depthwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                         use_bias, depthwise_initializer, bias_initializer, depthwise_regularizer,
                         bias_regularizer, depthwise_constraint, bias_constraint, **kwargs)

    def compute_output_shape(self, input_shape):
        c, _ = self.split_shape(input_shape)
        return self.output_shape_for(input_shape, c * self.depth_multiplier)

    def build(self, input_shape):
        c, _ = self.split_shape(input_shape)
        self.compute_output_shape(input_shape)
        self.in_channels = c
        m = self.depth_multiplier
        # Keras's fans: the kernel (*k, C, M) has fan_in C * k, fan_out M * k
        self.weight = self.add_weight("weight", (c * m, 1) + self.kernel_size,
                                      drawn_with_fans(self.depthwise_initializer, (m, c) + self.kernel_size),
                                      regularizer=self.depthwise_regularizer, constraint=self.depthwise_constraint)
        self.weight.keras_shape = (c, m) + self.kernel_size
        self.weight.keras_axes = tuple(range(2, 2 + self.rank)) + (0, 1)
        self.bias = self.add_weight("bias", (c * m,), self.bias_initializer, regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None

    def depthwise_kernel_cmk(self):
        return ops.reshape(self.weight, (self.in_channels, self.depth_multiplier, int(np.prod(self.kernel_size))))

    def pre_activation(self, inputs, training=None):
        c, spatial = self.split_shape(tuple(inputs.shape))
        if c == self.in_channels:
            self.spatial_out(spatial)                       # (a kernel larger than the input: Keras's message)
            direct = self.depthwise_direct(inputs, self.bias if self.use_bias else None)
            if direct is not None:
                return direct
        rows, out = self.depthwise(inputs)
        if self.use_bias:
            rows = ops.add(rows, self.bias)
        return rows_to_output(rows, inputs.shape[0], out, self.in_channels * self.depth_multiplier,
                              self.channels_first)

    def get_config(self):
        cfg = self.geometry_config()
        cfg.update(self.initializers_config(("depthwise_initializer", "bias_initializer")))
        cfg.update(weight_options_config(self, ("depthwise_regularizer", "bias_regularizer",
                                                "depthwise_constraint", "bias_constraint")))
        return cfg


@register_builtin
class DepthwiseConv2D(_DepthwiseConv):
    """2-D depthwise convolution over (H, W, C) images (or (C, H, W) with
    ``data_format="channels_first"``); output channels C * depth_multiplier."""

    rank = 2

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1, data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None, bias_regularizer=None,
                 depthwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(kernel_size, strides, padding, depth_multiplier, data_format, dilation_rate, activation,
                         use_bias, depthwise_initializer, bias_initializer, depthwise_regularizer,
                         bias_regularizer, depthwise_constraint, bias_constraint, **kwargs)


@register_builtin
class DepthwiseConv1D(_DepthwiseConv):
    """1-D depthwise convolution over (steps, channels) (or (channels, steps) with
    ``data_format="channels_first"``); output channels C * depth_multiplier."""

    rank = 1
