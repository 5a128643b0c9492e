"""Lamb (You et al., 2019), as Keras 3 defines it: Adam's bias-corrected step
scaled per weight by the trust ratio ||w|| / ||step||.

``m = b1 m + (1 - b1) g``; ``v = b2 v + (1 - b2) g^2``;
``u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon)``;
``w -= r lr u`` with ``r = ||w|| / ||u||`` when both norms are above 0, else 1
(``w`` after the decoupled weight decay, which Keras applies first)."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_fraction, check_number
from pyggml.optimizers.optimizer import Optimizer, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["Lamb"]


def _norm(x):
    """||x|| over every value, a 1-element tensor."""
    return ops.sqrt(ops.sum(ops.sqr(x if x.is_contiguous else ops.cont(x))))


@register_builtin
class Lamb(Optimizer):
    name = "lamb"
    slot_names = ("momentum", "velocity")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1 = check_fraction("beta_1", beta_1)
        self.beta_2 = check_fraction("beta_2", beta_2)
        self.epsilon = check_number("epsilon", epsilon, 0.0)

    def scalars(self):
        t = self.iterations + 1
        c1 = 1.0 / (1.0 - self.beta_1 ** t) if self.beta_1 < 1 else 1.0
        c2 = 1.0 / (1.0 - self.beta_2 ** t) if self.beta_2 < 1 else 1.0
        return np.array([self.learning_rate, self.weight_decay or 0.0, c1, c2], dtype=np.float32)

    def update(self, param, grad, slots, scalars):
        b1, b2 = self.beta_1, self.beta_2
        m, v = slots["momentum"], slots["velocity"]
        m_new = ops.add(ops.scale(m, b1), ops.scale(grad, 1.0 - b1))
        v_new = ops.add(ops.scale(v, b2), ops.scale(ops.sqr(grad), 1.0 - b2))
        denom = ops.scale_bias(ops.sqrt(ops.mul(v_new, scalar(scalars, 3))), 1.0, self.epsilon)
        step = ops.div(ops.mul(m_new, scalar(scalars, 2)), denom)
        w = self.decay(param, scalars)
        w_norm, u_norm = _norm(w), _norm(step)
        # r = w_norm / u_norm where both are > 0, else 1: with k = [w_norm > 0][u_norm > 0],
        # r = k w_norm / (u_norm + 1 - k) + 1 - k (no division by 0)
        k = ops.mul(ops.step(w_norm), ops.step(u_norm))
        one_minus_k = ops.scale_bias(k, -1.0, 1.0)
        ratio = ops.add(ops.div(ops.mul(k, w_norm), ops.add(u_norm, one_minus_k)), one_minus_k)
        inc = ops.mul(step, ops.mul(ratio, scalar(scalars, 0)))
        return [ops.cpy(m_new, m), ops.cpy(v_new, v), ops.cpy(ops.sub(w, inc), param)]

    def get_config(self):
        c = super().get_config()
        c.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
        return c
