"""Activation layers: ``Activation(name)``, and Keras's ReLU, LeakyReLU, ELU and Softmax layers."""

from pyggml import activations
from pyggml._validation import check_number
from pyggml.layers._helpers import Activated
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Activation", "ReLU", "LeakyReLU", "ELU", "Softmax"]


@register_builtin
class Activation(Activated):
    supports_masking = True

    def __init__(self, activation, **kwargs):
        super().__init__(activation=activation, **kwargs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def pre_activation(self, inputs, training=None):
        return inputs

    def get_config(self):
        c = super().get_config()
        c["activation"] = self.activation_name
        return c


class _Elementwise(Layer):
    supports_masking = True

    def compute_output_shape(self, input_shape):
        return input_shape


@register_builtin
class ReLU(_Elementwise):
    """max(x, 0), capped at ``max_value`` if given; ``negative_slope`` below ``threshold``."""

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(**kwargs)
        self.max_value = None if max_value is None else check_number("max_value", max_value, 0.0)
        self.negative_slope = check_number("negative_slope", negative_slope, 0.0)
        self.threshold = check_number("threshold", threshold)

    def call(self, inputs, training=None):
        # exact in float32 (a 0/1 mask or ggml's clamp: no rounding next to max_value)
        return activations.relu(inputs, negative_slope=self.negative_slope, max_value=self.max_value,
                                threshold=self.threshold)

    def get_config(self):
        c = super().get_config()
        c.update(max_value=self.max_value, negative_slope=self.negative_slope, threshold=self.threshold)
        return c


@register_builtin
class LeakyReLU(_Elementwise):
    def __init__(self, negative_slope=0.3, alpha=None, **kwargs):
        super().__init__(**kwargs)
        self.negative_slope = check_number("negative_slope", negative_slope if alpha is None else alpha, 0.0)

    def call(self, inputs, training=None):
        return activations.leaky_relu(inputs, self.negative_slope)

    def get_config(self):
        c = super().get_config()
        c["negative_slope"] = self.negative_slope
        return c


@register_builtin
class ELU(_Elementwise):
    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self.alpha = check_number("alpha", alpha)

    def call(self, inputs, training=None):
        return activations.elu(inputs, self.alpha)

    def get_config(self):
        c = super().get_config()
        c["alpha"] = self.alpha
        return c


@register_builtin
class Softmax(_Elementwise):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = int(axis)

    def call(self, inputs, training=None):
        return activations.softmax(inputs, self.axis)

    def takes_5d(self, shapes):
        """volumes take a softmax over their channels (axis=-1) only (pyggml._fold)."""
        return self.axis in (-1, 4)

    def get_config(self):
        c = super().get_config()
        c["axis"] = self.axis
        return c
