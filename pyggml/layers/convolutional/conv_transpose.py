"""Conv1DTranspose and Conv2DTranspose (channels-last), from ops that train.

On the CPU: pyggml's ``conv_transpose_2d_cl`` (the gradient of the
channels-last convolution as a forward op; it trains), the output window
given explicitly, then ``bias_act`` for the bias and the activation.

Elsewhere (ggml's conv_transpose ops have no backward pass), two
constructions, both checked against PyTorch:

- strides > 1: one mul_mat per kernel tap, each ``x W[:, :, a, b]`` on the
  input's rows (no transposition of the input), added with acc into the
  output at stride s, offset (a, b); then the "same"/output_padding window is
  cut out.  No multiply touches an inserted zero: at stride 2 a training step
  took a quarter to a third of the time of the zero-insertion convolution
  below (3x3 and 4x4 kernels, 1 thread).
- strides 1: a plain convolution (the f32 im2col + mul_mat of Conv2D) of the
  padded input by the spatially flipped kernel (get_rows), in and out
  channels swapped: one large product, as fast as the taps there.

``dilation_rate`` > 1 (strides 1 only, as Keras): the stride-1 construction
with im2col's dilation, the lengths and paddings of the dilated kernel
(``(k - 1) * d + 1``), on every backend (the fused op has no dilation).

Padding follows Keras 3: for "valid" the zero-inserted input is padded by
k - 1 before and k - 1 + output_padding after (output_padding defaults to
max(k, s) - k); for "same" the padding adds up to s + k - 2 (or k + k % 2 - 2
+ output_padding), at most k - 1 of it before.  Output lengths:
``in * s + max(k - s, 0)`` ("valid") and ``in * s`` ("same") without
output_padding, ``(in - 1) * s + k - 2 * pad + output_padding`` with it
(``pad`` = k // 2 for "same", 0 for "valid").

Weights in PyTorch's ConvTranspose layouts: Conv2DTranspose ``weight``
(in_channels, filters, kh, kw), Conv1DTranspose (in_channels, filters, k);
``bias`` (filters,).
"""

import numpy as np

from pyggml import _scope, ops
from pyggml._conv_arith import transpose_out_size, transpose_pads
from pyggml._validation import check_int, is_int
from pyggml.layers._helpers import cached, contiguous, fused
from pyggml.layers._channels_first import TransposesChannelsFirst
from pyggml.layers.convolutional.base_conv import BaseConv, pad_nchw, to_chw
from pyggml.saving.object_registration import register_builtin

__all__ = ["Conv1DTranspose", "Conv2DTranspose", "transpose_pads", "transpose_out_size"]


def _shape_only(shape):
    """A tensor whose shape is all im2col reads (its kernel argument)."""
    return _scope.require("a transposed convolution").ctx.new_tensor(shape)


def _flipped_kernel(weight, cin, cout, k):
    """(in, out, *kernel) -> the (out, in * K) matrix of the flipped kernel."""
    w = ops.permute_axes(ops.reshape(weight, (cin, cout, k)), (2, 1, 0))          # (K, out, in)
    if k > 1:
        w = ops.get_rows(ops.reshape(w, (k, cout * cin)), ops.constant(np.arange(k - 1, -1, -1), "int32"))
    w = ops.permute_axes(ops.reshape(w, (k, cout, cin)), (1, 2, 0))               # (out, in, K)
    return ops.reshape(w, (cout, cin * k))


def _conv_transpose_stride1(layer, xc, kh, kw, pads, dilation=(1, 1)):
    """Strides 1: (N, C, H, W) -> rows (N * OH * OW, filters), a convolution of the
    padded input by the flipped (dilated) kernel (+ b)."""
    n, c, h, w = xc.shape
    (t, b), (l, r) = pads
    ph = pw = 0
    if t == b and l == r:
        ph, pw = t, l                            # im2col pads symmetrically itself
    else:
        xc = pad_nchw(xc, t, b, l, r)
    f = layer.filters
    cols = ops.im2col(_shape_only((f, c, kh, kw)), xc, 1, 1, pw, ph, dilation[1], dilation[0], True, "f32")
    oh, ow = cols.shape[1], cols.shape[2]
    cols = ops.reshape(cols, (n * oh * ow, c * kh * kw))
    y = ops.mul_mat(_flipped_kernel(layer.weight, c, f, kh * kw), cols)
    if layer.use_bias:
        y = ops.add(y, layer.bias)
    return y


def _conv_transpose_taps(layer, x, weight, pads, strides, out_hw):
    """Channels-last (N, H, W, C) -> rows (N * OH * OW, filters): per kernel tap
    (a, b) the product of the input's rows with W[:, :, a, b], added with acc
    into the whole result at stride s, offset (a, b); then the output window."""
    n, h, w, c = x.shape
    _, f, kh, kw = weight.shape
    sh, sw = strides
    (t, _), (l, _) = pads
    top, left = kh - 1 - t, kw - 1 - l           # where the output starts in the whole result
    oh, ow = out_hw
    hb, wb = max((h - 1) * sh + kh, top + oh), max((w - 1) * sw + kw, left + ow)
    rows = ops.reshape(contiguous(x), (n * h * w, c))
    taps = ops.reshape(ops.permute_axes(weight, (2, 3, 1, 0)), (kh * kw * f, c))    # (kh, kw, F, C)
    out = ops.constant(np.zeros((n, hb, wb, f), dtype=np.float32))
    nb = (hb * wb * f * 4, sh * wb * f * 4, sw * f * 4, 4)
    for a in range(kh):
        for b in range(kw):
            tap = ops.view(taps, (f, c), offset=(a * kw + b) * f * c * 4)
            part = ops.reshape(ops.mul_mat(tap, rows), (n, h, w, f))
            out = ops.acc(out, part, nb=nb, offset=(a * wb + b) * f * 4)
    if (hb, wb) != (oh, ow):
        out = ops.cont(ops.view(out, (n, oh, ow, f), strides=(hb * wb * f * 4, wb * f * 4, f * 4, 4),
                                offset=(top * wb + left) * f * 4))
    y = ops.reshape(out, (n * oh * ow, f))
    if layer.use_bias:
        y = ops.add(y, layer.bias)
    return y


class _BaseConvTranspose(TransposesChannelsFirst, BaseConv):
    """(channels-first inputs are transposed: pyggml.layers._channels_first; volumes too)"""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 dilation_rate=1, data_format=None, **kwargs):
        if isinstance(padding, str) and padding == "causal":
            raise ValueError(f"{type(self).__name__}: padding must be 'valid' or 'same'")
        super().__init__(filters, kernel_size, strides, padding, activation, use_bias, kernel_initializer,
                         bias_initializer, dilation_rate, data_format, **kwargs)
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise ValueError(f"{type(self).__name__}: strides > 1 is incompatible with dilation_rate > 1 (as in "
                             f"Keras); got strides={self.strides}, dilation_rate={self.dilation_rate}")
        if output_padding is None:
            self.output_padding = None
        else:
            op = (output_padding,) * self.rank if is_int(output_padding) else tuple(output_padding)
            if len(op) != self.rank:
                raise ValueError(f"output_padding must be an int or a tuple of {self.rank} ints, "
                                 f"got {output_padding!r}")
            op = tuple(check_int("output_padding", v, 0) for v in op)
            for v, s in zip(op, self.strides):
                if v >= s:
                    raise ValueError(f"{type(self).__name__}: output_padding {op} must be smaller than the "
                                     f"strides {self.strides}")
            self.output_padding = op

    def _op(self, i):
        return None if self.output_padding is None else self.output_padding[i]

    def _k(self, i):
        """The kernel's extent along axis i, dilated."""
        return (self.kernel_size[i] - 1) * self.dilation_rate[i] + 1

    @property
    def _dilated(self):
        return max(self.dilation_rate) > 1

    def _out_size(self, size, i):
        return transpose_out_size(size, self._k(i), self.strides[i], self.padding, self._op(i))

    def _pads(self, size, i):
        return transpose_pads(self._k(i), self.strides[i], self.padding, self._op(i))

    def get_config(self):
        cfg = super().get_config()
        cfg["output_padding"] = self.output_padding
        return cfg

    # --- the fused path (CPU) -----------------------------------------------------------
    def call(self, inputs, training=None):
        if not fused() or self._dilated:
            return super().call(inputs, training)
        y = self.fused_product(inputs)
        spec = self.fusable_activation()
        if self.use_bias and spec is not None:
            return self.fused_shaped(ops.bias_act(y, self.bias, spec[0], spec[1]), inputs)
        if self.use_bias:
            y = ops.bias_act(y, self.bias)
        return self._act(self.fused_shaped(y, inputs))

    def pre_activation(self, inputs, training=None):
        if not fused() or self._dilated:
            return self.composed(inputs)
        y = self.fused_product(inputs)
        return self.fused_shaped(ops.bias_act(y, self.bias) if self.use_bias else y, inputs)

    def fused_product(self, inputs):
        """conv_transpose_2d_cl of the input as an image (N, H, W, C) -> (N, OH, OW, filters)."""
        x = contiguous(inputs)
        sizes = x.shape[1:-1]
        if self.rank == 1:
            x = ops.reshape(x, (x.shape[0], 1, sizes[0], x.shape[-1]))
        cin = x.shape[-1]
        # PyTorch's ConvTranspose layout (in, filters, *kernel) -> (in, kh, kw, filters)
        w = cached("conv_transpose_cl_weight", self.weight,
                   lambda: ops.reshape(ops.permute_axes(self.weight, (0,) + tuple(range(2, 2 + self.rank)) + (1,)),
                                       (cin, 1 if self.rank == 1 else self.kernel_size[0], self.kernel_size[-1],
                                        self.filters)))
        # where the output window starts in the whole transposed result: k - 1 - (Keras's
        # padding before the zero-inserted input), per axis; its size is Keras's
        tops = [self.kernel_size[i] - 1 - self._pads(size, i)[0] for i, size in enumerate(sizes)]
        outs = [self._out_size(size, i) for i, size in enumerate(sizes)]
        if self.rank == 1:
            tops, outs = [0] + tops, [1] + outs
        strides = self.strides if self.rank == 2 else (1, self.strides[0])
        return ops.conv_transpose_2d_cl(x, w, strides, padding=tuple(tops), output_size=tuple(outs))

    def fused_shaped(self, y, inputs):
        if self.rank == 1:
            return ops.reshape(y, (inputs.shape[0], y.shape[2], self.filters))
        return y


@register_builtin
class Conv2DTranspose(_BaseConvTranspose):
    rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", output_padding=None,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 dilation_rate=(1, 1), **kwargs):
        super().__init__(filters, kernel_size, strides, padding, output_padding, activation, use_bias,
                         kernel_initializer, bias_initializer, dilation_rate, **kwargs)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(f"Conv2DTranspose expects inputs of shape (H, W, C), got {tuple(input_shape[1:])}")
        _, h, w, _ = input_shape
        return (input_shape[0], self._out_size(h, 0), self._out_size(w, 1), self.filters)

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        self.add_kernel((input_shape[-1], self.filters) + self.kernel_size)

    def composed(self, inputs):
        n, h, w, c = inputs.shape
        kh, kw = self.kernel_size
        pads = (self._pads(h, 0), self._pads(w, 1))
        oh, ow = self._out_size(h, 0), self._out_size(w, 1)
        if self.strides == (1, 1):
            y = _conv_transpose_stride1(self, to_chw(inputs), kh, kw, pads, self.dilation_rate)
        else:
            y = _conv_transpose_taps(self, inputs, self.weight, pads, self.strides, (oh, ow))
        return ops.reshape(y, (n, oh, ow, self.filters))


@register_builtin
class Conv1DTranspose(_BaseConvTranspose):
    """Transposed 1-D convolution over (steps, channels)."""

    rank = 1

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"Conv1DTranspose expects inputs of shape (steps, channels), "
                             f"got {tuple(input_shape[1:])}")
        return (input_shape[0], self._out_size(input_shape[1], 0), self.filters)

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        self.add_kernel((input_shape[-1], self.filters, self.kernel_size[0]))

    def composed(self, inputs):
        n, steps, c = inputs.shape
        k = self.kernel_size[0]
        pads = ((0, 0), self._pads(steps, 0))
        o = self._out_size(steps, 0)
        # as a 2-D transposed convolution over an image of height 1: (N, 1, steps, C)
        x = ops.reshape(contiguous(inputs), (n, 1, steps, c))
        if self.strides[0] == 1:
            y = _conv_transpose_stride1(self, to_chw(x), 1, k, pads, (1, self.dilation_rate[0]))
        else:
            y = _conv_transpose_taps(self, x, ops.reshape(self.weight, (c, self.filters, 1, k)), pads,
                                     (1, self.strides[0]), (1, o))
        return ops.reshape(y, (n, o, self.filters))

