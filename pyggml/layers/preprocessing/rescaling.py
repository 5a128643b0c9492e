"""Rescaling: ``inputs * scale + offset`` (Keras's layer), e.g. ``Rescaling(1 / 255)``
for pixel values.  ``scale`` and ``offset`` are numbers or arrays that
broadcast against the inputs (one per channel of the last axis).

It runs in the graph, or on the host (``host_capable``) where it lies between the
inputs and host layers (``Resizing``, ``Rescaling``, then ``RandomFlip``)."""

import numpy as np

from pyggml import backend, ops
from pyggml._validation import is_number
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Rescaling"]


def _value(v, what):
    if is_number(v):
        if not np.isfinite(float(v)):
            raise ValueError(f"Rescaling: {what} must be finite, got {v!r}")
        return float(v)
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"Rescaling: {what} must be a number or an array of numbers, got {v!r}") from None
    if a.ndim > 4 or a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"Rescaling: {what} must be a finite number or a non-empty array of finite numbers")
    return a


def _channels_first_value(v):
    if isinstance(v, np.ndarray) and 1 <= v.ndim < 3 and backend.image_data_format() == "channels_first":
        return v.reshape(v.shape + (1,) * (3 - v.ndim))
    return v


@register_builtin
class Rescaling(Layer):
    """``Rescaling(scale, offset=0.0)``: ``x * scale + offset``."""

    supports_masking = True             # element-wise: a padding mask passes through (Keras's)

    host_capable = True

    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self._scale = _value(scale, "scale")
        self._offset = _value(offset, "offset")

    # Keras's: with image_data_format "channels_first", a scale or offset of one or two axes
    # stands for the leading axes (the channels), as (c, 1, 1)
    scale = property(lambda self: _channels_first_value(self._scale), lambda self, v: setattr(self, "_scale", v))
    offset = property(lambda self: _channels_first_value(self._offset), lambda self, v: setattr(self, "_offset", v))

    def compute_output_shape(self, input_shape):
        feat = tuple(input_shape[1:])
        for v, what in ((self.scale, "scale"), (self.offset, "offset")):
            if isinstance(v, np.ndarray):
                shape = v.shape[1:] if v.ndim > len(feat) else v.shape
                if v.ndim > len(feat) and v.shape[0] != 1:
                    raise ValueError(f"Rescaling: {what} of shape {v.shape} does not broadcast to inputs of shape "
                                     f"{tuple(input_shape)}")
                try:
                    np.broadcast_shapes(tuple(1 if d is None else d for d in feat), shape)
                except ValueError:
                    raise ValueError(f"Rescaling: {what} of shape {v.shape} does not broadcast to inputs of shape "
                                     f"{tuple(input_shape)}") from None
                if np.broadcast_shapes(tuple(1 if d is None else d for d in feat), shape) != \
                        tuple(1 if d is None else d for d in feat):
                    raise ValueError(f"Rescaling: {what} of shape {v.shape} would change the inputs' shape "
                                     f"{tuple(input_shape)}")
        return input_shape

    def build(self, input_shape):
        self.compute_output_shape(tuple(input_shape))

    @staticmethod
    def _in_graph(v, ndim):
        a = v.reshape(v.shape[1:]) if v.ndim == ndim + 1 else v
        return ops.constant(np.ascontiguousarray(a, dtype=np.float32).reshape(a.shape or (1,)))

    def call(self, inputs, training=None):
        x = contiguous(inputs)
        if x.dtype != "f32":
            x = ops.cast(x, "f32")
        nd = len(x.shape) - 1
        if isinstance(self.scale, float):
            y = ops.scale(x, self.scale) if self.scale != 1.0 else x
        else:
            y = x * self._in_graph(self.scale, nd)
        if isinstance(self.offset, float):
            return ops.scale_bias(y, 1.0, self.offset) if self.offset != 0.0 else (
                y if y is not x else ops.scale(x, 1.0))
        return y + self._in_graph(self.offset, nd)

    def host_apply(self, inputs, training=None):
        """The same in numpy, for the host stage."""
        x = np.asarray(inputs)
        if x.dtype == object or x.dtype.kind not in "biuf":
            raise TypeError(f"Rescaling takes numbers, got an array of dtype {x.dtype}")
        self.compute_output_shape((None,) + x.shape[1:])
        scale = self.scale if isinstance(self.scale, float) else self.scale.astype(np.float32)
        offset = self.offset if isinstance(self.offset, float) else self.offset.astype(np.float32)
        return np.ascontiguousarray(x.astype(np.float32) * scale + offset, dtype=np.float32)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(scale=self._scale if isinstance(self._scale, float) else self._scale.tolist(),
                   offset=self._offset if isinstance(self._offset, float) else self._offset.tolist())
        return cfg
