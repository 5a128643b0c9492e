"""GlobalAveragePooling2D and GlobalMaxPooling2D: one value per channel (on the CPU,
pyggml's channels-last pool_cl with the whole image as its window); with
``keepdims=True`` the output keeps the spatial axes, (N, 1, 1, C), as Keras's."""

from pyggml import ops
from pyggml._validation import check_bool
from pyggml.core import ops as core_ops
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.convolutional.base_conv import to_chw
from pyggml.layers._channels_first import TransposesChannelsFirst, data_format_of
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["GlobalAveragePooling2D", "GlobalMaxPooling2D"]


class _Global2D(TransposesChannelsFirst, Layer):
    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format_of(data_format, type(self).__name__)
        self.keepdims = check_bool("keepdims", keepdims)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(f"{type(self).__name__} expects (H, W, C) inputs, got {tuple(input_shape[1:])}")
        return (input_shape[0], 1, 1, input_shape[-1]) if self.keepdims else (input_shape[0], input_shape[-1])

    def call(self, inputs, training=None):
        n, c = inputs.shape[0], inputs.shape[-1]
        y = self.pool(inputs)
        return ops.reshape(y, (n, 1, 1, c) if self.keepdims else (n, c))

    def get_config(self):
        cfg = super().get_config()
        cfg.update(keepdims=self.keepdims, data_format=self.data_format)
        return cfg


@register_builtin
class GlobalAveragePooling2D(_Global2D):
    def pool(self, inputs):
        n, h, w, c = inputs.shape
        if fused():
            return ops.pool_cl(contiguous(inputs), "avg", (h, w))
        y = ops.reshape(contiguous(inputs), (n, h * w, c))
        y = ops.cont(core_ops.transpose(y))                                    # (N, C, HW)
        return ops.scale(ops.sum_rows(y), 1.0 / (h * w))


@register_builtin
class GlobalMaxPooling2D(_Global2D):
    def pool(self, inputs):
        n, h, w, c = inputs.shape
        if fused():
            return ops.pool_cl(contiguous(inputs), "max", (h, w))
        return ops.cont(ops.pool_2d(to_chw(inputs), "max", w, h, w, h, 0, 0))
