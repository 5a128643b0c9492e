"""Keras's ``stateful=True`` for the recurrent layers: the last state of sample i in
one batch is the initial state of sample i in the next.

The states are Variables of shape (batch, size), made once the batch size is
known and not among the layer's weights (as Keras: they are not trained, not
listed by ``weights``, not saved).  In a compiled model they live on the
model's device next to the weights; each graph that runs the layer (predict,
evaluate, fit's training step, ...) reads them as the initial state and writes
the final state back into them when it ends (``add_state_update`` of the graph
scope), so they carry over from batch to batch and from one method to the next.
A layer called on arrays (Keras's eager call) continues from them too.

The batch size is fixed: Keras's ``Input(batch_shape=...)`` /
``Input(shape, batch_size=...)`` or ``batch_input_shape=`` on the first layer
declares it; without one, the first batch the layer runs on fixes it (Keras
requires it declared).  A batch of any other size is refused, naming the size
expected.  ``reset_states()`` sets the states to zeros (or to given values).
"""

import numpy as np

from pyggml import _scope
from pyggml.variables import Variable

__all__ = ["Stateful"]


class Stateful:
    """A base, before Layer, of the layers with ``stateful``; they define ``state_sizes``
    (a list, one size per state) and call ``stateful_initial_states`` and
    ``keep_final_states`` in their call."""

    stateful = False
    _state_vars = None          # the state Variables, once made
    _state_batch = None         # the declared batch size, or None

    def init_stateful(self, stateful):
        self.stateful = bool(stateful)
        self._state_vars = None
        self._state_batch = None

    # --- the batch size -------------------------------------------------------------------
    def declare_batch_size(self, batch):
        """The model's fixed batch size (from its Input), known when the layer is called on it."""
        if not self.stateful or batch is None:
            return
        batch = int(batch)
        known = self.expected_batch_size
        if known is not None and known != batch:
            raise ValueError(f"{self._what()}: stateful, with states for batches of {known} rows; "
                             f"it cannot be used in a model with batch size {batch}")
        self._state_batch = batch

    def _call_symbolic(self, inputs, nodes, kwargs):
        batches = {n.batch_size for n in nodes if getattr(n, "batch_size", None) is not None}
        if len(batches) > 1:
            raise ValueError(f"{self._what()}: its inputs have different batch sizes {sorted(batches)}")
        if batches:
            self.declare_batch_size(batches.pop())
        return super()._call_symbolic(inputs, nodes, kwargs)

    @property
    def expected_batch_size(self):
        """The batch size a stateful layer takes (None until known)."""
        if self._state_vars is not None:
            return self._state_vars[0].shape[0]
        return self._state_batch

    def _what(self):
        return f"{type(self).__name__} {self.name!r}" if self.name else type(self).__name__

    # --- the state variables ---------------------------------------------------------------
    def _make_states(self, batch):
        sizes = list(self.state_sizes)
        self._state_vars = [Variable.made("rnn_state" if k == 0 else f"rnn_state_{k}", (batch, s), "zeros",
                                     trainable=False, layer=None) for k, s in enumerate(sizes)]
        for v in self._state_vars:
            v.is_state = True            # the graph builders keep it beside the weights, not among them
            v.initialize()
        return self._state_vars

    @property
    def states(self):
        """Keras's ``layer.states``: the state Variables (``.numpy()``, ``.assign()``), one per
        state, each (batch, size); None for a layer that is not stateful, or before its batch
        size is known."""
        if not self.stateful:
            return None
        if self._state_vars is None and self._state_batch is not None:
            self._make_states(self._state_batch)
        return list(self._state_vars) if self._state_vars is not None else None

    def reset_states(self, states=None):
        """Set the states to zeros (Keras's ``reset_state``), or to the given arrays, one per
        state, each (batch, size) (Keras 2's ``reset_states(states)``).  A layer that is not
        stateful has nothing to reset."""
        if not self.stateful:
            if states is not None:
                raise ValueError(f"{self._what()} is not stateful (stateful=False): it keeps no states to set")
            return
        sizes = list(self.state_sizes)
        if states is None:
            for v in self._state_vars or ():
                v.assign(np.zeros(v.shape, dtype=np.float32))
            return
        values = list(states) if isinstance(states, (list, tuple)) else [states]
        if len(values) != len(sizes):
            raise ValueError(f"{self._what()}.reset_states takes {len(sizes)} state"
                             f"{'s' if len(sizes) > 1 else ''} (sizes {sizes}), got {len(values)}")
        arrays = []
        for k, (a, size) in enumerate(zip(values, sizes)):
            a = np.asarray(a)
            if a.dtype == object or a.dtype.kind not in "biuf":
                raise TypeError(f"{self._what()}.reset_states: state {k} must be an array of numbers, "
                                f"got dtype {a.dtype}")
            batch = self.expected_batch_size
            if a.ndim != 2 or a.shape[1] != size or (batch is not None and a.shape[0] != batch):
                raise ValueError(f"{self._what()}.reset_states: state {k} must have shape (batch, {size})"
                                 f"{f' = {(batch, size)}' if batch is not None else ''}, got {a.shape}")
            arrays.append(a)
        if len({a.shape[0] for a in arrays}) > 1:
            raise ValueError(f"{self._what()}.reset_states: the states have different batch sizes")
        made = self.states or self._make_states(arrays[0].shape[0])
        for v, a in zip(made, arrays):
            v.assign(a)

    reset_state = reset_states

    # --- in the graph ------------------------------------------------------------------------
    def stateful_initial_states(self, batch):
        """The state tensors a stateful layer starts from in the graph being built (a list),
        or None (not stateful; or a graph that only finds shapes)."""
        if not self.stateful:
            return None
        b = _scope.current()
        if b is None or not hasattr(b, "add_state_update"):
            return None
        expected = self.expected_batch_size
        if expected is not None and batch != expected:
            raise ValueError(f"{self._what()} is stateful with batch size {expected}: every batch must have "
                             f"exactly {expected} rows (pass batch_size={expected} to fit, evaluate and "
                             f"predict, with a number of samples divisible by it), got a batch of {batch}")
        made = self.states or self._make_states(batch)
        return [b.tensor_of(v) for v in made]

    def keep_final_states(self, final):
        """Write the call's final states into the state variables when the graph runs."""
        if not self.stateful:
            return
        b = _scope.current()
        if b is None or not hasattr(b, "add_state_update") or self._state_vars is None:
            return
        for v, t in zip(self._state_vars, final):
            b.add_state_update(v, t)

