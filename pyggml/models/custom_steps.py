"""Keras's overridable steps: ``train_step``, ``test_step``, ``predict_step``,
``compute_loss`` and ``compute_metrics``, for custom training written in Python.

A model whose class overrides ``train_step`` or ``compute_loss`` (a GAN, a VAE,
a distiller), or a ``pg.Model`` subclass with no layer graph of its own (one
that only holds other models and writes ``train_step``), trains as Keras runs
it: ``fit`` calls ``train_step(data)`` on every batch (``data`` is ``x``,
``(x, y)`` or ``(x, y, sample_weight)`` as Keras packs it: arrays, or the
items a dataset yields) and logs the dict it returns; ``evaluate`` calls
``test_step`` and ``predict`` ``predict_step`` the same way, when overridden.
The steps compute with ``pg.GradientTape`` and ``optimizer.apply_gradients``.

The default ``train_step`` is Keras's: ``self(x, training=True)`` and
``compute_loss`` on a tape, the gradients of ``trainable_variables`` applied
by ``self.optimizer``, then ``compute_metrics``.  ``compile`` on such a model
takes Keras's arguments (``loss`` may be left out) and keeps them for these
steps: ``compute_loss`` is the compiled loss plus ``self.losses``, the
compiled metrics are one ``compile_metrics`` entry of ``model.metrics`` after
the ``loss`` tracker (Keras 3), also reachable as Keras 2's
``compiled_loss``/``compiled_metrics``.

Models without these overrides keep pyggml's own fused training step (one
cached ggml graph per batch shape, no Python per layer).

``install(Model)`` adds this to the Model class (it keeps model.py to the
functional graph, as pyggml.models.subclassing does).
"""

import functools
import itertools

import numpy as np

from pyggml import config as config_mod
from pyggml._validation import check_positive_int, host
from pyggml import losses as losses_mod
from pyggml import metrics as metrics_mod
from pyggml import optimizers as optimizers_mod
from pyggml import autodiff
from pyggml._tensor_arrays import as_ops_result
from pyggml.autodiff import GradientTape
from pyggml.callbacks import CallbackList
from pyggml.core import Tensor
from pyggml.layers._keras_weights import LayerWeights
from pyggml.layers.layer import Layer
from pyggml.metrics.metric import Mean, Metric
from pyggml.models import compile_spec
from pyggml.models import data_adapter as da
from pyggml.models.thread_policy import ThreadChooser
from pyggml.utils.data_packing import unpack_x_y_sample_weight

__all__ = ["install", "uses_custom_fit"]

autodiff.THREAD_CHOOSER[0] = ThreadChooser      # a tape's compute picks its threads as executors do

_DEFAULT_LOSS = object()           # compile's loss when not given: none for a custom-step model


# --- a call on arrays ----------------------------------------------------------------------

def _eager_call(model, x, training):
    return Layer.__call__(model, x) if training is None else Layer.__call__(model, x, training=training)


def _call_adds_losses(model):
    """Whether a layer of the model adds losses in its call (found while its graph was traced),
    kept per topology."""
    topo = model._topology
    if topo is None:
        return False
    known = model.__dict__.get("_adds_losses_of")
    if known is None or known[0] is not topo:
        from pyggml.layers.weight_rules import layer_tree
        known = model.__dict__["_adds_losses_of"] = (
            topo, any(l.__dict__.get("_adds_losses") for l in layer_tree([model])))
    return known[1]


# --- what compile keeps ----------------------------------------------------------------------
def _resolved_accuracy(identifier, y_true, y_pred):
    yt, yp = np.asarray(y_true), np.asarray(y_pred)
    binary = yp.ndim >= 1 and yp.shape[-1:] == (1,) or yp.ndim == 1
    sparse = not binary and (yt.ndim < yp.ndim or (yt.ndim == yp.ndim and yt.shape[-1] == 1))
    return metrics_mod.get(identifier, sparse=sparse, binary=binary)


class CompileMetrics(Metric):
    """The metrics given to compile, as one entry of ``model.metrics`` (Keras 3's
    ``compile_metrics``).  ``update_state(y, y_pred, sample_weight)`` updates each;
    ``result()`` is a dict by log name.  For several outputs (lists in the same order)
    the metrics are split as the fused compile splits them (pyggml.models.compile_spec):
    a flat list for every output, a list of lists one per output, a dict by output
    name; their names get the output's name in front when the model's outputs have
    names, and ``_1``, ``_2`` for repeats, as Keras names them."""

    def __init__(self, metrics, weighted_metrics=None, output_names=None):
        super().__init__("compile_metrics")
        self._given = (metrics, weighted_metrics)
        self._output_names = list(output_names) if output_names else None
        self._keys = None

    def _build(self, ys, ps):
        n = len(ps)
        names = self._output_names if self._output_names and len(self._output_names) == n else None
        split_names = names
        if split_names is None:
            dicts = [g for g in self._given if isinstance(g, dict)]
            split_names = list(dicts[0]) if dicts and len(dicts[0]) == n else [f"output_{i}" for i in range(n)]
        per = []
        for given, what in zip(self._given, ("metrics", "weighted_metrics")):
            ids = compile_spec.metrics_per_output(given, split_names, what)
            per.append([[_resolved_accuracy(m, ys[i], ps[i]) if m in ("accuracy", "acc") else metrics_mod.get(m)
                         for m in ms] for i, ms in enumerate(ids)])
        self._keys = compile_spec.metric_log_keys(names if n > 1 else None, per[0], per[1])

    def update_state(self, y_true, y_pred, sample_weight=None):
        several = isinstance(y_pred, (list, tuple))
        ps = [_array(p) for p in (y_pred if several else [y_pred])]
        ys = [_array(t) for t in (y_true if several and isinstance(y_true, (list, tuple)) else [y_true])]
        if len(ys) > len(ps) or (len(ys) < len(ps) and len(ys) != 1):
            raise ValueError(f"compile_metrics: {len(ps)} outputs and {len(ys)} targets")
        # one target for several outputs (keras-io's BASNet: a mask for each of its side outputs, the
        # loss its own compute_loss): Keras pairs them in order, so the first output's metrics alone
        # see it
        self._paired = len(ys)
        if isinstance(sample_weight, (list, tuple)):
            sws = list(sample_weight) + [sample_weight[0]] * (len(ps) - len(sample_weight))
        else:
            sws = [sample_weight] * len(ps)
        if self._keys is None:
            self._build(ys + ys[-1:] * (len(ps) - len(ys)), ps)
        for i, m, _, weighted in self._keys:
            if i < len(ys):
                m.update_state(ys[i], ps[i], sws[i] if weighted else None)

    def result(self):
        paired = self.__dict__.get("_paired")
        return _results((m, key) for i, m, key, _ in self._keys or () if paired is None or i < paired)

    def reset_state(self):
        for _, m, _, _ in self._keys or ():
            m.reset_state()

    @property
    def metrics(self):
        return [m for _, m, _, _ in self._keys or ()]


def _results(metrics):
    """{log key: result} of (metric, key) pairs; a metric whose result is a dict gives its entries."""
    out = {}
    for m, key in metrics:
        r = m.result()
        if isinstance(r, dict):
            out.update(r)
        else:
            out[key] = r
    return out


class _SpecMetrics(Metric):
    """Keras 3's ``compile_metrics`` entry of ``model.metrics`` for a model trained by fit:
    the compiled metrics' objects, their results by their log keys."""

    def __init__(self, spec):
        super().__init__("compile_metrics")
        self.spec = spec

    def update_state(self, y_true, y_pred, sample_weight=None):
        raise RuntimeError("compile_metrics: fit and evaluate update these; a train_step of its own updates "
                           "its own metrics")

    def result(self):
        return _results((m, key) for _, m, key, _ in self.spec.all_metric_keys())

    def reset_state(self):
        for _, m, _, _ in self.spec.all_metric_keys():
            m.reset_state()

    @property
    def metrics(self):
        return [m for _, m, _, _ in self.spec.all_metric_keys()]


class CompileLoss:
    """The loss given to compile (Keras 2's ``compiled_loss``): one loss, or a list / dict
    (by position) for several outputs, weighted by ``loss_weights``."""

    def __init__(self, loss, loss_weights=None):
        if isinstance(loss, dict):
            loss = list(loss.values())
        self.many = isinstance(loss, (list, tuple))
        self.losses = [None if l is None else losses_mod._as_loss(l) for l in (loss if self.many else [loss])]
        if isinstance(loss_weights, dict):
            loss_weights = list(loss_weights.values())
        w = loss_weights if loss_weights is not None else [1.0] * len(self.losses)
        self.weights = [float(x) for x in (w if isinstance(w, (list, tuple)) else [w])]
        if len(self.weights) != len(self.losses):
            raise ValueError(f"{len(self.weights)} loss_weights for {len(self.losses)} losses")

    def __call__(self, y_true, y_pred, sample_weight=None, regularization_losses=None):
        ys = list(y_true) if self.many else [y_true]
        ps = list(y_pred) if self.many else [y_pred]
        if len(ys) != len(self.losses) or len(ps) != len(self.losses):
            raise ValueError(f"compile has {len(self.losses)} losses; got {len(ps)} outputs and {len(ys)} targets")
        total = None
        for l, w, t, p in zip(self.losses, self.weights, ys, ps):
            if l is None:
                continue
            v = l(t, p, sample_weight)
            v = v * w if w != 1.0 else v
            total = v if total is None else total + v
        for r in regularization_losses or ():
            total = r if total is None else total + r
        return total


def _array(v):
    if isinstance(v, (list, tuple)):
        return [_array(x) for x in v]
    return np.asarray(v)


# --- which loop runs ------------------------------------------------------------------------
def _overrides(model, name, base):
    return getattr(type(model), name, None) is not getattr(base, name)


def _graphless(model):
    """A Model subclass holding other models, with neither a graph nor a call of its own."""
    from pyggml.models.sequential import Sequential
    return (model._topology is None and not model.__dict__.get("_subclassed", False)
            and not isinstance(model, Sequential) and type(model).__module__ != "pyggml.models.model")


def _output_names(model):
    """The names of a model's outputs when it has a layer graph (None without one yet)."""
    if model._topology is None:
        return None
    return model.output_names


def uses_custom_fit(model, base):
    return _overrides(model, "train_step", base) or _overrides(model, "compute_loss", base) or _graphless(model) \
        or getattr(model.__dict__.get("optimizer"), "steps_through_python", False)


def _custom_evaluate(model, base):
    return uses_custom_fit(model, base) or _overrides(model, "test_step", base)


# --- the steps (Model methods) --------------------------------------------------------------
def _batch_size(x):
    flat = x if isinstance(x, (list, tuple)) else (list(x.values()) if isinstance(x, dict) else [x])
    return len(flat[0]) if flat and hasattr(flat[0], "__len__") else 1


def _compute_loss(model, x, y, y_pred, sw, training):
    """model.compute_loss with the arguments its signature takes (Keras 3.0's had
    ``allow_empty``, later ones ``training``): x, y, y_pred and sample_weight by position, as
    Keras passes them (an override may name them ``y_true``), ``training`` by keyword."""
    import inspect
    try:
        params = inspect.signature(model.compute_loss).parameters
    except (TypeError, ValueError):
        params = {}
    if "training" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return model.compute_loss(x, y, y_pred, sw, training=training)
    return model.compute_loss(x, y, y_pred, sw)


def _check_callable(model, step):
    if _graphless(model):
        raise TypeError(f"{type(model).__name__} has neither a call() nor a layer graph, so the default "
                        f"{step} cannot run it: override {step} (or define call())")


def train_step(self, data):
    """Keras's default: forward and ``compute_loss`` on a GradientTape, the optimizer's
    step on ``trainable_variables``, then ``compute_metrics``."""
    _check_callable(self, "train_step")
    x, y, sw = unpack_x_y_sample_weight(data)
    variables = self.trainable_variables
    with GradientTape() as tape:
        y_pred = self(x, training=True)
        loss = _compute_loss(self, x, y, y_pred, sw, True)
    self._tracker().update_state(np.asarray(loss), sample_weight=_batch_size(x))
    grads = tape.gradient(loss, variables)
    self.optimizer.apply_gradients(zip(grads, variables))
    return self.compute_metrics(x, y, y_pred, sample_weight=sw)


def test_step(self, data):
    """Keras's default: inference-mode outputs, ``compute_loss``, ``compute_metrics``."""
    _check_callable(self, "test_step")
    x, y, sw = unpack_x_y_sample_weight(data)
    y_pred = self(x)
    loss = _compute_loss(self, x, y, y_pred, sw, False)
    self._tracker().update_state(np.asarray(loss), sample_weight=_batch_size(x))
    return self.compute_metrics(x, y, y_pred, sample_weight=sw)


def predict_step(self, data):
    """Keras's default: the model's outputs for the batch's ``x``."""
    _check_callable(self, "predict_step")
    x, _, _ = unpack_x_y_sample_weight(data)
    return self(x)


def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    """The compiled loss of (y, y_pred) plus the model's added losses (``self.losses``:
    regularization penalties, ``add_loss``), as Keras 3's."""
    cl = self.__dict__.get("_custom_loss")
    total = cl(y, y_pred, sample_weight) if cl is not None and y is not None else None
    for r in self.losses:
        total = r if total is None else total + r
    if total is None:
        raise ValueError("no loss to compute: give compile a loss, or override compute_loss or train_step")
    return total


class _NoCompiledMetrics:
    """``model.compiled_metrics`` of a model compiled without metrics (Keras's shim is there
    whatever compile got): a train_step's ``update_state`` has nothing to update."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        return None

    def reset_state(self):
        return None

    def result(self):
        return {}


_NO_METRICS = _NoCompiledMetrics()


def compute_metrics(self, x, y, y_pred, sample_weight=None):
    """Update the compiled metrics with the batch; returns ``get_metrics_result()``."""
    cm = self.__dict__.get("_custom_metrics")
    if cm is not None and y is not None:
        cm.update_state(y, y_pred, sample_weight)
    return self.get_metrics_result()


def get_metrics_result(self):
    """{name: value} of every metric in ``self.metrics`` (compile_metrics' entries flattened)."""
    out = {}
    for m in self.metrics:
        r = m.result()
        if isinstance(r, dict):
            out.update(r)
        else:
            out[m.name] = r
    return _floats(out)


def _tracker(self):
    t = self.__dict__.get("_loss_tracker")
    if t is None:
        t = self.__dict__["_loss_tracker"] = Mean(name="loss")
    return t


def metrics(self):
    """Keras 3's: the loss tracker and the compiled metrics (once compiled), then the
    Metric objects the model holds as attributes."""
    out = []
    if self.__dict__.get("_custom_compiled"):
        _flush_losses(self)
        out.append(self._tracker())
        cm = self.__dict__.get("_custom_metrics")
        if cm is not None:
            out.append(cm)
    elif self.__dict__.get("_compiled") and self.__dict__.get("_compile_spec") is not None:
        # fit's and evaluate's own: the loss's running mean and the compiled metrics, as they
        # stand after the last epoch or evaluation
        out.append(self._tracker())
        spec = self._compile_spec
        if spec.all_metric_keys():
            view = self.__dict__.get("_spec_metrics")
            if view is None or view.spec is not spec:
                view = self.__dict__["_spec_metrics"] = _SpecMetrics(spec)
            out.append(view)
    for k, v in self.__dict__.items():
        if not k.startswith("_") and isinstance(v, Metric) and all(v is not o for o in out):
            out.append(v)
    return out


class _TrackedLoss:
    """Keras 2's ``model.compiled_loss(y, y_pred, sample_weight, regularization_losses)``:
    the compiled loss, whose value also goes to the ``loss`` tracker (read when the metrics
    are, after the tape has computed it: no extra forward pass)."""

    def __init__(self, model, loss):
        self.model, self.loss = model, loss

    def __call__(self, y_true, y_pred, sample_weight=None, regularization_losses=None):
        total = self.loss(y_true, y_pred, sample_weight, regularization_losses)
        pending = self.model.__dict__.setdefault("_pending_losses", [])
        pending.append((total, _batch_size(y_true)))
        return total

    def __getattr__(self, name):
        return getattr(self.loss, name)


def _loss_for_compute_loss(loss, loss_weights):
    if loss is _DEFAULT_LOSS or loss is None:
        return None
    try:
        return CompileLoss(loss, loss_weights)
    except (TypeError, ValueError):       # a form only the fused step takes: compile itself says so
        return None


def _compiled_loss(self):
    cl = self.__dict__.get("_custom_loss")
    return None if cl is None else _TrackedLoss(self, cl)


def _flush_losses(self):
    pending = self.__dict__.pop("_pending_losses", None)
    for t, n in pending or ():
        self._tracker().update_state(np.asarray(t), sample_weight=n)


def reset_metrics(self):
    for m in self.metrics:
        m.reset_state()
    self.__dict__.pop("_pending_losses", None)


def _floats(logs, step="train_step"):
    if logs is None:
        return {}
    if not isinstance(logs, dict):
        raise TypeError(f"{step} must return a dict of logs {{name: value}} (or None), got "
                        f"{type(logs).__name__}")
    out = {}
    for k, v in logs.items():
        if isinstance(v, dict):
            out.update(_floats(v))
            continue
        a = np.asarray(v) if isinstance(v, (Tensor, np.ndarray, np.generic, float, int)) else v
        out[k] = float(a.reshape(-1)[0]) if isinstance(a, np.ndarray) and a.size == 1 else a
    return out


# --- the loops ------------------------------------------------------------------------------
def _length(x):
    flat = list(x.values()) if isinstance(x, dict) else (list(x) if isinstance(x, (list, tuple)) else [x])
    n = {len(a) for a in flat}
    if len(n) != 1:
        raise ValueError(f"the arrays of x have different numbers of rows: {sorted(n)}")
    return n.pop()


def _take(x, idx):
    if x is None:
        return None
    if isinstance(x, dict):
        return {k: _take(v, idx) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_take(v, idx) for v in x)
    return np.asarray(x)[idx]


def _arrays(x):
    if x is None:
        return None
    if isinstance(x, dict):
        return {k: _arrays(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_arrays(v) for v in x)
    return np.asarray(x)


class _Batches:
    """Keras's batches for the custom steps: ``x``, ``(x, y)`` or ``(x, y, w)`` slices of
    arrays (shuffled per epoch), or the items of a dataset or generator as they come."""

    def __init__(self, x, y=None, sample_weight=None, batch_size=32, steps=None, class_weight=None):
        if steps is not None:
            steps = check_positive_int("steps", steps)
        self.steps_given = steps
        # with steps given, an epoch goes on where the last stopped, as Keras's epoch iterator does for
        # the training data, until the data is used up (_cursor: arrays' (order, next batch), a
        # sequence's next index, or a dataset's iterator)
        self.go_on = steps is not None
        self._cursor = None
        if da.is_generator_like(x):
            if y is not None:
                raise ValueError("y must be None when x is a dataset or generator (it yields (x, y))")
            self.source, self.it = x, None
            self.arrays = None
            try:
                # (a dataset whose passes differ in length: each epoch reads its own pass to its end)
                self.steps = steps if steps is not None or da._passes_vary(x) or not da._sized(x) else len(x)
            except TypeError:
                self.steps = steps
            return
        if x is None:
            raise ValueError("no data: give x (arrays, or a dataset or generator of batches)")
        self.arrays = (_arrays(x), _arrays(y), None if sample_weight is None else np.asarray(sample_weight))
        for part, what in ((self.arrays[0], "x"), (self.arrays[1], "y"), (self.arrays[2], "sample_weight")):
            for a in (list(part.values()) if isinstance(part, dict) else
                      (list(part) if isinstance(part, (list, tuple)) else [part])):
                if a is not None and (not isinstance(a, np.ndarray) or a.ndim == 0):
                    raise TypeError(f"{what} must be arrays with a batch axis (or a dataset), got {type(a).__name__}"
                                    f"{'' if not isinstance(a, np.ndarray) else ' of no dimensions'}")
        if class_weight is not None:
            if y is None:
                raise ValueError("class_weight needs targets y")
            labels = np.asarray(y)
            labels = labels.argmax(-1) if labels.ndim > 1 and labels.shape[-1] > 1 else labels.reshape(len(labels))
            cw = np.array([float(class_weight.get(int(c), 1.0)) for c in labels], dtype=np.float32)
            self.arrays = (self.arrays[0], self.arrays[1], cw if self.arrays[2] is None else self.arrays[2] * cw)
        self.n = _length(self.arrays[0])
        for part, what in ((self.arrays[1], "y"), (self.arrays[2], "sample_weight")):
            if part is not None and _length(part) != self.n:
                raise ValueError(f"{what} has {_length(part)} rows, x has {self.n}")
        if self.n == 0:
            raise ValueError("the data has no rows")
        self.batch_size = batch_size
        self.steps = -(-self.n // batch_size)
        if steps is not None:
            self.steps = min(self.steps, steps)

    def split(self, fraction, val_batch_size=None, val_steps=None):
        """(training, validation) batches: the last ``fraction`` of the rows for validation (with
        their own batch size and steps when given: validation_batch_size, validation_steps)."""
        if self.arrays is None:
            raise ValueError("validation_split needs arrays; give a dataset's validation set as validation_data")
        k = self.n - int(round(self.n * fraction))
        if k <= 0 or k >= self.n:
            raise ValueError(f"validation_split={fraction} leaves no rows for training or validation")
        cut = [np.arange(k), np.arange(k, self.n)]
        parts = []
        for idx, size, steps in zip(cut, (self.batch_size, val_batch_size or self.batch_size),
                                    (self.steps_given, val_steps)):
            x, y, w = (_take(a, idx) for a in self.arrays)
            parts.append(_Batches(x, y, w, size, steps))
        return parts

    def __iter__(self):
        return self.epoch(False, None)

    def epoch(self, shuffle, rng):
        if self.arrays is None:
            yield from self._items()
            return
        x, y, w = self.arrays
        for idx in da.epoch_rows(self, self.n, self.batch_size, self.steps,
                                 lambda: rng.permutation(self.n) if shuffle and rng is not None else np.arange(self.n)):
            bx, by, bw = _take(x, idx), _take(y, idx), None if w is None else w[idx]
            if by is None and bw is None:
                # Keras's pack_x_y_sample_weight: a list of inputs alone comes as ([a, b, c],), so that
                # unpacking it gives x, not (x, y, sample_weight)
                yield (list(bx),) if isinstance(bx, (list, tuple)) else bx
            else:
                yield (bx, by) if bw is None else (bx, by, bw)

    def _items(self):
        src = self.source
        if da._torch_loader(src):
            yield from (_torch_batch(item) for item in self._raw_items(src))
            return
        yield from self._raw_items(src)

    def _raw_items(self, src):
        if _read_by_index(src):
            # a PyDataset or pg.utils.Dataset read by index: its on_epoch_begin starts each pass (a
            # Dataset's new shuffle and filter draws) and its on_epoch_end ends each epoch, as Keras's
            # epoch iterator calls them whatever the train_step
            first = self._cursor if self.go_on and self._cursor is not None else 0
            if first == 0 and hasattr(src, "on_epoch_begin"):
                src.on_epoch_begin()
            n = len(src)                 # (this pass's: after on_epoch_begin)
            try:
                for i in range(first, min(n, first + (self.steps if self.steps is not None else n))):
                    if self.go_on:
                        self._cursor = 0 if i + 1 >= n else i + 1
                    yield src[i]
            finally:
                if hasattr(src, "on_epoch_end"):
                    src.on_epoch_end()
            return
        if hasattr(src, "__next__"):            # a generator: one iterator, continued epoch after epoch
            it = src
        elif self.go_on and self._cursor is not None:
            it = self._cursor
            try:
                head = next(it)
            except StopIteration:               # that pass had ended: a new one
                it = iter(src)
            else:
                it = itertools.chain([head], it)
        else:
            it = iter(src)
        self._cursor = None
        for k, item in enumerate(it):
            if self.go_on and it is not src and k + 1 >= self.steps_given:
                self._cursor = it           # a re-iterable dataset: the next epoch goes on in this pass
            yield item
            if self.steps_given is not None and k + 1 >= self.steps_given:
                return


def _read_by_index(src):
    """Whether batches are read by index (a PyDataset, a pg.utils.Dataset that ends), not
    iterated (a generator, a dataset that repeats without end or streams a generator)."""
    return hasattr(src, "__getitem__") and hasattr(src, "__len__") and not hasattr(src, "__next__") and \
        da._sized(src)


def _torch_batch(item):
    """A torch DataLoader's batch as Keras's adapter hands it to train_step on a backend other
    than torch: a list becomes a tuple (``(x, y)``), its torch tensors numpy arrays."""
    def arrays(v):
        if isinstance(v, (list, tuple)):
            return tuple(arrays(e) for e in v)
        if isinstance(v, dict):
            return {k: arrays(e) for k, e in v.items()}
        return np.asarray(host(v)) if type(v).__module__.startswith("torch") and hasattr(v, "detach") else v
    return arrays(item)


def _run_test_steps(model, batches, cl=None):
    model.reset_metrics()
    logs = {}
    for bi, data in enumerate(batches):
        if cl is not None:
            cl.call("on_test_batch_begin", bi, {})
        logs = _floats(model.test_step(data), "test_step")
        if cl is not None:
            cl.call("on_test_batch_end", bi, logs)
        if model.__dict__.get("stop_evaluating"):         # a callback's (Keras's): after this batch
            break
    return logs


def custom_fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data, shuffle,
               class_weight, sample_weight, initial_epoch, steps_per_epoch, validation_steps, validation_batch_size,
               validation_freq):
    from pyggml.models.training_loop import (begin_fit, check_fit_args, check_validation_args, evaluate_overridden,
                                             own_evaluate, ran_out)
    epochs, initial_epoch, verbose, steps_per_epoch, cbs = check_fit_args(
        epochs, initial_epoch, verbose, validation_split, steps_per_epoch, validation_freq, callbacks)
    check_validation_args(validation_steps, validation_batch_size)
    data = _Batches(x, y, sample_weight, batch_size, steps_per_epoch, class_weight)
    val = None
    if validation_data is not None:
        if da.is_generator_like(validation_data):
            val = _Batches(validation_data, None, None, validation_batch_size or batch_size, validation_steps)
        else:
            vx, vy, vw = da.unpack_validation_data(validation_data)
            val = _Batches(vx, vy, vw, validation_batch_size or batch_size, validation_steps)
    elif validation_split > 0:
        data, val = data.split(validation_split, validation_batch_size, validation_steps)
    if val is not None:
        val.go_on = False                 # Keras: each validation starts at the data's first batch
    history, cl, rng, start = begin_fit(model, cbs, verbose, epochs, data.steps, initial_epoch)
    logs = {}
    for epoch in range(start, epochs):
        model.reset_metrics()
        cl.call("on_epoch_begin", epoch, {})
        seen = 0
        for bi, batch in enumerate(data.epoch(shuffle, rng)):
            cl.call("on_train_batch_begin", bi, {})
            logs = _floats(model.train_step(batch))
            seen += 1
            cl.call("on_train_batch_end", bi, logs)
            if model.stop_training:
                break
        if seen == 0 and ran_out(epoch, start):
            break
        logs = dict(logs)
        if val is not None and (epoch + 1 - initial_epoch) % validation_freq == 0:
            model.stop_evaluating = False
            cl.call("on_test_begin", {})
            val_logs = evaluate_overridden(model, validation_data, validation_batch_size or batch_size,
                                           validation_steps) if validation_data is not None and \
                own_evaluate(model) else _run_test_steps(model, val, cl)
            cl.call("on_test_end", val_logs)
            logs.update({"val_" + k: v for k, v in val_logs.items()})
        cl.call("on_epoch_end", epoch, logs)
        if model.stop_training:
            break
    cl.call("on_train_end", logs)
    return history


def custom_evaluate(model, x, y, batch_size, verbose, sample_weight, steps, callbacks, return_dict):
    from pyggml.models.training_loop import _with_progbar, check_callbacks, check_verbose
    verbose = check_verbose(verbose)
    data = _Batches(x, y, sample_weight, batch_size, steps)
    cl = CallbackList(_with_progbar(check_callbacks(callbacks), verbose), model,
                      {"steps": data.steps, "verbose": verbose})
    model.stop_evaluating = False
    cl.call("on_test_begin", {})
    logs = _run_test_steps(model, data, cl)
    cl.call("on_test_end", logs)
    return logs if return_dict else _in_keras_order(model, logs)


def _in_keras_order(model, logs):
    """A step's logs as Keras's list: the values of ``model.metrics``' names in that order (the
    loss, then the compiled metrics), then the other keys sorted; one value alone."""
    try:
        names = []
        for m in model.metrics:              # the compiled metrics' container by its metrics' names
            subs = getattr(m, "metrics", None) if m.name == "compile_metrics" else None
            names += [s.name for s in subs] if isinstance(subs, (list, tuple)) else [m.name]
    except Exception:            # a metrics property of the user's own that fails: the logs' order
        names = []
    values = [logs[n] for n in names if n in logs] + [logs[k] for k in sorted(logs) if k not in names]
    return values[0] if len(values) == 1 else values


def _concat(parts):
    first = parts[0]
    if isinstance(first, dict):
        return {k: _concat([p[k] for p in parts]) for k in first}
    if isinstance(first, (list, tuple)):
        return [_concat([p[i] for p in parts]) for i in range(len(first))]
    return np.concatenate([np.asarray(p, dtype=np.float32).reshape(np.shape(p) or (1,)) for p in parts])


def custom_predict(model, x, batch_size, steps):
    data = _Batches(x, None, None, batch_size, steps)
    outs = [model.predict_step(b) for b in data]
    if not outs:
        raise ValueError("predict: the data gave no batches")
    return _concat(outs)


# --- installing -----------------------------------------------------------------------------
def _install_graphless(cls):
    """A model with no graph of its own (one that holds other models) answers Keras's questions
    from the layers it holds: layers, weights, count_params, summary."""
    layers_, get_weights_, count_params_, summary_ = cls.layers, cls.get_weights, cls.count_params, cls.summary

    def layers(self):
        if _graphless(self) or self.__dict__.get("_subclassed", False):
            # Keras's: the layers the model holds (a subclassed model's, built or not), each once
            held = []
            for l in self._sublayers.values():
                if not any(l is h for h in held):
                    held.append(l)
            return held
        return layers_.fget(self)

    @functools.wraps(get_weights_)
    def get_weights(self):
        if _graphless(self):
            self.check_alive()
            return LayerWeights(self.named_variables(), "model")
        return get_weights_(self)

    @functools.wraps(count_params_)
    def count_params(self):
        if _graphless(self):
            return int(sum(v.size for _, v in self.named_variables()))
        return count_params_(self)

    @functools.wraps(summary_)
    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False, show_trainable=False,
                layer_range=None):
        if callable(line_length) and print_fn is None:      # summary(print_fn) positionally
            line_length, print_fn = None, line_length
        if not (_graphless(self) or (self.__dict__.get("_subclassed", False) and
                                     self.__dict__.get("_topology") is not None)):
            return summary_(self, line_length, positions, print_fn, expand_nested, show_trainable=show_trainable,
                            layer_range=layer_range)
        from pyggml.models import summary as summary_mod
        # Keras's table of the layers the model holds (their output shapes are not known apart
        # from the model's call: "?"), its counts as Keras writes them ("5,000 (19.53 KB)")
        held = self.layers
        rows = [(f"{l.name} ({summary_mod.class_name(l)})", "?",
                 f"{l.count_params():,}" if l.built or l.weights else "0 (unbuilt)") for l in held]
        total = self.count_params()
        trainable = sum(v.size for _, v in self.named_variables() if v.trainable)
        summary_mod.print_table(self, rows, [total, trainable, total - trainable], print if print_fn is None
                                else print_fn, held, show_trainable, line_length, positions)

    cls.layers = property(layers, doc=layers_.__doc__)
    cls.get_weights, cls.count_params, cls.summary = get_weights, count_params, summary


def _set_trainable(self, value):
    """Keras's ``model.trainable = False``: every layer of the model freezes (or thaws), those of
    its layer graph too (a base model frozen for transfer learning)."""
    Layer.trainable.fset(self, value)
    graph = self._topology.layers if self._topology is not None else self.__dict__.get("_stack", ())
    for layer in graph:
        if layer is not self:
            layer.trainable = value


def install(cls):
    """Add the overridable steps to ``cls`` (pg.Model) and route compile/fit/evaluate/predict."""
    compile_, fit_, evaluate_, predict_ = cls.compile, cls.fit, cls.evaluate, cls.predict
    train_on_batch_, test_on_batch_ = cls.train_on_batch, cls.test_on_batch

    @functools.wraps(compile_)
    def compile(self, optimizer="adam", loss=_DEFAULT_LOSS, metrics=None, loss_weights=None, *args, **kwargs):
        if not hasattr(type(self), "loss"):          # Keras's model.loss: what compile was given
            self.__dict__["loss"] = None if loss is _DEFAULT_LOSS else loss
        if not _custom_evaluate(self, cls):
            # (Keras's model.compute_loss works on such a model too: the loss kept for it)
            self.__dict__["_custom_loss"] = _loss_for_compute_loss(loss, loss_weights)
            out = compile_(self, optimizer, "categorical_crossentropy" if loss is _DEFAULT_LOSS else loss, metrics,
                           loss_weights, *args, **kwargs)
            spec = self.__dict__.get("_compile_spec")
            if loss is _DEFAULT_LOSS:
                # compile() without a loss: fit on inputs alone trains on add_loss (training_loop);
                # a model whose graph waits for data marks its compile when it is made (subclassing)
                self._compile_args = (optimizer, metrics, loss_weights, args, kwargs)
                if spec is not None:
                    spec.loss_defaulted = True
                else:
                    self.__dict__["_loss_defaulted_pending"] = True
            return out
        # Keras's compile for custom steps: loss optional, kept for compute_loss
        self.check_alive()
        loss = None if loss is _DEFAULT_LOSS else loss
        weighted = kwargs.get("weighted_metrics")
        self.optimizer = optimizers_mod.get("adam" if optimizer is None else optimizer)
        self._custom_loss = None if loss is None else CompileLoss(loss, loss_weights)
        self._custom_metrics = CompileMetrics(metrics, weighted, _output_names(self)) if (metrics or weighted) else None
        self._custom_compiled = True
        self._loss_tracker = Mean(name="loss")
        self._compiled = True
        if loss is not None and not _graphless(self):
            # the layer graph compiles as usual too (evaluate, save, a Trainer)
            opt = self.optimizer
            compile_(self, opt, loss, metrics, loss_weights, *args, **kwargs)
        return self

    @functools.wraps(fit_)
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None, validation_split=0.0,
            validation_data=None, shuffle=True, class_weight=None, sample_weight=None, initial_epoch=0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None, validation_freq=1):
        # Keras 3's caps (pg.config.set_max_epochs / set_max_steps_per_epoch)
        cap_epochs, cap_steps = config_mod.max_epochs(), config_mod.max_steps_per_epoch()
        if cap_epochs is not None and isinstance(epochs, int) and not isinstance(epochs, bool):
            epochs = min(epochs, cap_epochs)
        if cap_steps is not None:
            steps_per_epoch = cap_steps if steps_per_epoch is None else min(steps_per_epoch, cap_steps)
        validates = validation_data is not None or validation_split
        if not uses_custom_fit(self, cls) and not (validates and _overrides(self, "test_step", cls)):
            return fit_(self, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data,
                        shuffle, class_weight, sample_weight, initial_epoch, steps_per_epoch, validation_steps,
                        validation_batch_size, validation_freq)
        self.check_compiled("fit")
        from pyggml.models.training_loop import check_batch_size
        return custom_fit(self, x, y, check_batch_size(batch_size), epochs, verbose, callbacks, validation_split,
                          validation_data, shuffle, class_weight, sample_weight, initial_epoch, steps_per_epoch,
                          validation_steps, validation_batch_size, validation_freq)

    @functools.wraps(evaluate_)
    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None, steps=None,
                 callbacks=None, return_dict=False):
        if not _custom_evaluate(self, cls):
            return evaluate_(self, x, y, batch_size, verbose, sample_weight, steps, callbacks, return_dict)
        self.check_compiled("evaluate")
        from pyggml.models.training_loop import check_batch_size
        return custom_evaluate(self, x, y, check_batch_size(batch_size), verbose, sample_weight, steps, callbacks,
                               return_dict)

    @functools.wraps(predict_)
    def predict(self, x, batch_size=None, verbose=0, steps=None, callbacks=None):
        if not _overrides(self, "predict_step", cls):
            return predict_(self, x, batch_size, verbose, steps, callbacks)
        from pyggml.models.training_loop import check_batch_size
        return custom_predict(self, x, check_batch_size(batch_size), steps)

    @functools.wraps(train_on_batch_)
    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        if not uses_custom_fit(self, cls):
            return train_on_batch_(self, x, y, sample_weight, class_weight, return_dict)
        self.check_compiled("train_on_batch")
        data = next(iter(_Batches(x, y, sample_weight, 1 << 62, None, class_weight)))
        logs = _floats(self.train_step(data))
        return logs if return_dict else _in_keras_order(self, logs)

    @functools.wraps(test_on_batch_)
    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        if not _custom_evaluate(self, cls):
            return test_on_batch_(self, x, y, sample_weight, return_dict)
        self.check_compiled("test_on_batch")
        self.reset_metrics()
        data = next(iter(_Batches(x, y, sample_weight, 1 << 62, None)))
        logs = _floats(self.test_step(data), "test_step")
        return logs if return_dict else _in_keras_order(self, logs)

    get_compile_config_, compile_from_config_ = cls.get_compile_config, cls.compile_from_config

    @functools.wraps(get_compile_config_)
    def get_compile_config(self):
        if self.__dict__.get("_compile_spec") is None and self.__dict__.get("_custom_compiled"):
            # compiled for a compute_loss or train_step of its own, with no loss: the optimizer
            self.check_compiled("get_compile_config")
            return {"optimizer": optimizers_mod.serialize(self.optimizer), "loss": None, "custom_steps": True}
        return get_compile_config_(self)

    @functools.wraps(compile_from_config_)
    def compile_from_config(self, config, backend="auto", custom_objects=None):
        if config.get("custom_steps") and config.get("loss") is None:
            return self.compile(optimizer=optimizers_mod.deserialize(config["optimizer"], custom_objects),
                                backend=backend)
        return compile_from_config_(self, config, backend, custom_objects)

    cls.compile, cls.fit, cls.evaluate = compile, fit, evaluate
    cls.get_compile_config, cls.compile_from_config = get_compile_config, compile_from_config
    # predict stays the fused one (no wrapper on its hot path); a subclass that overrides
    # predict_step gets the custom one when it is defined
    previous = cls.__dict__.get("__init_subclass__")

    def __init_subclass__(sub, **kwargs):
        if previous is not None:
            previous.__func__(sub, **kwargs)
        else:
            super(cls, sub).__init_subclass__(**kwargs)
        if "predict_step" in sub.__dict__ and "predict" not in sub.__dict__:
            sub.predict = predict
    cls.__init_subclass__ = classmethod(__init_subclass__)
    _install_graphless(cls)
    cls.trainable = property(Layer.trainable.fget, _set_trainable, doc=Layer.trainable.__doc__)

    def _plain_predict(self, x, training=False):
        # calling a model on arrays: predict (never predict_step: no recursion), its arrays
        # answering TensorFlow's eager ``.numpy()`` as the ops' results do.  With no training=
        # given, its preprocessing layers take their own default, as Keras's eager call: an
        # augmentation augments (nnclr's augmenter called in its train_step).  A model whose
        # layers add losses (add_loss, activity regularizers) takes the eager path, which
        # computes them, so that model.losses holds this call's, as Keras's (where that path
        # does not take the inputs, strings, predict gives the outputs without them)
        adds = _call_adds_losses(self)
        if adds:
            try:
                return _eager_call(self, x, training)
            except (TypeError, ValueError):
                pass
        if training is not None:
            out = as_ops_result(predict_(self, x))
        else:
            self.__dict__["_host_training"] = None
            try:
                out = as_ops_result(predict_(self, x))
            finally:
                self.__dict__.pop("_host_training", None)
        if not adds and _call_adds_losses(self):        # (found out building the graph in this call)
            try:
                return _eager_call(self, x, training)
            except (TypeError, ValueError):
                pass
        return out
    cls._plain_predict = _plain_predict
    cls.train_on_batch, cls.test_on_batch = train_on_batch, test_on_batch
    cls.train_step, cls.test_step, cls.predict_step = train_step, test_step, predict_step
    cls.compute_loss, cls.compute_metrics, cls.get_metrics_result = compute_loss, compute_metrics, get_metrics_result
    cls.metrics = property(metrics)
    cls.reset_metrics = reset_metrics
    cls._tracker = _tracker
    cls.compiled_loss = property(_compiled_loss)
    cls.compiled_metrics = property(lambda self: self.__dict__.get("_custom_metrics") or _NO_METRICS)
    return cls
