"""The graphs a model runs, each built once per batch shape and kept.

- ``Predictor``: the forward graph (inference mode).
- ``LossEvaluator``: forward and the compiled losses, no training.
- ``TrainStep``: forward, losses, the backward pass, every weight's optimizer
  update and the layers' state updates (BatchNormalization's running
  statistics), as one graph computed once per step.  The optimizer's state
  (slots, step counter) lives in an ``OptimizerState`` shared by every
  TrainStep of one training context, so batches of any size train alike.

A ``GraphBuilder`` implements the graph scope of ``pyggml._scope``: the
graph's operations go to its ``ctx``; inputs, constants, masks and the
per-step scalars go to ``in_ctx`` (a static buffer set once, or per step);
the weights are the model's store's tensors, shared by every graph.  Each
executor has its own scheduler, so a prediction never re-lays the training
graph's memory.
"""

import warnings

import numpy as np

from pyggml import _fold, _random, _scope
from pyggml.metrics.metric import MetricUpdate
from pyggml._deep_graph import Graph
from pyggml.core import BackendBuffer, Context, Scheduler, ops, reachable_count
from pyggml.errors import ContextFullError, GGMLError
from pyggml.layers import weight_rules
from pyggml.losses.loss import reduce_loss
from pyggml.models import functional
from pyggml.models.thread_policy import ThreadChooser
from pyggml.optimizers.optimizer import global_clip_scale

__all__ = ["GraphBuilder", "Predictor", "LossEvaluator", "TrainStep", "GradientStep", "ApplyGradients", "build"]

# contexts start small and grow when a model needs more
_N_TENSORS = 2048
_GRAPH_SIZE = 2048
_SCALES = (1, 8, 32, 128, 512)


class GraphBuilder:
    """The graph scope (see pyggml._scope) of one executor's graphs."""

    def __init__(self, store, training, scale=1, fused_ok=False):
        self.store = store
        self.training = bool(training)
        # the graph computes on the CPU: layers may use pyggml's fused CPU ops (pyggml._scope.fused)
        self.fused_ok = bool(fused_ok)
        self.graph_size = _GRAPH_SIZE * scale
        self.ctx = Context(n_tensors=_N_TENSORS * scale, graph_size=3 * self.graph_size)
        self.in_ctx = Context(n_tensors=256 * scale + 64)
        self.cache = {}
        self.updates = []            # (variable tensor, new value)
        self.state_updates = []      # (state tensor, new value): stateful layers' states, every graph
        self._consts = []            # (tensor, array) still to set
        self._masks = []             # (tensor, rate or draw(rng, shape)): redrawn before each step
        self._derived = {}           # id(source) -> [(tensor, fn)]
        self._buffers = []
        self.added_losses = []       # 1-element tensors layers added (activity regularizers, add_loss)
        self.metric_updates = []     # MetricUpdate: a metric's update_state in a layer's call

    # --- the scope protocol ----------------------------------------------------------
    def tensor_of(self, variable):
        t = self.store.tensors.get(id(variable)) if self.store is not None else None
        if t is None:
            # a stateful layer's states: not weights, kept in the runtime's state stores
            t = self.state_tensor(variable)
        if t is None and not getattr(variable, "_made_in_graph", True):
            # a layer the model does not hold (one at module level its call uses, an adapted
            # Normalization): as in Keras, whose model does not track it, its weights are not the
            # model's to train; the graph reads their values now
            return self.constant(variable.numpy().reshape(variable.store_shape))
        if t is None:
            raise GGMLError(f"the weight {variable.name!r} is not one of this model's (a layer made it while "
                            f"the graph was being built: build every layer before compiling)")
        return t

    def constant(self, array, dtype="float32"):
        a = np.ascontiguousarray(array, dtype=np.int32 if dtype == "int32" else np.float32)
        t = self.in_ctx.new_tensor(a.shape if a.ndim else (1,), dtype="i32" if dtype == "int32" else "f32")
        self._consts.append((t, a))
        return t

    def random_keep_mask(self, shape, rate):
        t = self.in_ctx.new_tensor(shape)
        self._masks.append((t, float(rate)))
        return t

    def random_values(self, shape, draw, dtype="float32"):
        t = self.in_ctx.new_tensor(shape, dtype="i32" if dtype == "int32" else "f32")
        self._masks.append((t, draw))
        return t

    def add_update(self, variable, tensor):
        self.updates.append((self.tensor_of(variable), tensor))

    def add_state_update(self, variable, tensor):
        """Write ``tensor`` into the state ``variable`` when the graph has run (every graph:
        a stateful recurrent layer's states carry over from batch to batch)."""
        self.state_updates.append((self.tensor_of(variable), tensor))

    def state_tensor(self, variable):
        """The tensor of a state variable (not a weight) on the runtime's device, or None."""
        owner = getattr(self.store, "owner", None)
        if owner is None or not getattr(variable, "is_state", False):
            return None
        return owner.state_tensor(variable)

    def state_writes(self):
        """The copies that write the final states into the state tensors (inside the scope)."""
        return [ops.cpy(_contiguous(value), target) for target, value in self.state_updates]

    def add_loss(self, tensor, layer=None):
        self.added_losses.append(tensor)

    def add_metric_update(self, metric, args, kwargs):
        """A metric's update_state in a layer's call: its tensors are read back after each
        compute and the metric updated with their values (pyggml.metrics.metric)."""
        self.metric_updates.append(MetricUpdate(metric, args, kwargs))

    def derived_input(self, source, fn, shape, dtype):
        if source.op != "NONE":
            # only what is fed is known on the host: a computed source would leave t unset
            raise ValueError("this op reads its labels or indices on the host, so they must be data fed to the graph "
                             "(a model input, y_true), not computed in it")
        t = self.in_ctx.new_tensor(shape, dtype="i32" if dtype == "int32" else "f32")
        for c, a in self._consts:
            if c is source:
                self._consts.append((t, np.ascontiguousarray(fn(a)).reshape(shape)))
                return t
        self._derived.setdefault(id(source), []).append((t, fn))
        return t

    # --- for executors ------------------------------------------------------------------
    def input(self, shape, dtype="float32"):
        # a 5-D input (volumes, videos) is folded: (batch * D, H, W, C) (pyggml._fold)
        t = self.in_ctx.new_tensor(_fold.graph_shape(shape), dtype="i32" if dtype in ("int32", "string") else "f32")
        if len(shape) >= 5:
            # its Keras shape, for the layers it reaches (a volume's depth may be None in the model:
            # the graph is built for the data's)
            self.cache.setdefault("_fold_shapes", {})[t] = tuple(shape)
        if dtype == "string":
            _scope.mark_strings(self, t)         # zeros; host layers in a call read the strings
        return t

    def pairs(self, tensors, arrays, out):
        """Append (tensor, array) pairs to ``out`` for Scheduler.run, with derived inputs."""
        if not self._derived:
            out += [(t, a) for t, a in zip(tensors, arrays) if t is not None]
            return out
        strings = self.__dict__.get("_string_inputs", {})
        todo = [(t, a) for t, a in zip(tensors, arrays) if t is not None]
        while todo:                       # derived from derived ones too (labels sliced, then offset)
            t, a = todo.pop(0)
            out.append((t, np.zeros(a.shape, np.int32) if id(t) in strings else a))
            todo += [(d, np.ascontiguousarray(fn(a))) for d, fn in self._derived.get(id(t), ())]
        return out

    def allocate(self, backend):
        """Memory for the in_ctx tensors made since the last call, and their values."""
        if any(not t.is_allocated for t in self.in_ctx.tensors()):
            self._buffers.append(BackendBuffer(self.in_ctx, backend))
        for t, a in self._consts:
            t.set(a)
        self._consts = []
        self.refresh_masks()

    @property
    def has_masks(self):
        return bool(self._masks)

    @property
    def has_derived(self):
        return bool(self._derived)

    def refresh_masks(self):
        if not self._masks:
            return
        rng = _random.rng()
        for t, rate in self._masks:
            t.set(_random.draw_values(rng, t.shape, rate))

    def free(self):
        for b in self._buffers:
            b.free()
        self.ctx.free()
        self.in_ctx.free()


def _contiguous(t):
    return t if t.is_contiguous else ops.cont(t)


def _optimizer_ops(opt, param, grad, slots, scalars, variable):
    """(the ops of one weight's optimizer step, the tensor holding its value after them):
    the update (none without a gradient), then the moving average's (use_ema).  An optimizer
    that reads the weight's layout (Adafactor) is given its Variable."""
    if grad is None:
        outs = []
    elif opt.takes_variable:
        outs = opt.update(param, grad, slots, scalars, variable=variable)
    else:
        outs = opt.update(param, grad, slots, scalars)
    value = _written(outs, param)
    more = opt.after_step(param, value, slots, scalars)
    if more and opt.ema_overwrite_frequency:
        value = more[-1]
    return outs + more, value


def _written(outs, param):
    """The tensor holding param's value after an optimizer's update: the update's last
    op, which writes param (Optimizer.update's contract; its result is a view of param,
    so what reads it comes after the update), else param itself."""
    last = outs[-1] if outs else None
    if last is not None and tuple(last.shape) == tuple(param.shape) and last.op in ("CPY", "OPT_STEP_ADAMW",
                                                                                     "OPT_STEP_SGD"):
        return last
    return param


class Executor:
    """Shared set-up: a builder over the model's weights, one input tensor per model input."""

    def __init__(self, model, shapes, training, scale=1):
        self.model = model
        # every graph of a model computes on the model's backend (ggml patch 0060
        # made sharing one Vulkan backend safe; a backend per graph hid that bug)
        rt = model._rt
        self.backend = rt.backend
        self.g = GraphBuilder(rt.store, training, scale, fused_ok=self.backend.is_cpu)
        self.shapes = shapes
        self.batch = shapes[0][0]
        self.xs = [self.g.input(s, spec.dtype) for s, spec in zip(shapes, model.graph_specs)]
        self.work = self.batch * max(model.count_params(), 1) * (4 if model._has_conv() else 1)
        self.threads = ThreadChooser(self.work)
        self.threads_acc = ThreadChooser(self.work)
        self.sched = None
        self.freed = False

    def run_graph(self, graph, pairs, reads, threads=None):
        """One run of graph on the thread count the executor's chooser picks."""
        return self.on_threads(threads or self.threads, self.sched.run, graph, pairs, reads)

    @staticmethod
    def on_threads(threads, run, *args):
        """run(*args, n) on the count n that the chooser ``threads`` picks, timed for it."""
        n = threads.pick()
        try:
            got = run(*args, n)
        except BaseException:
            threads.abandon()
            raise
        threads.done()
        return got

    def forward(self, training, logits_for=(), with_masks=False):
        with _scope.entered(self.g):
            return functional.run_nodes(self.model._topology, self.xs, training, logits_for, with_masks)

    def make_scheduler(self, graph_size):
        self.sched = Scheduler([self.backend], graph_size=graph_size)

    def free(self):
        if self.freed:
            return
        self.freed = True
        if self.sched is not None:
            self.sched.free()
            self.sched = None
        self.g.free()


def build(cls, *args, **kwargs):
    """An executor in the smallest contexts that hold its graphs."""
    for i, scale in enumerate(_SCALES):
        try:
            return cls(*args, scale=scale, **kwargs)
        except ContextFullError:
            if i == len(_SCALES) - 1:
                raise ContextFullError(
                    f"the model's graph for these inputs needs more than {_N_TENSORS * scale:,} tensors, the most one "
                    f"graph holds (a recurrent layer unrolls its cell once per time step: give shorter sequences, "
                    f"or split them and carry the state with stateful=True)") from None


class Predictor(Executor):
    def __init__(self, model, shapes, scale=1):
        super().__init__(model, shapes, training=False, scale=scale)
        with _scope.entered(self.g):
            raw = self.forward(False)
            made = _fold.noted(raw) or [None] * len(raw)        # the Keras shapes of its volumes
            self.outs = [ops.dup(o) if o.op == "NONE" else _contiguous(o) for o in raw]
            writes = self.g.state_writes()
        size = reachable_count(self.outs + writes) + 64
        self.graph = Graph(self.g.ctx, size)
        for o in self.outs:
            o.set_output()
            self.graph.build_forward(o)
        for w in writes:                        # after the outputs: they read the states first
            self.graph.build_forward(w)
        self.g.allocate(self.backend)
        self.make_scheduler(size)
        # one input the graph reads as given (nothing derived from it): run_one's case
        self.one = len(self.xs) == 1 and not self.g.has_derived
        # 5-D outputs come back folded (pyggml._fold): their Keras shapes
        self.unfold = [(m if _fold.folds(m) else (self.batch, -1) + o.feature_shape[1:])
                       if o.ndim >= 5 else None for o, m in zip(model._topology.outputs, made)]
        if not any(self.unfold):
            self.unfold = None

    def run(self, xs):
        if self.g.has_masks:
            self.g.refresh_masks()          # random values (pg.random) are drawn again for every call
        return self._shaped(self.run_graph(self.graph, self.g.pairs(self.xs, xs, []), self.outs))

    def run_one(self, x):
        """run([x]) of a ``one`` predictor, x exactly as its input takes it (checked by the
        caller): one call into the core."""
        if self.g.has_masks:
            self.g.refresh_masks()
        return self._shaped(self.run_graph(self.graph, ((self.xs[0], x),), self.outs))

    def _shaped(self, got):
        if self.unfold is None:
            return got
        return [a if s is None else a.reshape(s) for a, s in zip(got, self.unfold)]


def _predictions(loss, raw):
    """The output activation a loss graph left out, applied to its logits on the host."""
    act = loss.logits_from
    if act == "softmax":
        z = raw - raw.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)
    if act == "sigmoid":
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-raw))
    return raw


class _LossGraph(Executor):
    """Forward pass plus the compiled losses: the total, each head's, the outputs."""

    def __init__(self, model, shapes, training, weight_kinds, trainable, opt_period=1, scale=1):
        super().__init__(model, shapes, training=training, scale=scale)
        spec = model._compile_spec
        self.spec = spec
        logits_for = [i for i, f in enumerate(spec.logits) if f]
        outs, masks = self.forward(training, logits_for, with_masks=True)
        # a padding mask reaches the loss (and the metrics) of an output that keeps the steps
        self.masks = [m if m is not None and len(o.shape) >= 3 and tuple(m.shape) == tuple(o.shape[:2]) else None
                      for o, m in zip(outs, masks)]
        self.ys, self.ws, self.heads = [], [], []
        self.last_masks = None              # the padding masks of the last step's outputs (for metrics)
        total = None
        with _scope.entered(self.g):
            for i, (o, loss) in enumerate(zip(outs, spec.losses)):
                if loss is None:
                    self.ys.append(None)
                    self.ws.append(None)
                    self.heads.append(None)
                    continue
                given = model.target_specs[i].given
                if given is not None:
                    # a user's loss takes y as the data has it (data_adapter's as_given)
                    rows_y = self.batch if model._topology.outputs[i].ndim >= 5 else o.shape[0]
                    y = self.g.input((rows_y,) + given[0] if given[0] else (rows_y,), given[1])
                elif loss.sparse:
                    y = self.g.input(tuple(o.shape[:-1]), "int32")
                else:
                    y = self.g.input(o.shape)
                self.ys.append(y)
                kind = weight_kinds[i] if weight_kinds else None
                w = None
                # a 5-D output comes folded, (batch * D, ...): its weights are per sample (pyggml._fold)
                rows = self.batch if model._topology.outputs[i].ndim >= 5 else o.shape[0]
                if kind is not None:
                    w = self.g.input((rows, int(kind)))       # the weights' width: 1, the cells or the steps
                self.ws.append(w)
                reduction = getattr(loss, "reduction", "sum_over_batch_size")
                if reduction in ("sum", "mean_with_sample_weight") and self.masks[i] is None and \
                        rows == o.shape[0]:
                    # the loss's own reduction (Keras's compile honours it): a sum, or the weighted
                    # sum over the weights' sum
                    values = loss.values(y, o, from_logits=spec.logits[i])
                    head = loss._reduce(loss._per_step(values, o, w), w)
                elif w is None and self.masks[i] is None:
                    head = loss.mean_loss(y, o, from_logits=spec.logits[i])
                else:
                    values = loss.values(y, o, from_logits=spec.logits[i])
                    if rows != o.shape[0]:
                        values = ops.reshape(_contiguous(values), (rows, values.nelements // rows))
                    head = reduce_loss(values, w, self.masks[i])
                self.heads.append(head)
                weighted = ops.scale(head, spec.loss_weights[i]) if spec.loss_weights[i] != 1.0 else head
                total = weighted if total is None else ops.add(total, weighted)
            # Keras's loss: the compiled losses plus the regularization penalties of the trainable
            # weights and the losses the layers added (activity regularizers, add_loss)
            self.penalty = weight_rules.total_penalty(model._ensure_graph().layers, trainable, self.g.added_losses)
            if total is None and self.penalty is None:
                raise ValueError("nothing to train on: no output has a loss and no layer adds one (add_loss); "
                                 "compile with a loss for at least one output")
            if self.penalty is not None:
                total = self.penalty if total is None else ops.add(total, self.penalty)
            if opt_period > 1:
                total = ops.scale(total, 1.0 / opt_period)
            self.read_outs = []
            self.read_masks = []
            for i, o in enumerate(outs):
                wanted = spec.wants_outputs(i)
                self.read_outs.append(_contiguous(o) if wanted else None)
                self.read_masks.append(_contiguous(self.masks[i]) if wanted and self.masks[i] is not None else None)
            # metrics a layer's call updates (keras-io's endpoint layer): their tensors are read
            # back with every step, and the metrics updated with the values (the model's logs hold them)
            self.metric_reads = [_contiguous(t) for u in self.g.metric_updates for t in u.tensors()]
            calls = model.__dict__.setdefault("_call_metrics", [])
            for u in self.g.metric_updates:
                if all(u.metric is not m for m in calls):
                    calls.append(u.metric)
        self.total = total
        self.opt_period = opt_period
        self.loss_heads = [h for h in self.heads if h is not None]
        # each head's loss is read back when there are several, or when the total holds more
        self.read_heads = len(self.heads) > 1 or self.penalty is not None
        for t in [total] + self.loss_heads + [o for o in self.read_outs + self.read_masks if o is not None] + \
                self.metric_reads:
            t.set_output()

    def batch_pairs(self, xs, ys, ws):
        if not self.g.has_derived:
            pairs = list(zip(self.xs, xs))
            pairs += [(t, y) for t, y in zip(self.ys, ys) if t is not None]
            if ws is not None:
                pairs += [(t, w) for t, w in zip(self.ws, ws) if t is not None]
            return pairs
        pairs = self.g.pairs(self.xs, xs, [])
        self.g.pairs(self.ys, ys, pairs)
        if ws is not None:
            self.g.pairs(self.ws, ws, pairs)
        return pairs

    def reads(self, want_outputs):
        """The tensors a step reads back: the total, the heads when several, the outputs for metrics."""
        cache = self.__dict__.setdefault("_reads", {})
        r = cache.get(want_outputs)
        if r is None:
            r = [self.total] + (self.loss_heads if self.read_heads else [])
            if want_outputs:
                r += [o for o in self.read_outs if o is not None]
                r += [m for m in self.read_masks if m is not None]
            r += self.metric_reads
            cache[want_outputs] = r
        return r

    def results(self, got, want_outputs):
        loss = float(got[0][0]) * self.opt_period
        k = 1
        if self.read_heads:
            heads = []
            for h in self.heads:
                heads.append(None if h is None else float(got[k][0]))
                k += h is not None
        else:
            heads = [loss / self.spec.loss_weights[0] if self.spec.loss_weights[0] else 0.0]
        outs = None
        if want_outputs:
            outs = []
            for i, o in enumerate(self.read_outs):
                if o is None:
                    outs.append(None)
                    continue
                raw = got[k]
                k += 1
                outs.append(_predictions(self.spec.losses[i], raw) if self.spec.logits[i] else raw)
            self.last_masks = []
            for m in self.read_masks:
                self.last_masks.append(None if m is None else got[k])
                k += m is not None
        for u in self.g.metric_updates:
            n = len(u.tensors())
            u.apply(got[k:k + n])
            k += n
        return loss, heads, outs


class LossEvaluator(_LossGraph):
    def __init__(self, model, shapes, weight_kinds, scale=1):
        super().__init__(model, shapes, training=False, weight_kinds=weight_kinds,
                         trainable=model._trainable_now()[0], scale=scale)
        wanted = [self.total] + self.loss_heads + [o for o in self.read_outs + self.read_masks if o is not None] + \
            self.metric_reads
        with _scope.entered(self.g):
            writes = self.g.state_writes()
        size = reachable_count(wanted + writes) + 64
        self.graph = Graph(self.g.ctx, size)
        for t in wanted:
            self.graph.build_forward(t)
        for w in writes:
            self.graph.build_forward(w)
        self.g.allocate(self.backend)
        self.make_scheduler(size)

    def run(self, xs, ys, ws=None, want_outputs=False):
        if self.g.has_masks:
            self.g.refresh_masks()
        got = self.run_graph(self.graph, self.batch_pairs(xs, ys, ws), self.reads(want_outputs))
        return self.results(got, want_outputs)


class TrainStep(_LossGraph):
    """Forward, losses, backward and the optimizer's updates as one graph
    (two with gradient accumulation: ``opt_period`` micro-steps accumulate,
    the last one also updates)."""

    def __init__(self, model, shapes, weight_kinds, state, trainable, opt_period=1, scale=1):
        super().__init__(model, shapes, training=True, weight_kinds=weight_kinds, trainable=trainable,
                         opt_period=opt_period, scale=scale)
        self.state = state
        opt = state.optimizer
        self.optimizer = opt
        g = self.g
        store = model._rt.store
        # parameters: the trainable weights this graph reaches
        params = []
        for name, v in model._named_variables():
            t = store.tensor(v)
            on = v in trainable
            t.set_param(on)
            if on:
                params.append((name, v, t))
        if not params:
            # Keras warns and runs: the loss and metrics of each batch (dropout on, as in
            # training), layers' own updates, and no weight changes
            warnings.warn("the model has no trainable weights (every layer is frozen): fit computes the loss "
                          "and metrics and changes no weight", stacklevel=2)
        state.ensure([(n, v) for n, v, _ in params])
        if params:
            self.total.set_loss()
        self.seed = g.input((1,))
        self.scalars = g.input((opt.n_scalars,))
        self.accs = None
        if opt_period > 1:
            # the sums live in the state: every batch shape's graph adds into the same ones
            sums = state.accumulators([(n, v) for n, v, _ in params])
            self.accs = {t: sums[id(v)] for _, v, t in params}
        g.allocate(self.backend)
        # the backward pass starts from d(loss)/d(loss) = 1, or the optimizer's loss scale
        self.seed.set(np.full(1, opt.loss_scale_factor or 1.0, dtype=np.float32))
        # the backward pass adds about three nodes per forward one; an optimizer a few per weight
        forward = reachable_count([self.total] + self.loss_heads +
                                  [o for o in self.read_outs + self.read_masks if o is not None])
        self.layers = model._ensure_graph().layers
        n_rules = sum(len(weight_rules.constraint_rules(l)) for l in weight_rules.layer_tree(self.layers))
        size = 4 * forward + 32 * len(params) + 4 * len(g.updates) + 8 * len(g.state_updates) + 64 * n_rules + 256
        accumulators = {self.total: self.seed}
        if self.accs:
            accumulators.update(self.accs)
        if opt_period > 1:
            self.graph_acc = self._graph(size, accumulators, params, with_updates=False)
        self.graph = self._graph(size, accumulators, params, with_updates=True)
        g.allocate(self.backend)
        self.make_scheduler(size)
        # the common case takes one call into the core per step (plain_step): no dropout
        # masks, derived inputs or accumulation, every output with its targets
        ws = [w for w in self.ws if w is not None]
        self.plain = (opt_period == 1 and not g.has_derived and not g.has_masks and None not in self.ys
                      and len(ws) in (0, len(self.ws)) and not self.metric_reads)
        self._plain_tensors = tuple(self.xs) + tuple(self.ys) + tuple(ws) + (self.scalars,)

    def _graph(self, size, accumulators, params, with_updates):
        g = self.g
        graph = Graph(g.ctx, size, grads=bool(params))
        graph.build_forward(self.total)
        for t in self.loss_heads + [o for o in self.read_outs + self.read_masks if o is not None] + self.metric_reads:
            graph.build_forward(t)
        if params:
            graph.build_backward(accumulators)
        with _scope.entered(g):
            for target, value in g.updates:
                graph.build_forward(ops.cpy(value, target))
            # after the backward pass, which reads the initial states (W_hh's gradient)
            for w in g.state_writes():
                graph.build_forward(w)
            opt = self.optimizer
            grads = [(v, t, graph.grad(t)) for _, v, t in params]
            grads = [(v, t, opt.unscale(gr)) for v, t, gr in grads if gr is not None]
            if with_updates and not grads and params:
                raise ValueError("the loss does not depend on any trainable weight")
            # Keras's gradient accumulation runs the moving average and the constraints after
            # every batch (its apply), the update on the last of each N only
            if with_updates or opt.gradient_accumulation_steps:
                scale = global_clip_scale([gr for _, _, gr in grads], opt.global_clipnorm) \
                    if opt.global_clipnorm is not None and with_updates else None
                updated = {}
                for v, t, gr in grads:
                    outs, updated[id(v)] = _optimizer_ops(opt, t, opt.clip(gr, scale) if with_updates else None,
                                                          self.state.slots(v), self.scalars, v)
                    for out in outs:
                        graph.build_forward(out)
                # Keras applies the weights' constraints after the optimizer's update
                for out in weight_rules.constraint_updates(self.layers, updated):
                    graph.build_forward(out)
        return graph

    def plain_step(self, arrays):
        """step() of a ``plain`` executor for arrays exactly as its tensors take them
        (inputs, targets, then weights if the graph has them; the caller checked them):
        one call into the core; returns the loss."""
        opt = self.optimizer
        loss = self.on_threads(self.threads, self.sched.run_scalar, self.graph, self._plain_tensors,
                               arrays + (opt.step_scalars(),), self.total)
        opt.iterations += 1
        return loss

    def step(self, xs, ys, ws=None, want_outputs=False):
        pairs = self.batch_pairs(xs, ys, ws)
        if self.g._masks:
            self.g.refresh_masks()
        state = self.state
        last = self.opt_period == 1 or (state.micro % self.opt_period) == self.opt_period - 1
        pairs.append((self.scalars, self.optimizer.step_scalars()))
        # the accumulation graph has no optimizer update: it is timed on its own
        got = self.run_graph(self.graph if last else self.graph_acc, pairs, self.reads(want_outputs),
                             self.threads if last else self.threads_acc)
        state.micro = 0 if last else state.micro + 1
        if last:
            self.optimizer.iterations += 1
            if self.accs:
                state.clear_accumulators()
        return self.results(got, want_outputs)


class GradientStep(_LossGraph):
    """Forward (training mode), the losses and the backward pass; reads each trainable
    weight's gradient and changes nothing (Keras's GradientTape pattern)."""

    def __init__(self, model, shapes, weight_kinds, trainable, scale=1):
        super().__init__(model, shapes, training=True, weight_kinds=weight_kinds, trainable=trainable, scale=scale)
        g = self.g
        store = model._rt.store
        self.params = []
        for name, v in model._named_variables():
            t = store.tensor(v)
            t.set_param(v in trainable)
            if v in trainable:
                self.params.append((name, t))
        if not self.params:
            raise ValueError("the model has no trainable weights (every layer is frozen)")
        self.total.set_loss()
        self.seed = g.input((1,))
        g.allocate(self.backend)
        self.seed.set(np.ones(1, dtype=np.float32))
        size = 5 * reachable_count([self.total]) + 8 * len(g.state_updates) + 256
        self.graph = Graph(g.ctx, size, grads=True)
        self.graph.build_forward(self.total)
        self.graph.build_backward({self.total: self.seed})
        self.grads = []
        for name, t in self.params:
            gr = self.graph.grad(t)
            if gr is not None:
                gr = _contiguous(gr)
                gr.set_output()
                self.graph.build_forward(gr)
            self.grads.append((name, t, gr))
        with _scope.entered(g):
            for w in g.state_writes():
                self.graph.build_forward(w)
        g.allocate(self.backend)
        self.make_scheduler(size)

    def run(self, xs, ys, ws=None):
        """(loss, {weight name: gradient}) for the batch."""
        pairs = self.batch_pairs(xs, ys, ws)
        if self.g._masks:
            self.g.refresh_masks()
        reads = [self.total] + [gr for _, _, gr in self.grads if gr is not None]
        got = self.run_graph(self.graph, pairs, reads)
        out, k = {}, 1
        for name, t, gr in self.grads:
            if gr is None:
                out[name] = np.zeros(t.shape, dtype=np.float32)
            else:
                out[name] = got[k].reshape(t.shape)
                k += 1
        return float(got[0][0]), out


class ApplyGradients:
    """An optimizer's step on given gradients: one graph whose inputs are the gradients."""

    def __init__(self, store, backend, state, variables, layers=()):
        opt = state.optimizer
        self.optimizer, self.state = opt, state
        n = len(variables)
        n_rules = sum(len(weight_rules.constraint_rules(l)) for l in weight_rules.layer_tree(layers))
        # room for the longest update (Lamb's and its trust ratio's) of every weight
        room = 64 * n + 64 * n_rules + 256
        self.g = GraphBuilder(store, training=False, scale=max(1, room // 1024 + 1))
        self.backend = backend
        self.grads = [self.g.input(v.store_shape) for v in variables]
        self.scalars = self.g.input((opt.n_scalars,))
        built = []
        with _scope.entered(self.g):
            params = [store.tensor(v) for v in variables]
            for t in params:
                t.set_param(True)            # ggml's optimizer steps update parameters only
            # Keras's apply unscales the gradients it is given (loss_scale_factor)
            grads = [opt.unscale(gr) for gr in self.grads]
            scale = global_clip_scale(grads, opt.global_clipnorm) if opt.global_clipnorm is not None else None
            updated = {}
            for v, t, gr in zip(variables, params, grads):
                outs, updated[id(v)] = _optimizer_ops(opt, t, opt.clip(gr, scale), state.slots(v), self.scalars, v)
                built += outs
            # Keras applies the weights' constraints after the optimizer's update
            built += list(weight_rules.constraint_updates(layers, updated))
        size = reachable_count(built) + 256
        self.graph = Graph(self.g.ctx, size)
        for out in built:
            self.graph.build_forward(out)
        self.g.allocate(backend)
        self.sched = Scheduler([backend], graph_size=size)
        self.freed = False

    def run(self, arrays):
        pairs = list(zip(self.grads, arrays)) + [(self.scalars, self.optimizer.step_scalars())]
        self.sched.run(self.graph, pairs, (), 1)
        self.optimizer.iterations += 1

    def free(self):
        if not self.freed:
            self.freed = True
            self.sched.free()
            self.g.free()
