"""LayerNormalization over the last axis: on the CPU ggml's norm (pyggml's patches
give it a backward pass) times gamma plus beta; elsewhere composed from sums.

``center=False`` drops beta (the weight "bias"), ``scale=False`` gamma ("weight"),
as Keras makes no such weight then."""

from pyggml import ops
from pyggml.core import ops as core_ops
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.layers.normalization._moments import affine_config, mean_rows, rsqrt, set_affine_options
from pyggml.saving.object_registration import register_builtin

__all__ = ["LayerNormalization"]

_OPTIONS = ("beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint")


@register_builtin
class LayerNormalization(Layer):
    supports_masking = True
    build_shape_rule = "last"        # weights on the last axis: a later call may have other lengths

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, **kwargs):
        super().__init__(**kwargs)
        if axis not in (-1, [-1], (-1,)):
            raise ValueError("LayerNormalization normalises the last axis (axis=-1)")
        self.axis = -1
        set_affine_options(self, epsilon, center, scale, beta_initializer, gamma_initializer,
                           beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
                           beta_constraint=beta_constraint, gamma_constraint=gamma_constraint)

    def compute_output_shape(self, input_shape):
        return input_shape

    # Keras's names for these weights (the same Variables)
    gamma = property(lambda self: self.weight, doc="Keras's gamma: the weight Variable.")
    beta = property(lambda self: self.bias, doc="Keras's beta: the bias Variable.")

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
        cfg.update(axis=self.axis)
        cfg.update(affine_config(self, _OPTIONS))
        return cfg
