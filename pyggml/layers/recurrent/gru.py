"""GRU as PyTorch's ``nn.GRU`` (gates r, z, n; Keras's ``reset_after=True``):
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) n + z h``."""

import numpy as np

from pyggml import ops
from pyggml.layers.recurrent.base_rnn import BaseRNN
from pyggml.saving.object_registration import register_builtin

__all__ = ["GRU"]


@register_builtin
class GRU(BaseRNN):
    n_gates = 3

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 return_sequences=False, reset_after=True, **kwargs):
        super().__init__(units, activation=activation, recurrent_activation=recurrent_activation,
                         use_bias=use_bias, return_sequences=return_sequences, **kwargs)
        if not reset_after:
            raise ValueError("GRU supports reset_after=True only (PyTorch's formulation, Keras's default)")
        self.reset_after = True

    def initial_state(self, batch):
        return (ops.constant(np.zeros((batch, self.units), dtype=np.float32)),)

    def cell(self, xp, state, consts):
        (h,) = state
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
        hp = ops.mul_mat(self.weight_hh, h)
        if self.use_bias:
            hp = ops.bias_act(hp, self.bias_hh)           # b_hn stays inside r * (...)
        return (ops.gru_cell(xp, hp, h, mask),)

    def get_config(self):
        cfg = super().get_config()
        cfg["reset_after"] = True
        return cfg
