"""LSTM (gates i, f, g, o as PyTorch's ``nn.LSTM``)."""

import numpy as np

from pyggml import initializers, ops
from pyggml.layers.recurrent.base_rnn import BaseRNN, CellMath
from pyggml.saving.object_registration import register_builtin

__all__ = ["LSTM", "LSTMMath", "lstm_bias_ih"]


class lstm_bias_ih:  # noqa: N801 - an initializer used as a function, as the others of its kind
    """Keras's unit_forget_bias: ``bias_initializer`` for the input gate (the first quarter) and
    the cell and output gates (the last half), ones for the forget gate (in bias_ih; bias_hh
    starts at zero, so their sum is Keras's single bias)."""

    def __init__(self, base="zeros"):
        self.base = base

    def __call__(self, shape, rng=None, layout=None):
        units = shape[0] // 4
        draw = initializers.drawer(self.base)
        first = np.asarray(draw((units,), rng, layout), dtype=np.float32).reshape(-1)
        rest = np.asarray(draw((2 * units,), rng, layout), dtype=np.float32).reshape(-1)
        return np.concatenate([first, np.ones(units, np.float32), rest])


class LSTMMath(CellMath):
    """LSTM's step (the layer's and LSTMCell's); ``unit_forget_bias`` is an attribute."""
    n_gates = 4
    n_states = 2
    folded_bias = True

    def bias_ih_initializer(self):
        return lstm_bias_ih(self.bias_initializer) if self.unit_forget_bias else self.bias_initializer

    def initial_state(self, batch):
        z = np.zeros((batch, self.units), dtype=np.float32)
        return (ops.constant(z), ops.constant(z))

    def constants(self):
        if not self.fused:
            return None
        s = np.ones(4 * self.units, dtype=np.float32)
        s[2 * self.units:3 * self.units] = 2.0
        return ops.constant(s)

    def step_math(self, xp, state, consts):
        h, c = state
        gates = ops.add(xp, self.recurrent_projection(h))                 # (batch, 4 units)
        if self.fused:
            # one sigmoid over all four gates, the g gate's inputs doubled:
            # tanh(a) = 2 sigmoid(2a) - 1 (half the graph of four separate passes)
            sg = self._rec_act(ops.mul(gates, consts))
            i, f, o = self.cols(sg, 0), self.cols(sg, 1), self.cols(sg, 3)
            cand = ops.scale_bias(self.gate(sg, 2), 2.0, -1.0)
        else:
            i = self._rec_act(self.gate(gates, 0))
            f = self._rec_act(self.gate(gates, 1))
            cand = self._act(self.gate(gates, 2))
            o = self._rec_act(self.gate(gates, 3))
        c = ops.add(ops.mul(f, c), ops.mul(i, cand))
        h = ops.mul(o, self._act(c))
        return (h, c)

    def fused_initial_state(self, batch, masked):
        # (h, c); h is only read (by the cell) with a mask
        z = ops.constant(np.zeros((batch, self.units), dtype=np.float32))
        return (z, z)

    def fused_cell(self, zx, state, mask, first):
        h, c = state
        b, u = h.shape
        if first:
            # the state starts at zero: so does its projection
            zh = ops.constant(np.zeros((b, 4 * u), dtype=np.float32))
        else:
            zh = self.hh_product(h)
        st = ops.lstm_cell(zx, zh, c, h if mask is not None else None, mask)       # (2, b, u): h; c
        return (ops.view(st, (b, u)), ops.view(st, (b, u), offset=b * u * 4))


@register_builtin
class LSTM(LSTMMath, BaseRNN):
    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 return_sequences=False, unit_forget_bias=True, **kwargs):
        super().__init__(units, activation=activation, recurrent_activation=recurrent_activation,
                         use_bias=use_bias, return_sequences=return_sequences, **kwargs)
        self.unit_forget_bias = bool(unit_forget_bias)

    def get_config(self):
        cfg = super().get_config()
        cfg["unit_forget_bias"] = self.unit_forget_bias
        return cfg
