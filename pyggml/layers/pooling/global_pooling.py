"""GlobalAveragePooling2D and GlobalMaxPooling2D: one value per channel (on the CPU,
pyggml's channels-last pool_cl with the whole image as its window)."""

from pyggml import ops
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.convolutional.base_conv import to_chw
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["GlobalAveragePooling2D", "GlobalMaxPooling2D"]


class _Global2D(Layer):
    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        if keepdims:
            raise ValueError(f"{type(self).__name__}: keepdims=True is not supported")

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(f"{type(self).__name__} expects (H, W, C) inputs, got {tuple(input_shape[1:])}")
        return (input_shape[0], input_shape[-1])


@register_builtin
class GlobalAveragePooling2D(_Global2D):
    def call(self, inputs, training=None):
        n, h, w, c = inputs.shape
        if fused():
            return ops.reshape(ops.pool_cl(contiguous(inputs), "avg", (h, w)), (n, c))
        y = ops.reshape(contiguous(inputs), (n, h * w, c))
        y = ops.cont(ops.transpose(y))                                    # (N, C, HW)
        return ops.reshape(ops.scale(ops.sum_rows(y), 1.0 / (h * w)), (n, c))


@register_builtin
class GlobalMaxPooling2D(_Global2D):
    def call(self, inputs, training=None):
        n, h, w, c = inputs.shape
        if fused():
            return ops.reshape(ops.pool_cl(contiguous(inputs), "max", (h, w)), (n, c))
        y = ops.pool_2d(to_chw(inputs), "max", w, h, w, h, 0, 0)
        return ops.reshape(ops.cont(y), (n, c))
