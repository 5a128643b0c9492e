"""Conv1D and Conv2D, channels-last.

On the CPU: pyggml's channels-last convolution ``conv_2d_cl`` (bias and a
fusable activation applied in the same pass, no permuted copies of the
images); the weight is turned into its (filters, kh, kw, in_channels) layout
in the graph, once per step (it is small).  Elsewhere: an f32 im2col and
mul_mat over channels-first copies (ggml_conv_2d with an f32 kernel makes an
f16 im2col, which skews training; and the kernel given to im2col must not be
a parameter, so a tensor of its shape alone stands in for it).

Weights in PyTorch's layouts: Conv2D ``weight`` (filters, in_channels, kh, kw),
Conv1D (filters, in_channels, k).

``groups`` (Keras's grouped convolution): output channels [g * F/G, (g + 1) * F/G) see
only input channels [g * C/G, (g + 1) * C/G), and ``weight`` is PyTorch's grouped
(filters, in_channels / groups, *kernel).  groups == in_channels is a depthwise
convolution (depthwise_rows, with filters / groups kernels per channel); any other
groups > 1 is one convolution per group on its slice of the channels (the forms
above), joined by a concatenation.  groups=1 builds the graph it always did.
"""

import math

from pyggml import _scope, ops
from pyggml._validation import is_int
from pyggml.layers._helpers import cached, contiguous, fused
from pyggml.layers._channels_first import TransposesChannelsFirst
from pyggml.layers._lora import LoraWeights, merged_weight
from pyggml.layers.convolutional.base_conv import BaseConv, pad_nchw, to_chw
from pyggml.layers.convolutional.depthwise_conv import depthwise_rows
from pyggml.saving.object_registration import register_builtin

__all__ = ["Conv1D", "Conv2D", "conv_chw_rows"]


def _shape_only(shape):
    """A tensor whose shape is all im2col reads (its kernel argument)."""
    return _scope.require("a convolution").ctx.new_tensor(shape)


def conv_chw_rows(xc, wmat, kh, kw, pads, strides, dilation, bias=None):
    """(N, C, H, W) convolved with the kernel matrix wmat (rows, C * kh * kw), padding
    ``pads`` ((top, bottom), (left, right)): (rows (N * OH * OW, rows) (+ bias), OH, OW); an
    f32 im2col and one mul_mat."""
    n, c, h, w = xc.shape
    (t, b), (l, r) = pads
    ph = pw = 0
    if t == b and l == r:
        ph, pw = t, l
    elif t or b or l or r:
        xc = pad_nchw(xc, t, b, l, r)
    kshape = _shape_only((wmat.shape[0], c, kh, kw))
    cols = ops.im2col(kshape, xc, strides[1], strides[0], pw, ph, dilation[1], dilation[0], True, "f32")
    oh, ow = cols.shape[1], cols.shape[2]
    y = ops.mul_mat(wmat, ops.reshape(cols, (n * oh * ow, c * kh * kw)))
    if bias is not None:
        y = ops.add(y, bias)
    return y, oh, ow


def _conv_chw(layer, xc, kh, kw, pads, strides, dilation):
    """(N, C, H, W) -> rows (N * OH * OW, filters) of x conv W (+ b)."""
    wmat = ops.reshape(layer.weight, (layer.filters, xc.shape[1] * kh * kw))
    return conv_chw_rows(xc, wmat, kh, kw, pads, strides, dilation, layer.bias if layer.use_bias else None)


def _slice_axis(x, axis, lo, hi):
    """x[lo:hi] along ``axis`` of a contiguous f32 tensor: a view along the first axis
    (contiguous, an op may take it as it is), a contiguous copy along any other."""
    shape = tuple(x.shape)
    strides = [4] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    part = ops.view(x, shape[:axis] + (hi - lo,) + shape[axis + 1:], strides, offset=lo * strides[axis])
    return part if axis == 0 else ops.cont(part)


def _groups_of(name, groups, filters):
    """``groups`` checked before anything is built: a positive int that divides ``filters``."""
    if not is_int(groups) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    if filters % groups:
        raise ValueError(f"{name}: groups ({groups}) must divide filters ({filters})")
    return int(groups)


def _conv_cl(layer, x, w, padding, strides, dilation):
    """The fused path: channels-last x (N, H, W, C) and w (filters, kh, kw, C) ->
    (N, OH, OW, filters), the activation applied when the op can fuse it."""
    spec = layer.fusable_activation()
    y = ops.conv_2d_cl(contiguous(x), w, layer.bias if layer.use_bias else None, strides, padding, dilation,
                       act=spec[0] if spec else "linear", alpha=spec[1] if spec else 0.0)
    return y if spec else layer._act(y)


class _Conv(TransposesChannelsFirst, LoraWeights, BaseConv):
    """BaseConv's arguments and Keras's ``groups`` (keyword only); channels-first inputs are
    transposed (pyggml.layers._channels_first).  LoRA (``lora_rank=``, ``enable_lora``) as
    Keras's: the frozen kernel plus ``(alpha / rank) A B``, A (*kernel_size, in, rank) and B
    (rank, filters), merged into the kernel each call builds."""

    _keras_kernel_property = True           # Keras's kernel is a property without a setter

    def __init__(self, *args, groups=1, lora_rank=None, lora_alpha=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.groups = _groups_of(type(self).__name__, groups, self.filters)
        self._init_lora(lora_rank, lora_alpha)

    def check_groups(self, channels):
        """The input channels of one group (all of them for groups=1); groups must divide them."""
        if self.groups == 1:
            return channels
        if channels is None or channels % self.groups:
            raise ValueError(f"{type(self).__name__}: groups ({self.groups}) must divide the input channels, got "
                             f"{channels} channels")
        return channels // self.groups

    def convolution_op(self, inputs, kernel):
        """Keras's hook: the convolution of ``inputs`` by ``kernel`` (Keras's layout,
        (*kernel_size, in, filters)) before the bias and the activation.  A subclass that
        overrides it (keras-io's weight-standardised convolution) has its own used."""
        return ops.conv(inputs, kernel, strides=self.strides, padding=self.padding, dilation_rate=self.dilation_rate)

    def _own_convolution(self):
        return type(self).convolution_op is not _Conv.convolution_op

    def call(self, inputs, training=None):
        with merged_weight(self):
            if self._own_convolution():
                return self._act(self.pre_activation(inputs, training))
            if self.groups > 1:
                return self.grouped(inputs)
            if fused():
                return self.fused_call(inputs)
            return super().call(inputs, training)

    def pre_activation(self, inputs, training=None):
        with merged_weight(self):
            return self._pre_activation(inputs, training)

    def _pre_activation(self, inputs, training=None):
        if self._own_convolution():
            y = self.convolution_op(inputs, self.kernel)
            return y + self.bias if self.use_bias else y
        if self.groups > 1:
            return self.grouped(inputs, activation=False)
        if fused():
            # (a loss that takes logits asks for these)
            return self.fused_call(inputs, activation=False)
        return self.composed(inputs)

    # --- groups > 1 ---------------------------------------------------------------------------
    def image_geometry(self, spatial):
        """The convolution as one over (N, H, W, C) images: (image spatial sizes, kernel size,
        strides, dilation, pads ((top, bottom), (left, right))); a Conv1D's has height 1."""
        raise NotImplementedError

    def grouped(self, inputs, activation=True):
        """The output with groups > 1 (its activation applied when ``activation``)."""
        n, c = inputs.shape[0], inputs.shape[-1]
        spatial = tuple(inputs.shape[1:-1])
        self.check_groups(c)
        out = tuple(self._out_size(size, i) for i, size in enumerate(spatial))
        bias = self.bias if self.use_bias else None
        if c == self.groups and self.filters == c and fused() and math.prod(self.kernel_size) <= 256:
            # one kernel per channel on the CPU: pyggml's depthwise op (patch 0043), bias and a
            # fusable activation in its pass
            image, (kh, kw), strides, dilation, pads = self.image_geometry(spatial)
            x = ops.reshape(contiguous(inputs), (n,) + image + (c,))
            w = cached("conv_dw_weight", self.weight, lambda: ops.reshape(
                contiguous(ops.permute_axes(ops.reshape(self.weight, (c, kh * kw)), (1, 0))), (1, kh, kw, c)))
            spec = self.fusable_activation() if activation else ("linear", 0.0)
            padding = (0, pads[1][0], 1, out[0]) if self.padding == "causal" else self.padding
            y = ops.conv_2d_cl_dw(x, w, bias, strides, padding, dilation, act=spec[0] if spec else "linear",
                                  alpha=spec[1] if spec else 0.0)
            y = ops.reshape(y, (n,) + out + (self.filters,))
            return self._act(y) if activation and not spec else y
        if c == self.groups and self.padding != "causal":
            # one channel per group: the depthwise convolution, filters / groups kernels a channel
            kernel = ops.reshape(self.weight, (c, self.filters // c, math.prod(self.kernel_size)))
            rows, _ = depthwise_rows(inputs, kernel, self.rank, False, self.kernel_size, self.strides,
                                     self.dilation_rate, self.padding)
            y = ops.reshape(ops.add(rows, bias) if bias is not None else rows, (n,) + out + (self.filters,))
            return self._act(y) if activation else y
        image, (kh, kw), strides, dilation, pads = self.image_geometry(spatial)
        x = ops.reshape(contiguous(inputs), (n,) + image + (c,))
        cg, fg = c // self.groups, self.filters // self.groups
        channel_ranges = [(g * cg, (g + 1) * cg, g * fg, (g + 1) * fg) for g in range(self.groups)]
        if fused():
            # conv_2d_cl per group (bias and a fusable activation in its pass), joined by ggml's concat
            w = cached("conv_cl_weight", self.weight,
                       lambda: ops.permute_axes(ops.reshape(self.weight, (self.filters, cg, kh, kw)), (0, 2, 3, 1)))
            spec = self.fusable_activation() if activation else ("linear", 0.0)
            if self.padding == "causal":
                padding = (0, pads[1][0], 1, out[0])        # all the padding before the steps
            else:
                padding = self.padding
            y = ops.concatenate([ops.conv_2d_cl(_slice_axis(x, 3, lo, hi), _slice_axis(w, 0, flo, fhi),
                                                None if bias is None else _slice_axis(bias, 0, flo, fhi),
                                                strides, padding, dilation, act=spec[0] if spec else "linear",
                                                alpha=spec[1] if spec else 0.0)
                                 for lo, hi, flo, fhi in channel_ranges], axis=-1)
            y = ops.reshape(y, (n,) + out + (self.filters,))
            return self._act(y) if activation and not spec else y
        # im2col and mul_mat per group on its channels of the (N, C, H, W) images, joined by rows
        xc = to_chw(x)
        wmat = ops.reshape(self.weight, (self.filters, cg * kh * kw))
        parts = [conv_chw_rows(_slice_axis(xc, 1, lo, hi), _slice_axis(wmat, 0, flo, fhi), kh, kw, pads, strides,
                               dilation, None if bias is None else _slice_axis(bias, 0, flo, fhi))[0]
                 for lo, hi, flo, fhi in channel_ranges]
        y = ops.reshape(ops.concatenate(parts, axis=-1), (n,) + out + (self.filters,))
        return self._act(y) if activation else y

    def get_config(self):
        cfg = super().get_config()
        cfg["groups"] = self.groups
        return self._lora_config(cfg)


@register_builtin
class Conv2D(_Conv):
    rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", dilation_rate=(1, 1), **kwargs):
        super().__init__(filters, kernel_size, strides, padding, activation, use_bias, kernel_initializer,
                         bias_initializer, dilation_rate, **kwargs)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(f"Conv2D expects inputs of shape (H, W, C), got {tuple(input_shape[1:])}")
        _, h, w, _ = input_shape
        return (input_shape[0], self._out_size(h, 0), self._out_size(w, 1), self.filters)

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        self.add_kernel((self.filters, self.check_groups(input_shape[-1])) + self.kernel_size)
        self._build_lora()                        # Keras's lora_rank=: LoRA as the layer builds

    def image_geometry(self, spatial):
        h, w = spatial
        return (h, w), self.kernel_size, self.strides, self.dilation_rate, (self._pads(h, 0), self._pads(w, 1))

    def fused_call(self, inputs, activation=True):
        w = cached("conv_cl_weight", self.weight, lambda: ops.permute_axes(self.weight, (0, 2, 3, 1)))
        if not activation:
            return ops.conv_2d_cl(contiguous(inputs), w, self.bias if self.use_bias else None, self.strides,
                                  self.padding, self.dilation_rate)
        return _conv_cl(self, inputs, w, self.padding, self.strides, self.dilation_rate)

    def composed(self, inputs):
        n, h, w, c = inputs.shape
        (kh, kw) = self.kernel_size
        y, oh, ow = _conv_chw(self, to_chw(inputs), kh, kw, (self._pads(h, 0), self._pads(w, 1)),
                              self.strides, self.dilation_rate)
        return ops.reshape(y, (n, oh, ow, self.filters))


@register_builtin
class Conv1D(_Conv):
    """1-D convolution over (steps, channels); ``padding`` also takes "causal"."""

    rank = 1

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"Conv1D expects inputs of shape (steps, channels), got {tuple(input_shape[1:])}")
        return (input_shape[0], self._out_size(input_shape[1], 0), self.filters)

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        self.add_kernel((self.filters, self.check_groups(input_shape[-1]), self.kernel_size[0]))
        self._build_lora()

    def image_geometry(self, spatial):
        (steps,) = spatial
        return ((1, steps), (1, self.kernel_size[0]), (1, self.strides[0]), (1, self.dilation_rate[0]),
                ((0, 0), self._pads(steps, 0)))

    def fused_call(self, inputs, activation=True):
        n, steps, c = inputs.shape
        k = self.kernel_size[0]
        w = cached("conv_cl_weight", self.weight,
                   lambda: ops.reshape(ops.permute_axes(self.weight, (0, 2, 1)), (self.filters, 1, k, c)))
        padding = self.padding
        out = self._out_size(steps, 0)
        if padding == "causal":
            # all the padding before the steps: (top, left, OH, OW) explicit
            padding = (0, (k - 1) * self.dilation_rate[0], 1, out)
        x = ops.reshape(contiguous(inputs), (n, 1, steps, c))          # an image of height 1
        strides, dilation = (1, self.strides[0]), (1, self.dilation_rate[0])
        if activation:
            y = _conv_cl(self, x, w, padding, strides, dilation)
        else:
            y = ops.conv_2d_cl(x, w, self.bias if self.use_bias else None, strides, padding, dilation)
        return ops.reshape(y, (n, out, self.filters))

    def composed(self, inputs):
        n, steps, c = inputs.shape
        # as a 2-D convolution over an image of height 1: (N, 1, steps, C)
        xc = to_chw(ops.reshape(contiguous(inputs), (n, 1, steps, c)))
        y, _, o = _conv_chw(self, xc, 1, self.kernel_size[0], ((0, 0), self._pads(steps, 0)),
                            (1, self.strides[0]), (1, self.dilation_rate[0]))
        return ops.reshape(y, (n, o, self.filters))
