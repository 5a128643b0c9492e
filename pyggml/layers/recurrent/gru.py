"""GRU as PyTorch's ``nn.GRU`` (gates r, z, n; Keras's ``reset_after=True``):
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) n + z h``.

``reset_after=False`` (Keras's other form): the reset gate acts before the
product, ``n = tanh(W_in x + b_in + W_hn (r * h))``, and there is one bias,
``bias_ih`` (Keras's ``(3 units,)`` bias; no ``bias_hh``); composed from ggml
ops on every backend (the fused cell is reset_after's)."""

import numpy as np

from pyggml import ops
from pyggml.layers.recurrent.base_rnn import BaseRNN, CellMath
from pyggml.saving.object_registration import register_builtin

__all__ = ["GRU", "GRUMath"]


class GRUMath(CellMath):
    """GRU's step (the layer's and GRUCell's); ``reset_after`` is an attribute."""
    n_gates = 3

    @property
    def fused(self):
        return self.reset_after and super().fused

    def build_weights(self, features):
        if self.reset_after:
            return super().build_weights(features)
        use_bias, self.use_bias = self.use_bias, False
        try:
            super().build_weights(features)
        finally:
            self.use_bias = use_bias
        if use_bias:
            # Keras's one bias: its regularizer and constraint act on it as it is
            self.bias_ih = self.add_weight("bias_ih", (3 * self.units,), self.bias_initializer,
                                           regularizer=self.bias_regularizer, constraint=self.bias_constraint)

    def input_projection(self, x):
        p = self.ih_product(x)
        return ops.add(p, self.bias_ih) if self.use_bias else p

    def extra_penalty_terms(self):
        return super().extra_penalty_terms() if self.reset_after else []

    def extra_constraint_rules(self):
        return super().extra_constraint_rules() if self.reset_after else []

    def _reset_before_cell(self, xp, h):
        """reset_after=False: r and z from W_h h, the candidate from W_hn (r * h); each
        gate's state through its recurrent dropout mask."""
        u = self.units
        hs = [ops.mul(h, m) for m in self._rec_masks] if self._rec_masks else [h, h, h]
        w = [ops.view(self.weight_hh, (u, u), offset=g * u * u * 4) for g in range(3)]
        r = self._rec_act(ops.add(self.gate(xp, 0), ops.mul_mat(w[0], hs[0])))
        z = self._rec_act(ops.add(self.gate(xp, 1), ops.mul_mat(w[1], hs[1])))
        n = self._act(ops.add(self.gate(xp, 2), ops.mul_mat(w[2], ops.mul(r, hs[2]))))
        return (ops.add(n, ops.mul(z, ops.sub(h, n))),)

    def initial_state(self, batch):
        return (ops.constant(np.zeros((batch, self.units), dtype=np.float32)),)

    def step_math(self, xp, state, consts):
        (h,) = state
        if not self.reset_after:
            return self._reset_before_cell(xp, h)
        hp = self.recurrent_projection(h)                                  # (batch, 3 units)
        if self.fused:
            # r and z side by side: one sigmoid pass over both
            rz = self._rec_act(ops.add(self.cols(xp, 0, 2), self.cols(hp, 0, 2)))
            r, z = self.cols(rz, 0), self.cols(rz, 1)
            n = ops.add(self.cols(xp, 2), ops.mul(r, self.cols(hp, 2)))
        else:
            r = self._rec_act(ops.add(self.gate(xp, 0), self.gate(hp, 0)))
            z = self._rec_act(ops.add(self.gate(xp, 1), self.gate(hp, 1)))
            n = ops.add(self.gate(xp, 2), ops.mul(r, self.gate(hp, 2)))
        n = self._act(n)
        # h' = (1 - z) n + z h = n + z (h - n)
        return (ops.add(n, ops.mul(z, ops.sub(h, n))),)

    def fused_initial_state(self, batch, masked):
        return (ops.constant(np.zeros((batch, self.units), dtype=np.float32)),)

    def fused_cell(self, xp, state, mask, first):
        (h,) = state
        hp = self.hh_product(h)
        if self.use_bias:
            hp = ops.bias_act(hp, self.bias_hh)           # b_hn stays inside r * (...)
        return (ops.gru_cell(xp, hp, h, mask),)


@register_builtin
class GRU(GRUMath, BaseRNN):
    keras_gates = (1, 0, 2)          # Keras's z, r, h; pyggml's (PyTorch's) r, z, n

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 return_sequences=False, reset_after=True, **kwargs):
        super().__init__(units, activation=activation, recurrent_activation=recurrent_activation,
                         use_bias=use_bias, return_sequences=return_sequences, **kwargs)
        self.reset_after = bool(reset_after)

    def get_config(self):
        cfg = super().get_config()
        cfg["reset_after"] = self.reset_after
        return cfg
