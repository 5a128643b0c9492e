"""MaxPooling1D and AveragePooling1D over (steps, channels), padding "valid" or "same".

On the CPU: pyggml's channels-last pool_cl over (N, 1, steps, C).  Elsewhere, no
permutation either: channels-last (N, steps, C) is ggml's [C, steps, N], and
ggml's pool_2d with a window of 1 along C pools the steps alone.  (ggml's
pool_1d has no backward pass.)
"""

from pyggml import ops
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.pooling.base_pooling import BasePooling, pool_cl_images, pool_last_two
from pyggml.saving.object_registration import register_builtin

__all__ = ["MaxPooling1D", "AveragePooling1D"]


class _Pooling1D(BasePooling):
    rank = 1
    op = "max"

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{type(self).__name__} expects inputs of shape (steps, channels), "
                             f"got {tuple(input_shape[1:])}")
        return (input_shape[0],) + self.spatial_out(input_shape[1:2]) + (input_shape[2],)

    def call(self, inputs, training=None):
        steps = inputs.shape[1]
        self.spatial_out((steps,))
        if fused():
            n, _, c = inputs.shape
            y = pool_cl_images(ops.reshape(contiguous(inputs), (n, 1, steps, c)), self.op, (1, self.pool_size[0]),
                               (1, self.strides[0]), self.padding)
            return ops.reshape(y, (n, y.shape[2], c))
        ((before, after),) = self.pads((steps,))
        return pool_last_two(inputs, self.op, (self.pool_size[0], 1), (self.strides[0], 1),
                             ((before, after), (0, 0)))


@register_builtin
class MaxPooling1D(_Pooling1D):
    op = "max"


@register_builtin
class AveragePooling1D(_Pooling1D):
    """Average over each window; with padding="same" over its real steps only, as Keras."""
    op = "avg"
