"""Recurrent layers: LSTM and GRU, unrolled over the steps in the graph.

Inputs are ``(batch, steps, features)``.  Weights follow PyTorch's modules of
the same kind, in PyTorch's layouts and gate orders:

- ``weight_ih`` ``(G * units, features)``, ``weight_hh`` ``(G * units, units)``,
  ``bias_ih`` and ``bias_hh`` ``(G * units,)``, with G = 4 gates i, f, g, o
  (LSTM) or G = 3 gates r, z, n (GRU).
- The GRU is PyTorch's (Keras' ``reset_after=True``):
  ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) n + z h``.

Initialisation is Keras': glorot-uniform ``weight_ih``, orthogonal
``weight_hh``, zero biases; the LSTM's ``unit_forget_bias=True`` puts the
forget gate's 1 in ``bias_ih`` (``bias_hh`` stays zero, so the sum is Keras'
single bias).  The state starts at zero.

ggml has no backward pass for tanh or sigmoid, so the gates go through
``pyggml.activations`` (built from ops that train).  The input projection is
one mul_mat over all steps (the LSTM's two biases added there, once), each
step one mul_mat of the state; with the default activations the gates share
one sigmoid pass (tanh(a) = 2 sigmoid(2a) - 1) and are read as column views,
other activations go gate by gate.  The graph is unrolled, so its size grows
with the steps: a training graph must fit ggml-opt's context (about 90 steps
for one LSTM or GRU layer today; predictions take far longer sequences).
The sequence output is assembled with ``acc`` (which trains; ggml's concat
does not).
"""

import numpy as np

from pyggml import activations, initializers
from pyggml.core import ops
from pyggml.layers.base import Layer
from pyggml.layers.core import _positive_int, _cont, permute_numpy

__all__ = ["LSTM", "GRU"]


def lstm_bias_ih(shape, rng=None, layout=None):
    """Zeros, except ones for the forget gate (the second quarter): Keras' unit_forget_bias."""
    b = np.zeros(shape, dtype=np.float32)
    units = shape[0] // 4
    b[units:2 * units] = 1.0
    return b


class _Recurrent(Layer):
    """Shared set-up of LSTM and GRU; subclasses define ``n_gates`` and ``_cell``."""

    n_gates = 1

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 return_sequences=False, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.units = _positive_int("units", units, 1 << 16)
        self._act = activations.get(activation)
        self.activation = activations.name_of(activation)
        self._rec_act = activations.get(recurrent_activation)
        self.recurrent_activation = activations.name_of(recurrent_activation)
        self.use_bias = bool(use_bias)
        self.return_sequences = bool(return_sequences)
        for what, init in (("kernel_initializer", kernel_initializer),
                           ("recurrent_initializer", recurrent_initializer),
                           ("bias_initializer", bias_initializer)):
            initializers.get(init)          # unknown names fail here, not at compile
        self.kernel_initializer = kernel_initializer
        self.recurrent_initializer = recurrent_initializer
        self.bias_initializer = bias_initializer

    def compute_output_shape(self, input_shape):
        if not isinstance(input_shape, tuple) or len(input_shape) != 2:
            raise ValueError(f"{type(self).__name__} expects inputs of shape (steps, features), "
                             f"got {input_shape}")
        steps = input_shape[0]
        return (steps, self.units) if self.return_sequences else (self.units,)

    def _bias_ih_initializer(self):
        return self.bias_initializer

    def build(self, input_shape):
        g = self.n_gates * self.units
        self.add_weight("weight_ih", (g, input_shape[-1]), self.kernel_initializer)
        self.add_weight("weight_hh", (g, self.units), self.recurrent_initializer)
        if self.use_bias:
            self.add_weight("bias_ih", (g,), self._bias_ih_initializer())
            self.add_weight("bias_hh", (g,), self.bias_initializer)

    # --- graph helpers -------------------------------------------------------------
    @property
    def _fused(self):
        """Keras' default activations: the gates can share one sigmoid pass."""
        return self.activation == "tanh" and self.recurrent_activation == "sigmoid"

    def _cols(self, g, t, k, n=1):
        """Columns [k * units, (k + n) * units) of a (batch, width) tensor with
        contiguous rows: a view (element-wise ops and their gradients take it)."""
        u = self.units
        return ops.view(t, (g.batch, n * u), strides=(t.nb[1], 4), offset=k * u * 4, ctx=g.ctx)

    def _gate(self, g, t, k):
        """Columns [k * units, (k + 1) * units), contiguous (for any activation)."""
        return ops.cont(self._cols(g, t, k), ctx=g.ctx)

    # recurrent-bias columns that can join the input projection (added once,
    # not once a step); the GRU's candidate bias must stay inside r * (...)
    _folded_bias = False

    def _input_projection(self, g, x):
        """W_ih x_t (+ b_ih) for every step at once, time-major: (steps * batch, G * units)."""
        steps, feats = self.input_shape
        xt = permute_numpy(_cont(x, g), (1, 0, 2), g)                      # (steps, batch, features)
        xt = ops.reshape(xt, (steps * g.batch, feats), ctx=g.ctx)
        p = ops.mul_mat(g.weight(self, "weight_ih"), xt, ctx=g.ctx)
        if self.use_bias:
            p = ops.add(p, g.weight(self, "bias_ih"), ctx=g.ctx)
            if self._folded_bias:
                p = ops.add(p, g.weight(self, "bias_hh"), ctx=g.ctx)
        return p

    def _step_rows(self, g, p, t):
        """Step t's rows of the time-major projection (a contiguous view)."""
        width = self.n_gates * self.units
        return ops.view(p, (g.batch, width), offset=t * g.batch * width * 4, ctx=g.ctx)

    def _recurrent_projection(self, g, h):
        r = ops.mul_mat(g.weight(self, "weight_hh"), h, ctx=g.ctx)
        if self.use_bias and not self._folded_bias:
            r = ops.add(r, g.weight(self, "bias_hh"), ctx=g.ctx)
        return r

    def _constants(self, g):
        """Constants every step uses (made once)."""
        return None

    def _stack_steps(self, g, hs):
        """The per-step (batch, units) outputs as one (batch, steps, units) tensor.

        Blocks are joined pairwise, time-major, with acc (which trains): placing
        each step into the whole output would copy it once per step (memory
        quadratic in the steps); pairwise joins copy each step log2(steps) times."""
        steps, block = len(hs), g.batch * self.units
        ctx = g.ctx
        zeros = g.const(np.zeros(steps * block, dtype=np.float32))
        parts = [(ops.reshape(h, (block,), ctx=ctx), 1) for h in hs]      # (flat block, steps in it)
        while len(parts) > 1:
            joined = []
            for (a, ka), (b, kb) in zip(parts[0::2], parts[1::2]):
                z = ops.view(zeros, ((ka + kb) * block,), ctx=ctx)
                z = ops.acc(ops.acc(z, a, ctx=ctx), b, offset=ka * block * 4, ctx=ctx)
                joined.append((z, ka + kb))
            if len(parts) % 2:
                joined.append(parts[-1])
            parts = joined
        seq = ops.reshape(parts[0][0], (steps, g.batch, self.units), ctx=ctx)
        return permute_numpy(seq, (1, 0, 2), g)

    def call(self, g, x, training):
        steps = self.input_shape[0]
        p = self._input_projection(g, x)
        state = self._initial_state(g)
        consts = self._constants(g)
        outputs = []
        for t in range(steps):
            state = self._cell(g, self._step_rows(g, p, t), state, consts)
            if self.return_sequences:
                outputs.append(state[0])
        return self._stack_steps(g, outputs) if self.return_sequences else state[0]

    def get_config(self):
        cfg = super().get_config()
        cfg.update(units=self.units, activation=self.activation,
                   recurrent_activation=self.recurrent_activation, use_bias=self.use_bias,
                   return_sequences=self.return_sequences)
        for k in ("kernel_initializer", "recurrent_initializer", "bias_initializer"):
            v = getattr(self, k)
            if isinstance(v, str):
                cfg[k] = v
        return cfg


class LSTM(_Recurrent):
    """Long short-term memory (gates i, f, g, o as PyTorch's ``nn.LSTM``)."""

    n_gates = 4
    _folded_bias = True

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 return_sequences=False, unit_forget_bias=True, **kwargs):
        super().__init__(units, activation=activation, recurrent_activation=recurrent_activation,
                         use_bias=use_bias, return_sequences=return_sequences, **kwargs)
        self.unit_forget_bias = bool(unit_forget_bias)

    def _bias_ih_initializer(self):
        return lstm_bias_ih if self.unit_forget_bias else self.bias_initializer

    def _initial_state(self, g):
        z = np.zeros((g.batch, self.units), dtype=np.float32)
        return (g.const(z), g.const(z))

    def _constants(self, g):
        if not self._fused:
            return None
        s = np.ones(4 * self.units, dtype=np.float32)
        s[2 * self.units:3 * self.units] = 2.0
        return g.const(s)

    def _cell(self, g, xp, state, consts):
        h, c = state
        ctx = g.ctx
        gates = ops.add(xp, self._recurrent_projection(g, h), ctx=ctx)        # (batch, 4 units)
        if self._fused:
            # one sigmoid over all four gates, the g gate's inputs doubled:
            # tanh(a) = 2 sigmoid(2a) - 1 (half the graph of four separate passes)
            sg = self._rec_act(ops.mul(gates, consts, ctx=ctx), ctx)
            i, f, o = self._cols(g, sg, 0), self._cols(g, sg, 1), self._cols(g, sg, 3)
            cand = ops.scale_bias(self._gate(g, sg, 2), 2.0, -1.0, ctx=ctx)
        else:
            i = self._rec_act(self._gate(g, gates, 0), ctx)
            f = self._rec_act(self._gate(g, gates, 1), ctx)
            cand = self._act(self._gate(g, gates, 2), ctx)
            o = self._rec_act(self._gate(g, gates, 3), ctx)
        c = ops.add(ops.mul(f, c, ctx=ctx), ops.mul(i, cand, ctx=ctx), ctx=ctx)
        h = ops.mul(o, self._act(c, ctx), ctx=ctx)
        return (h, c)

    def get_config(self):
        cfg = super().get_config()
        cfg["unit_forget_bias"] = self.unit_forget_bias
        return cfg


class GRU(_Recurrent):
    """Gated recurrent unit as PyTorch's ``nn.GRU`` (gates r, z, n; Keras'
    ``reset_after=True``)."""

    n_gates = 3

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 return_sequences=False, reset_after=True, **kwargs):
        super().__init__(units, activation=activation, recurrent_activation=recurrent_activation,
                         use_bias=use_bias, return_sequences=return_sequences, **kwargs)
        if not reset_after:
            raise ValueError("GRU supports reset_after=True only (PyTorch's formulation)")
        self.reset_after = True

    def _initial_state(self, g):
        return (g.const(np.zeros((g.batch, self.units), dtype=np.float32)),)

    def _cell(self, g, xp, state, consts):
        (h,) = state
        ctx = g.ctx
        hp = self._recurrent_projection(g, h)                                  # (batch, 3 units)
        if self._fused:
            # r and z side by side: one sigmoid pass over both
            rz = self._rec_act(ops.add(self._cols(g, xp, 0, 2), self._cols(g, hp, 0, 2), ctx=ctx), ctx)
            r, z = self._cols(g, rz, 0), self._cols(g, rz, 1)
            n = ops.add(self._cols(g, xp, 2), ops.mul(r, self._cols(g, hp, 2), ctx=ctx), ctx=ctx)
        else:
            r = self._rec_act(ops.add(self._gate(g, xp, 0), self._gate(g, hp, 0), ctx=ctx), ctx)
            z = self._rec_act(ops.add(self._gate(g, xp, 1), self._gate(g, hp, 1), ctx=ctx), ctx)
            n = ops.add(self._gate(g, xp, 2), ops.mul(r, self._gate(g, hp, 2), ctx=ctx), ctx=ctx)
        n = self._act(n, ctx)
        # h' = (1 - z) n + z h = n + z (h - n)
        h = ops.add(n, ops.mul(z, ops.sub(h, n, ctx=ctx), ctx=ctx), ctx=ctx)
        return (h,)

    def get_config(self):
        cfg = super().get_config()
        cfg["reset_after"] = True
        return cfg
