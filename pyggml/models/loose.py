"""Weights no compiled model holds, stepped by an optimizer (a custom training loop).

A GradientTape's gradients may be of layers and models that were never
compiled (a VAE's encoder and decoder, a GAN's generator): their Variables hold
numpy values and live on no device.  ``optimizer.apply_gradients`` then keeps
them in a ``LooseWeights`` of its own: one CPU weight store for that set of
variables, the optimizer's state (Adam's moments) and its step graph, all kept
for the next step.  A variable moves between such a store and a compiled
model's as either uses it (the weight stores' moves); when the optimizer goes,
its stores give their values back to the variables.
"""

import threading
import weakref

from pyggml.core import Backend
from pyggml.optimizers import optimizer as optimizer_mod
from pyggml.models import weights as weights_mod
from pyggml.models.optimizer_state import OptimizerState
from pyggml.models.runtime import step_on_gradients

__all__ = ["apply_loose"]


class LooseWeights:
    """A weight store, an optimizer state and step graphs for one set of variables."""

    def __init__(self, optimizer, variables, layers):
        self.backend = Backend("cpu")
        self.names = {id(v): f"{i}.{v.name}" for i, v in enumerate(variables)}
        self.store = weights_mod.WeightStore(self.backend, [(self.names[id(v)], v) for v in variables])
        self.store.owner = self
        self.state = OptimizerState(optimizer, self.backend)
        self.layers = layers
        self.graphs = {}
        self.lock = threading.RLock()
        self.model = self                  # the store's owner protocol: owner.model.check_alive(), .lock
        self.loose = True
        self.freed = False

    def check_alive(self):
        if self.freed:
            raise RuntimeError("these weights' optimizer state was released")

    def ensure_bound(self):
        self.store.bind_all()

    def graph(self, key, make):
        e = self.graphs.get(key)
        if e is None:
            e = self.graphs[key] = make()
        return e

    def apply_gradients(self, optimizer, pairs):
        step_on_gradients(self, self.state, pairs, self.names, self.layers)

    def free(self):
        if self.freed:
            return
        self.freed = True
        for e in self.graphs.values():
            e.free()
        self.graphs = {}
        self.state.free()
        self.store.free()               # the variables get their values back as numpy
        self.backend.free()


_registry = weakref.WeakKeyDictionary()     # optimizer -> {variable ids: LooseWeights}


def _free_all(stores):
    for s in stores.values():
        s.free()


def _layers_of(variables):
    """The layers owning ``variables`` whose constraints involve only those variables (their
    constraints apply after each step, as Keras's)."""
    from pyggml.layers.weight_rules import constraint_rules
    ids = {id(v) for v in variables}
    out = []
    for v in variables:
        layer = getattr(v, "_layer", None)
        if layer is None or any(layer is o for o in out):
            continue
        if all(id(x) in ids for vs, _ in constraint_rules(layer) for x in vs):
            out.append(layer)
    return out


def apply_loose(optimizer, pairs):
    """An optimizer step on [(gradient array, Variable)] of variables on no device (or in a
    store of this optimizer's): the store for exactly that set, made on first use."""
    key = tuple(sorted(id(v) for _, v in pairs))
    stores = _registry.get(optimizer)
    if stores is None:
        stores = _registry[optimizer] = {}
        weakref.finalize(optimizer, _free_all, stores)
    lw = stores.get(key)
    if lw is None or lw.freed:
        variables = [v for _, v in pairs]
        lw = stores[key] = LooseWeights(optimizer, variables, _layers_of(variables))
    with lw.lock:
        lw.ensure_bound()
        lw.apply_gradients(optimizer, pairs)


optimizer_mod.LOOSE_HANDLER[0] = apply_loose
