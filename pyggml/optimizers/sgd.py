"""SGD, with Keras's momentum and Nesterov momentum:
``v = momentum * v - lr * g``; ``w += v`` (or ``w += momentum * v - lr * g``)."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_fraction
from pyggml.optimizers.optimizer import Optimizer, leading, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["SGD"]


@register_builtin
class SGD(Optimizer):
    name = "sgd"

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.momentum = check_fraction("momentum", momentum)
        self.nesterov = bool(nesterov)

    @property
    def slot_names(self):
        return ("momentum",) if self.momentum > 0 else ()

    def scalars(self):
        return np.array([self.learning_rate, self.weight_decay or 0.0], dtype=np.float32)

    def update(self, param, grad, slots, scalars):
        if self.momentum == 0:
            # ggml's fused step: w = w * (1 - lr * wd) - lr * g
            return [ops.opt_step_sgd(param, grad, leading(scalars, 2))]
        lr = scalar(scalars, 0)
        v = slots["momentum"]
        step = ops.mul(grad, lr)
        v_new = ops.sub(ops.scale(v, self.momentum), step)
        move = ops.sub(ops.scale(v_new, self.momentum), step) if self.nesterov else v_new
        w_new = ops.add(self.decay(param, scalars), move)
        return [ops.cpy(v_new, v), ops.cpy(w_new, param)]

    def get_config(self):
        c = super().get_config()
        c.update(momentum=self.momentum, nesterov=self.nesterov)
        return c
