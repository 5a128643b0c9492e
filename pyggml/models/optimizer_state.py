"""An optimizer's state for one training context: the slots of each weight on the device.

A model's ``fit`` keeps one (it carries over between fits and between batch
sizes), each ``Trainer`` keeps its own.  Slots are tensors of their weight's
shape (Adam's ``m`` and ``v``), made the first time a weight is trained and
filled with the optimizer's initial value; the step counter is the
optimizer's ``iterations``.  With gradient accumulation the state also holds
each weight's gradient sum since the last update and the count of batches
in it (``micro``), shared by the training graphs of every batch shape.
"""

import numpy as np

from pyggml.core import BackendBuffer, Context
from pyggml._validation import ggml_name
from pyggml.errors import GGMLError

__all__ = ["OptimizerState"]


class OptimizerState:
    def __init__(self, optimizer, backend):
        self.optimizer = optimizer
        self.backend = backend
        self._slots = {}               # id(variable) -> {slot name: Tensor}
        self._names = {}               # id(variable) -> weight name
        self._chunks = []              # (Context, BackendBuffer)
        self._pending = None           # state to apply as slots appear: {slot: {name: array}}
        self._accs = {}                # id(variable) -> Tensor: the gradients summed since the last update
        self._acc_chunks = []          # (Context, BackendBuffer)
        self.host_accs = {}            # id(variable) -> array: apply_gradients' sums since the last update
        self.micro = 0                 # batches since the last update (gradient accumulation)

    def slots(self, variable):
        return self._slots[id(variable)]

    def slot_values(self, variable):
        """{slot: array} of one weight (empty before it is trained)."""
        return {s: t.numpy().reshape(variable.shape) for s, t in self._slots.get(id(variable), {}).items()}

    def ensure(self, named):
        """Slots for every (name, Variable) that has none yet."""
        new = [(n, v) for n, v in named if id(v) not in self._slots]
        if new and hasattr(self.optimizer, "prepare"):
            self.optimizer.prepare([v for _, v in named])     # (MultiOptimizer: each weight's optimizer)
        names = self.optimizer.state_slot_names
        for n, v in named:
            self._names[id(v)] = n
        if not new or not names:
            for n, v in new:
                self._slots[id(v)] = {}
            return
        ctx = Context(n_tensors=len(new) * len(names) + 8)
        made = []
        for n, v in new:
            self._slots[id(v)] = {s: ctx.new_tensor(v.store_shape, name=ggml_name(f"{s}.{n}")) for s in names}
            made.append((n, v))
        buf = BackendBuffer(ctx, self.backend)
        self._chunks.append((ctx, buf))
        for n, v in made:
            for s, t in self._slots[id(v)].items():
                start = self.optimizer.slot_initial_value(s)
                # "variable": the weight's own values (Schedule-Free's z)
                t.set(v.numpy().astype(np.float32) if isinstance(start, str) and start == "variable" else
                      np.full(v.shape, start, dtype=np.float32))
        self._apply_pending()

    def accumulators(self, named):
        """{id(variable): Tensor} summing each weight's gradient between updates (zero at first)."""
        new = [v for _, v in named if id(v) not in self._accs]
        if new:
            ctx = Context(n_tensors=len(new) + 4)
            for v in new:
                self._accs[id(v)] = ctx.new_tensor(v.store_shape)
            buf = BackendBuffer(ctx, self.backend)
            buf.clear(0)
            self._acc_chunks.append((ctx, buf))
        return {id(v): self._accs[id(v)] for _, v in named}

    def clear_accumulators(self):
        for _, buf in self._acc_chunks:
            buf.clear(0)
        self.host_accs = {}

    def get_state(self):
        """{"iterations": int, "slots": {slot: {weight name: array}}}."""
        out = {}
        for vid, slots in self._slots.items():
            for s, t in slots.items():
                out.setdefault(s, {})[self._names[vid]] = t.numpy()
        if self._pending:
            for s, d in self._pending.items():
                for n, a in d.items():
                    out.setdefault(s, {}).setdefault(n, a)
        return {"iterations": int(self.optimizer.iterations), "slots": out}

    def set_state(self, state, named):
        """Restore ``get_state()``'s data (slots for weights not trained yet wait
        until they are).  A slot of the wrong shape is refused, naming it."""
        shapes = {n: v.shape for n, v in named}
        slots = state.get("slots", {})
        known = set(self.optimizer.state_slot_names)
        for s, d in slots.items():
            if s not in known:
                raise GGMLError(f"the optimizer state has a slot {s!r} that {type(self.optimizer).__name__} "
                                f"does not keep (it keeps {sorted(known)})")
            for n, a in d.items():
                if n not in shapes:
                    raise GGMLError(f"the optimizer state names a weight {n!r} the model does not have")
                if tuple(np.shape(a)) != shapes[n] and np.size(a) != int(np.prod(shapes[n])):
                    raise GGMLError(f"the optimizer state's {s!r} for {n!r} has shape {np.shape(a)}, "
                                    f"the weight {shapes[n]}")
                if not np.all(np.isfinite(a)):
                    raise GGMLError(f"the optimizer state's {s!r} for {n!r} holds NaN or inf")
        self.optimizer.iterations = int(state.get("iterations", 0))
        self._pending = {s: {n: np.asarray(a, dtype=np.float32).reshape(shapes[n]) for n, a in d.items()}
                         for s, d in slots.items()}
        self._apply_pending()

    def _apply_pending(self):
        if not self._pending:
            return
        for vid, slots in self._slots.items():
            name = self._names.get(vid)
            for s, t in slots.items():
                a = self._pending.get(s, {}).pop(name, None)
                if a is not None:
                    t.set(a)

    def free(self):
        for ctx, buf in self._chunks + self._acc_chunks:
            buf.free()
            ctx.free()
        self._chunks, self._slots, self._acc_chunks, self._accs = [], {}, [], {}
