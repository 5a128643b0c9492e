"""Activations as ggml graphs that train.

ggml has no backward pass for tanh, sigmoid, gelu, elu or leaky_relu, so those
are composed from ops that have one (exact identities, or an erf to 1.5e-7).
"""

import math

from pyggml.core import ops

_SQRT1_2 = 1.0 / math.sqrt(2.0)


def sigmoid(x, ctx):
    # sigmoid(x) = exp(-softplus(-x)): stable for either sign
    return ops.exp(ops.neg(ops.softplus(ops.neg(x, ctx=ctx), ctx=ctx), ctx=ctx), ctx=ctx)


def tanh(x, ctx):
    # tanh(x) = 2 sigmoid(2x) - 1
    return ops.scale_bias(sigmoid(ops.scale(x, 2.0, ctx=ctx), ctx), 2.0, -1.0, ctx=ctx)


def relu(x, ctx):
    return ops.relu(x, ctx=ctx)


def _erf(x, ctx):
    """erf by Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7), from ops with a backward pass."""
    p, a1, a2, a3, a4, a5 = 0.3275911, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429
    ax = ops.abs(x, ctx=ctx)
    # t = 1 / (1 + p|x|) = exp(-log(1 + p|x|))
    t = ops.exp(ops.neg(ops.log(ops.scale_bias(ax, p, 1.0, ctx=ctx), ctx=ctx), ctx=ctx), ctx=ctx)
    poly = ops.scale(t, a5, ctx=ctx)
    for coef in (a4, a3, a2, a1):
        poly = ops.mul(ops.scale_bias(poly, 1.0, coef, ctx=ctx), t, ctx=ctx)
    e = ops.exp(ops.neg(ops.sqr(x, ctx=ctx), ctx=ctx), ctx=ctx)
    y = ops.scale_bias(ops.mul(poly, e, ctx=ctx), -1.0, 1.0, ctx=ctx)   # erf(|x|)
    return ops.mul(y, ops.sgn(x, ctx=ctx), ctx=ctx)


def gelu(x, ctx):
    # exact gelu (Keras' and PyTorch's default): x * (1 + erf(x / sqrt 2)) / 2
    e = _erf(ops.scale(x, _SQRT1_2, ctx=ctx), ctx)
    return ops.mul(x, ops.scale_bias(e, 0.5, 0.5, ctx=ctx), ctx=ctx)


def silu(x, ctx):
    return ops.silu(x, ctx=ctx)


def elu(x, ctx, alpha=1.0):
    # elu(x) = relu(x) + alpha * (exp(min(x, 0)) - 1),  min(x, 0) = -relu(-x)
    neg_part = ops.neg(ops.relu(ops.neg(x, ctx=ctx), ctx=ctx), ctx=ctx)
    em1 = ops.scale_bias(ops.exp(neg_part, ctx=ctx), alpha, -alpha, ctx=ctx)
    return ops.add(ops.relu(x, ctx=ctx), em1, ctx=ctx)


def leaky_relu(x, ctx, negative_slope=0.2):
    # Keras' default slope is 0.2: relu(x) - slope * relu(-x)
    return ops.sub(ops.relu(x, ctx=ctx),
                   ops.scale(ops.relu(ops.neg(x, ctx=ctx), ctx=ctx), negative_slope, ctx=ctx), ctx=ctx)


def softmax(x, ctx):
    return ops.soft_max(ops.cont(x, ctx=ctx) if not x.is_contiguous else x, ctx=ctx)


def linear(x, ctx):
    return x


_BY_NAME = {
    "relu": relu, "sigmoid": sigmoid, "tanh": tanh, "softmax": softmax, "gelu": gelu,
    "silu": silu, "swish": silu, "leaky_relu": leaky_relu, "elu": elu, "linear": linear,
}


def get(name):
    """The activation for a name (None and 'linear' are the identity)."""
    if name is None:
        return linear
    if callable(name):
        return name
    if not isinstance(name, str) or name not in _BY_NAME:
        raise ValueError(f"unknown activation {name!r}; known: {sorted(_BY_NAME)}")
    return _BY_NAME[name]


def name_of(act):
    if act is None:
        return "linear"
    if isinstance(act, str):
        get(act)
        return act
    for k, v in _BY_NAME.items():
        if v is act:
            return k
    return getattr(act, "__name__", "custom")
