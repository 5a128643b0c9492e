"""What LSTM and GRU share: arguments, weights, the unrolled loop.

Inputs are ``(batch, steps, features)``.  Weights follow PyTorch's modules of
the same kind, in PyTorch's layouts and gate orders: ``weight_ih``
``(G * units, features)``, ``weight_hh`` ``(G * units, units)``, ``bias_ih``
and ``bias_hh`` ``(G * units,)``.  Initialisation is Keras's: glorot-uniform
``weight_ih``, orthogonal ``weight_hh``, zero biases.  The state starts at zero.

The input projection is one mul_mat over all steps (time-major); each step
adds one mul_mat of the state and the cell's gate arithmetic.  The graph is
unrolled, so its size grows with the steps.

On the CPU, with the default activations (tanh, sigmoid), each step is one
fused cell op (pyggml's ``lstm_cell`` / ``gru_cell``, forward and backward;
a padding mask is the cell's own per-step mask) and the sequence output is
joined with ggml's concat in a balanced tree.  Elsewhere (or with other
activations) the cell is composed from element-wise ops and the sequence is
assembled with ``acc`` (which trains on every backend), pairwise.
"""

import numpy as np

from pyggml import activations, initializers, ops
from pyggml._validation import check_positive_int
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer

__all__ = ["BaseRNN"]


class BaseRNN(Layer):
    """Subclasses define ``n_gates``, ``initial_state`` and ``cell``."""

    n_gates = 1
    folded_bias = False         # bias_hh joins the input projection (added once, not once a step)

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 return_sequences=False, go_backwards=False, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units, 1 << 16)
        self._act = activations.get(activation)
        self.activation = activations.name_of(activation)
        self._rec_act = activations.get(recurrent_activation)
        self.recurrent_activation = activations.name_of(recurrent_activation)
        self.use_bias = bool(use_bias)
        self.return_sequences = bool(return_sequences)
        self.go_backwards = bool(go_backwards)
        for init in (kernel_initializer, recurrent_initializer, bias_initializer):
            initializers.get(init)          # unknown names fail here, not at compile
        self.kernel_initializer = kernel_initializer
        self.recurrent_initializer = recurrent_initializer
        self.bias_initializer = bias_initializer

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{type(self).__name__} expects inputs of shape (steps, features), "
                             f"got {tuple(input_shape[1:])}")
        if self.return_sequences:
            return (input_shape[0], input_shape[1], self.units)
        return (input_shape[0], self.units)

    def bias_ih_initializer(self):
        return self.bias_initializer

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        g = self.n_gates * self.units
        self.weight_ih = self.add_weight("weight_ih", (g, input_shape[-1]), self.kernel_initializer)
        self.weight_hh = self.add_weight("weight_hh", (g, self.units), self.recurrent_initializer)
        if self.use_bias:
            self.bias_ih = self.add_weight("bias_ih", (g,), self.bias_ih_initializer())
            self.bias_hh = self.add_weight("bias_hh", (g,), self.bias_initializer)

    # --- graph helpers -------------------------------------------------------------
    @property
    def fused(self):
        """Keras's default activations: the gates can share one sigmoid pass."""
        return self.activation == "tanh" and self.recurrent_activation == "sigmoid"

    def cols(self, t, k, n=1):
        """Columns [k * units, (k + n) * units) of a (batch, width) tensor with
        contiguous rows: a view (element-wise ops and their gradients take it)."""
        u = self.units
        return ops.view(t, (t.shape[0], n * u), strides=(t.nb[1], 4), offset=k * u * 4)

    def gate(self, t, k):
        """Columns [k * units, (k + 1) * units), contiguous (for any activation)."""
        return ops.cont(self.cols(t, k))

    def input_projection(self, x):
        """W_ih x_t (+ b_ih) for every step at once, time-major: (steps * batch, G * units)."""
        batch, steps, feats = x.shape
        xt = ops.permute_axes(contiguous(x), (1, 0, 2))                     # (steps, batch, features)
        p = ops.mul_mat(self.weight_ih, ops.reshape(xt, (steps * batch, feats)))
        if self.use_bias:
            p = ops.add(p, self.bias_ih)
            if self.folded_bias:
                p = ops.add(p, self.bias_hh)
        return p

    def step_rows(self, p, t, batch):
        """Step t's rows of the time-major projection (a contiguous view)."""
        width = self.n_gates * self.units
        return ops.view(p, (batch, width), offset=t * batch * width * 4)

    def recurrent_projection(self, h):
        r = ops.mul_mat(self.weight_hh, h)
        if self.use_bias and not self.folded_bias:
            r = ops.add(r, self.bias_hh)
        return r

    def constants(self):
        """Constants every step uses (made once)."""
        return None

    def stack_steps(self, hs):
        """The per-step (batch, units) outputs as one (batch, steps, units) tensor.

        Blocks are joined pairwise, time-major, with acc (which trains): placing
        each step into the whole output would copy it once per step (memory
        quadratic in the steps); pairwise joins copy each step log2(steps) times."""
        steps, batch = len(hs), hs[0].shape[0]
        block = batch * self.units
        zeros = ops.constant(np.zeros(steps * block, dtype=np.float32))
        parts = [(ops.reshape(h, (block,)), 1) for h in hs]                  # (flat block, steps in it)
        while len(parts) > 1:
            joined = []
            for (a, ka), (b, kb) in zip(parts[0::2], parts[1::2]):
                z = ops.view(zeros, ((ka + kb) * block,))
                z = ops.acc(ops.acc(z, a), b, offset=ka * block * 4)
                joined.append((z, ka + kb))
            if len(parts) % 2:
                joined.append(parts[-1])
            parts = joined
        seq = ops.reshape(parts[0][0], (steps, batch, self.units))
        return ops.permute_axes(seq, (1, 0, 2))

    def compute_mask(self, inputs, mask=None):
        return mask if self.return_sequences else None

    def call(self, inputs, training=None, mask=None):
        """With a padding mask (batch, steps), a padded step leaves the state as it was
        (so the last real step's state comes out), as Keras does."""
        if self.fused and fused():
            return self.fused_call(inputs, mask)
        batch, steps, _ = inputs.shape
        p = self.input_projection(inputs)
        state = self.initial_state(batch)
        consts = self.constants()
        step_masks = None
        if mask is not None:
            # time-major, so each step's (batch,) column is contiguous
            step_masks = ops.cont(ops.transpose(ops.as_tensor(mask)))
        outputs = []
        order = range(steps - 1, -1, -1) if self.go_backwards else range(steps)
        for t in order:
            new = self.cell(self.step_rows(p, t, batch), state, consts)
            if step_masks is not None:
                m = ops.reshape(ops.view(step_masks, (batch,), offset=t * batch * 4), (batch, 1))
                new = tuple(ops.add(old, ops.mul(ops.sub(n, old), m)) for n, old in zip(new, state))
            state = new
            if self.return_sequences:
                outputs.append(state[0])
        return self.stack_steps(outputs) if self.return_sequences else state[0]

    # --- the fused path (CPU, default activations) -------------------------------------
    def fused_projection(self, x):
        """W_ih x_t + the biases the cell takes with it, every step at once, time-major:
        (steps * batch, G * units)."""
        batch, steps, feats = x.shape
        xt = ops.permute_axes(contiguous(x), (1, 0, 2)) if batch > 1 and steps > 1 else contiguous(x)
        p = ops.mul_mat(self.weight_ih, ops.reshape(xt, (steps * batch, feats)))
        if self.use_bias:
            p = ops.bias_act(p, ops.add(self.bias_ih, self.bias_hh) if self.folded_bias else self.bias_ih)
        return p

    def stack_fused(self, hs):
        """The per-step (batch, units) outputs as one (batch, steps, units) tensor: concat
        along the steps in a balanced tree (each step copied log2(steps) times)."""
        batch = hs[0].shape[0]
        parts = [ops.reshape(h, (batch, 1, self.units)) for h in hs]
        while len(parts) > 1:
            joined = [ops.concat(a, b, 1) for a, b in zip(parts[0::2], parts[1::2])]
            if len(parts) % 2:
                joined.append(parts[-1])
            parts = joined
        return parts[0]

    def fused_call(self, inputs, mask):
        batch, steps, _ = inputs.shape
        p = self.fused_projection(inputs)
        step_masks = None
        if mask is not None:
            m = contiguous(ops.as_tensor(mask))
            if tuple(m.shape) not in ((batch, steps), (batch, steps, 1)):
                raise ValueError(f"{type(self).__name__}: mask must have shape (batch, steps) = "
                                 f"{(batch, steps)}, got {tuple(m.shape)}")
            # time-major, so that each step's (batch,) column is contiguous
            m = ops.reshape(m, (batch, steps))
            step_masks = ops.cont(ops.transpose(m)) if batch > 1 and steps > 1 else m
        state = self.fused_initial_state(batch, mask is not None)
        outputs = []
        order = range(steps - 1, -1, -1) if self.go_backwards else range(steps)
        for k, t in enumerate(order):
            m = None if step_masks is None else ops.view(step_masks, (batch,), offset=t * batch * 4)
            state = self.fused_cell(self.step_rows(p, t, batch), state, m, k == 0)
            if self.return_sequences:
                outputs.append(state[0])
        return self.stack_fused(outputs) if self.return_sequences else state[0]

    def get_config(self):
        cfg = super().get_config()
        cfg.update(units=self.units, activation=self.activation,
                   recurrent_activation=self.recurrent_activation, use_bias=self.use_bias,
                   return_sequences=self.return_sequences, go_backwards=self.go_backwards)
        for k in ("kernel_initializer", "recurrent_initializer", "bias_initializer"):
            v = getattr(self, k)
            if isinstance(v, str):
                cfg[k] = v
        return cfg
