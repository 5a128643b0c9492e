"""Means and variances from ops that train (ggml's norm has no backward pass), and
the scale-and-centre options LayerNormalization and GroupNormalization share."""

from pyggml import initializers, ops
from pyggml._validation import check_bool, check_number
from pyggml.initializers import config_value
from pyggml.layers._helpers import set_weight_options, weight_options_config

__all__ = ["mean_rows", "rsqrt", "set_affine_options", "affine_config"]

AFFINE_OPTIONS = ("beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint")


def set_affine_options(layer, epsilon, center, scale, beta_initializer, gamma_initializer, **weight_options):
    """epsilon, center, scale, the gamma/beta initializers (unknown names fail here, not at
    compile) and their regularizers and constraints, checked and set on ``layer``."""
    layer.epsilon = check_number("epsilon", epsilon, 0.0, low_open=True)
    layer.center = check_bool("center", center)
    layer.scale = check_bool("scale", scale)
    for init in (beta_initializer, gamma_initializer):
        initializers.get(init)
    layer.beta_initializer, layer.gamma_initializer = beta_initializer, gamma_initializer
    set_weight_options(layer, **weight_options)


def affine_config(layer, options):
    """The config entries set_affine_options set (initializers given by name)."""
    cfg = dict(epsilon=layer.epsilon, center=layer.center, scale=layer.scale)
    for k in ("beta_initializer", "gamma_initializer"):
        if config_value(getattr(layer, k)) is not None:          # a name or an Initializer instance
            cfg[k] = config_value(getattr(layer, k))
    cfg.update(weight_options_config(layer, options))
    return cfg


def mean_rows(x):
    """Mean over ggml dim 0 (numpy's last axis), as a scaled sum_rows: ggml's mean
    has a backward pass only when its result is a scalar."""
    return ops.scale(ops.sum_rows(x), 1.0 / x.ne[0])


def rsqrt(v, eps):
    """(v + eps) ** -0.5 as exp(-0.5 log(v + eps))."""
    return ops.exp(ops.scale(ops.log(ops.scale_bias(v, 1.0, eps)), -0.5))
