"""Conv3D and Conv3DTranspose, channels-last: volumes (batch, D, H, W, C), folded in the graph to
(batch * D, H, W, C) (pyggml._fold).

The convolution is a sum over the kernel's depth taps: for tap ``kd`` the
input's depths ``kd * dilation + j * stride`` (j over the output's depths, each
sample's own: a strided view) go through a 2-D convolution with that tap's
(filters, kh, kw, C) slice of the kernel, and the taps' results add up (the
bias once).  So every pass is one that trains on its own: views, conv_2d_cl
on the CPU (an f32 im2col and mul_mat elsewhere), add.

The weight keeps PyTorch's Conv3d layout, (filters, in, kd, kh, kw), in ggml's
four dimensions as (filters, in * kd, kh, kw) (the same memory: reshape a
PyTorch weight to that shape to assign it); ``kernel`` is Keras's view,
(kd, kh, kw, in, filters).

``groups`` (Keras's): output channels [g * F/G, (g + 1) * F/G) see input channels
[g * C/G, (g + 1) * C/G) only; the weight is then (filters, in / groups, kd, kh, kw),
and each group is the convolution above on its slice of the channels, the groups'
results joined along the channels.

``data_format="channels_first"`` volumes (batch, C, D, H, W) are moved to channels-last
and back (pyggml.layers._channels_first).
"""

import numpy as np

from pyggml import _fold, ops
from pyggml.layers._channels_first import TransposesChannelsFirst
from pyggml.layers._lora import LoraWeights, merged_weight
from pyggml.layers._helpers import cached, contiguous, fused
from pyggml.layers.convolutional.base_conv import BaseConv, to_chw
from pyggml.layers.convolutional.conv import _groups_of, _slice_axis, conv_chw_rows
from pyggml.layers.convolutional.conv_transpose import _BaseConvTranspose
from pyggml.saving.object_registration import register_builtin

__all__ = ["Conv3D", "Conv3DTranspose", "depth_pad", "depth_taps"]


def depth_pad(x, n, before, after, fill=0.0):
    """The folded volumes x (n * D, H, W, C) with ``before`` and ``after`` planes of ``fill``
    around each sample's depths: (n * (D + before + after), H, W, C).  acc, which trains."""
    if not before and not after:
        return x
    nd, h, w, c = x.shape
    d, plane = nd // n, h * w * c
    dp = d + before + after
    base = np.zeros((n, dp, plane), dtype=np.float32)
    if fill:
        base[:, :before] = fill
        base[:, before + d:] = fill
    y = ops.acc(ops.constant(base), ops.reshape(contiguous(x), (n, d, plane)), nb=(dp * plane * 4, plane * 4, 4),
                offset=before * plane * 4)
    return ops.reshape(y, (n * dp, h, w, c))


def depth_taps(x, n, start, step, count):
    """Each sample's depths start, start + step, ... (count of them) of the folded volumes x:
    (n * count, H, W, C), a strided view made contiguous (its gradient scatters back)."""
    nd, h, w, c = x.shape
    d, plane = nd // n, h * w * c
    if start == 0 and step == 1 and count == d:
        return x
    v = ops.view(ops.reshape(contiguous(x), (n, d, plane)), (n, count, plane),
                 strides=(d * plane * 4, step * plane * 4, 4), offset=start * plane * 4)
    return ops.reshape(ops.cont(v), (n * count, h, w, c))


class _OnVolumes:
    """What Conv3D and Conv3DTranspose share: volumes in, volumes out (pyggml._fold)."""

    rank = 3
    takes_5d = True

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 5:
            raise ValueError(f"{type(self).__name__} expects 5-D inputs, (batch, D, H, W, C) (channels_first: "
                             f"(batch, C, D, H, W)), got {len(input_shape)}-D ones")
        b, d, h, w, _ = input_shape
        return (b, self._out_size(d, 0), self._out_size(h, 1), self._out_size(w, 2), self.filters)

    def in_channels(self, input_shape):
        self.compute_output_shape(input_shape)
        if input_shape[-1] is None:
            raise ValueError(f"{type(self).__name__} needs a known number of input channels")
        return input_shape[-1]

    def call(self, inputs, training=None):
        return self._act(self.pre_activation(inputs))


@register_builtin
class Conv3D(TransposesChannelsFirst, LoraWeights, _OnVolumes, BaseConv):
    """Keras's Conv3D, arguments and defaults; padding "valid" or "same"; ``groups`` (keyword
    only, as Conv1D's and Conv2D's) must divide the filters and the input channels."""

    _keras_kernel_property = True           # Keras's kernel is a property without a setter

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", dilation_rate=(1, 1, 1), *,
                 groups=1, lora_rank=None, lora_alpha=None, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, activation, use_bias, kernel_initializer,
                         bias_initializer, dilation_rate, **kwargs)
        self.groups = _groups_of(type(self).__name__, groups, self.filters)
        self._init_lora(lora_rank, lora_alpha)

    def build(self, input_shape):
        c = self.in_channels(input_shape)
        if c % self.groups:
            raise ValueError(f"{type(self).__name__}: groups ({self.groups}) must divide the input channels, got "
                             f"{c} channels")
        c //= self.groups
        kd, kh, kw = self.kernel_size
        self.add_kernel((self.filters, c * kd, kh, kw))
        self.weight.keras_shape = (self.filters, c, kd, kh, kw)     # PyTorch's Conv3d layout
        self.weight.keras_axes = (2, 3, 4, 1, 0)                      # Keras's (kd, kh, kw, in, filters)
        self._build_lora()

    def _tap_weight(self, kd, channels_last, group=0):
        """Depth tap kd of the kernel (of group ``group``'s filters): (F, kh, kw, C) for conv_2d_cl,
        else (F, C, kh, kw).  The kernel is permuted once, taps first, and each tap is a contiguous
        block of that (a strided view's gradient must not come back permuted: ggml's acc takes rows
        of floats)."""
        f, ckd, kh, kw = self.weight.shape
        depth = self.kernel_size[0]
        c = ckd // depth
        f //= self.groups

        def taps():
            w = self.weight
            if self.groups > 1:
                w = _slice_axis(w, 0, group * f, (group + 1) * f)
            w = ops.reshape(w, (f, c, depth, kh * kw))
            return ops.cont(ops.permute_axes(w, (2, 0, 3, 1) if channels_last else (2, 0, 1, 3)))
        all_taps = cached(f"conv3d_taps_{int(channels_last)}_{group}", self.weight, taps)
        size = f * c * kh * kw
        return ops.reshape(ops.view(all_taps, (size,), offset=kd * size * 4),
                           (f, kh, kw, c) if channels_last else (f, c, kh, kw))

    def _plane_conv(self, x, kd, padding, bias, group):
        """One depth tap's 2-D convolution of the folded planes x (M, H, W, C) -> (M, OH, OW, F)."""
        strides, dilation = self.strides[1:], self.dilation_rate[1:]
        if fused():
            return ops.conv_2d_cl(contiguous(x), self._tap_weight(kd, True, group), bias, strides, padding,
                                  dilation)
        m, h, w, c = x.shape
        (kh, kw) = self.kernel_size[1:]
        f = self.filters // self.groups
        wmat = ops.reshape(self._tap_weight(kd, False, group), (f, c * kh * kw))
        y, oh, ow = conv_chw_rows(to_chw(x), wmat, kh, kw, (self._pads(h, 1), self._pads(w, 2)), strides, dilation,
                                  bias)
        return ops.reshape(y, (m, oh, ow, f))

    def pre_activation(self, inputs, training=None):
        with merged_weight(self):                     # LoRA's W + (alpha / rank) A B, as Conv2D's
            return self._pre_activation(inputs)

    def _pre_activation(self, inputs):
        shape = _fold.in_shape(self)
        n = _fold.batch_of(inputs, shape)
        d = shape[1]
        kd, sd, dd = self.kernel_size[0], self.strides[0], self.dilation_rate[0]
        before, after = self._pads(d, 0)
        x = depth_pad(inputs, n, before, after)
        od = self._out_size(d, 0)
        c = x.shape[-1]
        if c % self.groups:
            raise ValueError(f"{type(self).__name__}: groups ({self.groups}) must divide the input channels, got "
                             f"{c} channels")
        cg, fg = c // self.groups, self.filters // self.groups
        parts = []
        for g in range(self.groups):
            xg = x if self.groups == 1 else _slice_axis(contiguous(x), 3, g * cg, (g + 1) * cg)
            bias = None
            if self.use_bias:
                bias = self.bias if self.groups == 1 else _slice_axis(self.bias, 0, g * fg, (g + 1) * fg)
            y = None
            for tap in range(kd):
                planes = depth_taps(xg, n, tap * dd, sd, od)
                z = self._plane_conv(planes, tap, self.padding, bias if tap == 0 else None, g)
                y = z if y is None else ops.add(y, z)
            parts.append(y)
        return parts[0] if self.groups == 1 else ops.concatenate(parts, axis=-1)

    def get_config(self):
        cfg = super().get_config()
        cfg["groups"] = self.groups
        return self._lora_config(cfg)


@register_builtin
class Conv3DTranspose(_OnVolumes, _BaseConvTranspose):
    """Keras's Conv3DTranspose (channels-last) over volumes, folded (pyggml._fold).

    Per kernel tap (a, b, c) the product of the input's rows with W[:, :, a, b, c] (channels
    to filters) is added with acc into the whole transposed result at stride s and offset
    (a, b, c) times the dilation: the (b, c) taps into each depth tap's planes, then each
    depth tap's planes into the result at depth stride sd, offset a.  The output window of
    Keras's padding and output_padding is cut out of it (ConvTranspose's rule, per axis).

    The weight keeps PyTorch's ConvTranspose3d layout, (in, filters, kd, kh, kw), in ggml's
    four dimensions as (in, filters * kd, kh, kw); ``kernel`` is Keras's (kd, kh, kw,
    filters, in)."""

    def __init__(self, filters, kernel_size, strides=(1, 1, 1), padding="valid", output_padding=None,
                 activation=None, use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 dilation_rate=(1, 1, 1), **kwargs):
        super().__init__(filters, kernel_size, strides, padding, output_padding, activation, use_bias,
                         kernel_initializer, bias_initializer, dilation_rate, **kwargs)

    def build(self, input_shape):
        c = self.in_channels(input_shape)
        kd, kh, kw = self.kernel_size
        self.add_kernel((c, self.filters * kd, kh, kw))
        self.weight.keras_shape = (c, self.filters, kd, kh, kw)      # PyTorch's ConvTranspose3d layout

    def pre_activation(self, inputs, training=None):
        shape = _fold.in_shape(self)
        n = _fold.batch_of(inputs, shape)
        _, d, h, w, c = shape
        f = self.filters
        (kd, kh, kw), (sd, sh, sw), (dd, dh, dw) = self.kernel_size, self.strides, self.dilation_rate
        outs = [self._out_size(size, i) for i, size in enumerate((d, h, w))]
        tops = [self._k(i) - 1 - self._pads(size, i)[0] for i, size in enumerate((d, h, w))]
        # the whole result, grown where Keras's window (output_padding) reaches past it
        full = [max((size - 1) * s + self._k(i), top + out)
                for i, (size, s, top, out) in enumerate(zip((d, h, w), self.strides, tops, outs))]
        db, hb, wb = full
        rows = ops.reshape(contiguous(inputs), (n * d * h * w, c))
        taps = cached("conv3d_transpose_taps", self.weight, lambda: ops.reshape(
            ops.cont(ops.permute_axes(ops.reshape(self.weight, (c, f, kd, kh * kw)), (2, 3, 1, 0))),
            (kd * kh * kw * f, c)))                                                # (kd, kh * kw, F, C)
        plane = hb * wb * f
        out = ops.constant(np.zeros((n, db, plane), dtype=np.float32))
        nb_planes = (hb * wb * f * 4, sh * wb * f * 4, sw * f * 4, 4)
        for a in range(kd):
            planes = ops.constant(np.zeros((n * d, hb, wb, f), dtype=np.float32))
            for b in range(kh):
                for cc in range(kw):
                    tap = ops.view(taps, (f, c), offset=((a * kh + b) * kw + cc) * f * c * 4)
                    part = ops.reshape(ops.mul_mat(tap, rows), (n * d, h, w, f))
                    planes = ops.acc(planes, part, nb=nb_planes, offset=(b * dh * wb + cc * dw) * f * 4)
            out = ops.acc(out, ops.reshape(planes, (n, d, plane)), nb=(db * plane * 4, sd * plane * 4, 4),
                          offset=a * dd * plane * 4)
        y = depth_taps(ops.reshape(out, (n * db, hb, wb, f)), n, tops[0], 1, outs[0])
        if (hb, wb) != tuple(outs[1:]):
            corner = (tops[1] * wb + tops[2]) * f * 4
            y = ops.cont(ops.view(y, (n * outs[0], outs[1], outs[2], f),
                                  strides=(hb * wb * f * 4, wb * f * 4, f * 4, 4), offset=corner))
        if self.use_bias:
            y = ops.add(y, self.bias)
        return y
