"""LayerNormalization over the last axis: on the CPU ggml's norm (pyggml's patches
give it a backward pass) times gamma plus beta; elsewhere composed from sums.

``center=False`` drops beta (the weight "bias"), ``scale=False`` gamma ("weight"),
as Keras makes no such weight then."""

from pyggml import initializers, ops
from pyggml._validation import check_bool, check_number
from pyggml.core import ops as core_ops
from pyggml.layers._helpers import contiguous, fused, set_weight_options, weight_options_config
from pyggml.layers.layer import Layer
from pyggml.layers.normalization._moments import mean_rows, rsqrt
from pyggml.saving.object_registration import register_builtin
from pyggml.initializers import config_value as _init_config

__all__ = ["LayerNormalization"]

_OPTIONS = ("beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint")


@register_builtin
class LayerNormalization(Layer):
    supports_masking = True

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, **kwargs):
        super().__init__(**kwargs)
        if axis not in (-1, [-1], (-1,)):
            raise ValueError("LayerNormalization normalises the last axis (axis=-1)")
        self.axis = -1
        self.epsilon = check_number("epsilon", epsilon, 0.0, low_open=True)
        self.center = check_bool("center", center)
        self.scale = check_bool("scale", scale)
        for init in (beta_initializer, gamma_initializer):
            initializers.get(init)              # unknown names fail here, not at compile
        self.beta_initializer, self.gamma_initializer = beta_initializer, gamma_initializer
        set_weight_options(self, beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
                           beta_constraint=beta_constraint, gamma_constraint=gamma_constraint)

    def compute_output_shape(self, input_shape):
        return input_shape

    def build(self, input_shape):
        c = (input_shape[-1],)
        self.weight = self.add_weight("weight", c, self.gamma_initializer, regularizer=self.gamma_regularizer,
                                      constraint=self.gamma_constraint) if self.scale else None
        self.bias = self.add_weight("bias", c, self.beta_initializer, regularizer=self.beta_regularizer,
                                    constraint=self.beta_constraint) if self.center else None

    def call(self, inputs, training=None):
        x = contiguous(inputs)
        if fused():
            y = core_ops.norm(x, self.epsilon)
            if self.scale:
                y = ops.mul(y, self.weight)
            return ops.bias_act(y, self.bias) if self.center else y
        xc = ops.sub(x, ops.repeat(mean_rows(x), x))
        var = mean_rows(ops.sqr(xc))
        y = ops.mul(xc, rsqrt(var, self.epsilon))
        if self.scale:
            y = ops.mul(y, self.weight)
        return ops.add(y, self.bias) if self.center else y

    def get_config(self):
        cfg = super().get_config()
        cfg.update(axis=self.axis, epsilon=self.epsilon, center=self.center, scale=self.scale)
        for k in ("beta_initializer", "gamma_initializer"):
            if _init_config(getattr(self, k)) is not None:      # a name or an Initializer instance
                cfg[k] = _init_config(getattr(self, k))
        cfg.update(weight_options_config(self, _OPTIONS))
        return cfg
