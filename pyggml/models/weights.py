"""Where a compiled model's weights live: one buffer on its device.

A ``WeightStore`` holds a tensor for each of a model's Variables in one
backend buffer.  Binding a variable to the store moves its values there (from
numpy, or from another model's store that shares the layer); the store keeps
its tensor, so a variable that moved away can come back.  Freeing the store
returns the values of the variables still bound to it to numpy.

``Blender`` writes ``tau * source + (1 - tau) * target`` into every weight of
a target store, as one graph on the device (snapshots, target networks).
"""

import numpy as np

from pyggml.core import BackendBuffer, Context, Graph, Scheduler, ops
from pyggml._validation import ggml_name
from pyggml.errors import AllocationError
from pyggml.variables import binding_lock

__all__ = ["WeightStore", "Blender", "moves"]

_moves = [0]           # bumped whenever a variable changes stores: executors re-check their tensors


def moves():
    """A counter of variable moves between stores (executors compare it)."""
    return _moves[0]


def _device_free_memory(backend):
    from pyggml.core import devices
    return next((d["memory_free"] for d in devices() if d["name"] == backend.name), 0)


class WeightStore:
    """Tensors for ``named`` [(name, Variable)] in one buffer on ``backend``."""

    def __init__(self, backend, named):
        self.backend = backend
        need = sum(4 * v.size for _, v in named)
        free = _device_free_memory(backend)
        if free and need > free:
            raise AllocationError(f"the model's weights need {need / 2**30:.2f} GiB; "
                                  f"{backend.name} has {free / 2**30:.2f} GiB free")
        self.ctx = Context(n_tensors=len(named) + 8)
        self.owner = None                 # the Runtime this store belongs to
        self.buffer = None
        self.tensors = {}                 # id(variable) -> Tensor
        self.variables = {}               # id(variable) -> Variable
        for name, v in named:
            t = self.ctx.new_tensor(v.store_shape, name=ggml_name(name))
            self.tensors[id(v)] = t
            self.variables[id(v)] = v
        if named:
            self.buffer = BackendBuffer(self.ctx, backend)
        for _, v in named:
            self.bind(v)

    def bind(self, variable):
        """Move the variable's values into this store (a no-op when already here)."""
        if variable.home is self:
            return
        variable.bind(self.tensors[id(variable)], self)
        _moves[0] += 1

    def bind_all(self):
        for v in self.variables.values():
            self.bind(v)

    def holds_all(self):
        return all(v.home is self for v in self.variables.values())

    def tensor(self, variable):
        return self.tensors[id(variable)]

    def apply_gradients(self, optimizer, pairs):
        """An optimizer step on [(gradient array, Variable)] of weights bound here."""
        if self.owner is None:
            raise ValueError("these weights belong to no model any more")
        self.owner.model.check_alive()
        with self.owner.model.lock:
            self.owner.ensure_bound()
            self.owner.apply_gradients(optimizer, pairs)

    def free(self):
        with binding_lock:          # no thread reads a variable from the buffer as it goes
            for v in self.variables.values():
                if v.home is self:
                    v.unbind()
            _moves[0] += 1
            if self.buffer is not None:
                self.buffer.free()
            self.ctx.free()
            self.tensors, self.variables, self.buffer = {}, {}, None


class Blender:
    """target = tau * source + (1 - tau) * target for every weight, as one graph."""

    def __init__(self, target_tensors, source_tensors, backend):
        n = len(target_tensors)
        self.ctx = Context(n_tensors=8 * n + 16, graph_size=8 * n + 64)
        self.in_ctx = Context(n_tensors=4)
        self.tau = self.in_ctx.new_tensor((1,))
        self.one_minus = self.in_ctx.new_tensor((1,))
        self.backend = backend
        self.buf = BackendBuffer(self.in_ctx, self.backend)
        self.graph = Graph(self.ctx, 8 * n + 64)
        for t, s in zip(target_tensors, source_tensors):
            mixed = ops.add(ops.mul(s, self.tau, ctx=self.ctx), ops.mul(t, self.one_minus, ctx=self.ctx), ctx=self.ctx)
            self.graph.build_forward(ops.cpy(mixed, t, ctx=self.ctx))
        self.sched = Scheduler([self.backend], graph_size=16 * n + 128)

    def run(self, tau):
        self.tau.set(np.array([tau], dtype=np.float32))
        self.one_minus.set(np.array([1.0 - tau], dtype=np.float32))
        self.sched.compute(self.graph, n_threads=1)

    def free(self):
        if self.ctx.closed:
            return
        self.sched.free()
        self.buf.free()
        self.ctx.free()
        self.in_ctx.free()
