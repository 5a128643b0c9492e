"""What the windowed pooling layers share: Keras's "valid"/"same" arithmetic and
one pooled window op over the last two axes of a tensor.

On the CPU the layers use pyggml's channels-last pooling ``pool_cl`` (Keras's
"same" padding and its averages over the real cells built in; no permuted
copies): ``pool_cl_images``.  Elsewhere, the composed form below.

ggml's pool_2d (which trains) pools ggml dims 0 and 1, i.e. numpy's last two
axes.  Its padding is symmetric; max pooling skips padded cells and average
pooling divides by the whole window.  Keras's "same" puts the odd cell of
padding at the end, ignores padding in max, and divides an average by the
real cells of each window.  So:

- max: the padding is explicit (acc of x into a constant of -FLT_MAX, never
  chosen; acc trains): ggml's max pooling without padding takes a fast path,
  forward and backward (a training step of MaxPooling2D(3, 1, "same") on
  64x32x32x16 took 0.7 of the time that ggml's own padding took);
- average: ggml's padding for the symmetric part, an explicit zero cell at the
  end where the total is odd, and a constant factor (window size / real cells)
  on each output position.
"""

import numpy as np

from pyggml import ops
from pyggml._validation import check_choice, int_tuple
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.convolutional.base_conv import to_chw, to_hwc
from pyggml.layers._channels_first import TransposesChannelsFirst, data_format_of
from pyggml.layers.layer import Layer

__all__ = ["pool_out_size", "pool_pads", "pool_last_two", "pool_cl_images", "pool_images", "BasePooling"]

_LOWEST = float(np.finfo(np.float32).min)


def pool_out_size(size, k, s, padding):
    """Keras's output length of a pooling window (None for a variable length)."""
    if size is None:
        return None
    if padding == "same":
        return -(-size // s)
    return (size - k) // s + 1


def pool_pads(size, k, s, padding):
    """(before, after) padding of one axis; Keras's "same" puts the odd cell after."""
    if padding != "same":
        return 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def _pad(x, before, after, fill):
    """x (numpy order) with its last two axes padded by ``before`` and ``after``
    cells, ``fill`` in the new ones: acc of x into a constant, so that x trains."""
    shape = tuple(x.shape)
    rows, cols = shape[-2], shape[-1]
    padded = shape[:-2] + (rows + before[0] + after[0], cols + before[1] + after[1])
    base = np.full(padded, fill, dtype=np.float32)
    base[..., before[0]:before[0] + rows, before[1]:before[1] + cols] = 0.0
    strides = [4]
    for d in reversed(padded[1:]):
        strides.append(strides[-1] * d)
    return ops.acc(ops.constant(base), contiguous(x), nb=tuple(reversed(strides)),
                   offset=(before[0] * padded[-1] + before[1]) * 4)


def _real_cells(size, k, s, before, out):
    """For each output position, how many cells of its window lie inside the input."""
    starts = np.arange(out) * s - before
    return np.minimum(starts + k, size) - np.maximum(starts, 0)


def pool_last_two(x, op, kernel, strides, pads):
    """Max ("max") or average ("avg") pooling over numpy's last two axes of x,
    with windows ``kernel``, ``strides`` and ``pads`` ((before, after) per axis),
    all in numpy order.  Returns a tensor of x's rank."""
    (kr, kc), (sr, sc) = kernel, strides
    (top, bottom), (left, right) = pads
    rows, cols = x.shape[-2], x.shape[-1]
    if op == "max" and (top or left):
        # all the padding explicit: ggml's max pooling without padding takes its fast path
        # (no bounds tests), forward and backward, which outweighs the copy
        pre, extra = (0, 0), (bottom, right)
        x = _pad(x, (top, left), extra, _LOWEST)
    else:
        pre, extra = (top, left), (bottom - top, right - left)
        if extra[0] or extra[1]:
            x = _pad(x, (0, 0), extra, _LOWEST if op == "max" else 0.0)
    y = ops.pool_2d(contiguous(x), op, kc, kr, sc, sr, pre[1], pre[0])
    if op == "avg" and (top or bottom or left or right):
        out_r, out_c = y.shape[-2], y.shape[-1]
        cells = np.outer(_real_cells(rows, kr, sr, top, out_r), _real_cells(cols, kc, sc, left, out_c))
        y = ops.mul(y, ops.constant((kr * kc / cells).astype(np.float32)))
    return y


def pool_cl_images(x, op, kernel, strides, padding):
    """The fused path: max ("max") or average ("avg", over each window's real cells)
    pooling of channels-last images x (N, H, W, C); padding "valid" or "same" (Keras's)."""
    return ops.pool_cl(contiguous(x), op, tuple(kernel), tuple(strides), padding)


def pool_images(x, op, kernel, strides, padding):
    """Max or average ("max"/"avg") pooling of channels-last images x (N, H, W, C), Keras's
    padding: pyggml's pool_cl on the CPU, ggml's pool_2d on channels-first copies elsewhere."""
    if fused():
        return pool_cl_images(x, op, kernel, strides, padding)
    _, h, w, _ = x.shape
    pads = tuple(pool_pads(size, kernel[i], strides[i], padding) for i, size in enumerate((h, w)))
    return to_hwc(pool_last_two(to_chw(x), op, kernel, strides, pads))


class BasePooling(TransposesChannelsFirst, Layer):
    """Arguments shared by the windowed pooling layers (channels-last; channels-first inputs
    are transposed, pyggml.layers._channels_first)."""

    rank = 2

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.pool_size = int_tuple("pool_size", pool_size, self.rank)
        self.strides = self.pool_size if strides is None else int_tuple("strides", strides, self.rank)
        self.padding = check_choice("padding", padding.lower() if isinstance(padding, str) else padding,
                                    ("valid", "same"))
        self.data_format = data_format_of(data_format, type(self).__name__)

    def spatial_out(self, sizes):
        """The output's spatial sizes for the input's (None stays None)."""
        out = []
        for i, size in enumerate(sizes):
            k, s = self.pool_size[i], self.strides[i]
            if self.padding == "valid" and size is not None and size < k:
                raise ValueError(f"{type(self).__name__}: pool {self.pool_size} is larger than the input "
                                 f"{tuple(sizes)} (padding='valid')")
            out.append(pool_out_size(size, k, s, self.padding))
        return tuple(out)

    def pads(self, sizes):
        return tuple(pool_pads(size, self.pool_size[i], self.strides[i], self.padding)
                     for i, size in enumerate(sizes))

    def get_config(self):
        c = super().get_config()
        c.update(pool_size=self.pool_size, strides=self.strides, padding=self.padding, data_format=self.data_format)
        return c
