"""Muon (Keller Jordan, 2024; Liu et al., 2025), as Keras 3 defines it.

A 2-D weight (not an embedding's, not one of ``exclude_layers``) moves by the
orthogonalised momentum: ``m = momentum m + g``, ``G = g + momentum m``
(Nesterov) or ``m``; ``O`` = ``ns_steps`` quintic Newton-Schulz iterations on
``G / (||G||_F + 1e-7)`` (``A = X X^T``, ``X = a X + (b A + c A A) X``, on the
wide orientation); ``w -= lr O sqrt(max(rows, cols)) rms_rate`` (no factor with
``rms_rate=None``), after a decay by ``lr weight_decay w``.

Every other weight takes Keras's AdamW step: ``m, v`` as Adam's,
``w -= lr adam_lr_ratio sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + epsilon)``,
after a decay by ``lr adam_weight_decay w``.  (A weight's layout does not matter:
the orthogonalisation of a transposed matrix is the transposed result.)"""

import math
import re

import numpy as np

from pyggml import ops
from pyggml._validation import check_bool, check_fraction, check_int, check_number, is_number
from pyggml.optimizers.optimizer import Optimizer, scalar
from pyggml.saving.object_registration import register_builtin

__all__ = ["Muon"]


def _t(x):
    return ops.cont(ops.transpose(x))


def _optional(name, v, low=0.0):
    return None if v is None else check_number(name, v, low)


@register_builtin
class Muon(Optimizer):
    name = "muon"
    slot_names = ("momentum", "velocity")       # the velocity serves the AdamW weights only

    def __init__(self, learning_rate=0.001, adam_beta_1=0.9, adam_beta_2=0.999, adam_weight_decay=0.004,
                 epsilon=1e-7, weight_decay=0.004, exclude_layers=None, exclude_embeddings=True, muon_a=3.4445,
                 muon_b=-4.7750, muon_c=2.0315, adam_lr_ratio=1, momentum=0.95, ns_steps=5, nesterov=True,
                 rms_rate=0.2, **kwargs):
        super().__init__(learning_rate, weight_decay=weight_decay, **kwargs)
        self.adam_beta_1 = check_fraction("adam_beta_1", adam_beta_1)
        self.adam_beta_2 = check_fraction("adam_beta_2", adam_beta_2)
        self.adam_weight_decay = _optional("adam_weight_decay", adam_weight_decay)
        self.epsilon = check_number("epsilon", epsilon, 0.0)
        if exclude_layers is None:
            exclude_layers = []
        if isinstance(exclude_layers, str) or not isinstance(exclude_layers, (list, tuple)) or \
                not all(isinstance(k, str) for k in exclude_layers):
            raise TypeError(f"exclude_layers must be a list of strings (regular expressions), got {exclude_layers!r}")
        for k in exclude_layers:
            try:
                re.compile(k)
            except re.error as e:
                raise ValueError(f"exclude_layers: {k!r} is not a regular expression ({e})") from None
        self.exclude_layers = list(exclude_layers)
        self.exclude_embeddings = check_bool("exclude_embeddings", exclude_embeddings)
        self.muon_a = check_number("muon_a", muon_a)
        self.muon_b = check_number("muon_b", muon_b)
        self.muon_c = check_number("muon_c", muon_c)
        self.adam_lr_ratio = check_number("adam_lr_ratio", adam_lr_ratio, 0.0)
        self.momentum = check_fraction("momentum", momentum)
        self.ns_steps = check_int("ns_steps", ns_steps, 0, 100)
        self.nesterov = check_bool("nesterov", nesterov)
        if rms_rate is not None and not is_number(rms_rate):
            raise TypeError(f"rms_rate must be a number or None, got {rms_rate!r}")
        self.rms_rate = None if rms_rate is None else check_number("rms_rate", rms_rate, 0.0, low_open=True)

    def uses_adamw(self, name, shape):
        """True for a weight that takes the AdamW step: not 2-D, an embedding's (with
        exclude_embeddings), or a name that one of exclude_layers matches."""
        if len(shape) != 2:
            return True
        if self.exclude_embeddings and "embedding" in (name or "").lower():
            return True
        return any(re.search(k, name or "") for k in self.exclude_layers)

    def scalars(self):
        t = self.iterations + 1
        lr = self.learning_rate
        c1 = 1.0 - self.adam_beta_1 ** t
        alpha = lr * self.adam_lr_ratio * math.sqrt(1.0 - self.adam_beta_2 ** t) / c1 if c1 > 0 else 0.0
        # the learning rate, the base's weight-decay place (each kind decays by its own), the AdamW step size
        return np.array([lr, 0.0, alpha], dtype=np.float32)

    def _decayed(self, param, wd, scalars):
        if not wd:
            return param
        return ops.sub(param, ops.mul(ops.scale(param, wd), scalar(scalars, 0)))

    def update(self, param, grad, slots, scalars):
        if self.uses_adamw(param.name, tuple(param.shape)):
            return self._adamw(param, grad, slots, scalars)
        mu = self.momentum
        m = slots["momentum"]
        m_new = ops.add(ops.scale(m, mu), grad)
        g = ops.add(grad, ops.scale(m_new, mu)) if self.nesterov else m_new
        o = self._orthogonalised(g if g.is_contiguous else ops.cont(g))
        rows, cols = param.shape
        factor = math.sqrt(max(rows, cols)) * self.rms_rate if self.rms_rate is not None else 1.0
        inc = ops.mul(ops.scale(o, factor), scalar(scalars, 0))
        w = self._decayed(param, self.weight_decay, scalars)
        return [ops.cpy(m_new, m), ops.cpy(ops.sub(w, inc), param)]

    def _orthogonalised(self, g):
        a, b, c = self.muon_a, self.muon_b, self.muon_c
        tall = g.shape[0] > g.shape[1]
        x = _t(g) if tall else g
        norm = ops.sqrt(ops.sum(ops.sqr(x)))
        x = ops.div(x, ops.scale_bias(norm, 1.0, 1e-7))
        for _ in range(self.ns_steps):
            # ggml's mul_mat(p, q) is q @ p^T: A = X X^T and A A (A symmetric); then B X
            gram = ops.mul_mat(x, x)
            poly = ops.add(ops.scale(gram, b), ops.scale(ops.mul_mat(gram, gram), c))
            x = ops.add(ops.scale(x, a), ops.mul_mat(_t(x), poly))
        return _t(x) if tall else x

    def _adamw(self, param, grad, slots, scalars):
        b1, b2 = self.adam_beta_1, self.adam_beta_2
        m, v = slots["momentum"], slots["velocity"]
        m_new = ops.add(ops.scale(m, b1), ops.scale(grad, 1.0 - b1))
        v_new = ops.add(ops.scale(v, b2), ops.scale(ops.sqr(grad), 1.0 - b2))
        step = ops.div(ops.mul(m_new, scalar(scalars, 2)), ops.scale_bias(ops.sqrt(v_new), 1.0, self.epsilon))
        w = self._decayed(param, self.adam_weight_decay, scalars)
        return [ops.cpy(m_new, m), ops.cpy(v_new, v), ops.cpy(ops.sub(w, step), param)]

    def get_config(self):
        c = super().get_config()
        c["weight_decay"] = self.weight_decay          # its default is not None: None must survive a round trip
        c.update(adam_beta_1=self.adam_beta_1, adam_beta_2=self.adam_beta_2, epsilon=self.epsilon,
                 exclude_layers=list(self.exclude_layers), muon_a=self.muon_a, muon_b=self.muon_b,
                 muon_c=self.muon_c, adam_lr_ratio=self.adam_lr_ratio, momentum=self.momentum,
                 ns_steps=self.ns_steps, nesterov=self.nesterov, exclude_embeddings=self.exclude_embeddings,
                 adam_weight_decay=self.adam_weight_decay, rms_rate=self.rms_rate)
        return c
