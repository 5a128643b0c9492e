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

``dropout`` / ``recurrent_dropout`` (Keras's, while training): masks drawn once
per call and shared by every step, on the inputs (batch, features) and on the
state the recurrent kernel sees (batch, units).  As Keras: with
``recurrent_dropout`` each gate has masks of its own (Keras's implementation 1:
the gate's part of the kernels multiplies its own masked copy); with
``dropout`` alone one input mask serves all gates.

``return_state`` (Keras's): the call returns ``[output, *final_state]`` (LSTM: h
and c; GRU and SimpleRNN: h).  ``layer(x, initial_state=[...])`` starts from the
given states instead of zeros (they become inputs of the call, so gradients
reach them: an encoder's states feeding a decoder train both); a list ``[x,
*states]`` as the inputs means the same.  ``unroll`` is accepted: the graph is
always unrolled.  ``stateful=True`` (Keras's): each row's final state is its initial state
in the next batch (``stateful.py``).

The per-step maths (arguments, weights, dropout, the cell) is ``CellMath``: the
layers here and the cells of ``cells.py`` (``LSTMCell``, ...) share it, so
``RNN(LSTMCell(n))`` builds the graph ``LSTM(n)`` builds.
"""

import numpy as np

from pyggml import _scope, activations, initializers, ops
from pyggml._validation import check_bool, check_fraction, check_positive_int, host
from pyggml.core import ops as core_ops
from pyggml.layers._helpers import contiguous, fused, set_weight_options, weight_options_config
from pyggml.layers._keras_weights import KerasKernel
from pyggml.layers.layer import Layer
from pyggml.layers.recurrent.stateful import Stateful

__all__ = ["CellView", "BaseRNN", "CellMath", "TakesInitialState", "SequenceMask", "padding_mask", "stack_steps", "stack_fused"]

_OPTIONS = ("kernel_regularizer", "recurrent_regularizer", "bias_regularizer", "kernel_constraint",
            "recurrent_constraint", "bias_constraint")


def _several(shape):
    """Whether shape is a list of shapes (x's, then the states') rather than one shape."""
    return isinstance(shape, (list, tuple)) and bool(shape) and isinstance(shape[0], (list, tuple))


def stack_steps(hs):
    """The per-step (batch, units) outputs as one (batch, steps, units) tensor.

    Blocks are joined pairwise, time-major, with acc (which trains): placing
    each step into the whole output would copy it once per step (memory
    quadratic in the steps); pairwise joins copy each step log2(steps) times."""
    steps, (batch, units) = len(hs), hs[0].shape
    block = batch * units
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
    seq = ops.reshape(parts[0][0], (steps, batch, units))
    return ops.permute_axes(seq, (1, 0, 2))


def stack_fused(hs):
    """The per-step (batch, units) outputs as one (batch, steps, units) tensor: concat
    along the steps in a balanced tree (each step copied log2(steps) times)."""
    batch, units = hs[0].shape
    parts = [ops.reshape(h, (batch, 1, units)) for h in hs]
    while len(parts) > 1:
        joined = [ops.concat(a, b, 1) for a, b in zip(parts[0::2], parts[1::2])]
        if len(parts) % 2:
            joined.append(parts[-1])
        parts = joined
    return parts[0]


def padding_mask(mask, batch, steps, what):
    """A padding mask as a contiguous (batch, steps) tensor, its shape checked."""
    m = contiguous(ops.as_tensor(mask))
    if tuple(m.shape) not in ((batch, steps), (batch, steps, 1)):
        raise ValueError(f"{what}: mask must have shape (batch, steps) = {(batch, steps)}, got {tuple(m.shape)}")
    return ops.reshape(m, (batch, steps))


class SequenceMask:
    """The output mask of a recurrent layer: the sequence's with return_sequences, none for
    the states (a base of BaseRNN and RNN)."""

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]                        # the sequence's; the states have none
        out = mask if self.return_sequences else None
        return [out] + [None] * self.n_states if self.return_state else out


class TakesInitialState:
    """``layer(x, initial_state=[...])`` called as ``layer([x, *states])``, and built on x's
    shape alone: the weights depend on x only, so a layer built on x takes states later, as
    Keras (a base of the recurrent layers and of Bidirectional, before Layer)."""

    def __call__(self, *args, initial_state=None, **kwargs):
        if initial_state is None:
            return super().__call__(*args, **kwargs)
        states = list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
        if len(args) != 1 or isinstance(args[0], (list, tuple, dict)):
            raise TypeError(f"{type(self).__name__}: with initial_state, call the layer on one input "
                            f"(batch, steps, features)")
        return super().__call__([args[0]] + states, **kwargs)

    def _build_once(self, shape):
        return super()._build_once(shape[0] if _several(shape) else shape)


class CellMath:
    """A recurrent cell's arguments, weights and per-step maths (a base, before Layer, of
    the recurrent layers and of the cells).  Subclasses define ``n_gates``,
    ``initial_state`` and ``step_math`` (one step: the cell's gates)."""

    n_gates = 1
    n_states = 1                # h (LSTM: h and c)
    folded_bias = False         # bias_hh joins the input projection (added once, not once a step)
    # Keras's (features, G units) and (units, G units) views of weight_ih and weight_hh
    kernel = KerasKernel("weight_ih")
    recurrent_kernel = KerasKernel("weight_hh")

    def init_cell(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                  kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                  kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                  recurrent_constraint=None, bias_constraint=None, dropout=0.0, recurrent_dropout=0.0, seed=None):
        """Check and keep the cell's arguments (Keras's)."""
        self.dropout = check_fraction("dropout", dropout, high_open=True)
        self.recurrent_dropout = check_fraction("recurrent_dropout", recurrent_dropout, high_open=True)
        self.seed = seed
        self._rec_masks = None               # the recurrent dropout masks of the call being built
        set_weight_options(self, kernel_regularizer=kernel_regularizer, recurrent_regularizer=recurrent_regularizer,
                           bias_regularizer=bias_regularizer, kernel_constraint=kernel_constraint,
                           recurrent_constraint=recurrent_constraint, bias_constraint=bias_constraint)
        self.units = check_positive_int("units", units, 1 << 16)
        self._act = activations.get(activation)
        self.activation = activations.name_of(activation)
        self._rec_act = activations.get(recurrent_activation)
        self.recurrent_activation = activations.name_of(recurrent_activation)
        self.use_bias = bool(use_bias)
        for init in (kernel_initializer, recurrent_initializer, bias_initializer):
            initializers.get(init)          # unknown names fail here, not at compile
        self.kernel_initializer = kernel_initializer
        self.recurrent_initializer = recurrent_initializer
        self.bias_initializer = bias_initializer

    def cell_config(self):
        """The cell's arguments as Keras's config keys."""
        cfg = dict(units=self.units, activation=self.activation, recurrent_activation=self.recurrent_activation,
                   use_bias=self.use_bias)
        cfg.update(weight_options_config(self, _OPTIONS))
        cfg.update(dropout=self.dropout, recurrent_dropout=self.recurrent_dropout)
        cfg["seed"] = self.seed
        for k in ("kernel_initializer", "recurrent_initializer", "bias_initializer"):
            v = initializers.config_value(getattr(self, k))          # a name, or an Initializer serialized
            if v is not None:
                cfg[k] = v
        return cfg

    def bias_ih_initializer(self):
        return self.bias_initializer

    def build_weights(self, features):
        """weight_ih (G units, features), weight_hh (G units, units) and the biases."""
        g = self.n_gates * self.units
        self.weight_ih = self.add_weight("weight_ih", (g, features), self.kernel_initializer,
                                         regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.weight_hh = self.add_weight("weight_hh", (g, self.units), self.recurrent_initializer,
                                         regularizer=self.recurrent_regularizer, constraint=self.recurrent_constraint)
        # Keras's kernel (features, G units) and recurrent kernel (units, G units)
        self.weight_ih.keras_axes = self.weight_hh.keras_axes = (1, 0)
        if self.use_bias:
            self.bias_ih = self.add_weight("bias_ih", (g,), self.bias_ih_initializer())
            # a folded bias_hh joins bias_ih as Keras's one bias: zeros, so their sum is Keras's (GRU's two
            # biases are Keras's two rows, each drawn as Keras draws it)
            self.bias_hh = self.add_weight("bias_hh", (g,), "zeros" if self.folded_bias else self.bias_initializer)

    # --- Keras's bias: the regularizer and constraint take both biases together ---------
    def keras_bias(self, b_ih, b_hh):
        """Keras's bias from the two biases: their sum (one bias, as Keras's LSTM) when
        bias_hh is folded into the input projection, else the two as rows (GRU's (2, G units))."""
        if self.folded_bias:
            return ops.add(b_ih, b_hh)
        g = b_ih.shape[0]
        return ops.concatenate([ops.reshape(b_ih, (1, g)), ops.reshape(b_hh, (1, g))], axis=0)

    def extra_penalty_terms(self):
        if not self.use_bias or self.bias_regularizer is None or not self.built:
            return []
        reg = self.bias_regularizer
        return [([self.bias_ih, self.bias_hh], lambda a, b: reg(self.keras_bias(a, b)))]

    def extra_constraint_rules(self):
        if not self.use_bias or self.bias_constraint is None or not self.built:
            return []
        con = self.bias_constraint

        def rule(a, b):
            k = ops.as_tensor(con(self.keras_bias(a, b)))
            if self.folded_bias:
                return [ops.sub(k, b), None]              # bias_ih + bias_hh becomes Keras's projected bias
            g = a.shape[0]
            k = contiguous(k)
            return [ops.cont(ops.view(k, (g,))), ops.cont(ops.view(k, (g,), offset=g * 4))]
        return [([self.bias_ih, self.bias_hh], rule)]

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

    # --- dropout (training only) --------------------------------------------------------
    def dropout_masks(self, x, training):
        """(input masks, recurrent masks) for this call (x: the inputs or their shape): None, or
        lists of masks (one per gate with recurrent_dropout, as Keras's implementation 1; else
        one input mask)."""
        if not training or (self.dropout == 0 and self.recurrent_dropout == 0):
            return None, None
        b = _scope.require(type(self).__name__)
        shape = tuple(x) if isinstance(x, tuple) else tuple(x.shape)        # x, or its shape
        batch, feats = shape[0], shape[-1]
        # a sequence's masks (batch, 1, features) serve every step; one step's are (batch, features)
        in_shape = (batch, 1, feats) if len(shape) == 3 else (batch, feats)
        count = self.n_gates if self.recurrent_dropout > 0 else 1
        ins = [b.random_keep_mask(in_shape, self.dropout) for _ in range(count)] if self.dropout else None
        recs = [b.random_keep_mask((batch, self.units), self.recurrent_dropout) for _ in range(self.n_gates)] \
            if self.recurrent_dropout else None
        return ins, recs

    def masked_inputs(self, x, masks):
        """x, or x times the input mask, or the list of x times each gate's mask."""
        if masks is None:
            return x
        xc = contiguous(x)
        masked = [ops.mul(xc, m) for m in masks]                     # (batch, 1, features) over the steps
        return masked[0] if len(masked) == 1 else masked

    def _per_gate(self, weight, xs):
        """[x_g] -> the columns W_g x_g of each gate side by side (rows (n, G * units))."""
        u, cols = self.units, weight.shape[1]
        if len(xs) == 1:
            return ops.mul_mat(weight, xs[0])
        parts = [ops.mul_mat(ops.view(weight, (u, cols), offset=g * u * cols * 4), x) for g, x in enumerate(xs)]
        return ops.concatenate(parts, axis=-1)

    def ih_product(self, x):
        """W_ih x_t for every step, time-major: (steps * batch, G * units); x may be a
        list (a masked copy per gate).  One step's x (batch, features) gives (batch, G * units)."""
        xs = x if isinstance(x, list) else [x]
        if len(xs[0].shape) == 2:
            return self._per_gate(self.weight_ih, [contiguous(xg) for xg in xs])
        batch, steps, feats = xs[0].shape
        flat = []
        for xg in xs:
            xt = ops.permute_axes(contiguous(xg), (1, 0, 2)) if batch > 1 and steps > 1 else contiguous(xg)
            flat.append(ops.reshape(xt, (steps * batch, feats)))
        if len(flat) == 1:
            return ops.mul_mat(self.weight_ih, flat[0])
        return self._per_gate(self.weight_ih, flat)

    def hh_product(self, h):
        """W_hh h, the state dropped out by the call's recurrent masks (each gate's own)."""
        if not self._rec_masks:
            return ops.mul_mat(self.weight_hh, h)
        return self._per_gate(self.weight_hh, [ops.mul(h, m) for m in self._rec_masks])

    def input_projection(self, x):
        """W_ih x_t (+ b_ih) for every step at once, time-major: (steps * batch, G * units)."""
        p = self.ih_product(x)
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
        r = self.hh_product(h)
        if self.use_bias and not self.folded_bias:
            r = ops.add(r, self.bias_hh)
        return r

    def constants(self):
        """Constants every step uses (made once)."""
        return None

    def stack_steps(self, hs):
        return stack_steps(hs)

    def run_steps(self, inputs, mask, projected_in, states, go_backwards=False, return_sequences=False,
                  zero_output_for_mask=False):
        """(the output, the final state) of the sequence ``inputs`` (batch, steps, features).

        With a padding mask (batch, steps), a padded step leaves the state as it was
        (so the last real step's state comes out), as Keras does; its output in the
        sequence is the state carried (zeros with ``zero_output_for_mask``)."""
        if self.fused and fused():
            return self.fused_call(inputs, mask, projected_in, states, go_backwards, return_sequences,
                                   zero_output_for_mask)
        batch, steps, _ = inputs.shape
        p = self.input_projection(projected_in)
        state = self.initial_state(batch) if states is None else states
        consts = self.constants()
        step_masks = None
        if mask is not None:
            # time-major, so each step's (batch,) column is contiguous
            step_masks = ops.cont(ops.transpose(ops.as_tensor(mask)))
        outputs = []
        order = range(steps - 1, -1, -1) if go_backwards else range(steps)
        for t in order:
            new = self.step_math(self.step_rows(p, t, batch), state, consts)
            m = None
            if step_masks is not None:
                m = ops.reshape(ops.view(step_masks, (batch,), offset=t * batch * 4), (batch, 1))
                new = tuple(ops.add(old, ops.mul(ops.sub(n, old), m)) for n, old in zip(new, state))
            state = new
            if return_sequences:
                outputs.append(state[0] if m is None or not zero_output_for_mask else ops.mul(state[0], m))
        return (self.stack_steps(outputs) if return_sequences else state[0]), state

    # --- the fused path (CPU, default activations) -------------------------------------
    def fused_projection(self, x):
        """W_ih x_t + the biases the cell takes with it, every step at once, time-major:
        (steps * batch, G * units)."""
        p = self.ih_product(x)
        if self.use_bias:
            p = ops.bias_act(p, ops.add(self.bias_ih, self.bias_hh) if self.folded_bias else self.bias_ih)
        return p

    def stack_fused(self, hs):
        return stack_fused(hs)

    def fused_call(self, inputs, mask, projected_in=None, states=None, go_backwards=False, return_sequences=False,
                   zero_output_for_mask=False):
        batch, steps, _ = inputs.shape
        p = self.fused_projection(inputs if projected_in is None else projected_in)
        step_masks = None
        if mask is not None:
            m = padding_mask(mask, batch, steps, type(self).__name__)
            # time-major, so that each step's (batch,) column is contiguous
            step_masks = ops.cont(core_ops.transpose(m)) if batch > 1 and steps > 1 else m
        state = self.fused_initial_state(batch, mask is not None) if states is None else states
        outputs = []
        order = range(steps - 1, -1, -1) if go_backwards else range(steps)
        for k, t in enumerate(order):
            m = None if step_masks is None else ops.view(step_masks, (batch,), offset=t * batch * 4)
            # (first: the state is zero, and so is its projection)
            state = self.fused_cell(self.step_rows(p, t, batch), state, m, k == 0 and states is None)
            if return_sequences:
                if m is not None and zero_output_for_mask:
                    outputs.append(ops.mul(state[0], ops.reshape(m, (batch, 1))))
                else:
                    outputs.append(state[0])
        return (self.stack_fused(outputs) if return_sequences else state[0]), state


class CellView:
    """Keras's ``lstm.cell``: the layer's cell, here the layer itself seen as one
    (``lstm.cell.kernel``, ``.units``, ``.state_size``: the layer's weights and arguments)."""

    __slots__ = ("_layer",)

    def __init__(self, layer):
        object.__setattr__(self, "_layer", layer)

    @property
    def state_size(self):
        layer = self._layer
        return layer.units if layer.n_states == 1 else [layer.units] * layer.n_states

    @property
    def output_size(self):
        return self._layer.units

    def __getattr__(self, name):
        return getattr(self._layer, name)

    def __setattr__(self, name, value):
        setattr(self._layer, name, value)

    def __repr__(self):
        return f"<{type(self._layer).__name__} {self._layer.name!r}'s cell>"


class BaseRNN(Stateful, TakesInitialState, SequenceMask, CellMath, Layer):
    """A recurrent layer over a sequence, with its cell's maths (CellMath) built in."""
    _config_activity_regularizer = True      # (Keras's config names it, None included)

    cell = property(CellView, doc="Keras's cell of the layer: a view of the layer's weights and arguments.")

    build_shape_rule = "last"        # a later call may have other lengths (Layer._fits_built)

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 return_sequences=False, go_backwards=False, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, dropout=0.0, recurrent_dropout=0.0, seed=None, return_state=False,
                 stateful=False, unroll=False, zero_output_for_mask=False, implementation=None, use_cudnn="auto",
                 **kwargs):
        super().__init__(**kwargs)
        self.init_stateful(check_bool("stateful", stateful))
        self.zero_output_for_mask = check_bool("zero_output_for_mask", zero_output_for_mask)
        # Keras's kernel choices (its implementation modes, cuDNN): one computation here, taken as given
        if implementation is not None and implementation not in (0, 1, 2):
            raise ValueError(f"implementation must be 1 or 2 (Keras's modes), got {implementation!r}")
        self.implementation = 2 if implementation is None else int(implementation)
        if use_cudnn not in ("auto", True, False):
            raise ValueError(f"use_cudnn must be 'auto', True or False, got {use_cudnn!r}")
        self.use_cudnn = use_cudnn
        self.return_state = bool(return_state)
        self.unroll = bool(unroll)             # Keras's; the graph here is unrolled either way
        self.init_cell(units, activation=activation, recurrent_activation=recurrent_activation, use_bias=use_bias,
                       kernel_initializer=kernel_initializer, recurrent_initializer=recurrent_initializer,
                       bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                       recurrent_regularizer=recurrent_regularizer, bias_regularizer=bias_regularizer,
                       kernel_constraint=kernel_constraint, recurrent_constraint=recurrent_constraint,
                       bias_constraint=bias_constraint, dropout=dropout, recurrent_dropout=recurrent_dropout,
                       seed=seed)
        self.return_sequences = bool(return_sequences)
        self.go_backwards = bool(go_backwards)

    # Keras's gate order as blocks of pyggml's (PyTorch's) order: pyggml's block j is Keras's
    # block keras_gates[j] (a GRU's r, z, n are Keras's r, z, h at 1, 0, 2); None: the same order
    keras_gates = None

    def set_weights(self, weights):
        """As Layer.set_weights; also Keras's own three arrays of this layer: kernel (features,
        G units), recurrent kernel (units, G units) and bias (G units; a GRU's (2, 3 units): the
        input and the recurrent biases), in Keras's gate order."""
        if isinstance(weights, (list, tuple)) and len(weights) == 3 and self.use_bias and \
                len(self.named_variables()) == 4:
            weights = self._from_keras_three(weights)
        elif isinstance(weights, (list, tuple)) and self.keras_gates is not None and \
                len(weights) == len(self.named_variables()):
            # one Keras array per weight (a GRU with reset_after=False or no bias): in Keras's gate order
            weights = self._gate_list()[1](weights)
        super().set_weights(weights)

    def get_weights(self):
        """As Layer.get_weights; by position (``kernel, recurrent_kernel, bias = lstm.get_weights()``)
        Keras's three arrays: the kernels in Keras's gate order, and the bias (units * gates,): the sum
        of pyggml's (PyTorch's) two biases, which compute the same; a GRU's (2, 3 units): both."""
        spec = self._keras_list()
        if spec is None:
            return super().get_weights()
        from pyggml.layers._keras_weights import LayerWeights
        return LayerWeights(self.named_variables(), keras_list=spec[:2])

    def _keras_list(self):
        """(to, back, length) of Keras's list, known without reading the values: an LSTM's three
        arrays for pyggml's four weights, or a GRU's weights one by one with their gate blocks in
        Keras's order; None where Keras's list is the weights one by one."""
        named = self.named_variables()
        if self.use_bias and len(named) == 4:
            return (self._to_keras_three, lambda arrays: {
                k: np.asarray(v, np.float32) for k, v in self._from_keras_three(arrays).items()}, 3)
        if self.keras_gates is not None:
            return self._gate_list() + (len(named),)
        return None

    def _gate_list(self):
        """(to, back) for LayerWeights: Keras's list of one array per weight, its gate blocks in
        Keras's order (pyggml's block j is Keras's keras_gates[j]), and the weights from it."""
        from pyggml.layers._keras_weights import from_keras_value, keras_value
        named = self.named_variables()
        u, g = self.units, self.n_gates
        back = [self.keras_gates.index(k) for k in range(g)]

        def blocks(a, order):
            a = np.asarray(a)
            if a.ndim == 0 or a.shape[-1] != g * u:
                return a
            return np.concatenate([a[..., j * u:(j + 1) * u] for j in order], axis=-1)

        def to(weights):
            return [blocks(keras_value(v, weights[n]), back) for n, v in named]

        def from_list(arrays):
            return {n: from_keras_value(v, blocks(np.asarray(host(a), np.float32), self.keras_gates),
                                        f"{self.name}.set_weights") for (n, v), a in zip(named, arrays)}
        return to, from_list

    def _to_keras_three(self, weights):
        u = self.units
        back = None if self.keras_gates is None else [self.keras_gates.index(k) for k in range(self.n_gates)]

        def order(a):              # pyggml's gate blocks along the last axis, into Keras's order
            if back is None:
                return np.ascontiguousarray(a)
            return np.concatenate([a[..., j * u:(j + 1) * u] for j in back], axis=-1)
        w_ih, w_hh, b_ih, b_hh = (np.asarray(weights[k]) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
        bias = np.stack([order(b_ih), order(b_hh)]) if self.keras_gates is not None else order(b_ih + b_hh)
        return [order(w_ih.T), order(w_hh.T), bias]

    def _from_keras_three(self, weights):
        u, g = self.units, self.n_gates
        kernel, recurrent, bias = (np.asarray(w, dtype=np.float64) for w in weights)
        who = f"{self.name}.set_weights"
        if kernel.ndim != 2 or kernel.shape[1] != g * u or recurrent.shape != (u, g * u):
            raise ValueError(f"{who}: Keras's kernels are (features, {g * u}) and ({u}, {g * u}), got {kernel.shape} "
                             f"and {recurrent.shape}")
        if bias.shape == (2, g * u):
            b_ih, b_hh = bias[0], bias[1]
        elif bias.shape == (g * u,) and self.keras_gates is None:
            b_ih, b_hh = bias, np.zeros(g * u)
        else:
            raise ValueError(f"{who}: Keras's bias is ({g * u},)" + (f" or (2, {g * u})" if self.keras_gates is None
                                                                      else f" as (2, {g * u}) (reset_after=True: a "
                                                                           f"Keras GRU with reset_after=False computes "
                                                                           f"otherwise)") + f", got {bias.shape}")

        def order(a):              # the gate blocks along the last axis, into pyggml's order
            if self.keras_gates is None:
                return a
            return np.concatenate([a[..., k * u:(k + 1) * u] for k in self.keras_gates], axis=-1)
        return {"weight_ih": order(kernel).T, "weight_hh": order(recurrent).T, "bias_ih": order(b_ih),
                "bias_hh": order(b_hh)}

    # --- initial and final states ----------------------------------------------------------
    @property
    def state_sizes(self):
        """The size of each state (LSTM: h and c)."""
        return [self.units] * self.n_states

    def split_inputs(self, inputs):
        """(x, the initial states or None) from the call's inputs: x, or [x, *states]."""
        if not isinstance(inputs, (list, tuple)):
            return inputs, None
        if len(inputs) != 1 + self.n_states:
            raise ValueError(f"{type(self).__name__} takes {self.n_states} initial state"
                             f"{'s' if self.n_states > 1 else ''} ({'h and c' if self.n_states == 2 else 'h'}, "
                             f"each (batch, {self.units})), got {len(inputs) - 1}")
        return inputs[0], list(inputs[1:])

    def compute_output_shape(self, input_shape):
        x_shape, state_shapes = self.split_inputs(list(input_shape)) if _several(input_shape) else (input_shape, None)
        if len(x_shape) != 3:
            raise ValueError(f"{type(self).__name__} expects inputs of shape (steps, features), "
                             f"got {tuple(x_shape[1:])}")
        for s in state_shapes or ():
            if tuple(s[1:]) != (self.units,):
                raise ValueError(f"{type(self).__name__}: an initial state must have shape (batch, "
                                 f"{self.units}), got {tuple(s)}")
        out = (x_shape[0], x_shape[1], self.units) if self.return_sequences else (x_shape[0], self.units)
        if self.return_state:
            return [out] + [(x_shape[0], self.units)] * self.n_states
        return out

    def build(self, input_shape):
        self.compute_output_shape(input_shape)
        self.build_weights(input_shape[-1])

    def call(self, inputs, training=None, mask=None):
        """With a padding mask (batch, steps), a padded step leaves the state as it was
        (so the last real step's state comes out), as Keras does."""
        inputs, states = self.split_inputs(inputs)
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        if states is not None:
            batch = inputs.shape[0]
            for st in states:
                if tuple(st.shape) != (batch, self.units):
                    raise ValueError(f"{type(self).__name__}: an initial state must have shape "
                                     f"(batch, units) = {(batch, self.units)}, got {tuple(st.shape)}")
            states = tuple(contiguous(st) for st in states)
        kept = self.stateful_initial_states(inputs.shape[0])
        if states is None and kept is not None:
            states = tuple(kept)
        in_masks, self._rec_masks = self.dropout_masks(inputs, training)
        try:
            out, final = self.run_steps(inputs, mask, self.masked_inputs(inputs, in_masks), states,
                                        self.go_backwards, self.return_sequences, self.zero_output_for_mask)
        finally:
            self._rec_masks = None
        self.keep_final_states(final)
        return [out] + list(final) if self.return_state else out

    def get_config(self):
        cfg = super().get_config()
        cell = self.cell_config()
        cfg.update(units=cell.pop("units"), activation=cell.pop("activation"),
                   recurrent_activation=cell.pop("recurrent_activation"), use_bias=cell.pop("use_bias"),
                   return_sequences=self.return_sequences, go_backwards=self.go_backwards,
                   return_state=self.return_state, stateful=self.stateful, unroll=self.unroll,
                   zero_output_for_mask=self.zero_output_for_mask)
        cfg.update(cell)
        return cfg
