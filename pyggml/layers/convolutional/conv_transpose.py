"""Conv1DTranspose and Conv2DTranspose (channels-last), from ops that train.

A transposed convolution with strides s is a plain convolution (stride 1) of
the input with s - 1 zeros inserted between its cells, padded, by the
spatially flipped kernel with in and out channels swapped.  Here: the input
goes channels-first and is added with acc into a zero image at stride s
(insertion and padding in one op), the kernel is flipped with get_rows, and
the convolution is the f32 im2col + mul_mat of Conv2D.  (ggml's
conv_transpose ops have no backward pass.)

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
from pyggml._validation import check_int, is_int
from pyggml.layers._helpers import contiguous
from pyggml.layers.convolutional.base_conv import BaseConv, pad_nchw, to_chw
from pyggml.saving.object_registration import register_builtin

__all__ = ["Conv1DTranspose", "Conv2DTranspose", "transpose_pads", "transpose_out_size"]


def transpose_pads(k, s, padding, output_padding):
    """(before, after) padding of the zero-inserted input, Keras 3's rule."""
    if padding == "valid":
        op = max(k, s) - k if output_padding is None else output_padding
        return k - 1, k - 1 + op
    pad_len = s + k - 2 if output_padding is None else k + k % 2 - 2 + output_padding
    before = min(pad_len // 2 + pad_len % 2, k - 1)
    return before, pad_len - before


def transpose_out_size(size, k, s, padding, output_padding):
    """Keras's output length of a transposed convolution (None stays None)."""
    if size is None:
        return None
    before, after = transpose_pads(k, s, padding, output_padding)
    return (size - 1) * s + 1 + before + after - k + 1


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


def _conv_transpose_chw(layer, xc, kh, kw, pads, strides):
    """(N, C, H, W) -> rows (N * OH * OW, filters) of the transposed convolution (+ b)."""
    n, c, h, w = xc.shape
    (t, b), (l, r) = pads
    sh, sw = strides
    ph = pw = 0
    if sh == 1 and sw == 1:
        if t == b and l == r:
            ph, pw = t, l                        # im2col pads symmetrically itself
        else:
            xc = pad_nchw(xc, t, b, l, r)
    else:
        # zeros between the cells and the padding around: x added at stride s into a zero image
        hd, wd = (h - 1) * sh + 1 + t + b, (w - 1) * sw + 1 + l + r
        zeros = ops.constant(np.zeros((n, c, hd, wd), dtype=np.float32))
        cells = ops.reshape(contiguous(xc), (n * c, h, w, 1))
        xc = ops.acc(zeros, cells, nb=(hd * wd * 4, sh * wd * 4, sw * 4, 4), offset=(t * wd + l) * 4)
    f = layer.filters
    cols = ops.im2col(_shape_only((f, c, kh, kw)), xc, 1, 1, pw, ph, 1, 1, True, "f32")
    oh, ow = cols.shape[1], cols.shape[2]
    cols = ops.reshape(cols, (n * oh * ow, c * kh * kw))
    y = ops.mul_mat(_flipped_kernel(layer.weight, c, f, kh * kw), cols)
    if layer.use_bias:
        y = ops.add(y, layer.bias)
    return y, oh, ow


class _BaseConvTranspose(BaseConv):
    def __init__(self, filters, kernel_size, strides=1, padding="valid", output_padding=None,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 dilation_rate=1, data_format=None, **kwargs):
        if isinstance(padding, str) and padding == "causal":
            raise ValueError(f"{type(self).__name__}: padding must be 'valid' or 'same'")
        super().__init__(filters, kernel_size, strides, padding, activation, use_bias, kernel_initializer,
                         bias_initializer, dilation_rate, data_format, **kwargs)
        if any(d != 1 for d in self.dilation_rate):
            raise ValueError(f"{type(self).__name__}: dilation_rate must be 1 (dilated transposed "
                             f"convolutions are not supported)")
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

    def _out_size(self, size, i):
        return transpose_out_size(size, self.kernel_size[i], self.strides[i], self.padding, self._op(i))

    def _pads(self, size, i):
        return transpose_pads(self.kernel_size[i], self.strides[i], self.padding, self._op(i))

    def get_config(self):
        cfg = super().get_config()
        cfg["output_padding"] = self.output_padding
        return cfg


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
        c = input_shape[-1]
        self.weight = self.add_weight("weight", (c, self.filters) + self.kernel_size, self.kernel_initializer)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer) if self.use_bias else None

    def pre_activation(self, inputs, training=None):
        n, h, w, c = inputs.shape
        kh, kw = self.kernel_size
        y, oh, ow = _conv_transpose_chw(self, to_chw(inputs), kh, kw, (self._pads(h, 0), self._pads(w, 1)),
                                        self.strides)
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
        self.weight = self.add_weight("weight", (input_shape[-1], self.filters, self.kernel_size[0]),
                                      self.kernel_initializer)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer) if self.use_bias else None

    def compute_mask(self, inputs, mask=None):
        return None                       # the steps change

    def pre_activation(self, inputs, training=None):
        n, steps, c = inputs.shape
        # as a 2-D transposed convolution over an image of height 1: (N, 1, steps, C)
        xc = to_chw(ops.reshape(contiguous(inputs), (n, 1, steps, c)))
        y, _, o = _conv_transpose_chw(self, xc, 1, self.kernel_size[0], ((0, 0), self._pads(steps, 0)),
                                      (1, self.strides[0]))
        return ops.reshape(y, (n, o, self.filters))
