"""SimpleRNN (Keras's; PyTorch's ``nn.RNN``): ``h_t = activation(W_ih x_t + W_hh h_{t-1} + b)``.

Weights as PyTorch's module: ``weight_ih`` (units, features), ``weight_hh``
(units, units), ``bias_ih`` and ``bias_hh`` (units,); Keras's one bias is their
sum (bias_hh joins the input projection).  The cell is composed from ggml ops
on every backend (there is no fused cell op for it)."""

import numpy as np

from pyggml import ops
from pyggml.layers.recurrent.base_rnn import BaseRNN, CellMath
from pyggml.saving.object_registration import register_builtin

__all__ = ["SimpleRNN", "SimpleRNNMath"]


class SimpleRNNMath(CellMath):
    """SimpleRNN's step (the layer's and SimpleRNNCell's)."""
    n_gates = 1
    folded_bias = True

    @property
    def fused(self):
        return False

    def initial_state(self, batch):
        return (ops.constant(np.zeros((batch, self.units), dtype=np.float32)),)

    def step_math(self, xp, state, consts):
        (h,) = state
        return (self._act(ops.add(xp, self.recurrent_projection(h))),)


@register_builtin
class SimpleRNN(SimpleRNNMath, BaseRNN):
    def __init__(self, units, activation="tanh", use_bias=True, return_sequences=False, **kwargs):
        if "recurrent_activation" in kwargs:
            raise TypeError("SimpleRNN() has no recurrent_activation (it has no gates)")
        super().__init__(units, activation=activation, recurrent_activation="sigmoid", use_bias=use_bias,
                         return_sequences=return_sequences, **kwargs)

    def get_config(self):
        cfg = super().get_config()
        cfg.pop("recurrent_activation", None)
        if cfg.get("seed") is None:
            cfg.pop("seed", None)                 # (Keras's SimpleRNN config names no seed)
        return cfg
