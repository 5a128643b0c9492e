"""Dropout: zero a fraction ``rate`` of the values while training, scale the rest by 1/(1-rate)."""

from pyggml import ops
from pyggml._validation import check_fraction
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Dropout"]


@register_builtin
class Dropout(Layer):
    supports_masking = True

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = check_fraction("Dropout rate", rate, high_open=True)
        if noise_shape is not None:
            raise ValueError("Dropout: noise_shape is not supported (masks are drawn per value)")
        self.seed = seed

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, inputs, training=None):
        return ops.dropout(inputs, self.rate, training=training)

    def get_config(self):
        c = super().get_config()
        c["rate"] = self.rate
        if self.seed is not None:
            c["seed"] = self.seed
        return c
