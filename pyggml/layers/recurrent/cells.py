"""Keras's recurrent cells: one step of SimpleRNN, LSTM or GRU, for ``RNN(cell)``.

A cell is a layer with a ``state_size`` (an int, or a list of ints, one per
state) whose ``call(inputs, states, training=None)`` takes one step's inputs
(batch, features) and the states (a list, each (batch, size)) and returns
``(output, new_states)``.  ``LSTMCell``, ``GRUCell`` and ``SimpleRNNCell`` are
the layers' own steps (``CellMath``: the same arguments, weights, names and
maths), so ``RNN(LSTMCell(n))`` computes what ``LSTM(n)`` does with the same
weights (``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh`` in PyTorch's
layouts and gate orders).

``StackedRNNCells(cells)`` runs cells one above the other within each step:
each cell's output is the next one's input; its states are the cells' states
in order (``state_size`` is the list of the cells' ``state_size``).

Dropout (``dropout``, ``recurrent_dropout``, while training) draws its masks
once per sequence when the cell runs inside ``RNN``, as Keras; a cell called on
its own draws them for that call.
"""

import numpy as np

from pyggml import _eager
from pyggml.core import Tensor
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.layers.recurrent.base_rnn import CellMath
from pyggml.layers.recurrent.gru import GRUMath
from pyggml.layers.recurrent.lstm import LSTMMath
from pyggml.layers.recurrent.simple_rnn import SimpleRNNMath
from pyggml.layers.wrappers.wrapping import check_layer, serialize_layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["SimpleRNNCell", "LSTMCell", "GRUCell", "StackedRNNCells", "check_cell", "flat_state_sizes",
           "flatten_states", "structure_states", "call_cell", "output_size_of", "start_sequence", "end_sequence"]


# --- what RNN and StackedRNNCells need of any cell ------------------------------------------

MAX_STATE_SIZE = 1 << 20   # values per sample: a custom cell's 10**9 made a 7 GiB zero state


def flat_state_sizes(state_size, owner="RNN"):
    """A cell's ``state_size`` (an int, or a list of ints or of such lists) as a flat list of ints."""
    if isinstance(state_size, bool):
        state_size = None
    if isinstance(state_size, int):
        if state_size < 1:
            raise ValueError(f"{owner}: a cell's state_size must be positive, got {state_size}")
        if state_size > MAX_STATE_SIZE:
            raise ValueError(f"{owner}: a cell's state_size={state_size} is too large (at most {MAX_STATE_SIZE})")
        return [int(state_size)]
    if isinstance(state_size, (list, tuple)) and state_size:
        out = []
        for s in state_size:
            out.extend(flat_state_sizes(s, owner))
        return out
    raise ValueError(f"{owner}: a cell's state_size must be an int or a list of ints (one per state), "
                     f"got {state_size!r}")


def flatten_states(states):
    """A tensor or a (nested) list of tensors as a flat list."""
    if isinstance(states, (list, tuple)):
        out = []
        for s in states:
            out.extend(flatten_states(s))
        return out
    return [states]


def structure_states(flat, state_size):
    """The flat states as a cell's ``call`` takes them: a list with one entry per entry of
    ``state_size`` (a tensor for an int, a list for a list); an int state_size: [tensor]."""
    flat = list(flat)
    n = len(flat_state_sizes(state_size))
    if len(flat) != n:
        raise ValueError(f"a cell of state_size {state_size!r} takes {n} state{'s' if n > 1 else ''}, "
                         f"got {len(flat)}")

    def take(size):
        if isinstance(size, (list, tuple)):
            return [take(s) for s in size]
        return flat.pop(0)
    if isinstance(state_size, (list, tuple)):
        return [take(s) for s in state_size]
    return [take(state_size)]


def check_cell(owner, cell):
    """A cell (or its serialized form) with ``call`` and ``state_size``, as Keras checks."""
    if isinstance(cell, dict):
        cell = check_layer(owner, cell, "cell")
    if not callable(getattr(cell, "call", None)):
        raise ValueError(f"{owner}: a cell must have a call(inputs, states) method, got {cell!r}")
    if getattr(cell, "state_size", None) is None:
        raise ValueError(f"{owner}: a cell must have a state_size attribute (an int, or a list of ints, "
                         f"one per state), got {type(cell).__name__} without one")
    if not isinstance(cell, Layer):
        raise TypeError(f"{owner}: a cell must be a pyggml.layers.Layer (its weights are made with "
                        f"add_weight), got {type(cell).__name__}")
    flat_state_sizes(cell.state_size, owner)
    return cell


def output_size_of(cell):
    """The cell's output_size, or its first state's size (Keras's rule)."""
    size = getattr(cell, "output_size", None)
    if size is None:
        size = flat_state_sizes(cell.state_size)[0]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"{type(cell).__name__}: output_size must be a positive int, got {size!r}")
    return int(size)


def call_cell(cell, inputs, states, training):
    """One step of a cell: (output, the flat new states); built for the inputs' features first."""
    cell._build_once((None, inputs.shape[-1]))
    kwargs = {"training": training} if cell._accepts("training") else {}
    result = cell.call(inputs, states, **kwargs)
    if not isinstance(result, (list, tuple)) or len(result) != 2:
        raise ValueError(f"{type(cell).__name__}.call must return (output, new_states), got {type(result).__name__}")
    out, new = result
    return out, flatten_states(new)


def start_sequence(cell, batch, training):
    """Draw the dropout masks a built-in cell (or the cells of a stack) uses at every step."""
    if isinstance(cell, _Cell):
        cell.start_sequence(batch, training)
    elif isinstance(cell, StackedRNNCells):
        for sub in cell.cells:
            start_sequence(sub, batch, training)


def end_sequence(cell):
    if isinstance(cell, _Cell):
        cell.end_sequence()
    elif isinstance(cell, StackedRNNCells):
        for sub in cell.cells:
            end_sequence(sub)


def _is_bare_state(states):
    """True for one state given as itself (a tensor or an array), not in a list."""
    return isinstance(states, (Tensor, np.ndarray))


class _StepCall:
    """``cell(inputs, states)`` on tensors inside a layer's call: one step, as Keras's cells.
    A cell of one state (GRUCell, SimpleRNNCell) also takes that state bare, as Keras's
    ``states[0] if nested else states``; its new state then comes back bare too."""

    def __call__(self, *args, **kwargs):
        step = args + (kwargs["states"],) if len(args) == 1 and "states" in kwargs else args
        if len(step) == 2 and isinstance(step[0], (Tensor, np.ndarray)) and \
                (isinstance(step[1], (list, tuple)) or _is_bare_state(step[1])):
            inputs, states = step
            bare = _is_bare_state(states)
            if bare and not isinstance(self.state_size, int):
                raise ValueError(f"{type(self).__name__} has {len(flat_state_sizes(self.state_size))} states "
                                 f"(state_size={self.state_size!r}): give them as a list, not one tensor")
            training = kwargs.get("training")
            if isinstance(inputs, Tensor):
                out, new = call_cell(self, inputs, [states] if bare else list(states), training)
                new = structure_states(new, self.state_size)
            else:
                out, new = self._eager_step(inputs, flatten_states(states), bool(training or False))
            return out, (new[0] if bare else new)
        return super().__call__(*args, **kwargs)

    def _eager_step(self, inputs, states, training):
        """cell(x, states) on arrays: one step computed at once (output, new states)."""
        arrays = [np.asarray(a) for a in [inputs] + states]
        for a in arrays:
            if a.dtype == object or a.dtype.kind not in "biuf" or a.ndim != 2:
                raise ValueError(f"{type(self).__name__}(inputs, states) on arrays takes 2-D arrays of numbers "
                                 f"(batch, features) and (batch, size), got shape {a.shape}, dtype {a.dtype}")

        def step(x, *st):
            out, new = call_cell(self, x, structure_states(list(st), self.state_size), training)
            return [out] + list(new)
        res = _eager.evaluate(step, arrays, training=training)
        return res[0], structure_states(res[1:], self.state_size)


# --- the built-in cells ------------------------------------------------------------------------

class _Cell(_StepCall, CellMath, Layer):
    """One step of a built-in recurrent layer."""

    float_inputs = True

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0, recurrent_dropout=0.0, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.init_cell(units, activation=activation, recurrent_activation=recurrent_activation, use_bias=use_bias,
                       kernel_initializer=kernel_initializer, recurrent_initializer=recurrent_initializer,
                       bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                       recurrent_regularizer=recurrent_regularizer, bias_regularizer=bias_regularizer,
                       kernel_constraint=kernel_constraint, recurrent_constraint=recurrent_constraint,
                       bias_constraint=bias_constraint, dropout=dropout, recurrent_dropout=recurrent_dropout,
                       seed=seed)
        self._sequence_masks = None        # (input masks, recurrent masks) of the sequence being built

    @property
    def state_size(self):
        return self.units if self.n_states == 1 else [self.units] * self.n_states

    @property
    def output_size(self):
        return self.units

    def build(self, input_shape):
        shape = tuple(input_shape)
        if len(shape) != 2:
            raise ValueError(f"{type(self).__name__} takes one step's inputs (batch, features), got shape {shape}")
        self.build_weights(shape[-1])

    def get_initial_state(self, batch_size=None):
        """Zeros, one (batch_size, units) tensor per state (in the graph being built)."""
        return list(self.initial_state(int(batch_size)))

    def start_sequence(self, batch, training):
        self._sequence_masks = self.dropout_masks((batch, self.weight_ih.shape[1]), training)

    def end_sequence(self):
        self._sequence_masks = None

    def call(self, inputs, states, training=None):
        bare = self.n_states == 1 and _is_bare_state(states)      # Keras's GRUCell/SimpleRNNCell: h, not [h]
        states = flatten_states(states)
        name = type(self).__name__
        if len(inputs.shape) != 2:
            raise ValueError(f"{name} takes one step's inputs (batch, features), got shape {tuple(inputs.shape)}")
        batch = inputs.shape[0]
        if len(states) != self.n_states:
            raise ValueError(f"{name} takes {self.n_states} state{'s' if self.n_states > 1 else ''}, "
                             f"got {len(states)}")
        for s in states:
            if tuple(s.shape) != (batch, self.units):
                raise ValueError(f"{name}: a state must have shape (batch, units) = {(batch, self.units)}, "
                                 f"got {tuple(s.shape)}")
        masks = self._sequence_masks or self.dropout_masks(inputs, training)
        in_masks, self._rec_masks = masks
        try:
            xp = self.input_projection(self.masked_inputs(inputs, in_masks))
            new = self.step_math(xp, tuple(contiguous(s) for s in states), self.constants())
        finally:
            self._rec_masks = None
        return new[0], (new[0] if bare else list(new))

    def get_config(self):
        cfg = super().get_config()
        cfg.update(self.cell_config())
        return cfg


@register_builtin
class SimpleRNNCell(SimpleRNNMath, _Cell):
    """One step of SimpleRNN: ``h' = activation(W_ih x + W_hh h + b)``."""

    def __init__(self, units, activation="tanh", use_bias=True, **kwargs):
        if "recurrent_activation" in kwargs:
            raise TypeError("SimpleRNNCell() has no recurrent_activation (it has no gates)")
        super().__init__(units, activation=activation, recurrent_activation="sigmoid", use_bias=use_bias, **kwargs)

    def get_config(self):
        cfg = super().get_config()
        cfg.pop("recurrent_activation", None)
        return cfg


@register_builtin
class LSTMCell(LSTMMath, _Cell):
    """One step of LSTM (gates i, f, g, o); states [h, c]."""

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 unit_forget_bias=True, **kwargs):
        super().__init__(units, activation=activation, recurrent_activation=recurrent_activation,
                         use_bias=use_bias, **kwargs)
        self.unit_forget_bias = bool(unit_forget_bias)

    def get_config(self):
        cfg = super().get_config()
        cfg["unit_forget_bias"] = self.unit_forget_bias
        return cfg


@register_builtin
class GRUCell(GRUMath, _Cell):
    """One step of GRU (gates r, z, n; ``reset_after`` as Keras's)."""

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True, reset_after=True,
                 **kwargs):
        super().__init__(units, activation=activation, recurrent_activation=recurrent_activation,
                         use_bias=use_bias, **kwargs)
        self.reset_after = bool(reset_after)

    def get_config(self):
        cfg = super().get_config()
        cfg["reset_after"] = self.reset_after
        return cfg


# --- a stack of cells as one cell ------------------------------------------------------------

@register_builtin
class StackedRNNCells(_StepCall, Layer):
    """Cells one above the other as one cell (Keras's): each step runs them in order,
    each one's output the next one's input.  Its weights are ``cells.<i>.<weight>``."""

    def __init__(self, cells, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(cells, (list, tuple)) or not cells:
            raise ValueError(f"StackedRNNCells takes a non-empty list of cells, got {cells!r}")
        self.cells = [check_cell("StackedRNNCells", c) for c in cells]

    @property
    def state_size(self):
        return [c.state_size for c in self.cells]

    @property
    def output_size(self):
        return output_size_of(self.cells[-1])

    def build(self, input_shape):
        shape = tuple(input_shape)
        if len(shape) != 2:
            raise ValueError(f"StackedRNNCells takes one step's inputs (batch, features), got shape {shape}")
        for cell in self.cells:
            cell._build_once((None, shape[-1]))
            shape = (None, output_size_of(cell))

    def get_initial_state(self, batch_size=None):
        out = []
        for cell in self.cells:
            get = getattr(cell, "get_initial_state", None)
            out.append(get(batch_size=batch_size) if get is not None else None)
        return out

    def call(self, inputs, states, training=None):
        """states: one entry per cell (a tensor, or a list for a cell of several states), or
        all of them flat."""
        flat = flatten_states(states)
        sizes = [len(flat_state_sizes(c.state_size, "StackedRNNCells")) for c in self.cells]
        if len(flat) != sum(sizes):
            raise ValueError(f"StackedRNNCells takes {sum(sizes)} states (its cells' in order), got {len(flat)}")
        new_states = []
        for cell, n in zip(self.cells, sizes):
            mine, flat = flat[:n], flat[n:]
            inputs, new = call_cell(cell, inputs, structure_states(mine, cell.state_size), training)
            if len(new) != n:
                raise ValueError(f"{type(cell).__name__}.call returned {len(new)} states, its state_size "
                                 f"says {n}")
            new_states.append(structure_states(new, cell.state_size) if isinstance(cell.state_size, (list, tuple))
                              else new[0])
        return inputs, new_states

    def get_config(self):
        cfg = super().get_config()
        cfg["cells"] = [serialize_layer(c) for c in self.cells]
        return cfg

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        cells = [check_layer("StackedRNNCells", c, "cell") for c in config.pop("cells")]
        return cls(cells, **config)
