"""Adafactor (Shazeer and Stern, 2018), as Keras 3 defines it.

At step t: ``rho = min(lr, 1 / sqrt(t))``, ``alpha = max(epsilon_2, rms(w)) rho``,
``b = 1 - t^beta_2_decay``, ``G = g^2 + epsilon_1``.  A weight of 2 or more dims keeps the
second moment factored over Keras's last two axes: ``r = b r + (1 - b) mean(G, last)``,
``c = b c + (1 - b) mean(G, second last)``, ``v = r c / mean(r)``; a smaller one keeps
``v = b v + (1 - b) G``.  Then ``u = g / sqrt(v)``, ``w -= alpha u / max(1, rms(u) /
clip_threshold)``.

The factors are kept broadcast to the weight's shape (each slot as large as the weight, as
Keras's velocity is), and the axes are Keras's: a Dense kernel (units, in) here is
(in, units) in Keras, a Conv2D kernel (out, in, kh, kw) is (kh, kw, in, out), and the factors
run over Keras's in and out."""

import math

import numpy as np

from pyggml import ops
from pyggml._validation import check_bool, check_number
from pyggml.optimizers.optimizer import Optimizer, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["Adafactor"]


def _factored_axes(variable, shape):
    """(the axis r averages over, the one c averages over) of the weight as stored here:
    Keras's last and second last; None for a weight of fewer than 2 dims."""
    if len(shape) < 2:
        return None
    axes = tuple(range(len(shape)))
    if variable is not None and variable.keras_shape is None and variable.keras_axes is not None and \
            len(variable.keras_axes) == len(shape):
        axes = tuple(int(a) for a in variable.keras_axes)
    return axes[-1], axes[-2]


def _rms(x):
    return ops.sqrt(ops.mean(ops.square(x)))


@register_builtin
class Adafactor(Optimizer):
    name = "adafactor"
    slot_names = ("row_moment", "column_moment", "velocity")
    takes_variable = True

    def __init__(self, learning_rate=0.001, beta_2_decay=-0.8, epsilon_1=1e-30, epsilon_2=1e-3, clip_threshold=1.0,
                 relative_step=True, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_2_decay = check_number("beta_2_decay", beta_2_decay)
        self.epsilon_1 = check_number("epsilon_1", epsilon_1, 0.0)
        self.epsilon_2 = check_number("epsilon_2", epsilon_2, 0.0)
        self.clip_threshold = check_number("clip_threshold", clip_threshold, 0.0, low_open=True)
        # (Keras's step size is min(lr, 1 / sqrt(t)) whichever it is: kept for the config)
        self.relative_step = check_bool("relative_step", relative_step)

    def scalars(self):
        t = self.iterations + 1
        lr = self.learning_rate
        rho = min(lr, 1.0 / math.sqrt(t))
        beta = 1.0 - float(t) ** self.beta_2_decay
        return np.array([lr, self.weight_decay or 0.0, rho, beta], dtype=np.float32)

    def update(self, param, grad, slots, scalars, variable=None):
        shape = tuple(int(d) for d in param.shape)
        w = self.decay(param, scalars)
        rho, beta = scalar(scalars, 2), scalar(scalars, 3)
        keep = ops.scale_bias(beta, -1.0, 1.0)                       # 1 - b
        g = grad if grad.is_contiguous else ops.cont(grad)
        sq = ops.scale_bias(ops.sqr(g), 1.0, self.epsilon_1)
        axes = _factored_axes(variable, shape)
        outs = []
        if axes is None:
            v_new = ops.add(ops.mul(slots["velocity"], beta), ops.mul(sq, keep))
        else:
            a_r, a_c = axes
            r, c = slots["row_moment"], slots["column_moment"]
            r_new = ops.add(ops.mul(r, beta), ops.mul(ops.broadcast_to(ops.mean(sq, axis=a_r, keepdims=True), shape),
                                                      keep))
            c_new = ops.add(ops.mul(c, beta), ops.mul(ops.broadcast_to(ops.mean(sq, axis=a_c, keepdims=True), shape),
                                                      keep))
            r_new, c_new = ops.cont(r_new), ops.cont(c_new)
            outs += [ops.cpy(r_new, r), ops.cpy(c_new, c)]
            scale = ops.broadcast_to(ops.mean(r_new, axis=a_c, keepdims=True), shape)
            v_new = ops.mul(ops.div(r_new, scale), c_new)
        v_new = ops.cont(v_new)
        outs.append(ops.cpy(v_new, slots["velocity"]))
        u = ops.div(g, ops.sqrt(v_new))
        clip = ops.maximum(ops.scale(_rms(u), 1.0 / self.clip_threshold), 1.0)
        alpha = ops.mul(ops.maximum(_rms(param), self.epsilon_2), rho)
        step = ops.mul(ops.div(u, ops.reshape(clip, (1,))), ops.reshape(alpha, (1,)))
        outs.append(ops.cpy(ops.sub(w, step), param))
        return outs

    def get_config(self):
        c = super().get_config()
        c.update(beta_2_decay=self.beta_2_decay, epsilon_1=self.epsilon_1, epsilon_2=self.epsilon_2,
                 clip_threshold=self.clip_threshold, relative_step=self.relative_step)
        return c
