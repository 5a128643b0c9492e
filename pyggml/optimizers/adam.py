"""Adam and AdamW (ggml's fused AdamW step), Adamax-free Keras defaults as API.md fixes them.

The step is PyTorch's form: ``w -= lr * m_hat / (sqrt(v_hat) + epsilon)`` with
``m_hat = m / (1 - beta_1^t)`` and ``v_hat = v / (1 - beta_2^t)``; AdamW first
decays ``w`` by ``lr * weight_decay * w``."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_fraction, check_number
from pyggml.optimizers.optimizer import Optimizer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Adam", "AdamW"]


@register_builtin
class Adam(Optimizer):
    name = "adam"
    slot_names = ("m", "v")

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-8, amsgrad=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if amsgrad:
            raise ValueError("Adam: amsgrad=True is not supported")
        self.beta_1 = check_fraction("beta_1", beta_1)
        self.beta_2 = check_fraction("beta_2", beta_2)
        self.epsilon = check_number("epsilon", epsilon, 0.0)

    def scalars(self):
        t = self.iterations + 1
        b1h = 1.0 / (1.0 - self.beta_1 ** t) if self.beta_1 < 1 else 1.0
        b2h = 1.0 / (1.0 - self.beta_2 ** t) if self.beta_2 < 1 else 1.0
        # ggml's AdamW parameters: alpha, beta1, beta2, eps, wd, 1/(1 - beta1^t), 1/(1 - beta2^t)
        return np.array((self.learning_rate, self.beta_1, self.beta_2, self.epsilon, self.weight_decay or 0.0,
                         b1h, b2h), dtype=np.float32)

    def update(self, param, grad, slots, scalars):
        return [ops.opt_step_adamw(param, grad, slots["m"], slots["v"], scalars)]

    def get_config(self):
        c = super().get_config()
        c.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon)
        return c


@register_builtin
class AdamW(Adam):
    name = "adamw"

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0.01, **kwargs):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, weight_decay=weight_decay, **kwargs)
