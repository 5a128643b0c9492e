"""One graph builder and the executors that run a model's graphs.

Every graph of a model is built by ``GraphBuilder`` from the same layer graph
(Sequential models are functional graphs too).  Inputs, targets, weights,
constants and dropout masks live in a static buffer of their own ("copied
once"); the weights live in the model's buffer, shared by all executors; each
executor has its own scheduler, so predictions never re-lay the training
graph's memory.

- ``Predictor``: the forward graph for one batch size (inference mode).
- ``LossEvaluator``: forward + loss, no training (evaluate, Trainer.eval).
- ``TrainStep``: forward + loss trained by a ggml-opt context (fit, Trainer).
"""

import numpy as np

from pyggml import _random
from pyggml.core import Backend, BackendBuffer, Context, Graph, OptContext, Scheduler, ops
from pyggml.core import n_threads_is_set, get_n_threads
from pyggml.errors import GGMLError

# work (multiply-adds per step) below which one thread beats two: ggml's
# thread synchronisation costs more than it saves on tiny graphs
_SMALL_WORK = 200_000
# contexts start small (a few hundred kB) and grow when a model needs more
_N_TENSORS = 2048
_GRAPH_SIZE = 2048
_SCALES = (1, 8, 32, 128)


class GraphBuilder:
    """Collects the tensors of one graph: ``ctx`` for operations, ``in_ctx``
    for static inputs, constants and masks."""

    def __init__(self, model, batch, training, scale=1):
        self.model = model
        self.batch = int(batch)
        self.training = training
        self.graph_size = _GRAPH_SIZE * scale
        self.ctx = Context(n_tensors=_N_TENSORS * scale, graph_size=self.graph_size)
        self.in_ctx = Context(n_tensors=256 * scale + 64)
        self._consts = []
        self._masks = []
        self._limits = []
        self.stats = []          # (layer, mean, var) of BatchNormalization while training
        self.chw_of = {}         # id(channels-last tensor) -> (it, its (N, C, H, W) source)
        self.in_buf = None

    # used by layers -------------------------------------------------------------
    def weight(self, layer, name):
        return self.model._weight_tensor(layer, name)

    def const(self, array):
        a = np.ascontiguousarray(array, dtype=np.float32)
        t = self.in_ctx.new_tensor(a.shape if a.ndim else (1,))
        self._consts.append((t, a))
        return t

    def shape_only(self, shape):
        """A tensor whose shape is all that is used (im2col's kernel)."""
        return self.ctx.new_tensor(shape)

    def dropout_mask(self, shape, rate):
        t = self.in_ctx.new_tensor(shape)
        self._masks.append((t, float(rate)))
        return t

    def add_stat(self, layer, mean, var):
        mean.set_output()
        var.set_output()
        self.stats.append((layer, mean, var))

    def index_limit(self, t, limit):
        self._limits.append((t, limit))

    # used by executors -------------------------------------------------------------
    def input(self, shape, dtype="f32"):
        return self.in_ctx.new_tensor(shape, dtype=dtype)

    def allocate(self, backend):
        self.in_buf = BackendBuffer(self.in_ctx, backend)
        for t, a in self._consts:
            t.set(a)
        self.refresh_masks()

    def refresh_masks(self, rng=None):
        if not self._masks:
            return
        rng = rng or _random.rng()
        for t, rate in self._masks:
            keep = 1.0 - rate
            t.set((rng.random(t.shape) < keep).astype(np.float32) / keep)

    def free(self):
        if self.in_buf is not None:
            self.in_buf.free()
        self.ctx.free()
        self.in_ctx.free()


def _threads(work):
    if n_threads_is_set():
        return get_n_threads()
    return 1 if work < _SMALL_WORK else get_n_threads()


class _Executor:
    """Shared set-up: a builder, the model's forward pass, input tensors."""

    def __init__(self, model, batch, training, logits, scale=1):
        self.model = model
        self.batch = int(batch)
        # A device backend of its own (the weights' buffers work with any backend of
        # their device): freeing an executor then takes its device state with it,
        # which Vulkan needs (a backend that outlives buffers it computed with
        # corrupts memory in Mesa's driver).  CPU executors share the model's
        # backend and its thread pool.
        dev = model._backend
        self.backend = dev if dev.is_cpu else Backend(dev.name)
        self.g = GraphBuilder(model, batch, training, scale)
        self.xs = [self.g.input((batch,) + tuple(s), "i32" if d == "int32" else "f32")
                   for s, d in zip(model._input_shapes(), model._input_dtypes())]
        self.outs = model._forward(self.g, self.xs, training, logits)
        self.work = batch * max(model.count_params(), 1) * (4 if model._has_conv() else 1)
        self.n_threads = _threads(self.work)

    def set_inputs(self, xs):
        # index ranges (Embedding) are checked on the numpy side, in Model._prepare_x
        for t, x in zip(self.xs, xs):
            t.set(x)

    def free(self):
        for name in ("opt", "sched"):
            o = getattr(self, name, None)
            if o is not None:
                o.free()
        self.g.free()
        if self.backend is not self.model._backend:
            self.backend.free()


def build(cls, *args, **kwargs):
    """An executor in the smallest contexts that hold its graphs."""
    for i, scale in enumerate(_SCALES):
        try:
            return cls(*args, scale=scale, **kwargs)
        except GGMLError as e:
            msg = str(e)
            if ("full" not in msg and "too small" not in msg) or i == len(_SCALES) - 1:
                raise


class Predictor(_Executor):
    def __init__(self, model, batch, scale=1):
        super().__init__(model, batch, training=False, logits=False, scale=scale)
        self.outs = [o if o.is_contiguous else ops.cont(o, ctx=self.g.ctx) for o in self.outs]
        self.graph = Graph(self.g.ctx, self.g.graph_size)
        for o in self.outs:
            o.set_output()
            self.graph.build_forward(o)
        self.g.allocate(self.backend)
        self.sched = Scheduler([self.backend], graph_size=2 * self.g.graph_size)

    def run(self, xs):
        self.set_inputs(xs)
        self.sched.compute(self.graph, n_threads=self.n_threads)
        return [o.numpy() for o in self.outs]


def _flat2(t, ctx):
    """(batch, ...) -> (batch, cells) for the loss."""
    shape = t.shape
    cells = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    if len(shape) == 2:
        return t, cells
    src = t if t.is_contiguous else ops.cont(t, ctx=ctx)
    return ops.reshape(src, (shape[0], cells), ctx=ctx), cells


class _LossGraph(_Executor):
    """Forward pass plus the compiled loss over every output."""

    def __init__(self, model, batch, training, weighted, loss_mask=None, opt_period=1, scale=1):
        self.losses = model._losses
        logits = [l.logits_from for l in self.losses]
        super().__init__(model, batch, training=training, logits=logits, scale=scale)
        g = self.g
        self.weighted = weighted
        self.ys, self.ws = [], []
        total = None
        self.out_cells = []
        for i, (o, loss) in enumerate(zip(self.outs, self.losses)):
            o2, cells = _flat2(o, g.ctx)
            self.out_cells.append(cells)
            y = g.input((batch, cells))
            self.ys.append(y)
            w = None
            if weighted:
                wcols = cells if (loss_mask is not None and loss_mask > 1) or model._cell_weights[i] else 1
                w = g.input((batch, wcols))
                self.ws.append(w)
            if not weighted:
                inv_n = None
            else:
                if not hasattr(self, "inv_n"):
                    self.inv_n = g.input((1,))
                inv_n = self.inv_n
            from_logits = model._output_logits[i]
            li = loss.build(o2, y, g.ctx, batch, cells, w, inv_n, from_logits)
            # each head reports its own loss (Keras' <output>_loss); the total weighs them
            self.head_losses = getattr(self, "head_losses", []) + [li]
            lw = model._loss_weights[i]
            if lw != 1.0:
                li = ops.scale(li, lw, ctx=g.ctx)
            total = li if total is None else ops.add(total, li, ctx=g.ctx)
        self.opt_period = opt_period
        if opt_period > 1:
            total = ops.scale(total, 1.0 / opt_period, ctx=g.ctx)
        self.loss = total
        self.loss.set_output()
        if len(self.head_losses) > 1:
            for h in self.head_losses:
                h.set_output()
        self.read_outs = []
        for o in self.outs:
            oc = o if o.is_contiguous else ops.cont(o, ctx=g.ctx)
            oc.set_output()
            self.read_outs.append(oc)

    def set_batch(self, xs, ys, ws=None, n_real=None):
        self.set_inputs(xs)
        for t, y in zip(self.ys, ys):
            t.set(y)
        if self.weighted:
            for t, w in zip(self.ws, ws):
                t.set(w)
            self.inv_n.set(np.array([1.0 / (n_real or self.batch)], dtype=np.float32))


def _predictions(model, raw, i):
    """Apply the output activation the loss graph left out (logits -> probabilities)."""
    if model._output_logits[i]:
        act = model._losses[i].logits_from
        if act == "softmax":
            z = raw - raw.max(axis=-1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(axis=-1, keepdims=True)
        if act == "sigmoid":
            return 1.0 / (1.0 + np.exp(-raw))
    return raw


class LossEvaluator(_LossGraph):
    def __init__(self, model, batch, weighted, loss_mask=None, scale=1):
        super().__init__(model, batch, training=False, weighted=weighted, loss_mask=loss_mask, scale=scale)
        self.graph = Graph(self.g.ctx, self.g.graph_size)
        self.graph.build_forward(self.loss)
        for o in self.read_outs + (self.head_losses if len(self.head_losses) > 1 else []):
            self.graph.build_forward(o)
        self.g.allocate(self.backend)
        self.sched = Scheduler([self.backend], graph_size=2 * self.g.graph_size)

    def run(self, xs, ys, ws=None, n_real=None, want_outputs=False):
        self.set_batch(xs, ys, ws, n_real)
        self.sched.compute(self.graph, n_threads=self.n_threads)
        loss = float(self.loss.numpy()[0])
        heads = [float(h.numpy()[0]) for h in self.head_losses] if len(self.head_losses) > 1 else [loss]
        outs = None
        if want_outputs:
            outs = [_predictions(self.model, o.numpy(), i) for i, o in enumerate(self.read_outs)]
        return loss, heads, outs


class TrainStep(_LossGraph):
    """One ggml-opt context for its whole life: the moments and the step
    counter persist across steps."""

    def __init__(self, model, batch, weighted, loss_mask=None, opt_period=1, optimizer=None, scale=1):
        super().__init__(model, batch, training=True, weighted=weighted, loss_mask=loss_mask,
                         opt_period=opt_period, scale=scale)
        self.optimizer = optimizer or model.optimizer
        self.g.allocate(self.backend)
        self.sched = Scheduler([self.backend], graph_size=2 * self.g.graph_size)
        h = self.optimizer.hparams()
        self._hp = dict(h)
        self._lr = h["learning_rate"]
        self.opt = OptContext(self.sched, self.g.ctx, self.xs[0], self.loss, loss="sum",
                              optimizer=self.optimizer.kind, opt_period=opt_period,
                              **h)

    def _sync_hparams(self):
        lr = self.optimizer.learning_rate
        if lr != self._lr:
            h = self.optimizer.hparams()
            self.opt.set_hparams(**h)
            self._hp = dict(h)
            self._lr = lr

    def step(self, xs, ys, ws=None, n_real=None, want_outputs=False):
        self.set_batch(xs, ys, ws, n_real)
        self._sync_hparams()
        if self.g._masks:
            self.g.refresh_masks()
        loss = self.opt.step(n_threads=self.n_threads) * self.opt_period
        if self.g.stats:
            self.model._update_running_stats([(l, self.opt.read(m), self.opt.read(v)) for l, m, v in self.g.stats])
        heads = [self.opt.read(h)[0] * self.opt_period for h in self.head_losses] \
            if len(self.head_losses) > 1 else [loss]
        outs = None
        if want_outputs:
            outs = [_predictions(self.model, self.opt.read(o), i) for i, o in enumerate(self.read_outs)]
        return loss, heads, outs

    def get_state(self):
        """{"iter": t, "names": [...], "m": [...], "v": [...]} keyed by weight name."""
        st = self.opt.get_state()
        st["names"] = [p.name for p in self.opt.params]
        return st

    def set_state(self, state):
        """Restore a state from get_state() (of any TrainStep of the same model)."""
        order = {n: i for i, n in enumerate(state["names"])}
        ms, vs = [], []
        for p in self.opt.params:
            i = order.get(p.name)
            ms.append(None if i is None else state["m"][i])
            vs.append(None if i is None else state["v"][i])
        self.opt.set_state({"iter": state["iter"], "m": ms, "v": vs})
