"""ZeroPadding1D/2D and Cropping1D/2D: zeros added around, or steps and pixels cut from,
the edges of sequences (batch, steps, channels) and images (batch, height, width,
channels; ``data_format="channels_first"``: batch, channels, height, width; for
ZeroPadding1D: batch, channels, steps).

Cropping is a strided view of the kept part (its gradient scatters back); padding
adds the input into a zero tensor of the padded shape at its offset (``acc``, which
trains on every backend)."""

import numpy as np

from pyggml import ops
from pyggml._validation import is_int
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["ZeroPadding1D", "ZeroPadding2D", "Cropping1D", "Cropping2D", "pairs_nd", "edged_shape", "crop", "zero_pad"]


def _pair(value, what, name):
    """(before, after) from an int or a pair of ints (non-negative)."""
    if is_int(value):
        p = (int(value), int(value))
    else:
        try:
            p = tuple(value)
        except TypeError:
            raise TypeError(f"{name}: {what} must be an int or a pair of ints, got {value!r}") from None
        if len(p) != 2 or not all(is_int(v) for v in p):
            raise ValueError(f"{name}: {what} must be an int or a pair of ints, got {value!r}")
        p = (int(p[0]), int(p[1]))
    if p[0] < 0 or p[1] < 0:
        raise ValueError(f"{name}: {what} must not be negative, got {value!r}")
    return p


def pairs_nd(value, what, name, n=2):
    """One (before, after) per spatial axis (n of them) from an int, n ints (each symmetric)
    or n pairs."""
    count = {2: "two", 3: "three"}.get(n, str(n))
    rule = f"{name}: {what} must be an int, {count} ints or {count} pairs of ints, got {value!r}"
    if is_int(value):
        return (_pair(value, what, name),) * n
    try:
        v = tuple(value)
    except TypeError:
        raise TypeError(rule) from None
    if len(v) != n:
        raise ValueError(rule)
    return tuple(_pair(e, what, name) for e in v)


def _data_format(value, name):
    fmt = "channels_last" if value is None else value
    if fmt not in ("channels_last", "channels_first"):
        raise ValueError(f"{name}: data_format must be 'channels_last' or 'channels_first', got {value!r}")
    return fmt


def _edges(rank, axes, pairs):
    """(before, after) for every axis of a tensor of this rank (batch included)."""
    out = [(0, 0)] * rank
    for a, p in zip(axes, pairs):
        out[a] = p
    return out


def _strides(shape):
    st = [4] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        st[i] = st[i + 1] * shape[i + 1]
    return st


def _offset(strides, edges):
    return sum(s * e[0] for s, e in zip(strides, edges))


def crop(x, edges):
    """x without edges[i] = (before, after) entries at each end of axis i."""
    x = contiguous(ops.as_tensor(x))
    shape = tuple(x.shape)
    kept = tuple(n - a - b for n, (a, b) in zip(shape, edges))
    st = _strides(shape)
    return ops.cont(ops.view(x, kept, strides=tuple(st), offset=_offset(st, edges)))


def zero_pad(x, edges):
    """x inside zeros, with edges[i] = (before, after) zeros at each end of axis i."""
    x = contiguous(ops.as_tensor(x))
    padded = tuple(n + a + b for n, (a, b) in zip(x.shape, edges))
    st = _strides(padded)
    zeros = ops.constant(np.zeros(padded, dtype=np.float32))
    return ops.acc(zeros, x, nb=tuple(st), offset=_offset(st, edges))


def edged_shape(layer, input_shape, axes, pairs):
    """The shape after ``layer`` adds (padding) or cuts (cropping) pairs[i] = (before, after)
    along axes[i] of input_shape (None stays None)."""
    out = list(input_shape)
    sign = 1 if layer.key == "padding" else -1
    for a, p in zip(axes, pairs):
        if out[a] is not None:
            out[a] += sign * sum(p)
            if out[a] < 1:
                raise ValueError(f"{type(layer).__name__}: cropping {getattr(layer, layer.key)} leaves nothing "
                                 f"of the input's {tuple(input_shape[1:])}")
    return tuple(out)


class _Edges(Layer):
    """What the four layers share: the spatial axes, their (before, after) counts (the
    attribute named by ``key``: ``padding`` or ``cropping``) and whether they add or cut."""

    rank = 3
    key = "padding"
    supports_masking = False
    data_format = "channels_last"

    def _axes(self):
        if self.rank == 3:
            return (1,) if self.data_format == "channels_last" else (2,)
        return (1, 2) if self.data_format == "channels_last" else (2, 3)

    def _pairs(self):
        value = getattr(self, self.key)
        return (value,) if self.rank == 3 else value

    def compute_output_shape(self, input_shape):
        if len(input_shape) != self.rank:
            what = "(steps, channels)" if self.rank == 3 else "(height, width, channels)"
            if self.data_format == "channels_first":
                what = "(channels, steps)" if self.rank == 3 else "(channels, height, width)"
            raise ValueError(f"{type(self).__name__} takes inputs of shape {what}, got {tuple(input_shape[1:])}")
        return edged_shape(self, input_shape, self._axes(), self._pairs())

    def call(self, inputs):
        x = ops.as_tensor(inputs)
        self.compute_output_shape(tuple(x.shape))
        edges = _edges(self.rank, self._axes(), self._pairs())
        return zero_pad(x, edges) if self.key == "padding" else crop(x, edges)

    def get_config(self):
        c = super().get_config()
        if self.rank == 3:
            c[self.key] = list(getattr(self, self.key))
            if "data_format" in self.__dict__:              # ZeroPadding1D's (Cropping1D has none)
                c["data_format"] = self.data_format
        else:
            c.update({self.key: [list(p) for p in getattr(self, self.key)], "data_format": self.data_format})
        return c


@register_builtin
class ZeroPadding1D(_Edges):
    """``ZeroPadding1D(padding=1, data_format=None)``: zero steps at the start and end of each
    sequence (channels_first: of each channel's row of steps)."""

    def __init__(self, padding=1, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.padding = _pair(padding, "padding", "ZeroPadding1D")
        self.data_format = _data_format(data_format, "ZeroPadding1D")


@register_builtin
class ZeroPadding2D(_Edges):
    """``ZeroPadding2D(padding=(1, 1), data_format=None)``: zero rows and columns around each image."""

    rank = 4

    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.padding = pairs_nd(padding, "padding", "ZeroPadding2D")
        self.data_format = _data_format(data_format, "ZeroPadding2D")


@register_builtin
class Cropping1D(_Edges):
    """``Cropping1D(cropping=(1, 1))``: steps cut from the start and end of each sequence."""

    key = "cropping"

    def __init__(self, cropping=(1, 1), **kwargs):
        super().__init__(**kwargs)
        self.cropping = _pair(cropping, "cropping", "Cropping1D")


@register_builtin
class Cropping2D(_Edges):
    """``Cropping2D(cropping=((0, 0), (0, 0)), data_format=None)``: rows and columns cut from
    the edges of each image."""

    rank = 4
    key = "cropping"

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.cropping = pairs_nd(cropping, "cropping", "Cropping2D")
        self.data_format = _data_format(data_format, "Cropping2D")
