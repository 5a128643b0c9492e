"""``GradientTape``: gradients of a computation written in Python (TensorFlow's and Keras's).

Inside ``with pg.GradientTape() as tape:`` layers and models called on arrays,
``pyggml.ops`` on what they return (and on arrays the tape was told to ``watch``)
and Tensor arithmetic (``a + b``, ``-0.5 * x``) are recorded into one ggml graph
instead of being computed at once: what they
return are ``pyggml.core.Tensor`` objects of the tape.  ``tape.gradient(target,
sources)`` then computes that graph forward and backward in one go, on the CPU,
and returns the gradients as float32 numpy arrays, in the structure of
``sources`` (Variables, a model's ``trainable_variables`` or ``trainable_weights``,
or arrays and leaf tensors the tape was told to ``watch``); a source the target
does not depend on gets None (or zeros with ``unconnected_gradients="zero"``).
A non-scalar target is summed, as TensorFlow does.

A recorded tensor's value is computed when it is first read (``float(t)``,
``np.asarray(t)``, ``t.numpy()``, a metric's ``update_state(t)``); after
``gradient`` every tensor that the target depends on has its value already.
The weights' values are read when the tape first uses them: changing a weight
afterwards (``optimizer.apply_gradients``) does not change what the tape computes.

Layers see ``training=False`` unless called with ``training=True``, as in Keras;
dropout masks and random draws are drawn once, when recorded; a
BatchNormalization called with ``training=True`` updates its moving statistics
when the tape first computes.

What ggml cannot do, the tape cannot either: an op without a backward pass on the
path from a source to the target is refused with the op's name.  A computation that
uses tensors of two tapes is refused too.

Second-order gradients (a gradient penalty such as WGAN-GP's, a Hessian-vector
product): a tape opened inside another's ``with`` block records into the same graph,
and its ``gradient()`` taken while the outer tape records returns tensors of that
graph (its backward pass, as ops), which the outer tape differentiates again.  The
ops that have a backward pass of their backward pass (ggml/patches/0040) are the
dense products, convolutions (Conv1D/2D and their transposes), element-wise
arithmetic, reshapes, splits, padding, upsampling, dropout, average pooling, max
pooling over windows that do not overlap (and ops.max, logsumexp, log_softmax),
layer normalization and the activations relu, leaky_relu, tanh, sigmoid, elu,
selu and softplus; another op on that path (batch normalization, softmax, gelu, a
recurrent cell) is refused with its name when the outer gradient is taken.
"""

import threading
import weakref

import numpy as np

from pyggml import _random, _scope
from pyggml._deep_graph import Graph
from pyggml._tensor_arrays import as_ops_result
from pyggml._validation import host
from pyggml.core import Backend, BackendBuffer, Context, Scheduler, Tensor, ops, reachable_count, reachable_sizes
from pyggml.errors import ContextFullError

__all__ = ["GradientTape", "active_tape", "lift"]

_lock = threading.RLock()         # one CPU backend for every tape: one compute at a time
_backend = [None]
_sched = [None, 0]                # the tapes' scheduler (under _lock) and the graph size it takes
_NO_MEMORY = "no tensors without memory"
# pyggml.models.thread_policy.ThreadChooser, set by pyggml.models.custom_steps (that package
# imports this module): a tape's compute runs on the thread count its chooser picks, one
# chooser per graph shape (a training loop records the same graph every step, so its chooser
# learns across steps)
THREAD_CHOOSER = [None]
_choosers = {}
_MAX_CHOOSERS = 64


def active_tape():
    """The builder of the tape recording on this thread (the innermost graph scope), or None."""
    b = _scope.current()
    return b if isinstance(b, _TapeBuilder) and b.recording else None


def lift(tape, value):
    """``value`` as a tensor of ``tape``: arrays and numbers become constants, Variables
    their tensors, tensors stay; a list is lifted element by element."""
    from pyggml import _wide
    if isinstance(value, Tensor) or type(value) is _wide.Wide:
        return value             # (a tensor of more than four dimensions in the tape: kept, not read back)
    if isinstance(value, (list, tuple)):
        return [lift(tape, v) for v in value]
    from pyggml.variables import Variable
    if isinstance(value, Variable):
        return tape.tensor_of(value)
    a = np.asarray(host(value))
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"a GradientTape records arrays of numbers, got dtype {a.dtype}")
    if a.ndim > 4:
        # a batch of volumes or videos: one tensor of its values, with its shape (pyggml._wide);
        # the model it goes to folds it (pyggml._fold)
        kind = "int32" if a.dtype.kind in "biu" else "float32"
        return _wide.Wide(tape.constant(np.ascontiguousarray(a).reshape(-1), kind), a.shape)
    # (the array itself where it is one: a watched array is known by its identity)
    return tape.constant(value if isinstance(value, np.ndarray) else a, "int32" if a.dtype.kind in "biu" else "float32")


def _cpu():
    if _backend[0] is None:
        _backend[0] = Backend("cpu")
    return _backend[0]


_KEEP_SCHED = 1 << 16               # graph sizes up to this keep the shared scheduler


def _scheduler(size):
    """The tapes' scheduler, made again when a graph needs a larger one (called under _lock:
    making one per compute cost more than a small tape's arithmetic).  A graph larger than
    _KEEP_SCHED gets one of its own (the caller frees it): its tables are not kept."""
    if size > _KEEP_SCHED:
        return Scheduler([_cpu()], graph_size=size)
    if _sched[0] is None or _sched[1] < size:
        if _sched[0] is not None:
            _sched[0].free()
            _sched[0] = None
        size = min(max(size, 4096), _KEEP_SCHED)
        _sched[0] = Scheduler([_cpu()], graph_size=size)
        _sched[1] = size
    return _sched[0]


def _chooser(g):
    """The thread chooser of graphs shaped as g (None: ggml's default count)."""
    make = THREAD_CHOOSER[0]
    if make is None:
        return None
    work = g.work()
    key = (g.n_nodes, work)
    c = _choosers.get(key)
    if c is None:
        if len(_choosers) >= _MAX_CHOOSERS:
            _choosers.pop(next(iter(_choosers)))
        # work counts the forward and the backward pass (2-3 times a forward pass's); the
        # chooser's threshold is a forward pass's
        c = _choosers[key] = make(work / 2.0)
    return c


def _compute(g, size):
    sched = _scheduler(2 * size)
    try:
        threads = _chooser(g)
        if threads is None:
            sched.compute(g)
            return
        n = threads.pick()
        try:
            sched.compute(g, n)
        except BaseException:
            threads.abandon()
            raise
        threads.done()
    finally:
        if sched is not _sched[0]:
            sched.free()


def _allocate(ctx):
    try:
        # the context keeps it, freed with the context; its memory from pyggml's pool (the next
        # step's tape takes it again without the system's fresh pages)
        BackendBuffer(ctx, _cpu(), pooled=True)
    except ValueError as e:
        if _NO_MEMORY not in str(e):
            raise


class _TapeBuilder:
    """The graph scope (pyggml._scope) of a tape, and the ``value_source`` of its context:
    one context holds the tape's constants, weights and operations, each in its own memory
    (nothing is reused), so every recorded tensor keeps its value once computed."""

    fused_ok = True              # computed on the CPU (pyggml._scope.fused)

    def __init__(self, n_tensors):
        self._ctx = Context(n_tensors=n_tensors)
        self._ctx.value_source = self
        self._ctx_ref = None         # (weak) once no tape uses this builder: see tape_gone
        self.n_tapes = 0             # the GradientTapes that record (or may yet record) here
        self.training = False
        self.recording = True
        self.cache = {}
        self.vars = {}               # id(variable) -> (tensor, variable)
        self.watched = {}            # id(array) -> (array, its tensor or None)
        self._pending = []           # (leaf tensor, array) to set once memory exists
        self._leaf_values = {}       # hash(leaf tensor) -> (tensor, array), also once set
        self._done = set()           # hashes (addresses) of tensors holding their values
        self.updates = []            # (variable, new value): moving statistics, states
        self._updated = False
        self.losses = []             # (layer, tensor): add_loss and activity regularizers
        # hashes of the (1,) tensors that stand for Keras's 0-d values (a full reduction, a loss,
        # arithmetic of those and numbers): their numpy() is 0-d, as Keras's scalars
        self.scalars = set()
        self.parent = None           # the builder of the tape whose block this one was opened in
        self.open_tapes = []         # the tapes inside whose with block this builder records

    def is_scalar(self, t):
        """Whether ``t`` (of shape (1,)) stands for a 0-d value (Tensor.numpy gives it 0-d)."""
        return hash(t) in self.scalars

    @property
    def ctx(self):
        """The context of the tape's tensors (None once they are all gone, after tape_gone)."""
        return self._ctx if self._ctx is not None else self._ctx_ref()

    def tape_gone(self):
        """One of the GradientTapes of this builder is gone.  With the last, what recording
        needs is dropped and the context is held weakly: the context holds this builder (its
        value_source, which computes a kept tensor's value on demand), so the two referred to
        each other, and a finished tape's memory (a GAN critic's step: hundreds of megabytes)
        waited for Python's garbage collector, which counts objects, not bytes.  Now it goes
        with the tape's last tensor.  (Leaves not yet given their values and weight updates
        not yet made keep the cycle: the collector still frees those.)"""
        self.n_tapes -= 1
        if self.n_tapes > 0 or self.recording or self._ctx is None or self._pending or \
                (self.updates and not self._updated):
            return
        self.vars, self.watched, self.cache, self._leaf_values = {}, {}, {}, {}
        self.losses, self.updates, self.open_tapes = [], [], []
        self._ctx_ref = weakref.ref(self._ctx)
        self._ctx = None

    # --- the scope protocol --------------------------------------------------------------
    def _leaf(self, array, dtype):
        a = np.ascontiguousarray(array, dtype=np.int32 if dtype == "int32" else np.float32)
        if a.ndim > 4:
            raise ValueError(f"a GradientTape records arrays of at most 4 dimensions, got {a.shape}: volumes and "
                             f"videos (5-D) train in functional, Sequential and subclassed models (fit, "
                             f"train_on_batch, a Trainer)")
        t = self.ctx.new_tensor(a.shape or (1,), dtype="i32" if dtype == "int32" else "f32")
        self._pending.append((t, a))
        self._leaf_values[hash(t)] = (t, a)
        return t

    def constant(self, array, dtype="float32"):
        w = self.watched.get(id(array))
        if w is not None and w[0] is array:
            if w[1] is None:
                t = self._leaf(array, "float32")
                self.watched[id(array)] = (array, t)
                return t
            return w[1]
        return self._leaf(np.asarray(array), dtype)

    def watched_tensor(self, array):
        """The tensor of ``array`` when the tape watches that very array (pyggml.ops record
        their use of it), else None."""
        w = self.watched.get(id(array))
        if w is None or w[0] is not array:
            return None
        return self.constant(array)

    def tensor_of(self, variable):
        e = self.vars.get(id(variable))
        if e is None:
            # (a weight of more than four dimensions is held as it is stored; see Variable)
            values = variable.numpy()
            e = self.vars[id(variable)] = (self._leaf(values.reshape(variable.store_shape) if values.ndim > 4 else
                                                      values, "float32"), variable)
        return e[0]

    def derived_input(self, source, fn, shape, dtype):
        e = self._leaf_values.get(hash(source))        # (a leaf computed already too: a metric read it)
        if e is not None and e[0] is source:
            return self._leaf(np.ascontiguousarray(fn(e[1])).reshape(shape), dtype)
        raise ValueError("this op reads its labels or indices on the host, so they must be data (an array), "
                         "not computed in the GradientTape")

    def random_keep_mask(self, shape, rate):
        return self._leaf(_random.draw_values(_random.rng(), tuple(shape), rate), "float32")

    def random_values(self, shape, draw, dtype="float32"):
        return self._leaf(_random.draw_values(_random.rng(), tuple(shape), draw), dtype)

    def add_update(self, variable, tensor):
        self.updates.append((variable, tensor))

    def add_state_update(self, variable, tensor):
        self.updates.append((variable, tensor))

    def add_loss(self, tensor, layer=None):
        self.losses.append((layer, tensor))

    # --- values (Context.value_source) ---------------------------------------------------
    def computed(self, t):
        return hash(t) in self._done

    def compute(self, t):
        self.run([t])

    def run(self, outputs, loss=None, params=()):
        """Compute ``outputs`` and, the first time, the weight updates with everything recorded
        so far (in the order recorded: some ops write side tensors the updates read, the fused
        BatchNormalization's batch statistics); with ``loss``, also its backward pass,
        returning the gradients of ``params`` (None where unconnected)."""
        with _lock:
            outs = [o if o.is_contiguous else ops.cont(o, ctx=self.ctx) for o in outputs]
            updates = [] if self._updated else [(v, t if t.is_contiguous else ops.cont(t, ctx=self.ctx))
                                                for v, t in self.updates]
            # with updates to make, everything recorded (the ops that write what they read)
            todo = [t for t in self.ctx.tensors() if t.op != "NONE" and hash(t) not in self._done] \
                if updates else []
            todo += [o for o in outs if o.op != "NONE" and hash(o) not in self._done]
            grads = []
            if loss is None and not todo and not updates:
                self._fill()
                return grads
            roots = todo + [t for _, t in updates] + ([loss] if loss is not None else [])
            # the backward pass's tensors: about three per node, more for a second-order pass
            n, back = reachable_sizes(roots) if loss is not None else (reachable_count(roots), 0)
            size = 2 * n + back + 256 if loss is not None else n + 256
            gctx = Context(n_tensors=(n + back + 64) if loss is not None else 8, graph_size=size)
            try:
                g = Graph(gctx, size, grads=loss is not None)
                if loss is not None:
                    loss.set_loss()
                    g.build_forward(loss)
                for o in todo:
                    o.set_output()
                    g.build_forward(o)
                wanted = []
                if g.count_outside(self.ctx, gctx):
                    raise ValueError("a recorded computation uses tensors of another GradientTape (or of a model's "
                                     "graph): a tape computes only what it recorded itself")
                if loss is not None:
                    sctx = Context(n_tensors=2)          # the seed gradient, with memory before the pass
                    seed = sctx.new_tensor((1,))
                    BackendBuffer(sctx, _cpu())
                    seed.set(np.ones(1, dtype=np.float32))
                    g.build_backward({loss: seed})
                    for p in params:
                        gr = g.grad(p) if p is not None else None
                        if gr is not None:
                            if not gr.is_contiguous:
                                gr = ops.cont(gr, ctx=gctx)
                            gr.set_output()
                            g.build_forward(gr)
                        wanted.append(gr)
                for _, t in updates:                 # last: after the ops whose side tensors they read
                    t.set_output()
                    g.build_forward(t)
                if loss is not None and g.count_outside(self.ctx, gctx, sctx):
                    raise ValueError("the backward pass reaches tensors of another GradientTape")
                _allocate(self.ctx)
                _allocate(gctx)
                self._fill()
                _compute(g, size)
                self._done.update(g.node_hashes())
                grads = [None if gr is None else gr.numpy() for gr in wanted]
                values = [t.numpy() for _, t in updates]
            finally:
                gctx.free()
        if updates:
            self._updated = True
            for (v, _), a in zip(updates, values):
                v.assign(a.reshape(v.shape))
        return grads

    def _fill(self):
        """Memory for the tensors made since the last computation, and the leaves' values."""
        _allocate(self.ctx)
        for t, a in self._pending:
            t.set(a)
            self._done.add(hash(t))
        self._pending = []


def _flatten(structure):
    if isinstance(structure, dict):
        return [v for k in structure for v in _flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [v for s in structure for v in _flatten(s)]
    return [structure]


def _pack(structure, flat):
    return _pack_from(structure, iter(flat))


def _pack_from(s, it):
    # (a module function: a nested one calling itself is a reference cycle, which kept the
    # packed gradients' tensors, and their tape's memory, for the garbage collector)
    if isinstance(s, dict):
        return {k: _pack_from(s[k], it) for k in s}
    if isinstance(s, (list, tuple)):
        out = [_pack_from(v, it) for v in s]
        return out if isinstance(s, list) else tuple(out)
    return next(it)


class GradientTape:
    """Records operations for ``gradient``: ``with pg.GradientTape() as tape: ...``.

    ``persistent``: ``gradient`` may be called more than once.
    ``watch_accessed_variables``: the trainable Variables a recorded layer or op reads are
    watched (``False``: only those given to ``watch``).
    ``max_tensors``: the most tensors one tape records (pyggml's; ggml sizes its graph
    memory up front)."""

    def __init__(self, persistent=False, watch_accessed_variables=True, max_tensors=1 << 16):
        if isinstance(max_tensors, bool) or not isinstance(max_tensors, (int, np.integer)) or \
                not 64 <= max_tensors <= 1 << 22:
            raise ValueError(f"max_tensors must be an int between 64 and 2**22, got {max_tensors!r}")
        self.persistent = bool(persistent)
        self.watch_accessed_variables = bool(watch_accessed_variables)
        self._max = int(max_tensors)
        self._b = None
        self._scope = None
        self._used = False
        self._watched_vars = {}          # id -> Variable (watch())
        self._watched_arrays = set()     # ids of the arrays this tape watches (a shared graph holds others')
        self._shared = False             # records into the graph of the tape it was opened in

    def _use(self, builder):
        """Record into ``builder`` (None: none yet); the builder counts its tapes."""
        if builder is self._b:
            return
        old, self._b = self._b, builder
        if builder is not None:
            builder.n_tapes += 1
        if old is not None:
            old.tape_gone()

    def __del__(self):
        try:
            self._use(None)
        except Exception:         # (at interpreter exit, or a half-made tape)
            pass

    # --- recording -------------------------------------------------------------------------
    def __enter__(self):
        if self._scope is not None:
            raise RuntimeError("this GradientTape is already recording")
        outer = _scope.current()
        if self._shared and not (outer is self._b and self._b.recording):
            self._use(None)                             # a shared graph is not entered again alone
            self._shared = False
        if self._b is None and isinstance(outer, _TapeBuilder) and outer.recording:
            # a tape opened inside another's block (``with gen_tape, disc_tape:``, a gradient
            # penalty's tape): what it records, the outer one records too (TensorFlow's), in one
            # graph, so the outer tape can differentiate this one's gradient again
            self._use(outer)
            self._shared = True
        if self._b is None:
            self._use(_TapeBuilder(self._max))
        if not self._shared:
            self._b.parent = outer if isinstance(outer, _TapeBuilder) else None
        self._b.open_tapes.append(self)
        self._b.recording = True
        self._scope = _scope.entered(self._b)
        self._scope.__enter__()
        return self

    def __exit__(self, *exc):
        scope, self._scope = self._scope, None
        scope.__exit__(*exc)
        if self in self._b.open_tapes:
            self._b.open_tapes.remove(self)
        self._b.recording = bool(self._b.open_tapes)
        if exc[0] is ContextFullError:
            raise ContextFullError(f"the GradientTape recorded more than {self._max} tensors: make it with "
                                   f"pg.GradientTape(max_tensors=...) larger") from exc[1]
        return False

    def stop_recording(self):
        """``with tape.stop_recording():`` layers and ops on arrays compute at once, recording
        nothing (inside the tape's with block)."""
        if self._scope is None:
            raise RuntimeError("stop_recording() is used inside the tape's with block")
        return _scope.paused()

    def watch(self, tensor):
        """Watch a Variable, an array (the same object, given to a layer or op inside the
        tape) or a leaf tensor of this tape; a list of them too."""
        from pyggml.variables import Variable
        for x in _flatten(tensor):
            x = getattr(x, "variable", x)
            x = getattr(x, "view_base", x)                    # Dense.kernel: its weight
            if isinstance(x, Variable):
                self._watched_vars[id(x)] = x
            elif isinstance(x, Tensor):
                if (self._b is None or x.ctx is not self._b.ctx) and x.op != "NONE" and \
                        getattr(x.ctx, "value_source", None) is not None:
                    raise ValueError("watch() of a tensor another GradientTape computed: open this tape inside that "
                                     "tape's with block (they then record one graph, and a gradient with respect "
                                     "to it can be differentiated again)")
                if self._b is None or x.ctx is not self._b.ctx or x.dtype != "f32":
                    raise ValueError("watch() takes a float tensor this tape recorded, a Variable or an array")
                # a constant (ops.convert_to_tensor) is no longer one the ops may compute on the host:
                # its gradient is asked for (a PINN's coordinates, concatenated before the model)
                known = self._b.cache.get("host_values", {})
                if id(x) in known and known[id(x)][0] is x:
                    del known[id(x)]
            elif isinstance(x, np.ndarray) and x.dtype.kind == "f":
                if self._b is None:
                    self._use(_TapeBuilder(self._max))
                self._b.watched[id(x)] = (x, None)
                self._watched_arrays.add(id(x))
            else:
                kind = f"{type(x).__module__}.{type(x).__name__}" if type(x).__module__ != "builtins" else \
                    type(x).__name__
                raise TypeError(f"watch() takes pyggml Variables, float numpy arrays or tensors of the tape, got "
                                f"{kind}" + (": watch a numpy array (t.detach().numpy()) and use that array "
                                             "in the block" if type(x).__module__.startswith("torch") else ""))

    def watched_variables(self):
        if self._b is None:
            return []
        out = [v for _, v in self._b.vars.values() if v.trainable and self.watch_accessed_variables]
        out += [v for v in self._watched_vars.values() if all(v is not o for o in out)]
        return out

    def reset(self):
        """Forget what was recorded (inside the with block: recording goes on afresh)."""
        recording = self._scope is not None
        if recording:
            self.__exit__(None, None, None)
        self._use(None)
        self._used = False
        if recording:
            self.__enter__()

    # --- gradients -------------------------------------------------------------------------
    def _recorder_of(self, target):
        """The builder whose graph holds ``target``: this tape's, or that of a tape opened inside
        this one's block while this one had recorded nothing itself (so the inner graph holds
        all this tape saw: TensorFlow's two tapes in one ``with`` statement)."""
        b = self._b
        for t in _flatten(target):
            inner = getattr(getattr(t, "ctx", None), "value_source", None) if isinstance(t, Tensor) else None
            if not isinstance(inner, _TapeBuilder) or inner is b:
                continue
            up = getattr(inner, "parent", None)
            while up is not None and up is not b:
                up = getattr(up, "parent", None)
            if up is b and not b.vars and not b._leaf_values:
                return inner
            break
        return b

    def _leaf_of(self, source, b=None):
        from pyggml.variables import Variable
        b = self._b if b is None else b
        source = getattr(source, "variable", source)          # a model's trainable_weights name
        source = getattr(source, "view_base", source)         # Dense.kernel: its weight's leaf
        if isinstance(source, Variable):
            e = b.vars.get(id(source))
            if e is None:
                return None
            if not (id(source) in self._watched_vars or (self.watch_accessed_variables and source.trainable)):
                return None
            return e[0]
        if isinstance(source, Tensor):
            if source.ctx is not b.ctx:
                raise ValueError("gradient(): a source tensor is not one this tape recorded")
            # a recorded result too (Grad-CAM's gradient with respect to a layer's output)
            return source if source.dtype == "f32" else None
        if isinstance(source, np.ndarray):
            w = b.watched.get(id(source))
            if b is self._b and id(source) not in self._watched_arrays:
                return None                    # another tape of the shared graph watches it, not this one
            return None if w is None or w[0] is not source else w[1]
        raise TypeError(f"gradient(): sources must be Variables, watched arrays or tensors of the tape, got "
                        f"{type(source).__name__}")

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients="none"):
        """Gradients of ``target`` (a tensor the tape recorded, or a list of them, summed)
        with respect to ``sources``, as numpy arrays in the structure of ``sources``."""
        if unconnected_gradients not in ("none", "zero"):
            raise ValueError(f"unconnected_gradients must be 'none' or 'zero', got {unconnected_gradients!r}")
        if self._used and not self.persistent:
            raise RuntimeError("a GradientTape that is not persistent computes gradients once; make it with "
                               "persistent=True to call gradient() again")
        if self._b is None:
            raise RuntimeError("the GradientTape recorded nothing (use it as `with pg.GradientTape() as tape:`)")
        b = self._recorder_of(target)
        outer = active_tape()
        if outer is not None and outer is not b:
            # TensorFlow records the inner gradient on the outer tape (a gradient penalty trains
            # through it); a tape that does not share the outer one's graph cannot: say so
            raise ValueError("gradient() of a tape inside another recording GradientTape whose graph it does not "
                             "share (it recorded before that tape's with block): open it inside the outer "
                             "tape's block, or call gradient() after that block")
        flat = _flatten(sources)
        leaves = [self._leaf_of(s, b) for s in flat]
        loss = self._loss_of(target, output_gradients, b)
        self._used = True
        if outer is b and any(t is not self for t in b.open_tapes):
            # another tape records this gradient: its ops join the graph (second order)
            return self._recorded_gradient(b, sources, flat, leaves, loss, unconnected_gradients)
        if loss is None:
            grads = [None] * len(flat)
        else:
            wanted = set(hash(l) for l in leaves if l is not None)
            for t, _ in b.vars.values():
                t.set_param(hash(t) in wanted)
            for _, t in b.watched.values():
                if t is not None:
                    t.set_param(hash(t) in wanted)
            for l in leaves:
                if l is not None and l.op == "NONE":
                    l.set_param(True)
            if any(l is not None and l.op != "NONE" for l in leaves):
                # ggml computes the gradient of a result when a parameter lies upstream of it: every
                # float leaf is one for this pass (the weights' and the inputs' gradients are not read)
                for t, _ in list(b.vars.values()) + list(b._leaf_values.values()):
                    if t.dtype == "f32":
                        t.set_param(True)
            try:
                grads = b.run([], loss, leaves) if wanted else None
            except ValueError as e:
                if "does not depend on any trainable weight" not in str(e):
                    raise
                grads = None
            if grads is None:                       # nothing to differentiate: the values still count
                b.run([loss])
                grads = [None] * len(flat)
        out = []
        for s, g in zip(flat, grads):
            if g is None and unconnected_gradients == "zero":
                g = np.zeros(np.shape(getattr(s, "variable", s)), dtype=np.float32)
            elif g is not None:
                s = getattr(s, "variable", s)
                g = s.gradient_from_base(g) if hasattr(s, "view_base") else g.reshape(np.shape(s))
            out.append(as_ops_result(g) if type(g) is np.ndarray else g)    # TensorFlow's .numpy() too
        if isinstance(sources, (list, tuple, dict)):
            return _pack(sources, out)
        return out[0]

    def _recorded_gradient(self, b, sources, flat, leaves, loss, unconnected_gradients):
        """gradient() while another tape records: the backward pass built as ops of the shared
        graph (ggml's, in the tape's context), so the tensors returned are that tape's and it
        can differentiate them again; nothing is computed here."""
        for s, l in zip(flat, leaves):
            if l is not None and hasattr(s, "view_base"):
                raise ValueError(f"a gradient another tape differentiates again is taken with respect to weights in "
                                 f"pyggml's layout ({getattr(s, 'name', s)!r} is a view in Keras's): use the "
                                 f"layer's trainable_variables")
        grads = [None] * len(flat)
        wanted = [l for l in leaves if l is not None]
        if loss is not None and wanted:
            with _lock:
                for t in b.ctx.tensors():            # marks of earlier passes: this pass has its own
                    if t.dtype == "f32" and "param" in t.flags:
                        t.mark_source(False)
                seed = b._leaf(np.ones(1, dtype=np.float32), "float32")
                b._fill()
                n, back = reachable_sizes([loss])
                size = 2 * n + back + 256
                gctx = Context(n_tensors=8, graph_size=size)
                try:
                    for l in wanted:
                        l.mark_source(True)
                    loss.set_loss()
                    g = Graph(gctx, size, grads=True)
                    g.build_forward(loss)
                    if g.count_outside(b.ctx, gctx):
                        raise ValueError("a recorded computation uses tensors of another GradientTape (or of a "
                                         "model's graph): a tape computes only what it recorded itself")
                    try:
                        g.build_backward({loss: seed}, tensor_ctx=b.ctx)
                    except ContextFullError as e:
                        raise ContextFullError(f"the GradientTape has no room for this gradient's backward pass: "
                                               f"make the outer tape with pg.GradientTape(max_tensors=...) "
                                               f"larger ({e})") from e
                    except ValueError as e:
                        if "does not depend on any trainable weight" not in str(e):
                            raise
                    else:
                        grads = [None if l is None else g.grad(l) for l in leaves]
                finally:
                    loss.set_loss(False)
                    for l in wanted:
                        l.mark_source(False)
                    gctx.free()
        out = []
        with b.ctx.as_default():
            for s, gr in zip(flat, grads):
                if gr is None and unconnected_gradients == "zero":
                    gr = b._leaf(np.zeros(np.shape(getattr(s, "variable", s)), dtype=np.float32), "float32")
                elif gr is not None and not gr.is_contiguous:
                    gr = ops.cont(gr)
                out.append(gr)
        b._fill()
        if isinstance(sources, (list, tuple, dict)):
            return _pack(sources, out)
        return out[0]

    def _loss_of(self, target, output_gradients, b=None):
        """The scalar the backward pass starts from: sum(target * output_gradients), None for
        a target the tape did not record (a constant: every gradient is None)."""
        b = self._b if b is None else b
        targets = _flatten(target)
        seeds = _flatten(output_gradients) if output_gradients is not None else [None] * len(targets)
        if len(seeds) != len(targets):
            raise ValueError(f"output_gradients has {len(seeds)} entries for {len(targets)} targets")
        parts = []
        with b.ctx.as_default():
            for t, s in zip(targets, seeds):
                if not isinstance(t, Tensor) or t.ctx is not b.ctx or t.dtype != "f32":
                    if isinstance(t, Tensor) and t.ctx is not b.ctx:
                        raise ValueError("gradient(): the target was recorded by another tape")
                    continue
                if s is not None:
                    sv = np.asarray(s, dtype=np.float32)
                    if sv.size != t.nelements:
                        raise ValueError(f"output_gradients: shape {sv.shape} for a target of shape {t.shape}")
                    t = ops.mul(t if t.is_contiguous else ops.cont(t), b._leaf(sv.reshape(t.shape), "float32"))
                parts.append(t if t.nelements == 1 and t.ndim == 1 else
                             ops.sum(ops.reshape(t if t.is_contiguous else ops.cont(t), (t.nelements,))))
            if not parts:
                return None
            loss = parts[0]
            for p in parts[1:]:
                loss = ops.add(loss, p)
            if loss.op == "NONE":
                loss = ops.scale(loss, 1.0)
        return loss

    def jacobian(self, target, sources, unconnected_gradients="none"):
        """The Jacobian of ``target`` with respect to each source: shape target.shape +
        source.shape (one backward pass per element of the target; a persistent tape)."""
        if not self.persistent:
            raise RuntimeError("jacobian() needs a persistent tape (GradientTape(persistent=True))")
        t = target
        if not isinstance(t, Tensor):
            raise TypeError("jacobian(): the target must be a tensor the tape recorded")
        flat = _flatten(sources)
        rows = []
        for i in range(t.nelements):
            seed = np.zeros(t.nelements, dtype=np.float32)
            seed[i] = 1.0
            rows.append(self.gradient(t, flat, output_gradients=seed.reshape(t.shape),
                                      unconnected_gradients="zero"))
        out = [np.stack([r[k] for r in rows]).reshape(tuple(t.shape) + np.shape(getattr(s, "variable", s)))
               for k, s in enumerate(flat)]
        if unconnected_gradients == "none":
            out = [None if not np.any(o) and self._leaf_of(s) is None else o for o, s in zip(out, flat)]
        if isinstance(sources, (list, tuple, dict)):
            return _pack(sources, out)
        return out[0]
