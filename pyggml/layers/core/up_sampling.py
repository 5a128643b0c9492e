"""UpSampling1D and UpSampling2D: repeat steps / pixels (nearest), or bilinear.

Nearest: on the CPU, pyggml's ``upscale`` (its backward pass a windowed sum);
elsewhere one gather of the channels-last input's rows with get_rows (which
trains).  Bilinear (Keras's half-pixel centres, edges clamped: the same
as PyTorch's ``interpolate(..., align_corners=False)``) is separable: along
each axis two gathers of the neighbours and their weighted sum.
"""

import numpy as np

from pyggml import _scope, ops
from pyggml._validation import check_choice, int_tuple
from pyggml.layers._channels_first import TransposesChannelsFirst, data_format_of
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["UpSampling1D", "UpSampling2D"]


def _index(values):
    """An i32 constant, shared by the layers of one graph that need the same one."""
    a = np.ascontiguousarray(values, dtype=np.int32)
    cache = _scope.require("up-sampling").cache.setdefault("up_sampling_index", {})
    key = (a.shape, a.tobytes())
    t = cache.get(key)
    if t is None:
        t = cache[key] = ops.constant(a, "int32")
    return t


def _nearest_rows(lead, size, scale):
    """Rows of a (lead, size, -1) tensor that nearest up-sampling by ``scale`` picks."""
    src = np.arange(size * scale) // scale
    return (np.arange(lead)[:, None] * size + src[None, :]).reshape(-1)


def _bilinear_taps(size, scale):
    """(lower source index, upper source index, weight of the upper) per output
    position: half-pixel centres, clamped at the edges."""
    src = np.maximum((np.arange(size * scale) + 0.5) / scale - 0.5, 0.0)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, size - 1)
    return lo, hi, (src - lo).astype(np.float32)


def _gather(x2d, rows):
    return ops.get_rows(x2d, _index(rows))


def _bilinear_axis(x, scale):
    """Bilinear up-sampling of axis 1 of x (lead, size, inner...), flattened after it."""
    lead, size = x.shape[0], x.shape[1]
    inner = int(np.prod(x.shape[2:]))
    rows = ops.reshape(contiguous(x), (lead * size, inner))
    lo, hi, w = _bilinear_taps(size, scale)
    base = np.arange(lead)[:, None] * size
    a = _gather(rows, (base + lo[None, :]).reshape(-1))
    b = _gather(rows, (base + hi[None, :]).reshape(-1))
    out = size * scale
    diff = ops.reshape(ops.sub(b, a), (lead, out, inner))
    y = ops.add(ops.reshape(a, (lead, out, inner)), ops.mul(diff, ops.constant(w.reshape(out, 1))))
    return y                                                     # (lead, out, inner)


class _UpSampling(Layer):
    rank = 1

    def _check_shape(self, input_shape):
        if len(input_shape) != self.rank + 2:
            what = "(steps, channels)" if self.rank == 1 else "(H, W, C)"
            raise ValueError(f"{type(self).__name__} expects inputs of shape {what}, got {tuple(input_shape[1:])}")

    def compute_output_shape(self, input_shape):
        self._check_shape(input_shape)
        spatial = tuple(None if d is None else d * s for d, s in zip(input_shape[1:-1], self.size))
        return (input_shape[0],) + spatial + (input_shape[-1],)


@register_builtin
class UpSampling1D(_UpSampling):
    """Repeat each step ``size`` times: (N, steps, C) -> (N, steps * size, C)."""

    rank = 1

    def __init__(self, size=2, **kwargs):
        super().__init__(**kwargs)
        (self.size,) = int_tuple("size", size, 1)
        self.size = (self.size,)

    def call(self, inputs, training=None):
        n, steps, c = inputs.shape
        if fused():
            return ops.upscale(contiguous(inputs), (1, self.size[0], 1))
        rows = _nearest_rows(n, steps, self.size[0])
        y = _gather(ops.reshape(contiguous(inputs), (n * steps, c)), rows)
        return ops.reshape(y, (n, steps * self.size[0], c))

    def get_config(self):
        cfg = super().get_config()
        cfg["size"] = self.size[0]
        return cfg


@register_builtin
class UpSampling2D(TransposesChannelsFirst, _UpSampling):
    """Repeat rows and columns ``size`` = (rows, cols) times (``interpolation``
    "nearest"), or interpolate them ("bilinear"; "bicubic", "lanczos3" and "lanczos5" as
    ``ops.image.resize`` computes them: Keys' cubic with a = -0.5, as Keras's JAX and
    TensorFlow backends, where its torch backend takes PyTorch's a = -0.75)."""

    rank = 2

    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", **kwargs):
        super().__init__(**kwargs)
        self.size = int_tuple("size", size, 2)
        self.data_format = data_format_of(data_format, "UpSampling2D")     # (channels-first: transposed)
        self.interpolation = check_choice("interpolation", interpolation,
                                          ("nearest", "bilinear", "bicubic", "lanczos3", "lanczos5"))

    def call(self, inputs, training=None):
        n, h, w, c = inputs.shape
        sh, sw = self.size
        if self.interpolation == "nearest" and fused():
            return ops.upscale(contiguous(inputs), (1, sh, sw, 1))
        if self.interpolation not in ("nearest", "bilinear"):
            from pyggml import _ops_image        # (a kernel of more taps: two matrix products)
            return _ops_image.resize(inputs, (h * sh, w * sw), interpolation=self.interpolation,
                                     data_format="channels_last")
        if self.interpolation == "nearest":
            # one gather: output pixel (n, i, j) is input pixel (n, i // sh, j // sw)
            src = (np.arange(h * sh) // sh)[:, None] * w + (np.arange(w * sw) // sw)[None, :]
            rows = (np.arange(n)[:, None, None] * (h * w) + src[None]).reshape(-1)
            y = _gather(ops.reshape(contiguous(inputs), (n * h * w, c)), rows)
            return ops.reshape(y, (n, h * sh, w * sw, c))
        y = inputs
        if sw > 1:                                               # columns: (N * H, W, C)
            y = _bilinear_axis(ops.reshape(contiguous(y), (n * h, w, c)), sw)
        if sh > 1:                                               # rows: (N, H, W' * C)
            y = _bilinear_axis(ops.reshape(contiguous(y), (n, h, w * sw * c)), sh)
        return ops.reshape(contiguous(y), (n, h * sh, w * sw, c))

    def get_config(self):
        cfg = super().get_config()
        cfg.update(size=self.size, interpolation=self.interpolation, data_format=self.data_format)
        return cfg
