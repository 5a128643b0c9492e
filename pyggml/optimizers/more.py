"""Adamax, Adadelta and Lion, as Keras 3 defines them (composed from ggml ops)."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_fraction, check_number
from pyggml.optimizers.optimizer import Optimizer, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["Adamax", "Adadelta", "Lion"]


def _maximum(a, b):
    """Element-wise max(a, b) as b + relu(a - b)."""
    return ops.add(b, ops.relu(ops.sub(a, b)))


@register_builtin
class Adamax(Optimizer):
    """Adam with the infinity norm: ``m = b1 m + (1 - b1) g``; ``u = max(b2 u, |g|)``;
    ``w -= lr m / ((1 - b1^t) (u + epsilon))``."""

    name = "adamax"
    slot_names = ("m", "u")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1 = check_fraction("beta_1", beta_1)
        self.beta_2 = check_fraction("beta_2", beta_2)
        self.epsilon = check_number("epsilon", epsilon, 0.0)

    def scalars(self):
        t = self.iterations + 1
        c = 1.0 / (1.0 - self.beta_1 ** t) if self.beta_1 < 1 else 1.0
        return np.array([self.learning_rate, self.weight_decay or 0.0, self.learning_rate * c], dtype=np.float32)

    def update(self, param, grad, slots, scalars):
        b1, b2 = self.beta_1, self.beta_2
        m, u = slots["m"], slots["u"]
        m_new = ops.add(ops.scale(m, b1), ops.scale(grad, 1.0 - b1))
        u_new = _maximum(ops.scale(u, b2), ops.abs(grad))
        inc = ops.mul(ops.div(m_new, ops.scale_bias(u_new, 1.0, self.epsilon)), scalar(scalars, 2))
        return [ops.cpy(m_new, m), ops.cpy(u_new, u), ops.cpy(ops.sub(self.decay(param, scalars), inc), param)]

    def get_config(self):
        c = super().get_config()
        c.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
        return c


@register_builtin
class Adadelta(Optimizer):
    """``a = rho a + (1 - rho) g^2``; ``d = sqrt(D + eps) / sqrt(a + eps) g``;
    ``D = rho D + (1 - rho) d^2``; ``w -= lr d``."""

    name = "adadelta"
    slot_names = ("accumulated_grad", "accumulated_delta_var")

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.rho = check_fraction("rho", rho)
        self.epsilon = check_number("epsilon", epsilon, 0.0)

    def update(self, param, grad, slots, scalars):
        rho, eps = self.rho, self.epsilon
        a, dv = slots["accumulated_grad"], slots["accumulated_delta_var"]
        a_new = ops.add(ops.scale(a, rho), ops.scale(ops.sqr(grad), 1.0 - rho))
        delta = ops.mul(ops.div(ops.sqrt(ops.scale_bias(dv, 1.0, eps)), ops.sqrt(ops.scale_bias(a_new, 1.0, eps))),
                        grad)
        dv_new = ops.add(ops.scale(dv, rho), ops.scale(ops.sqr(delta), 1.0 - rho))
        inc = ops.mul(delta, scalar(scalars, 0))
        return [ops.cpy(a_new, a), ops.cpy(dv_new, dv), ops.cpy(ops.sub(self.decay(param, scalars), inc), param)]

    def get_config(self):
        c = super().get_config()
        c.update(rho=self.rho, epsilon=self.epsilon)
        return c


@register_builtin
class Lion(Optimizer):
    """``w -= lr sign(b1 m + (1 - b1) g)``; ``m = b2 m + (1 - b2) g`` (Chen et al., 2023)."""

    name = "lion"
    slot_names = ("m",)

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.99, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1 = check_fraction("beta_1", beta_1)
        self.beta_2 = check_fraction("beta_2", beta_2)
        if self.beta_1 <= 0:
            raise ValueError(f"Lion: beta_1 must be in (0, 1], got {beta_1}")

    def update(self, param, grad, slots, scalars):
        b1, b2 = self.beta_1, self.beta_2
        m = slots["m"]
        c = ops.add(ops.scale(m, b1), ops.scale(grad, 1.0 - b1))
        # b2 m + (1 - b2) g written from c, so the slot's copy comes after c read the old m
        m_new = ops.add(c, ops.add(ops.scale(m, b2 - b1), ops.scale(grad, b1 - b2)))
        inc = ops.mul(ops.sgn(c), scalar(scalars, 0))
        return [ops.cpy(ops.sub(self.decay(param, scalars), inc), param), ops.cpy(m_new, m)]

    def get_config(self):
        c = super().get_config()
        c.update(beta_1=self.beta_1, beta_2=self.beta_2)
        return c
