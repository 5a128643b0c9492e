"""RNN(cell): Keras's generic recurrent layer, a cell run over the steps of a sequence.

``cell`` is a cell (``LSTMCell``, ``GRUCell``, ``SimpleRNNCell``,
``StackedRNNCells``, or a layer of yours with ``state_size`` and ``call(inputs,
states) -> (output, new_states)``), or a list of cells (stacked).  Inputs are
``(batch, steps, features)``; the output is the last step's output (batch,
output_size), or every step's with ``return_sequences``.

The built-in cells run the loop of the matching layer (one input projection
for all steps, the fused CPU cell ops), so ``RNN(LSTMCell(n))`` computes what
``LSTM(n)`` computes with the same weights.  Any other cell is called once per
step on that step's inputs (the graph is unrolled).

As Keras: a padding mask keeps the states of padded steps (and their output is
the previous step's, or zeros with ``zero_output_for_mask``); ``go_backwards``
runs the steps last to first (the sequence output in that order);
``return_state`` returns ``[output, *final_states]``; ``initial_state=[...]``
(or ``[x, *states]`` as the inputs) starts from given states, which then train.
States are flat lists here: a stack of cells takes and returns its cells'
states one after the other (Keras nests them per cell).
``stateful=True`` keeps each sample's final states as its initial states in the next
batch (see ``stateful.py``); ``unroll`` is accepted (always unrolled).
"""

import numpy as np

from pyggml import ops
from pyggml._validation import check_bool
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.layers.recurrent.base_rnn import (CellMath, SequenceMask, TakesInitialState, _several, padding_mask,
                                              stack_fused, stack_steps)
from pyggml.layers.recurrent.stateful import Stateful
from pyggml.layers.recurrent.cells import (StackedRNNCells, call_cell, check_cell, end_sequence, flat_state_sizes,
                                           flatten_states, output_size_of, start_sequence, structure_states)
from pyggml.layers.wrappers.wrapping import serialize_layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RNN"]


@register_builtin
class RNN(Stateful, TakesInitialState, SequenceMask, Layer):
    build_shape_rule = "last"        # a later call may have other lengths (Layer._fits_built)
    float_inputs = True

    def __init__(self, cell, return_sequences=False, return_state=False, go_backwards=False, stateful=False,
                 unroll=False, zero_output_for_mask=False, **kwargs):
        super().__init__(**kwargs)
        self.init_stateful(check_bool("stateful", stateful))
        if isinstance(cell, (list, tuple)):
            cell = StackedRNNCells(cell)
        self.cell = check_cell("RNN", cell)
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.unroll = bool(unroll)
        self.zero_output_for_mask = bool(zero_output_for_mask)

    # --- the cell's states -------------------------------------------------------------------
    @property
    def state_sizes(self):
        """The size of each state, flat (a stack: its cells' states in order)."""
        return flat_state_sizes(self.cell.state_size)

    @property
    def n_states(self):
        return len(self.state_sizes)

    def __call__(self, *args, initial_state=None, **kwargs):
        if isinstance(initial_state, (list, tuple)):
            initial_state = flatten_states(initial_state)          # Keras nests a stack's states per cell
        return super().__call__(*args, initial_state=initial_state, **kwargs)

    def split_inputs(self, inputs):
        """(x, the initial states or None) from the call's inputs: x, or [x, *states]."""
        if not isinstance(inputs, (list, tuple)):
            return inputs, None
        n = self.n_states
        if len(inputs) != 1 + n:
            raise ValueError(f"RNN takes {n} initial state{'s' if n > 1 else ''} (sizes {self.state_sizes}), "
                             f"got {len(inputs) - 1}")
        return inputs[0], list(inputs[1:])

    def _check_states(self, shapes, batch=None):
        for k, (s, size) in enumerate(zip(shapes, self.state_sizes)):
            s = tuple(s)
            if len(s) != 2 or s[1] != size or (batch is not None and s[0] != batch):
                raise ValueError(f"RNN: initial state {k} must have shape (batch, {size}), got {s}")

    # --- shapes and masks ------------------------------------------------------------------------
    def compute_output_shape(self, input_shape):
        x_shape, state_shapes = self.split_inputs(list(input_shape)) if _several(input_shape) else (input_shape, None)
        x_shape = tuple(x_shape)
        self._check_rank(x_shape)
        if state_shapes is not None:
            self._check_states(state_shapes)
        size = output_size_of(self.cell)
        out = (x_shape[0], x_shape[1], size) if self.return_sequences else (x_shape[0], size)
        if self.return_state:
            return [out] + [(x_shape[0], s) for s in self.state_sizes]
        return out

    def _check_rank(self, shape):
        """(batch, steps, features); a cell of the user's may take each step's features in more
        dims (Keras's: (batch, steps, h, w) gives its call (batch, h, w))."""
        if len(shape) != 3 and (len(shape) < 3 or isinstance(self.cell, CellMath)):
            raise ValueError(f"RNN expects inputs of shape (steps, features)"
                             f"{'' if isinstance(self.cell, CellMath) else ' or (steps, *features)'}, "
                             f"got {shape[1:]}")

    def build(self, input_shape):
        shape = tuple(input_shape)
        self._check_rank(shape)
        self.cell._build_once((None,) + shape[2:])
        if not isinstance(self.cell, CellMath) and None not in shape[2:]:
            self._build_cell_layers(tuple(shape[2:]))

    def _build_cell_layers(self, step_shape):
        """A cell of the user's may make layers it builds on their first call (a Dense in its
        ``__init__``, no ``build``), as Keras builds them: one step of its call on shapes alone
        builds them before a model's graph is made over their weights.  A call that fails on
        these stand-ins is left to fail, with its own message, in the real graph."""
        from pyggml.errors import GGMLError
        from pyggml.layers.tracing import _BATCH, on_shapes

        def one_step(builder):
            x_t = builder.ctx.new_tensor((_BATCH,) + step_shape)
            states = [builder.ctx.new_tensor((_BATCH, s)) for s in self.state_sizes]
            start_sequence(self.cell, _BATCH, False)
            try:
                call_cell(self.cell, x_t, structure_states(states, self.cell.state_size), False)
            finally:
                end_sequence(self.cell)
        try:
            on_shapes(one_step)
        except (ValueError, TypeError, IndexError, GGMLError):
            pass

    # --- the computation ----------------------------------------------------------------------
    def call(self, inputs, training=None, mask=None):
        x, states = self.split_inputs(inputs)
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        batch, steps = x.shape[:2]
        if states is not None:
            self._check_states([st.shape for st in states], batch)
            states = [contiguous(st) for st in states]
        kept = self.stateful_initial_states(batch)
        if states is None and kept is not None:
            states = kept
        if mask is not None:
            mask = padding_mask(mask, batch, steps, "RNN")
        if isinstance(self.cell, CellMath):
            out, final = self._run_builtin(x, mask, states, training)
        else:
            start_sequence(self.cell, batch, training)
            try:
                out, final = self._run_cell(x, mask, states, training)
            finally:
                end_sequence(self.cell)
        self.keep_final_states(final)
        return [out] + list(final) if self.return_state else out

    def _run_builtin(self, x, mask, states, training):
        """A built-in cell: its layer's loop (the same graph as LSTM, GRU, SimpleRNN)."""
        cell = self.cell
        in_masks, cell._rec_masks = cell.dropout_masks(x, training)
        try:
            return cell.run_steps(x, mask, cell.masked_inputs(x, in_masks), None if states is None else tuple(states),
                                  self.go_backwards, self.return_sequences, self.zero_output_for_mask)
        finally:
            cell._rec_masks = None

    def _initial_states(self, batch):
        get = getattr(self.cell, "get_initial_state", None)
        if get is None:
            return [ops.constant(np.zeros((batch, s), dtype=np.float32)) for s in self.state_sizes]
        got = flatten_states(get(batch_size=batch))
        sizes = self.state_sizes
        if len(got) != len(sizes) or any(g is None for g in got):
            # a stack's cells without get_initial_state: zeros for all
            return [ops.constant(np.zeros((batch, s), dtype=np.float32)) for s in sizes]
        out = [ops.as_tensor(g) if not isinstance(g, np.ndarray) else ops.constant(g.astype(np.float32))
               for g in got]
        self._check_states([t.shape for t in out], batch)
        return out

    def _run_cell(self, x, mask, states, training):
        """Any cell: called once per step on the step's rows."""
        cell = self.cell
        batch, steps = x.shape[:2]
        step_shape = tuple(x.shape[2:])                 # each step's features, as the cell takes them
        feats = int(np.prod(step_shape))
        sizes, out_size = self.state_sizes, output_size_of(cell)
        state = self._initial_states(batch) if states is None else list(states)
        xc = contiguous(x) if len(step_shape) == 1 else ops.reshape(contiguous(x), (batch, steps, feats))
        # time-major, so that each step's (batch, features) rows are contiguous
        xt = ops.permute_axes(xc, (1, 0, 2)) if batch > 1 and steps > 1 else xc
        xt = contiguous(ops.reshape(contiguous(xt), (steps * batch, feats)))
        step_masks = None
        if mask is not None:
            step_masks = ops.cont(ops.transpose(mask)) if batch > 1 and steps > 1 else mask
        prev = ops.constant(np.zeros((batch, out_size), dtype=np.float32)) if mask is not None else None
        name = type(cell).__name__
        outputs = []
        order = range(steps - 1, -1, -1) if self.go_backwards else range(steps)
        for t in order:
            x_t = ops.view(xt, (batch, feats), offset=t * batch * feats * 4)
            if len(step_shape) > 1:
                x_t = ops.reshape(x_t, (batch,) + step_shape)
            out, new = call_cell(cell, x_t, structure_states(state, cell.state_size), training)
            if out is None or any(n is None for n in new):
                raise ValueError(f"{name}.call returned None for its output or a state; it must return "
                                 f"(output, new_states) as tensors")
            out = ops.as_tensor(out)
            if tuple(out.shape) != (batch, out_size):
                raise ValueError(f"{name}.call returned an output of shape {tuple(out.shape)}; expected "
                                 f"(batch, output_size) = {(batch, out_size)}")
            if len(new) != len(sizes):
                raise ValueError(f"{name}.call returned {len(new)} states; its state_size {cell.state_size!r} "
                                 f"says {len(sizes)}")
            new = [ops.as_tensor(n) for n in new]
            for k, (n, size) in enumerate(zip(new, sizes)):
                if tuple(n.shape) != (batch, size):
                    raise ValueError(f"{name}.call returned state {k} of shape {tuple(n.shape)}; its state_size "
                                     f"says (batch, {size}) = {(batch, size)}")
            new = [contiguous(n) for n in new]
            out = contiguous(out)
            if step_masks is not None:
                m = ops.reshape(ops.view(step_masks, (batch,), offset=t * batch * 4), (batch, 1))
                new = [ops.add(old, ops.mul(ops.sub(n, old), m)) for n, old in zip(new, state)]
                kept = ops.add(prev, ops.mul(ops.sub(out, prev), m))
                out = ops.mul(out, m) if self.zero_output_for_mask else kept
                prev = kept
            else:
                prev = out
            state = new
            if self.return_sequences:
                outputs.append(out)
        if self.return_sequences:
            seq = stack_fused(outputs) if fused() else stack_steps(outputs)
            return seq, state
        return prev, state

    def get_config(self):
        cfg = super().get_config()
        cfg.update(return_sequences=self.return_sequences, return_state=self.return_state,
                   go_backwards=self.go_backwards, stateful=self.stateful, unroll=self.unroll,
                   zero_output_for_mask=self.zero_output_for_mask, cell=serialize_layer(self.cell))
        return cfg

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        return cls(check_cell("RNN", config.pop("cell")), **config)
