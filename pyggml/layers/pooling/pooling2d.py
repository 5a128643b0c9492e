"""MaxPooling2D and AveragePooling2D (ggml's pool_2d on channels-first data)."""

from pyggml import ops
from pyggml._validation import int_tuple
from pyggml.layers.convolutional.base_conv import to_chw, to_hwc, valid_size
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["MaxPooling2D", "AveragePooling2D"]


class _Pooling2D(Layer):
    op = "max"

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.pool_size = int_tuple("pool_size", pool_size, 2)
        self.strides = self.pool_size if strides is None else int_tuple("strides", strides, 2)
        if padding != "valid":
            raise ValueError("pooling supports padding='valid' (Keras' default)")
        self.padding = padding

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(f"{type(self).__name__} expects inputs of shape (H, W, C), got {tuple(input_shape[1:])}")
        _, h, w, c = input_shape
        (kh, kw), (sh, sw) = self.pool_size, self.strides
        if (h is not None and h < kh) or (w is not None and w < kw):
            raise ValueError(f"{type(self).__name__}: pool {self.pool_size} is larger than the input {(h, w)}")
        return (input_shape[0], None if h is None else valid_size(h, kh, sh),
                None if w is None else valid_size(w, kw, sw), c)

    def call(self, inputs, training=None):
        (kh, kw), (sh, sw) = self.pool_size, self.strides
        return to_hwc(ops.pool_2d(to_chw(inputs), self.op, kw, kh, sw, sh, 0, 0))

    def get_config(self):
        c = super().get_config()
        c.update(pool_size=self.pool_size, strides=self.strides, padding=self.padding)
        return c


@register_builtin
class MaxPooling2D(_Pooling2D):
    op = "max"


@register_builtin
class AveragePooling2D(_Pooling2D):
    op = "avg"
