"""RMSprop, Adagrad and Nadam, as Keras defines them (composed from ggml ops)."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_fraction, check_number
from pyggml.optimizers.optimizer import Optimizer, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["RMSprop", "Adagrad", "Nadam"]


@register_builtin
class RMSprop(Optimizer):
    """``v = rho v + (1 - rho) g^2``; ``w -= lr g / sqrt(v + epsilon)`` (centered:
    ``v - mean_g^2``); with momentum the step goes through a velocity."""

    name = "rmsprop"

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.rho = check_fraction("rho", rho)
        self.momentum = check_fraction("momentum", momentum)
        self.epsilon = check_number("epsilon", epsilon, 0.0)
        self.centered = bool(centered)

    @property
    def slot_names(self):
        return ("velocity",) + (("average_gradient",) if self.centered else ()) + \
            (("momentum",) if self.momentum > 0 else ())

    def update(self, param, grad, slots, scalars):
        rho, lr = self.rho, scalar(scalars, 0)
        v = slots["velocity"]
        v_new = ops.add(ops.scale(v, rho), ops.scale(ops.sqr(grad), 1.0 - rho))
        out = [ops.cpy(v_new, v)]
        denom = v_new
        if self.centered:
            a = slots["average_gradient"]
            a_new = ops.add(ops.scale(a, rho), ops.scale(grad, 1.0 - rho))
            out.append(ops.cpy(a_new, a))
            denom = ops.sub(v_new, ops.sqr(a_new))
        inc = ops.div(ops.mul(grad, lr), ops.sqrt(ops.scale_bias(denom, 1.0, self.epsilon)))
        if self.momentum > 0:
            m = slots["momentum"]
            m_new = ops.add(ops.scale(m, self.momentum), inc)
            out.append(ops.cpy(m_new, m))
            inc = m_new
        out.append(ops.cpy(ops.sub(self.decay(param, scalars), inc), param))
        return out

    def get_config(self):
        c = super().get_config()
        c.update(rho=self.rho, momentum=self.momentum, epsilon=self.epsilon, centered=self.centered)
        return c


@register_builtin
class Adagrad(Optimizer):
    """``acc += g^2``; ``w -= lr g / sqrt(acc + epsilon)``; acc starts at
    ``initial_accumulator_value``."""

    name = "adagrad"
    slot_names = ("accumulator",)

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.initial_accumulator_value = check_number("initial_accumulator_value", initial_accumulator_value, 0.0)
        self.epsilon = check_number("epsilon", epsilon, 0.0)

    def slot_initial_value(self, slot):
        return self.initial_accumulator_value

    def update(self, param, grad, slots, scalars):
        acc = slots["accumulator"]
        acc_new = ops.add(acc, ops.sqr(grad))
        inc = ops.div(ops.mul(grad, scalar(scalars, 0)), ops.sqrt(ops.scale_bias(acc_new, 1.0, self.epsilon)))
        return [ops.cpy(acc_new, acc), ops.cpy(ops.sub(self.decay(param, scalars), inc), param)]

    def get_config(self):
        c = super().get_config()
        c.update(initial_accumulator_value=self.initial_accumulator_value, epsilon=self.epsilon)
        return c


@register_builtin
class Nadam(Optimizer):
    """Adam with Nesterov momentum and Keras's momentum schedule (decay 0.96)."""

    name = "nadam"
    slot_names = ("m", "v")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1 = check_fraction("beta_1", beta_1)
        self.beta_2 = check_fraction("beta_2", beta_2)
        self.epsilon = check_number("epsilon", epsilon, 0.0)

    def _mu(self, step):
        # Keras 3's schedule, 0.96 to the step (PyTorch's NAdam takes 0.96 to 0.004 x the step)
        return self.beta_1 * (1.0 - 0.5 * 0.96 ** step)

    def _u_product(self, t):
        """prod_{s <= t} mu(s), kept from one step to the next."""
        cache = self.__dict__.setdefault("_u_cache", [0, 1.0])
        if cache[0] > t:
            cache[:] = [0, 1.0]
        while cache[0] < t:
            cache[0] += 1
            cache[1] *= self._mu(cache[0])
        return cache[1]

    def scalars(self):
        t = self.iterations + 1
        u_t = self._u_product(t)
        u_next = u_t * self._mu(t + 1)
        c_m = self._mu(t + 1) / (1.0 - u_next)
        c_g = (1.0 - self._mu(t)) / (1.0 - u_t)
        c_v = 1.0 / (1.0 - self.beta_2 ** t) if self.beta_2 < 1 else 1.0
        return np.array([self.learning_rate, self.weight_decay or 0.0, c_m, c_g, c_v], dtype=np.float32)

    def update(self, param, grad, slots, scalars):
        b1, b2 = self.beta_1, self.beta_2
        m, v = slots["m"], slots["v"]
        m_new = ops.add(ops.scale(m, b1), ops.scale(grad, 1.0 - b1))
        v_new = ops.add(ops.scale(v, b2), ops.scale(ops.sqr(grad), 1.0 - b2))
        m_hat = ops.add(ops.mul(m_new, scalar(scalars, 2)), ops.mul(grad, scalar(scalars, 3)))
        denom = ops.scale_bias(ops.sqrt(ops.mul(v_new, scalar(scalars, 4))), 1.0, self.epsilon)
        inc = ops.mul(ops.div(m_hat, denom), scalar(scalars, 0))
        return [ops.cpy(m_new, m), ops.cpy(v_new, v), ops.cpy(ops.sub(self.decay(param, scalars), inc), param)]

    def get_config(self):
        c = super().get_config()
        c.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
        return c
