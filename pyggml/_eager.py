"""Running graph code on numpy arrays at once (Keras's eager calls).

``evaluate(fn, arrays)`` calls ``fn`` on tensors holding the arrays inside a
graph scope (Variables stand for constants of their current values, dropout
is off unless ``training``), computes the result on the CPU and returns numpy.
Layers called on arrays and loss objects called on arrays go through here.
"""

import threading

import numpy as np

from pyggml import _scope, _wide
from pyggml._deep_graph import Graph
from pyggml.core import Backend, BackendBuffer, Context, Scheduler, Tensor, ops, reachable_hashes
from pyggml.errors import ContextFullError

__all__ = ["evaluate"]

_lock = threading.Lock()
_backend = [None]


class _EagerBuilder:
    """The graph-scope protocol (pyggml._scope) for a one-off host computation."""

    def __init__(self, n_tensors, training):
        self.ctx = Context(n_tensors=n_tensors, graph_size=n_tensors)
        self.in_ctx = Context(n_tensors=n_tensors)
        self.training = bool(training)
        self.fused_ok = True         # computed on the CPU (pyggml._scope.fused)
        self.cache = {}
        self._values = []            # (tensor, array) to set once memory exists
        self._masks = []
        self._vars = {}
        self._strings = {}           # id(tensor) -> (tensor, its strings)
        self.losses = []             # (layer, 1-element tensor): activity regularizers, add_loss
        self.state_updates = []      # (state variable, its new value)

    def _leaf(self, array, dtype):
        t = self.in_ctx.new_tensor(array.shape or (1,), dtype="i32" if dtype == "int32" else "f32")
        self._values.append((t, array))
        return t

    def constant(self, array, dtype="float32"):
        return self._leaf(np.asarray(array), dtype)

    def tensor_of(self, variable):
        t = self._vars.get(id(variable))
        if t is None:
            t = self._vars[id(variable)] = self._leaf(variable.numpy().reshape(variable.store_shape), "float32")
        return t

    def strings(self, array):
        """An input of strings: zeros in the graph, the strings for the host layers in the call
        (a StringLookup), as a model's string inputs (pyggml._scope.mark_strings)."""
        a = np.asarray(array)
        t = self._leaf(np.zeros(a.shape, np.int32), "int32")
        _scope.mark_strings(self, t)
        self._strings[id(t)] = (t, a)
        return t

    def derived_input(self, source, fn, shape, dtype):
        kept = self._strings.get(id(source))
        if kept is not None and kept[0] is source:
            return self._leaf(np.ascontiguousarray(fn(kept[1])).reshape(shape), dtype)
        for t, a in self._values:
            if t is source:
                return self._leaf(np.ascontiguousarray(fn(a)).reshape(shape), dtype)
        raise ValueError("derived_input: the source is not an input of this computation")

    def random_keep_mask(self, shape, rate):
        t = self.in_ctx.new_tensor(shape)
        self._masks.append((t, rate))
        return t

    def random_values(self, shape, draw, dtype="float32"):
        t = self.in_ctx.new_tensor(shape, dtype="i32" if dtype == "int32" else "f32")
        self._masks.append((t, draw))
        return t

    def add_update(self, variable, tensor):
        # a call with training=True moves BatchNormalization's statistics, as Keras's eager call
        if self.training:
            self.state_updates.append((variable, tensor))

    def add_state_update(self, variable, tensor):
        # a stateful layer's states do change (Keras's eager call of a stateful RNN)
        self.state_updates.append((variable, tensor))

    def add_loss(self, tensor, layer=None):
        self.losses.append((layer, tensor))

    def run(self, outputs):
        from pyggml import _random
        # a leaf (a constant handed back as is) gets a copy op: a graph needs one
        outs = [ops.dup(o, ctx=self.ctx) if o.op == "NONE" else (o if o.is_contiguous else ops.cont(o, ctx=self.ctx))
                for o in outputs]
        graph = Graph(self.ctx, self.ctx_graph_size())
        for o in outs:
            o.set_output()
            graph.build_forward(o)
        with _lock:
            if _backend[0] is None:
                _backend[0] = Backend("cpu")
            buf = BackendBuffer(self.in_ctx, _backend[0])
            try:
                for t, a in self._values:
                    t.set(a)
                rng = _random.rng()
                for t, rate in self._masks:
                    t.set(_random.draw_values(rng, t.shape, rate))
                sched = Scheduler([_backend[0]], graph_size=2 * self.ctx_graph_size())
                try:
                    sched.compute(graph, n_threads=1)
                    return [o.numpy() for o in outs]
                finally:
                    sched.free()
            finally:
                buf.free()

    def ctx_graph_size(self):
        return self._graph_size

    def free(self):
        self.ctx.free()
        self.in_ctx.free()


def _beyond_int32(a):
    a = np.asarray(a)
    return a.dtype.kind in "iu" and a.dtype.itemsize > 4 and a.size > 0 and \
        bool(a.min() < -2 ** 31 or a.max() > 2 ** 31 - 1)


def evaluate(fn, arrays, training=False, losses=None):
    """numpy results of ``fn(*tensors)`` for numpy ``arrays`` (float32, or int32
    for integer arrays); ``fn`` returns a tensor or a list of them.  With a list
    ``losses``, the losses layers added (activity regularizers, ``add_loss``) are
    computed too and appended to it as (layer, float)."""
    # ggml computes integers as int32 (in float32): wider values (int64 timestamps) go in as float32,
    # rounded, instead of wrapping round int32 (2**40 read as 0)
    arrays = [np.asarray(a, np.float32) if _beyond_int32(a) else a for a in arrays]
    n = 4096
    while True:
        b = _EagerBuilder(n, training)
        b._graph_size = n
        try:
            with _scope.entered(b):
                xs = [b.strings(a) if np.asarray(a).dtype.kind in "USO" else
                      b.constant(np.ascontiguousarray(a, dtype=np.int32 if np.asarray(a).dtype.kind in "iub"
                                                      else np.float32),
                                 "int32" if np.asarray(a).dtype.kind in "iub" else "float32") for a in arrays]
                for t, a in zip(xs, arrays):
                    a = np.asarray(a)
                    if a.ndim == 0 and a.dtype.kind in "biuf":
                        # one Python number or bool (a flag given as y_pred: gaugan's loss(pred, False)):
                        # its value is known while the graph is built, so ``if flag:`` in a call reads it
                        _scope.remember_host_value(t, a.astype(np.int64 if a.dtype.kind in "biu" else np.float32))
                out = fn(*xs)
            many = isinstance(out, (list, tuple))
            outs = list(out) if many else [out]
            wide = [o.shape if isinstance(o, _wide.Wide) else None for o in outs]
            outs = [o.t if isinstance(o, _wide.Wide) else o for o in outs]
            bad = [o for o in outs if not isinstance(o, Tensor)]
            if bad:
                raise TypeError(f"an eager call must compute tensors from its inputs, got "
                                f"{type(bad[0]).__name__} (a layer that takes one array was given a "
                                f"dict or a nested structure?)")
            if b._strings:
                # strings stand in the graph as zeros: only host layers (a StringLookup) may read them
                reach = reachable_hashes(outs)
                if any(hash(t) in reach for t, _ in b._strings.values()):
                    raise TypeError("an input of strings reaches an op that takes numbers: strings go through "
                                    "a lookup layer first (StringLookup, TextVectorization, Hashing, ...)")
            extra = b.losses if losses is not None else []
            states = b.state_updates
            kept = getattr(b, "kept", None) or []        # tensors a layer keeps as attributes (layers.eager)
            res = b.run(outs + [t for _, t in extra] + [t for _, t in states] +
                        [v.t if isinstance(v, _wide.Wide) else v for _, _, v in kept])
            if kept:
                from pyggml._tensor_arrays import as_ops_result
                for (obj, name, v), value in zip(kept, res[len(res) - len(kept):]):
                    object.__setattr__(obj, name, as_ops_result(value.reshape(v.shape)))
                res = res[:len(res) - len(kept)]
            if states:
                for (v, _), value in zip(states, res[len(res) - len(states):]):
                    v.assign(value.reshape(v.shape))
                res = res[:len(res) - len(states)]
            if extra:
                losses.extend((layer, float(np.asarray(v).reshape(-1)[0])) for (layer, _), v in
                              zip(extra, res[len(outs):]))
                res = res[:len(outs)]
            res = [r if s is None else r.reshape(s) for r, s in zip(res, wide)] + res[len(wide):]
            return res if many else res[0]
        except ContextFullError:
            if n >= 1 << 22:
                raise
            n *= 8
        finally:
            b.free()
