"""Activation layers: ``Activation(name)``, and Keras's ReLU, LeakyReLU, ELU and Softmax layers."""

import numpy as np

from pyggml import activations, ops
from pyggml._validation import check_number, is_int
from pyggml.layers._helpers import Activated, contiguous
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


def _non_negative(owner, name, value):
    """A number >= 0; None or a negative value is a ValueError, as Keras's."""
    if value is None:
        raise ValueError(f"{owner}: {name} cannot be None or a negative value, got None")
    v = check_number(name, value)
    if v < 0:
        raise ValueError(f"{owner}: {name} cannot be None or a negative value, got {value!r}")
    return v


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
        # Keras's: None or a negative value is a ValueError
        self.negative_slope = _non_negative("ReLU", "negative_slope", negative_slope)
        self.threshold = _non_negative("ReLU", "threshold", threshold)

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
        self.negative_slope = _non_negative("LeakyReLU", "negative_slope",
                                            negative_slope if alpha is None else alpha)

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
    """Keras's Softmax layer: softmax over ``axis`` (an int, or a tuple of axes taken together);
    ``mask`` (broadcastable to the inputs, as numpy's; true or > 0.5 where kept) leaves the
    masked entries out of the softmax and zero in the output."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        if not axes or not all(is_int(a) for a in axes) or len(set(axes)) != len(axes):
            raise ValueError(f"Softmax: axis must be an int or a tuple of distinct ints, got {axis!r}")
        self.axis = tuple(int(a) for a in axes) if isinstance(axis, (tuple, list)) else int(axis)

    def call(self, inputs, training=None, mask=None):
        x = ops.as_tensor(inputs)
        shape = tuple(x.shape)
        m = None
        if mask is not None:
            m = ops.as_tensor(mask)
            ms = tuple(m.shape)
            if len(ms) > len(shape) or any(a not in (1, b) for a, b in zip(ms[::-1], shape[::-1])):
                raise ValueError(f"Softmax: the mask must be broadcastable to the inputs and have no more "
                                 f"dimensions, got inputs of shape {shape} and a mask of shape {ms}")
            if m.dtype != "f32":
                m = ops.cast(m, "float32")
            m = ops.step(ops.scale_bias(m, 1.0, -0.5))                 # kept where > 0.5
            m = ops.reshape(contiguous(m), (1,) * (len(shape) - len(ms)) + ms)
            if ms != shape:
                m = ops.repeat(m, x)
            # a masked entry: -1e9 in place of its value (Keras's large negative number)
            x = ops.add(ops.mul(contiguous(x), m), ops.scale_bias(m, 1e9, -1e9))
        axes = self.axis if isinstance(self.axis, tuple) else (self.axis,)
        rank = len(shape)
        axes = tuple(sorted(a + rank if a < 0 else a for a in axes))
        if any(not 0 <= a < rank for a in axes):
            raise ValueError(f"Softmax: axis {self.axis} is out of range for inputs of shape {shape}")
        if len(axes) == 1:
            y = activations.softmax(x, axes[0])
        else:
            # the axes moved last and joined: one softmax over them, then back
            rest = tuple(a for a in range(rank) if a not in axes)
            perm = rest + axes
            moved = ops.transpose(x, perm)
            lead = tuple(shape[a] for a in rest)
            flat = ops.reshape(contiguous(moved), lead + (int(np.prod([shape[a] for a in axes])),))
            y = ops.reshape(activations.softmax(flat, -1), tuple(moved.shape))
            y = ops.transpose(y, tuple(int(i) for i in np.argsort(perm)))
        if m is not None:
            y = ops.mul(contiguous(y), m)
        return y

    def takes_5d(self, shapes):
        """volumes take a softmax over their channels (axis=-1) only (pyggml._fold)."""
        return self.axis in (-1, 4)

    def get_config(self):
        c = super().get_config()
        c["axis"] = self.axis
        return c
