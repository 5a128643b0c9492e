"""BatchNormalization and LayerNormalization, from ops that train.

(ggml's norm has no backward pass; mean, sub, mul, log and exp do.)
"""

import numpy as np

from pyggml.core import ops
from pyggml.layers.base import Layer
from pyggml.layers.core import _cont

__all__ = ["BatchNormalization", "LayerNormalization"]


def _rsqrt(v, eps, ctx):
    # (v + eps) ** -0.5 as exp(-0.5 log(v + eps))
    return ops.exp(ops.scale(ops.log(ops.scale_bias(v, 1.0, eps, ctx=ctx), ctx=ctx), -0.5, ctx=ctx), ctx=ctx)


def _mean_rows(x, ctx):
    # mean over ggml dim 0 as a scaled sum_rows (ggml's mean has a backward pass
    # only when its result is a scalar)
    return ops.scale(ops.sum_rows(x, ctx=ctx), 1.0 / x.ne[0], ctx=ctx)


def _check_eps(eps):
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise ValueError(f"epsilon must be a positive number, got {eps!r}")
    return float(eps)


class BatchNormalization(Layer):
    """Normalises over every axis but the last (channels), with batch statistics
    while training and the running ones (updated after each step) at inference."""

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, **kwargs):
        super().__init__(**kwargs)
        if axis != -1:
            raise ValueError("BatchNormalization normalises the last axis (axis=-1)")
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum <= 1:
            raise ValueError(f"momentum must be in [0, 1], got {momentum!r}")
        self.axis, self.momentum, self.epsilon = -1, float(momentum), _check_eps(epsilon)

    def build(self, input_shape):
        c = input_shape[-1]
        self.add_weight("weight", (c,), "ones")
        self.add_weight("bias", (c,), "zeros")
        self.add_weight("running_mean", (c,), "zeros", trainable=False)
        self.add_weight("running_var", (c,), "ones", trainable=False)

    def call(self, g, x, training):
        c = self.input_shape[-1]
        m = int(np.prod(self.input_shape[:-1])) * g.batch
        x2 = ops.reshape(_cont(x, g), (m, c), ctx=g.ctx)          # ggml [C, M]
        if training:
            xt = ops.cont(ops.transpose(x2, ctx=g.ctx), ctx=g.ctx)  # ggml [M, C]
            mean = ops.reshape(_mean_rows(xt, g.ctx), (1, c), ctx=g.ctx)
            xc = ops.sub(x2, ops.repeat(mean, x2, ctx=g.ctx), ctx=g.ctx)   # ggml's sub has no broadcast backward
            var = _mean_rows(ops.cont(ops.transpose(ops.sqr(xc, ctx=g.ctx), ctx=g.ctx), ctx=g.ctx), g.ctx)
            var = ops.reshape(var, (1, c), ctx=g.ctx)
            g.add_stat(self, mean, var)
            y = ops.mul(xc, _rsqrt(var, self.epsilon, g.ctx), ctx=g.ctx)
        else:
            xc = ops.sub(x2, g.weight(self, "running_mean"), ctx=g.ctx)
            y = ops.mul(xc, _rsqrt(g.weight(self, "running_var"), self.epsilon, g.ctx), ctx=g.ctx)
        y = ops.add(ops.mul(y, g.weight(self, "weight"), ctx=g.ctx), g.weight(self, "bias"), ctx=g.ctx)
        return ops.reshape(y, (g.batch,) + tuple(self.input_shape), ctx=g.ctx)

    def update_stats(self, mean, var, running):
        """Keras' moving averages, from one training batch's statistics."""
        m = self.momentum
        running["running_mean"] = running["running_mean"] * m + mean.reshape(-1) * (1 - m)
        running["running_var"] = running["running_var"] * m + var.reshape(-1) * (1 - m)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(axis=self.axis, momentum=self.momentum, epsilon=self.epsilon)
        return cfg


class LayerNormalization(Layer):
    def __init__(self, axis=-1, epsilon=1e-3, **kwargs):
        super().__init__(**kwargs)
        if axis != -1:
            raise ValueError("LayerNormalization normalises the last axis (axis=-1)")
        self.axis, self.epsilon = -1, _check_eps(epsilon)

    def build(self, input_shape):
        self.add_weight("weight", (input_shape[-1],), "ones")
        self.add_weight("bias", (input_shape[-1],), "zeros")

    def call(self, g, x, training):
        x = _cont(x, g)
        xc = ops.sub(x, ops.repeat(_mean_rows(x, g.ctx), x, ctx=g.ctx), ctx=g.ctx)
        var = _mean_rows(ops.sqr(xc, ctx=g.ctx), g.ctx)
        y = ops.mul(xc, _rsqrt(var, self.epsilon, g.ctx), ctx=g.ctx)
        return ops.add(ops.mul(y, g.weight(self, "weight"), ctx=g.ctx), g.weight(self, "bias"), ctx=g.ctx)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(axis=self.axis, epsilon=self.epsilon)
        return cfg
