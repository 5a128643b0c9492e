"""Dense: ``activation(x W^T + b)`` over the last axis, W of PyTorch's shape (units, in).

On the CPU the bias and the activation (linear, relu, tanh, sigmoid, elu,
leaky_relu) are one fused op, ``bias_act``, forward and backward."""

from pyggml import ops
from pyggml._validation import check_positive_int
from pyggml.layers._helpers import Activated, fused, rows_2d, set_weight_options, weight_options_config
from pyggml.layers._keras_weights import KerasKernel
from pyggml.layers._lora import LoraWeights
from pyggml.layers.core.quantize import QuantizedWeights
from pyggml.saving.object_registration import register_builtin
from pyggml.initializers import config_value as _init_config

__all__ = ["Dense"]


_OPTIONS = ("kernel_regularizer", "bias_regularizer", "kernel_constraint", "bias_constraint")


@register_builtin
class Dense(QuantizedWeights, LoraWeights, Activated):
    """Keras's arguments; the kernel's regularizer and constraint see it in Keras's
    layout (in, units) (pyggml.regularizers, pyggml.constraints)."""

    build_shape_rule = "last"        # a later call may have other lengths (Layer._fits_built)

    supports_masking = True

    kernel = KerasKernel("weight")          # Keras's (in, units) view of weight (units, in)
    _keras_kernel_property = True           # Keras's kernel is a property without a setter

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, lora_rank=None, lora_alpha=None, **kwargs):
        super().__init__(activation=activation, activity_regularizer=activity_regularizer, **kwargs)
        self.units = check_positive_int("units", units)
        self._init_lora(lora_rank, lora_alpha)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        set_weight_options(self, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                           kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def build(self, input_shape):
        if input_shape[-1] is None:
            raise ValueError("Dense needs a known last dimension")
        self.weight = self.add_weight("weight", (self.units, input_shape[-1]), self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.weight.keras_axes = (1, 0)                   # Keras's kernel is (in, units)
        self.bias = self.add_weight("bias", (self.units,), self.bias_initializer, regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None
        self._build_lora()
        self._build_quantized()

    def _quant_reduce_axes(self):
        return (0,)                                  # one scale per unit (Keras's kernel (in, units))

    def _product(self, inputs):
        lead = tuple(inputs.shape[:-1])
        # ggml's mul_mat trains a 2-D weight only: apply it to the rows of a 2-D view
        rows = rows_2d(inputs) if len(lead) != 1 else inputs
        y = ops.mul_mat(self._weight_tensor(), rows)
        if self.lora_enabled:
            y = ops.add(y, self._lora_rows(rows))
        return y, lead

    def _shaped(self, y, lead):
        return ops.reshape(y, lead + (self.units,)) if len(lead) != 1 else y

    def pre_activation(self, inputs, training=None):
        y, lead = self._product(inputs)
        if self.use_bias:
            # the bias as the fused op's linear form where it applies (one pass, no broadcast)
            y = ops.bias_act(y, self.bias, "linear") if fused() else ops.add(y, self.bias)
        return self._shaped(y, lead)

    def call(self, inputs, training=None):
        spec = self.fusable_activation() if self.use_bias and fused() else None
        if spec is None:
            return super().call(inputs, training)
        y, lead = self._product(inputs)
        return self._shaped(ops.bias_act(y, self.bias, spec[0], spec[1]), lead)

    def get_config(self):
        c = super().get_config()
        c.update(units=self.units, activation=self.activation_name, use_bias=self.use_bias)
        c.update(weight_options_config(self, _OPTIONS))
        self._lora_config(c)
        self._quant_config(c)
        for k in ("kernel_initializer", "bias_initializer"):
            if _init_config(getattr(self, k)) is not None:      # a name or an Initializer instance
                c[k] = _init_config(getattr(self, k))
        return c
