"""What a model holds on its device: the backend, the weight store, the graphs
it has built (a few, most recently used kept) and the optimizer state of its
``fit``.  ``compile`` makes a new one; ``free`` releases it.
"""

import collections
import weakref

import numpy as np

from pyggml.models import executors
from pyggml.models import weights as weights_mod
from pyggml.models.optimizer_state import OptimizerState

__all__ = ["Runtime", "step_on_gradients"]

_MAX_CACHED = 8


class Runtime:
    def __init__(self, model, backend, rng=None):
        named = model.named_variables()
        for _, v in named:
            v.initialize(rng)
        self.model = model
        self.backend = backend
        self.store = weights_mod.WeightStore(backend, named)
        self.store.owner = self
        self.states = {}                         # optimizer states for apply_gradients by other optimizers
        self.graphs = collections.OrderedDict()
        # variable lengths make a graph per length (or length bucket): keep more of them
        self.max_graphs = _MAX_CACHED * (2 if any(None in s.feature_shape for s in model.graph_specs) else 1)
        self.others = weakref.WeakSet()          # graphs and states made for a Trainer: freed with us
        self.fit_state = None
        self.state_stores = {}                   # id(state variable) -> its WeightStore (stateful layers)
        self.bound_at = weights_mod.moves()
        self.weights_added = False               # a layer made weights after this was made

    def ensure_bound(self):
        """A layer shared with another model may have taken its values there: bring them back."""
        if self.bound_at != weights_mod.moves():
            self.store.bind_all()
            for s in self.state_stores.values():
                s.bind_all()
            self.bound_at = weights_mod.moves()

    def graph(self, key, make):
        e = self.graphs.get(key)
        if e is None:
            e = make()
            self.graphs[key] = e
            while len(self.graphs) > self.max_graphs:
                _, old = self.graphs.popitem(last=False)
                old.free()
        else:
            self.graphs.move_to_end(key)
        return e

    def state_tensor(self, variable):
        """The device tensor of a stateful layer's state variable (not a weight: not saved,
        not trained), made on first use; every graph of this runtime shares it."""
        store = self.state_stores.get(id(variable))
        if store is None:
            store = self.state_stores[id(variable)] = weights_mod.WeightStore(self.backend,
                                                                              [(variable.name, variable)])
        store.bind(variable)
        return store.tensor(variable)

    def state_of(self, optimizer):
        """The state this runtime keeps for ``optimizer`` (fit's, or apply_gradients'), or None."""
        if self.fit_state is not None and self.fit_state.optimizer is optimizer:
            return self.fit_state
        state = self.states.get(id(optimizer))
        return state if state is not None and state.optimizer is optimizer else None

    def fit_state_for(self, optimizer):
        if self.fit_state is None:
            self.fit_state = OptimizerState(optimizer, self.backend)
        return self.fit_state

    def evaluator(self, shapes, weight_kinds):
        # the penalties in the loss are those of the trainable weights: a graph per trainable set
        key = ("eval", shapes, weight_kinds, self.model._trainable_now()[1], _given_targets(self.model))
        return self.graph(key, lambda: executors.build(executors.LossEvaluator, self.model, shapes, weight_kinds))

    def train_step(self, shapes, weight_kinds, optimizer, trainable, signature):
        key = ("train", shapes, weight_kinds, signature, _given_targets(self.model))
        state = self.fit_state_for(optimizer)
        period = optimizer.gradient_accumulation_steps or 1
        return self.graph(key, lambda: executors.build(executors.TrainStep, self.model, shapes, weight_kinds, state,
                                                       trainable, period))

    def gradient_step(self, shapes, weight_kinds, trainable, signature):
        key = ("grad", shapes, weight_kinds, signature, _given_targets(self.model))
        return self.graph(key, lambda: executors.build(executors.GradientStep, self.model, shapes, weight_kinds,
                                                       trainable))

    def apply_gradients(self, optimizer, pairs):
        """One optimizer step on given gradients [(array, Variable)] of this model's weights."""
        names = {id(v): n for n, v in self.model.named_variables()}
        if optimizer is self.model.optimizer:
            state = self.fit_state_for(optimizer)
        else:
            state = self.states.get(id(optimizer))
            if state is None or state.optimizer is not optimizer:
                state = self.states[id(optimizer)] = OptimizerState(optimizer, self.backend)
        step_on_gradients(self, state, pairs, names, self.model._ensure_graph().layers)

    def predictor(self, shapes):
        return self.graph(("predict", shapes), lambda: executors.build(executors.Predictor, self.model, shapes))

    def outside_step(self, shapes, weight_kinds, optimizer, trainable, opt_period, state):
        """A training graph outside fit (a Trainer's), with its own optimizer state unless given."""
        if state is None:
            state = OptimizerState(optimizer, self.backend)
            self.others.add(state)
        step = executors.build(executors.TrainStep, self.model, shapes, weight_kinds, state, trainable, opt_period)
        self.others.add(step)
        return step

    def outside_evaluator(self, shapes, weight_kinds):
        ev = executors.build(executors.LossEvaluator, self.model, shapes, weight_kinds)
        self.others.add(ev)
        return ev

    def blender(self, other):
        """The graph that blends ``other``'s weights into ours (cached)."""
        key = ("blend", id(other.store))
        cached = self.graphs.get(key)
        if cached is not None and cached.graph.closed:       # that store was freed since
            self.graphs.pop(key).free()
        mine = [self.store.tensor(v) for _, v in self.model.named_variables()]
        theirs = [other.store.tensor(v) for _, v in other.model.named_variables()]
        return self.graph(key, lambda: weights_mod.Blender(mine, theirs, self.backend))

    def drop_graphs(self):
        for e in self.graphs.values():
            e.free()
        self.graphs.clear()
        for e in list(self.others):
            e.free()

    def free(self):
        self.drop_graphs()
        if self.fit_state is not None:
            self.fit_state.free()
            self.fit_state = None
        for s in self.states.values():
            s.free()
        self.states = {}
        for s in self.state_stores.values():
            s.free()
        self.state_stores = {}
        self.store.free()
        self.backend.free()


def step_on_gradients(rt, state, pairs, names, layers):
    """The optimizer step of ``state`` on [(gradient array, Variable)] of weights in ``rt``'s
    store (a Runtime, or a LooseWeights); ``names``: id(variable) -> weight name."""
    optimizer = state.optimizer
    variables = [v for _, v in pairs]
    state.ensure([(names[id(v)], v) for v in variables])
    n = optimizer.gradient_accumulation_steps
    if n:
        # Keras's apply accumulates too: the update comes every N calls, with the mean
        sums = state.host_accs
        for a, v in pairs:
            sums[id(v)] = sums[id(v)] + a if id(v) in sums else a.copy()
        state.micro += 1
        if state.micro < n:
            return
        pairs = [(sums.get(id(v), np.zeros(v.shape, np.float32)) / n, v) for _, v in pairs]
        state.micro = 0
        state.host_accs = {}
    key = ("apply", id(optimizer), tuple(id(v) for v in variables))
    ex = rt.graph(key, lambda: executors.ApplyGradients(rt.store, rt.backend, state, variables, layers))
    ex.run([a for a, _ in pairs])


def drop_graphs_holding(models, layer, weights_added=False):
    """A layer's computation changed (Layer.layer_changed): the models holding it make their
    graphs again; where it made weights, their device side too (Model._runtime)."""
    def holds(outer):
        return any(s is layer or holds(s) for s in outer.__dict__.get("_sublayers", {}).values())
    for m in models:
        topo = m.__dict__.get("_topology")
        if topo is None or m.__dict__.get("_freed") or not (m is layer or any(l is layer or holds(l)
                                                                              for l in topo.layers)):
            continue
        m._predict_fast = None
        if m._rt is not None:
            m._rt.drop_graphs()
            m._rt.weights_added = m._rt.weights_added or weights_added


def _given_targets(model):
    """The shapes of the targets a user's loss takes as given (data_adapter.TargetSpec.given):
    a graph is made for them as for its inputs' shapes."""
    spec = model.__dict__.get("_compile_spec")
    specs = None if spec is None else spec.target_specs
    return None if not specs else tuple(t.given for t in specs)
