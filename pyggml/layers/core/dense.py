"""Dense: ``activation(x W^T + b)`` over the last axis, W of PyTorch's shape (units, in).

On the CPU the bias and the activation (linear, relu, tanh, sigmoid, elu,
leaky_relu) are one fused op, ``bias_act``, forward and backward."""

from pyggml import ops
from pyggml._validation import check_positive_int
from pyggml.layers._helpers import Activated, fused, rows_2d
from pyggml.saving.object_registration import register_builtin

__all__ = ["Dense"]


@register_builtin
class Dense(Activated):
    supports_masking = True

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(activation=activation, **kwargs)
        self.units = check_positive_int("units", units)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def build(self, input_shape):
        if input_shape[-1] is None:
            raise ValueError("Dense needs a known last dimension")
        self.weight = self.add_weight("weight", (self.units, input_shape[-1]), self.kernel_initializer)
        self.bias = self.add_weight("bias", (self.units,), self.bias_initializer) if self.use_bias else None

    def _product(self, inputs):
        lead = tuple(inputs.shape[:-1])
        # ggml's mul_mat trains a 2-D weight only: apply it to the rows of a 2-D view
        return ops.mul_mat(self.weight, rows_2d(inputs) if len(lead) != 1 else inputs), lead

    def _shaped(self, y, lead):
        return ops.reshape(y, lead + (self.units,)) if len(lead) != 1 else y

    def pre_activation(self, inputs, training=None):
        y, lead = self._product(inputs)
        if self.use_bias:
            y = ops.add(y, self.bias)
        return self._shaped(y, lead)

    def call(self, inputs, training=None):
        spec = self.fusable_activation() if self.use_bias and fused() else None
        if spec is None:
            return super().call(inputs, training)
        y, lead = self._product(inputs)
        return self._shaped(ops.bias_act(y, self.bias, spec[0], spec[1]), lead)

    def get_config(self):
        c = super().get_config()
        c.update(units=self.units, activation=self.activation, use_bias=self.use_bias)
        for k in ("kernel_initializer", "bias_initializer"):
            if isinstance(getattr(self, k), str):
                c[k] = getattr(self, k)
        return c
