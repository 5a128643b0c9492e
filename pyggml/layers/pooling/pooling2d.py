"""MaxPooling2D and AveragePooling2D with Keras's padding="valid" or "same":
pyggml's channels-last pool_cl on the CPU, elsewhere ggml's pool_2d on
channels-first copies."""

from pyggml.layers.pooling.base_pooling import BasePooling, pool_images
from pyggml.saving.object_registration import register_builtin

__all__ = ["MaxPooling2D", "AveragePooling2D"]


class _Pooling2D(BasePooling):
    rank = 2
    op = "max"

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(f"{type(self).__name__} expects inputs of shape (H, W, C), got {tuple(input_shape[1:])}")
        return (input_shape[0],) + self.spatial_out(input_shape[1:3]) + (input_shape[3],)

    def call(self, inputs, training=None):
        _, h, w, _ = inputs.shape
        self.spatial_out((h, w))
        return pool_images(inputs, self.op, self.pool_size, self.strides, self.padding)


@register_builtin
class MaxPooling2D(_Pooling2D):
    op = "max"


@register_builtin
class AveragePooling2D(_Pooling2D):
    """Average over each window; with padding="same" over the window's real
    (unpadded) cells only, as Keras."""
    op = "avg"
