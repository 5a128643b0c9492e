"""Adam and AdamW (ggml's fused AdamW step), Adamax-free Keras defaults as API.md fixes them.

The step is PyTorch's form: ``w -= lr * m_hat / (sqrt(v_hat) + epsilon)`` with
``m_hat = m / (1 - beta_1^t)`` and ``v_hat = v / (1 - beta_2^t)``; AdamW first
decays ``w`` by ``lr * weight_decay * w``.

``amsgrad=True`` (Keras's and PyTorch's AMSGrad) keeps the largest ``v`` seen so
far, ``v_max = max(v_max, v)``, and divides by ``sqrt(v_max / (1 - beta_2^t))``
instead (composed from ggml ops; the slot is ``v_max``)."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_bool, check_fraction, check_number
from pyggml.optimizers.optimizer import Optimizer, leading, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["Adam", "AdamW"]


@register_builtin
class Adam(Optimizer):
    name = "adam"

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-8, amsgrad=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.beta_1 = check_fraction("beta_1", beta_1)
        self.beta_2 = check_fraction("beta_2", beta_2)
        self.epsilon = check_number("epsilon", epsilon, 0.0)
        self.amsgrad = check_bool("amsgrad", amsgrad)

    @property
    def slot_names(self):
        return ("m", "v", "v_max") if self.amsgrad else ("m", "v")

    def scalars(self):
        t = self.iterations + 1
        b1h = 1.0 / (1.0 - self.beta_1 ** t) if self.beta_1 < 1 else 1.0
        b2h = 1.0 / (1.0 - self.beta_2 ** t) if self.beta_2 < 1 else 1.0
        # ggml's AdamW parameters: alpha, beta1, beta2, eps, wd, 1/(1 - beta1^t), 1/(1 - beta2^t)
        return np.array((self.learning_rate, self.beta_1, self.beta_2, self.epsilon, self.weight_decay or 0.0,
                         b1h, b2h), dtype=np.float32)

    def update(self, param, grad, slots, scalars):
        if not self.amsgrad:
            return [ops.opt_step_adamw(param, grad, slots["m"], slots["v"], leading(scalars, 7))]
        b1, b2 = self.beta_1, self.beta_2
        m, v, v_max = slots["m"], slots["v"], slots["v_max"]
        m_new = ops.add(ops.scale(m, b1), ops.scale(grad, 1.0 - b1))
        v_new = ops.add(ops.scale(v, b2), ops.scale(ops.sqr(grad), 1.0 - b2))
        vm_new = ops.add(v_new, ops.relu(ops.sub(v_max, v_new)))                # max(v_max, v)
        # lr * (m / (1 - beta_1^t)) / (sqrt(v_max / (1 - beta_2^t)) + epsilon)
        denom = ops.scale_bias(ops.sqrt(ops.mul(vm_new, scalar(scalars, 6))), 1.0, self.epsilon)
        inc = ops.mul(ops.div(ops.mul(m_new, scalar(scalars, 5)), denom), scalar(scalars, 0))
        w_new = ops.sub(self.decay(param, scalars), inc)
        return [ops.cpy(m_new, m), ops.cpy(v_new, v), ops.cpy(vm_new, v_max), ops.cpy(w_new, param)]

    def get_config(self):
        c = super().get_config()
        c.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
        if self.amsgrad:
            c["amsgrad"] = True
        return c


@register_builtin
class AdamW(Adam):
    name = "adamw"

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.01, amsgrad=False,
                 **kwargs):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, amsgrad=amsgrad, weight_decay=weight_decay, **kwargs)
