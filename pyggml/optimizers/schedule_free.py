"""Schedule-Free AdamW (Defazio et al., 2024), as Keras 3 defines it.

The weights the model sees are ``y``; the optimizer keeps ``z`` (the slot ``momentum``, starting
at the weights' values) where Adam's steps land, and the average ``x`` is recovered from ``y``
and ``z``.  At step t, with ``lr`` warmed up linearly over ``warmup_steps``:
``v = beta_2 v + (1 - beta_2) g^2``, ``z_new = z - lr g / (sqrt(v / (1 - beta_2^t)) + epsilon)``,
``x = (y - (1 - beta_1) z) / beta_1``, ``x_new = (1 - 1/t) x + z_new / t`` and
``y_new = (1 - beta_1) z_new + beta_1 x_new``.  No learning-rate schedule is needed: the
averaging plays its part."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_fraction, check_int, check_number
from pyggml.optimizers.optimizer import Optimizer, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["ScheduleFreeAdamW"]


@register_builtin
class ScheduleFreeAdamW(Optimizer):
    name = "schedule_free_adamw"
    slot_names = ("momentum", "velocity")

    def __init__(self, learning_rate=0.0025, beta_1=0.9, beta_2=0.999, epsilon=1e-8, warmup_steps=0, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1 = check_fraction("beta_1", beta_1)
        if self.beta_1 == 0:
            raise ValueError("ScheduleFreeAdamW: beta_1 must be above 0 (the average is recovered by dividing by it)")
        self.beta_2 = check_fraction("beta_2", beta_2)
        self.epsilon = check_number("epsilon", epsilon, 0.0)
        self.warmup_steps = check_int("warmup_steps", warmup_steps, low=0)

    def slot_initial_value(self, slot):
        return "variable" if slot == "momentum" else 0.0          # z starts at the weights

    def scalars(self):
        t = self.iterations + 1
        lr = self.learning_rate
        if self.warmup_steps:
            lr *= min(t / self.warmup_steps, 1.0)
        # the last: the rate without warmup, which Keras's weight decay takes
        return np.array([lr, self.weight_decay or 0.0, 1.0 / (1.0 - self.beta_2 ** t), 1.0 / t, self.learning_rate],
                        dtype=np.float32)

    def update(self, param, grad, slots, scalars):
        b1, b2 = self.beta_1, self.beta_2
        z_slot, v_slot = slots["momentum"], slots["velocity"]
        g = grad if grad.is_contiguous else ops.cont(grad)
        z = ops.scale(z_slot, 1.0)               # z read before its slot is written (the write depends on it)
        y = self.decay(param, scalars, lr_index=4)
        v_new = ops.add(ops.scale(v_slot, b2), ops.scale(ops.sqr(g), 1.0 - b2))
        denom = ops.scale_bias(ops.sqrt(ops.mul(v_new, scalar(scalars, 2))), 1.0, self.epsilon)
        z_new = ops.sub(z, ops.mul(ops.div(g, denom), scalar(scalars, 0)))
        x = ops.scale(ops.sub(y, ops.scale(z, 1.0 - b1)), 1.0 / b1)
        w = scalar(scalars, 3)                                                   # 1 / t
        x_new = ops.add(x, ops.mul(ops.sub(z_new, x), w))                        # (1 - 1/t) x + z_new / t
        y_new = ops.add(ops.scale(z_new, 1.0 - b1), ops.scale(x_new, b1))
        return [ops.cpy(v_new, v_slot), ops.cpy(ops.cont(z_new), z_slot), ops.cpy(ops.cont(y_new), param)]

    def get_config(self):
        c = super().get_config()
        c.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon, warmup_steps=self.warmup_steps)
        return c
