"""Adamax, Adadelta, Lion and Ftrl, as Keras 3 defines them (composed from ggml ops)."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_fraction, check_number
from pyggml.optimizers.optimizer import Optimizer, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["Adamax", "Adadelta", "Lion", "Ftrl"]


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


@register_builtin
class Ftrl(Optimizer):
    """Follow the regularized leader (McMahan et al., 2013), Keras's form:
    ``n' = n + g^2``; ``z += g + 2 l2s w - (n'^-p - n^-p) / lr w``;
    ``w = (clip(z, -l1, l1) - z) / (n'^-p / lr + 2 (l2 + beta / (2 lr)))``,
    p = ``learning_rate_power``, n starting at ``initial_accumulator_value``.
    The learning rate must stay above 0."""

    name = "ftrl"
    slot_names = ("accumulator", "linear")

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 l2_shrinkage_regularization_strength=0.0, beta=0.0, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.learning_rate_power = check_number("learning_rate_power", learning_rate_power, high=0.0)
        self.initial_accumulator_value = check_number("initial_accumulator_value", initial_accumulator_value, 0.0)
        self.l1_regularization_strength = check_number("l1_regularization_strength", l1_regularization_strength, 0.0)
        self.l2_regularization_strength = check_number("l2_regularization_strength", l2_regularization_strength, 0.0)
        self.l2_shrinkage_regularization_strength = check_number(
            "l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength, 0.0)
        self.beta = check_number("beta", beta, 0.0)

    def slot_initial_value(self, slot):
        return self.initial_accumulator_value if slot == "accumulator" else 0.0

    def scalars(self):
        lr = self.learning_rate
        if lr <= 0:
            raise ValueError(f"Ftrl: the learning rate must be > 0, got {lr} at step {self.iterations}")
        l2 = self.l2_regularization_strength + self.beta / (2.0 * lr)
        return np.array([lr, self.weight_decay or 0.0, 1.0 / lr, 2.0 * l2], dtype=np.float32)

    def _pow(self, x):
        """x ** -learning_rate_power (x >= 0)."""
        p = -self.learning_rate_power
        if p == 0.5:
            return ops.sqrt(x)
        if p == 0:
            return ops.scale_bias(x, 0.0, 1.0)
        return ops.exp(ops.scale(ops.log(x), p))

    def update(self, param, grad, slots, scalars):
        n, z = slots["accumulator"], slots["linear"]
        w = self.decay(param, scalars)
        inv_lr = scalar(scalars, 2)
        g = grad
        if self.l2_shrinkage_regularization_strength:
            g = ops.add(grad, ops.scale(w, 2.0 * self.l2_shrinkage_regularization_strength))
        n_new = ops.add(n, ops.sqr(grad))
        p_new = self._pow(n_new)
        sigma = ops.mul(ops.sub(p_new, self._pow(n)), inv_lr)
        z_new = ops.sub(ops.add(z, g), ops.mul(sigma, w))
        quadratic = ops.add(ops.mul(p_new, inv_lr), ops.repeat(scalar(scalars, 3), p_new))
        l1 = self.l1_regularization_strength
        w_new = ops.div(ops.sub(ops.clamp(z_new, -l1, l1), z_new), quadratic)
        # the accumulator's copy must come after sigma read the old one: a (zero) term of sigma
        n_store = ops.add(n_new, ops.scale(sigma, 0.0))
        return [ops.cpy(w_new, param), ops.cpy(z_new, z), ops.cpy(n_store, n)]

    def get_config(self):
        c = super().get_config()
        c.update(learning_rate_power=self.learning_rate_power, initial_accumulator_value=self.initial_accumulator_value,
                 l1_regularization_strength=self.l1_regularization_strength,
                 l2_regularization_strength=self.l2_regularization_strength,
                 l2_shrinkage_regularization_strength=self.l2_shrinkage_regularization_strength, beta=self.beta)
        return c
