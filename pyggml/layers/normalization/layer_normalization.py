"""LayerNormalization over the last axis: on the CPU ggml's norm (pyggml's patches
give it a backward pass) times gamma plus beta; elsewhere composed from sums."""

from pyggml import ops
from pyggml._validation import check_number
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.layers.normalization._moments import mean_rows, rsqrt
from pyggml.saving.object_registration import register_builtin

__all__ = ["LayerNormalization"]


@register_builtin
class LayerNormalization(Layer):
    supports_masking = True

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, **kwargs):
        super().__init__(**kwargs)
        if axis not in (-1, [-1], (-1,)):
            raise ValueError("LayerNormalization normalises the last axis (axis=-1)")
        if not center or not scale:
            raise ValueError("LayerNormalization: center=False / scale=False are not supported")
        self.axis = -1
        self.epsilon = check_number("epsilon", epsilon, 0.0, low_open=True)

    def compute_output_shape(self, input_shape):
        return input_shape

    def build(self, input_shape):
        self.weight = self.add_weight("weight", (input_shape[-1],), "ones")
        self.bias = self.add_weight("bias", (input_shape[-1],), "zeros")

    def call(self, inputs, training=None):
        x = contiguous(inputs)
        if fused():
            return ops.bias_act(ops.mul(ops.norm(x, self.epsilon), self.weight), self.bias)
        xc = ops.sub(x, ops.repeat(mean_rows(x), x))
        var = mean_rows(ops.sqr(xc))
        y = ops.mul(xc, rsqrt(var, self.epsilon))
        return ops.add(ops.mul(y, self.weight), self.bias)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(axis=self.axis, epsilon=self.epsilon)
        return cfg
