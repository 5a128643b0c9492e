"""RMSNormalization (Keras 3's): each sample divided by its root mean square along
``axis``, then times a learned ``scale``."""

from pyggml import ops
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.layers.normalization.unit_normalization import normalized_axes
from pyggml.saving.object_registration import register_builtin

__all__ = ["RMSNormalization"]


@register_builtin
class RMSNormalization(Layer):
    """``RMSNormalization(axis=-1, epsilon=1e-6)``: ``x / sqrt(mean(x**2 over axis) + epsilon)
    * scale``; ``scale`` has the normalized axes' shape and starts at ones."""

    supports_masking = True

    @property
    def build_shape_rule(self):
        # weights on the last axis: a later call may have other lengths (Layer._fits_built)
        return "last" if self.axis in (-1, [-1]) else None

    def __init__(self, axis=-1, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        items = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        normalized_axes(items, 64, "RMSNormalization")            # ints, no repeats
        self.axis = axis if not isinstance(axis, tuple) else list(axis)
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon > 0:
            raise ValueError(f"RMSNormalization: epsilon must be a number > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)

    def build(self, input_shape):
        if isinstance(input_shape, (list, dict)):
            raise ValueError("RMSNormalization takes one input")
        axes = normalized_axes(self.axis, len(input_shape), "RMSNormalization")
        if 0 in axes:
            raise ValueError("RMSNormalization: the batch axis (0) cannot be normalized")
        shape = tuple(input_shape[a] for a in axes)
        if any(d is None for d in shape):
            raise ValueError(f"RMSNormalization: the normalized axes need known sizes, got {shape}")
        self.scale = self.add_weight("scale", shape, "ones")

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, inputs):
        x = contiguous(ops.as_tensor(inputs))
        rank = len(x.shape)
        axes = normalized_axes(self.axis, rank, "RMSNormalization")
        ms = ops.sqr(x)
        n = 1
        for ax in axes:
            ms = ops.reduce_sum(ms, ax, keepdims=True)
            n *= x.shape[ax]
        inv = ops.rsqrt(ops.scale_bias(contiguous(ms), 1.0 / n, self.epsilon))
        y = ops.mul(x, ops.repeat(inv, x) if tuple(inv.shape) != tuple(x.shape) else inv)
        # the scale broadcast over the other axes: shape 1 there
        s = ops.reshape(self.scale.graph_tensor(), tuple(x.shape[a] if a in axes else 1 for a in range(rank)))
        return ops.mul(y, ops.repeat(s, y) if tuple(s.shape) != tuple(y.shape) else s)

    def get_config(self):
        c = super().get_config()
        c.update({"axis": self.axis, "epsilon": self.epsilon})
        return c
