"""Functional models (``pg.Model``) and what every model does: compile, fit,
evaluate, predict, weights, summary, free."""

import collections
import threading
import weakref

import numpy as np

from pyggml import _random, initializers, losses as losses_mod, metrics as metrics_mod
from pyggml import optimizers as optimizers_mod
from pyggml.callbacks import Callback, History
from pyggml.core import Backend, BackendBuffer, Context, Graph, Scheduler, ops
from pyggml._lifetime import Freeable
from pyggml.errors import FreedError
from pyggml.layers.base import InputLayer, Layer, Node
from pyggml.models.graph import LossEvaluator, Predictor, TrainStep, build

__all__ = ["Model"]

_MAX_CACHED = 4


def _as_float_array(x, what):
    if x is None:
        raise TypeError(f"{what} must be an array, got None")
    try:
        a = np.asarray(x)
    except Exception as e:
        raise TypeError(f"{what} must be an array of numbers: {e}") from None
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what} must hold real numbers, got dtype {a.dtype}")
    return a


def _print_epoch(epoch, epochs, logs):
    print(f"Epoch {epoch + 1}/{epochs} - " + " - ".join(f"{k}: {v:.4g}" for k, v in logs.items()))


class Model(Freeable):
    """A functional model: ``pg.Model(inputs, outputs, name=None)``."""

    def __init__(self, inputs=None, outputs=None, name=None):
        if name is not None and not isinstance(name, str):
            raise TypeError("name must be a str")
        self.name = name or "functional"
        self._lock = threading.RLock()
        self._freed = False
        self._compiled = False
        self._trained = False
        self.stop_training = False
        self.optimizer = None
        self._wctx = None
        self._wbuf = None
        self._wt = {}
        self._values = None          # weights kept in numpy before compile
        self._executors = collections.OrderedDict()
        self._fit_step = None
        self._dependents = weakref.WeakSet()
        self._multi = False
        if inputs is not None or outputs is not None:
            self._init_graph(inputs, outputs)

    # ------------------------------------------------------------------ graph
    def _init_graph(self, inputs, outputs):
        self._multi_in = isinstance(inputs, (list, tuple))
        self._multi = isinstance(outputs, (list, tuple))
        ins = list(inputs) if self._multi_in else [inputs]
        outs = list(outputs) if self._multi else [outputs]
        if not ins or not outs:
            raise ValueError("a Model needs at least one input and one output")
        for n in ins:
            if not isinstance(n, Node) or not isinstance(n.layer, InputLayer):
                raise TypeError("Model inputs must be pg.Input(...) nodes")
        for n in outs:
            if not isinstance(n, Node):
                raise TypeError("Model outputs must be layer outputs (nodes)")
        self._inputs, self._outputs = ins, outs
        order, seen = [], set()

        def visit(n, stack=()):
            if id(n) in seen:
                return
            if id(n) in stack:
                raise ValueError("the layer graph has a cycle")
            for p in n.inputs:
                visit(p, stack + (id(n),))
            seen.add(id(n))
            order.append(n)
        for o in outs:
            visit(o)
        for n in order:
            if isinstance(n.layer, InputLayer) and all(n is not i for i in ins):
                raise ValueError(f"output depends on an input that is not among the model's inputs")
        self._nodes = order
        layers = []
        for n in ins + order:
            if all(n.layer is not l for l in layers):
                layers.append(n.layer)
        self._all_layers = layers
        self._assign_names()

    def _assign_names(self):
        counts, used = {}, set()
        for l in self._all_layers:
            if l._given_name:
                if l._given_name in used:
                    raise ValueError(f"two layers are named {l._given_name!r}")
                used.add(l._given_name)
        for l in self._all_layers:
            if l._given_name:
                l.name = l._given_name
                continue
            base = l.kind()
            while True:
                k = counts.get(base, 0)
                cand = base if k == 0 else f"{base}_{k}"
                counts[base] = k + 1
                if cand not in used:
                    break
            l.name = cand
            used.add(cand)
        for l in self._all_layers:
            l._model = self

    @property
    def layers(self):
        return list(self._all_layers)

    @property
    def inputs(self):
        self._ensure_graph()
        return list(self._inputs)

    @property
    def outputs(self):
        self._ensure_graph()
        return list(self._outputs)

    @property
    def output_names(self):
        self._ensure_graph()
        return [n.layer.name for n in self._outputs]

    def _input_shapes(self):
        return [n.shape for n in self._inputs]

    def _input_dtypes(self):
        cached = self.__dict__.get("_input_dtypes_cache")
        if cached is not None:
            return cached
        out = []
        for n in self._inputs:
            d = n.layer.dtype
            if any(getattr(c.layer, "input_dtype", None) == "int32" and any(p is n for p in c.inputs)
                   for c in self._nodes):
                d = "int32"
            out.append(d)
        if self._compiled:
            self._input_dtypes_cache = out
        return out

    def _has_conv(self):
        return any(type(l).__name__.startswith("Conv") for l in self._all_layers)

    def _forward(self, g, xs, training, logits=False):
        vals = {}
        for n, t in zip(self._inputs, xs):
            vals[id(n)] = t
        out_ids = {id(o): i for i, o in enumerate(self._outputs)}
        results = {}
        for n in self._nodes:
            if id(n) in vals:
                continue
            args = [vals[id(p)] for p in n.inputs]
            a = args if isinstance(n.layer.input_shape, list) else args[0]
            vals[id(n)] = n.layer.call(g, a, training)
            i = out_ids.get(id(n))
            if i is not None and logits and self._output_logits[i] and hasattr(n.layer, "call_logits"):
                results[i] = n.layer.call_logits(g, a, training)
        return [results.get(i, vals[id(o)]) for i, o in enumerate(self._outputs)]

    # ---------------------------------------------------------------- checks
    def _check(self):
        if self._freed:
            raise FreedError(f"model {self.name!r} has been freed")

    def _check_compiled(self, what):
        self._check()
        if not self._compiled:
            raise RuntimeError(f"compile the model before {what} (model.compile(...))")

    def _ensure_graph(self):
        """Hook for Sequential: build the layer graph when the input shape is known."""
        if not hasattr(self, "_nodes"):
            raise ValueError("the model has no layers or no input shape yet")

    # --------------------------------------------------------------- compile
    def compile(self, optimizer="adam", loss="categorical_crossentropy", metrics=None, backend="auto",
                seed=None, loss_weights=None):
        """Set the optimizer, losses and metrics, choose the device, draw the weights."""
        self._check()
        self._ensure_graph()
        opt = optimizers_mod.get(optimizer)
        n_out = len(self._outputs)
        names = self.output_names
        if isinstance(loss, dict):
            unknown = set(loss) - set(names)
            if unknown:
                raise ValueError(f"loss names unknown outputs {sorted(unknown)}; outputs: {names}")
            loss_list = [loss.get(nm) for nm in names]
            if any(l is None for l in loss_list):
                raise ValueError(f"loss dict must name every output: {names}")
        elif isinstance(loss, (list, tuple)):
            if len(loss) != n_out:
                raise ValueError(f"{len(loss)} losses for {n_out} outputs")
            loss_list = list(loss)
        else:
            loss_list = [loss] * n_out
        lobjs = [losses_mod.get(l) for l in loss_list]
        if loss_weights is None:
            lw = [1.0] * n_out
        elif isinstance(loss_weights, dict):
            lw = [float(loss_weights.get(nm, 1.0)) for nm in names]
        else:
            lw = [float(v) for v in loss_weights]
            if len(lw) != n_out:
                raise ValueError(f"{len(lw)} loss_weights for {n_out} outputs")
        mets = []
        if metrics is not None:
            if isinstance(metrics, str):
                metrics = [metrics]
            if isinstance(metrics, dict):
                metrics = sorted({m for v in metrics.values() for m in ([v] if isinstance(v, str) else v)})
            for m in metrics:
                mets.append(metrics_mod.canonical(m))
        if not isinstance(backend, str):
            raise TypeError("backend must be a str: 'auto', 'cpu' or a device name")
        new_backend = Backend(backend)
        with self._lock:
            values = self._values if not self._compiled else self._read_weights()
            self._drop_executors()
            self._free_weights()
            if getattr(self, "_backend", None) is not None:
                self._backend.free()
            self._backend = new_backend
            self.optimizer = opt
            self._losses = lobjs
            self._loss_weights = lw
            self._metrics = mets
            self._compile_args = dict(optimizer=opt, loss=loss_list, metrics=mets, backend=backend,
                                      loss_weights=lw)
            self._output_logits = []
            for o, l in zip(self._outputs, lobjs):
                act = getattr(o.layer, "activation", None)
                self._output_logits.append(l.logits_from is not None and act == l.logits_from)
            self._cell_weights = [False] * n_out
            if values is None:
                values = self._draw_weights(_random.rng(seed))
            self._make_weights(values)
            self._values = None
            self._compiled = True
            self._trained = False
        return self

    def _weight_specs(self):
        for l in self._all_layers:
            for wn, (shape, init, trainable, layout) in l._weight_specs.items():
                yield l, wn, shape, init, trainable, layout

    def _draw_weights(self, rng):
        vals = {}
        for l, wn, shape, init, trainable, layout in self._weight_specs():
            vals[f"{l.name}.{wn}"] = initializers.get(init)(shape, rng, layout)
        return vals

    def _make_weights(self, values):
        specs = list(self._weight_specs())
        need = sum(4 * int(np.prod(sp[2])) for sp in specs)
        from pyggml.core import devices
        free = next((d["memory_free"] for d in devices() if d["name"] == self._backend.name), 0)
        if free and need > free:
            from pyggml.errors import AllocationError
            raise AllocationError(f"the model's weights need {need / 2**30:.1f} GiB; "
                                  f"{self._backend.name} has {free / 2**30:.1f} GiB free")
        self._wctx = Context(n_tensors=len(specs) + 8)
        self._wt = {}
        for l, wn, shape, init, trainable, layout in specs:
            t = self._wctx.new_tensor(shape, name=f"{l.name}.{wn}"[:63])
            if trainable and l.trainable:
                t.set_param()
            self._wt[(l.name, wn)] = t
        self._param_signature = self._trainable_signature()
        if specs:
            self._wbuf = BackendBuffer(self._wctx, self._backend)
            for (ln, wn), t in self._wt.items():
                t.set(values[f"{ln}.{wn}"])

    def _trainable_signature(self):
        return tuple(l.trainable for l in self._all_layers)

    def _on_trainable_changed(self):
        # takes effect at once for a model not yet trained, else at the next compile
        if self._compiled and not self._trained and not self._freed:
            with self._lock:
                values = self._read_weights()
                self._drop_executors()
                self._free_weights()
                self._make_weights(values)

    def _free_weights(self):
        if self._wbuf is not None:
            self._wbuf.free()
        if self._wctx is not None:
            self._wctx.free()
        self._wbuf = self._wctx = None
        self._wt = {}

    def _drop_executors(self):
        for e in self._executors.values():
            e.free()
        self._executors.clear()
        if self._fit_step is not None:
            self._fit_step.free()
            self._fit_step = None

    def _backends(self):
        return [self._backend]

    def _weight_tensor(self, layer, name):
        return self._wt[(layer.name, name)]

    def _read_weights(self):
        return {f"{ln}.{wn}": t.numpy() for (ln, wn), t in self._wt.items()}

    def _update_running_stats(self, stats):
        for layer, mean, var in stats:
            running = {k: self._wt[(layer.name, k)].numpy() for k in ("running_mean", "running_var")}
            layer.update_stats(mean, var, running)
            for k, v in running.items():
                self._wt[(layer.name, k)].set(v)

    # --------------------------------------------------------------- weights
    def get_weights(self):
        """A dict {"<layer>.<weight>": array} of copies."""
        self._check()
        with self._lock:
            if not self._compiled:
                self._ensure_graph()
                if self._values is None:
                    self._values = self._draw_weights(_random.rng())
                return {k: v.copy() for k, v in self._values.items()}
            return self._read_weights()

    def set_weights(self, weights):
        """Set weights by name; a missing name or a wrong shape is refused, naming it."""
        self._check()
        if not isinstance(weights, dict):
            raise TypeError("set_weights takes a dict {name: array} as get_weights returns")
        current = self.get_weights()
        for k in weights:
            if k not in current:
                raise ValueError(f"unknown weight {k!r}; the model has {sorted(current)}")
        prepared = {}
        for k, v in weights.items():
            a = _as_float_array(v, f"weight {k!r}")
            if a.shape != current[k].shape:
                raise ValueError(f"weight {k!r} has shape {current[k].shape}, got {a.shape}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"weight {k!r} has NaN or inf values")
            prepared[k] = a.astype(np.float32)
        with self._lock:
            if not self._compiled:
                self._values.update(prepared)
                return
            for k, a in prepared.items():
                ln, wn = k.split(".", 1)
                self._wt[(ln, wn)].set(a)

    @property
    def trainable_weights(self):
        return [f"{l.name}.{wn}" for l, wn, s, i, tr, lay in self._weight_specs() if tr and l.trainable]

    @property
    def weights(self):
        return [f"{l.name}.{wn}" for l, wn, *_ in self._weight_specs()]

    def count_params(self):
        self._ensure_graph()
        return int(sum(l.count_params() for l in self._all_layers))

    def get_layer(self, name=None, index=None):
        self._ensure_graph()
        if (name is None) == (index is None):
            raise ValueError("give exactly one of name and index")
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError("index must be an int")
            layers = self.layers
            if not -len(layers) <= index < len(layers):
                raise ValueError(f"index {index} out of range for {len(layers)} layers")
            return layers[index]
        for l in self.layers:
            if l.name == name:
                return l
        raise ValueError(f"no layer named {name!r}; layers: {[l.name for l in self.layers]}")

    # ------------------------------------------------------------- executors
    def _executor(self, key, make):
        e = self._executors.get(key)
        if e is None:
            e = make()
            self._executors[key] = e
            while len(self._executors) > _MAX_CACHED:
                _, old = self._executors.popitem(last=False)
                old.free()
        else:
            self._executors.move_to_end(key)
        return e

    # ----------------------------------------------------------------- data
    def _prepare_x(self, x, n_expected=None):
        xs = x if isinstance(x, (list, tuple)) and len(self._inputs) > 1 else [x]
        if isinstance(x, dict):
            xs = [x[n.layer.name] for n in self._inputs]
        if len(xs) != len(self._inputs):
            raise ValueError(f"the model has {len(self._inputs)} inputs, got {len(xs)} arrays")
        out = []
        for i, (a, shape, dt) in enumerate(zip(xs, self._input_shapes(), self._input_dtypes())):
            if type(a) is np.ndarray and a.dtype == np.float32 and dt != "int32" and a.flags.c_contiguous \
                    and a.shape[1:] == shape and a.ndim == len(shape) + 1:
                out.append(a)
                continue
            a = _as_float_array(a, "x")
            if a.ndim == len(shape) and a.shape == tuple(shape):
                pass
            if a.shape[1:] != tuple(shape):
                if a.ndim >= 1 and a.size % max(int(np.prod(shape)), 1) == 0 and a.ndim == 1 and len(shape) == 1 and a.shape[0] == shape[0]:
                    raise ValueError(f"x must have shape (n, {', '.join(map(str, shape))}), got {a.shape}: "
                                     f"add the batch axis (x[None])")
                raise ValueError(f"x must have shape (n, {', '.join(map(str, shape))}), got {a.shape}")
            if dt == "int32":
                if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
                    raise ValueError("indices must be finite")
                ai = a.astype(np.int64)
                lim = min((c.layer.input_dim for c in self._nodes
                           if getattr(c.layer, "input_dtype", None) == "int32" and any(p is self._inputs[i] for p in c.inputs)),
                          default=2 ** 31)
                if ai.size and (ai.min() < 0 or ai.max() >= lim):
                    raise ValueError(f"indices must be in [0, {lim}), got values from {ai.min()} to {ai.max()}")
                a = np.ascontiguousarray(ai, dtype=np.int32)
            else:
                a = np.ascontiguousarray(a, dtype=np.float32)
            out.append(a)
        n = out[0].shape[0]
        if any(a.shape[0] != n for a in out):
            raise ValueError("all inputs must have the same number of rows")
        if n_expected is not None and n != n_expected:
            raise ValueError(f"x has {n} rows, y has {n_expected}")
        return out, n

    def _prepare_y(self, y, n):
        names = self.output_names
        if isinstance(y, dict):
            ys = [y[nm] for nm in names]
        elif len(self._outputs) > 1:
            if not isinstance(y, (list, tuple)) or len(y) != len(self._outputs):
                raise ValueError(f"the model has {len(self._outputs)} outputs: give y as a list or a dict")
            ys = list(y)
        else:
            ys = [y]
        out = []
        for o, l, a in zip(self._outputs, self._losses, ys):
            cells = o.cells
            if type(a) is np.ndarray and a.dtype == np.float32 and a.flags.c_contiguous and a.shape == (n, cells) \
                    and not getattr(l, "sparse", False):
                out.append(a)
                continue
            a = _as_float_array(a, "y")
            if a.shape[0] != n:
                raise ValueError(f"y has {a.shape[0]} rows, x has {n}")
            if getattr(l, "sparse", False):
                labels = a.reshape(n, -1)
                if labels.shape[1] != 1:
                    raise ValueError(f"sparse_categorical_crossentropy takes integer labels of shape (n,), got {a.shape}")
                if not np.all(np.isfinite(labels)) or np.any(labels < 0) or np.any(labels >= cells) or np.any(labels != np.floor(labels)):
                    raise ValueError(f"labels must be integers in [0, {cells})")
                a = np.eye(cells, dtype=np.float32)[labels[:, 0].astype(np.int64)]
            else:
                if a.size != n * cells:
                    raise ValueError(f"y for output {o.layer.name!r} must have shape (n, {', '.join(map(str, o.shape))}), got {a.shape}")
            out.append(np.ascontiguousarray(a.reshape(n, cells), dtype=np.float32))
        return out

    def _prepare_weights(self, sample_weight, class_weight, ys, n):
        """Per-output weight arrays (n, 1) or (n, cells), or None."""
        if sample_weight is None and class_weight is None:
            return None
        ws = []
        sws = sample_weight if isinstance(sample_weight, (list, tuple)) and len(self._outputs) > 1 else \
            [sample_weight] * len(self._outputs)
        for i, (y, l) in enumerate(zip(ys, self._losses)):
            sw = sws[i]
            if sw is None:
                w = np.ones((n, 1), dtype=np.float32)
            else:
                w = _as_float_array(sw, "sample_weight").astype(np.float32)
                if w.ndim == 1 or (w.ndim == 2 and w.shape[1] == 1):
                    if w.shape[0] != n:
                        raise ValueError(f"sample_weight must have shape ({n},), got {w.shape}")
                    w = w.reshape(n, 1)
                elif w.ndim == 2 and w.shape == y.shape:
                    if not l.elementwise:
                        raise ValueError(f"per-cell sample_weight needs an element-wise loss (mse, mae, huber, "
                                         f"binary_crossentropy), not {l.name}")
                else:
                    raise ValueError(f"sample_weight must have shape ({n},) or ({n}, {y.shape[1]}), got {w.shape}")
                if not np.all(np.isfinite(w)) or np.any(w < 0):
                    raise ValueError("sample_weight must be finite and non-negative")
            if class_weight is not None:
                if not isinstance(class_weight, dict):
                    raise TypeError("class_weight must be a dict {class index: weight}")
                cls = np.argmax(y, axis=1) if y.shape[1] > 1 else (y[:, 0] > 0.5).astype(np.int64)
                cw = np.array([float(class_weight.get(int(c), 1.0)) for c in cls], dtype=np.float32)
                w = w * cw.reshape(n, 1)
            ws.append(np.ascontiguousarray(w))
        return ws

    @staticmethod
    def _pad(a, rows):
        if a.shape[0] == rows:
            return a
        out = np.zeros((rows,) + a.shape[1:], dtype=a.dtype)
        out[:a.shape[0]] = a
        return out

    # --------------------------------------------------------------- predict
    def predict(self, x, batch_size=32, verbose=0):
        """float32 predictions for any number of rows (a list for several outputs)."""
        self._check_compiled("predict")
        bs = self._check_batch_size(batch_size)
        xs, n = self._prepare_x(x)
        with self._lock:
            if n == 0:
                res = [np.zeros((0,) + tuple(o.shape), dtype=np.float32) for o in self._outputs]
            else:
                b = min(bs, n)
                pred = self._executor(("predict", b), lambda: build(Predictor, self, b))
                chunks = [[] for _ in self._outputs]
                for s in range(0, n, b):
                    part = [self._pad(a[s:s + b], b) for a in xs]
                    outs = pred.run(part)
                    m = min(b, n - s)
                    for i, o in enumerate(outs):
                        chunks[i].append(o[:m])
                res = [np.concatenate(c, axis=0).reshape((n,) + tuple(o.shape)) for c, o in zip(chunks, self._outputs)]
        return res if len(res) > 1 else res[0]

    def __call__(self, x):
        return self.predict(x)

    @staticmethod
    def _check_batch_size(batch_size):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if batch_size > 1 << 20:
            raise ValueError(f"batch_size {batch_size} is too large")
        return int(batch_size)

    # -------------------------------------------------------------- evaluate
    def evaluate(self, x, y, batch_size=32, sample_weight=None, verbose=0, return_dict=True):
        """{"loss": ..., metric: ...} over all rows, in inference mode."""
        self._check_compiled("evaluate")
        bs = self._check_batch_size(batch_size)
        xs, n = self._prepare_x(x)
        ys = self._prepare_y(y, n)
        ws = self._prepare_weights(sample_weight, None, ys, n)
        if n == 0:
            raise ValueError("evaluate needs at least one row")
        with self._lock:
            return self._evaluate_arrays(xs, ys, ws, n, bs)

    def _evaluate_arrays(self, xs, ys, ws, n, bs):
        b = min(bs, n)
        weighted = ws is not None or n % b != 0
        if weighted and ws is None:
            ws = [np.ones((n, 1), dtype=np.float32) for _ in ys]
        cellw = tuple(w.shape[1] > 1 for w in ws) if ws else None
        self._cell_weights = list(cellw) if cellw else [False] * len(ys)
        ev = self._executor(("eval", b, weighted, cellw), lambda: build(LossEvaluator, self, b, weighted))
        mstates = self._metric_states()
        total, heads_total = 0.0, None
        for s in range(0, n, b):
            m = min(b, n - s)
            loss, heads, outs = ev.run([self._pad(a[s:s + b], b) for a in xs],
                                       [self._pad(a[s:s + b], b) for a in ys],
                                       [self._pad(a[s:s + b], b) for a in ws] if weighted else None,
                                       m, want_outputs=bool(mstates))
            total += loss * m
            heads_total = [h * m for h in heads] if heads_total is None else [a + h * m for a, h in zip(heads_total, heads)]
            for (i, st) in mstates:
                st.update(ys[i][s:s + m], outs[i].reshape(b, -1)[:m], m)
        logs = {"loss": total / n}
        if len(self._outputs) > 1:
            for nm, h in zip(self.output_names, heads_total):
                logs[f"{nm}_loss"] = h / n
        for (i, st) in mstates:
            logs[self._metric_key(i, st.name)] = st.result()
        return logs

    def _metric_states(self):
        out = []
        for i, l in enumerate(self._losses):
            for m in self._metrics:
                out.append((i, metrics_mod.MetricState(m, l.name)))
        return out

    def _metric_key(self, i, name):
        return name if len(self._outputs) == 1 else f"{self.output_names[i]}_{name}"

    # ------------------------------------------------------------------- fit
    def _train_step_for(self, b, weighted, cellw):
        key = (b, weighted, cellw)
        st = self._fit_step
        if st is not None and st.key == key:
            return st
        state = st.get_state() if st is not None else getattr(self, "_pending_opt_state", None)
        new = build(TrainStep, self, b, weighted)
        new.key = key
        if state is not None:
            try:
                new.set_state(state)
            except Exception:
                pass
        if st is not None:
            st.free()
        self._pending_opt_state = None
        self._fit_step = new
        return new

    def fit(self, x=None, y=None, epochs=1, batch_size=32, validation_split=0.0, validation_data=None,
            shuffle=True, callbacks=None, verbose=1, sample_weight=None, class_weight=None,
            steps_per_epoch=None, initial_epoch=0):
        """Train; returns a History.  Optimizer state carries over between calls."""
        self._check_compiled("fit")
        bs = self._check_batch_size(batch_size)
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 0:
            raise ValueError(f"epochs must be a non-negative int, got {epochs!r}")
        if not isinstance(validation_split, (int, float)) or not 0 <= validation_split < 1:
            raise ValueError(f"validation_split must be in [0, 1), got {validation_split!r}")
        cbs = list(callbacks or [])
        for c in cbs:
            if not isinstance(c, Callback):
                raise TypeError(f"callbacks must be pg.callbacks.Callback instances, got {type(c).__name__}")
        if verbose not in (0, 1, 2, True, False):
            raise ValueError("verbose must be 0, 1 or 2")
        is_gen = x is not None and y is None and not isinstance(x, (np.ndarray, list, tuple, dict))
        if is_gen:
            return self._fit_generator(x, epochs, steps_per_epoch, cbs, verbose, validation_data)
        xs, n = self._prepare_x(x)
        ys = self._prepare_y(y, n)
        ws = self._prepare_weights(sample_weight, class_weight, ys, n)
        if n == 0:
            raise ValueError("fit needs at least one row")
        val = None
        if validation_data is not None:
            if not isinstance(validation_data, (list, tuple)) or len(validation_data) not in (2, 3):
                raise ValueError("validation_data must be (x, y) or (x, y, sample_weight)")
            vx, vn = self._prepare_x(validation_data[0])
            vy = self._prepare_y(validation_data[1], vn)
            vw = self._prepare_weights(validation_data[2] if len(validation_data) == 3 else None, None, vy, vn)
            val = (vx, vy, vw, vn)
        elif validation_split > 0:
            nv = int(n * validation_split)
            if nv < 1 or nv >= n:
                raise ValueError(f"validation_split={validation_split} leaves no rows for training or validation")
            cut = n - nv
            val = ([a[cut:] for a in xs], [a[cut:] for a in ys], [a[cut:] for a in ws] if ws else None, nv)
            xs, ys, ws, n = [a[:cut] for a in xs], [a[:cut] for a in ys], [a[:cut] for a in ws] if ws else None, cut
        b = min(bs, n)
        weighted = ws is not None or n % b != 0
        if weighted and ws is None:
            ws = [np.ones((n, 1), dtype=np.float32) for _ in ys]
        cellw = tuple(w.shape[1] > 1 for w in ws) if ws else None
        hist = History()
        all_cbs = cbs + [hist]
        with self._lock:
            self._cell_weights = list(cellw) if cellw else [False] * len(ys)
            step = self._train_step_for(b, weighted, cellw)
            self._trained = True
            self.stop_training = False
            params = {"epochs": epochs, "steps": -(-n // b), "verbose": verbose}
            for c in all_cbs:
                c.set_model(self)
                c.set_params(params)
                c.on_train_begin()
            rng = _random.rng()
            for epoch in range(initial_epoch, epochs):
                for c in all_cbs:
                    c.on_epoch_begin(epoch)
                order = rng.permutation(n) if shuffle else np.arange(n)
                mstates = self._metric_states()
                total, heads_total, seen = 0.0, None, 0
                batches = range(0, n, b)
                bar = None
                if verbose == 1:
                    from tqdm.auto import tqdm
                    bar = tqdm(total=len(batches), desc=f"Epoch {epoch + 1}/{epochs}", unit="batch", leave=True)
                for bi, s in enumerate(batches):
                    idx = order[s:s + b]
                    m = len(idx)
                    bx = [self._pad(a[idx], b) for a in xs]
                    by = [self._pad(a[idx], b) for a in ys]
                    bw = [self._pad(a[idx], b) for a in ws] if weighted else None
                    loss, heads, outs = step.step(bx, by, bw, m, want_outputs=bool(mstates))
                    total += loss * m
                    seen += m
                    heads_total = [h * m for h in heads] if heads_total is None else [a + h * m for a, h in zip(heads_total, heads)]
                    for (i, st) in mstates:
                        st.update(by[i], outs[i].reshape(b, -1), m)
                    blogs = {"loss": total / seen}
                    for (i, st) in mstates:
                        blogs[self._metric_key(i, st.name)] = st.result()
                    for c in all_cbs:
                        c.on_train_batch_end(bi, blogs)
                    if bar is not None:
                        bar.set_postfix({k: f"{v:.4g}" for k, v in blogs.items()}, refresh=False)
                        bar.update(1)
                    if self.stop_training:
                        break
                logs = {"loss": total / max(seen, 1)}
                if len(self._outputs) > 1:
                    for nm, h in zip(self.output_names, heads_total):
                        logs[f"{nm}_loss"] = h / max(seen, 1)
                for (i, st) in mstates:
                    logs[self._metric_key(i, st.name)] = st.result()
                if val is not None:
                    vlogs = self._evaluate_arrays(val[0], val[1], val[2], val[3], bs)
                    for k, v in vlogs.items():
                        logs["val_" + k] = v
                logs["learning_rate"] = self.optimizer.learning_rate
                if bar is not None:
                    bar.set_postfix({k: f"{v:.4g}" for k, v in logs.items() if k != "learning_rate"})
                    bar.close()
                elif verbose == 2:
                    _print_epoch(epoch, epochs, logs)
                for c in all_cbs:
                    c.on_epoch_end(epoch, logs)
                if self.stop_training:
                    break
            for c in all_cbs:
                c.on_train_end()
        return hist

    def _fit_generator(self, gen, epochs, steps_per_epoch, cbs, verbose, validation_data):
        if steps_per_epoch is None:
            raise ValueError("fit on a generator needs steps_per_epoch")
        it = iter(gen)
        hist = History()
        all_cbs = cbs + [hist]
        for c in all_cbs:
            c.set_model(self)
            c.on_train_begin()
        self.stop_training = False
        for epoch in range(epochs):
            for c in all_cbs:
                c.on_epoch_begin(epoch)
            total, seen = 0.0, 0
            for bi in range(steps_per_epoch):
                try:
                    item = next(it)
                except StopIteration:
                    break
                if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
                    raise ValueError("a generator must yield (x, y) or (x, y, sample_weight)")
                h = self.fit(item[0], item[1], epochs=1, batch_size=max(len(np.asarray(item[1] if not isinstance(item[1], (list, dict)) else item[0])), 1),
                             shuffle=False, verbose=0, sample_weight=item[2] if len(item) == 3 else None)
                m = len(self._prepare_x(item[0])[0][0])
                total += h.history["loss"][0] * m
                seen += m
                for c in all_cbs:
                    c.on_train_batch_end(bi, {"loss": total / seen})
            logs = {"loss": total / max(seen, 1), "learning_rate": self.optimizer.learning_rate}
            if validation_data is not None:
                vl = self.evaluate(validation_data[0], validation_data[1])
                logs.update({"val_" + k: v for k, v in vl.items()})
            if verbose:
                _print_epoch(epoch, epochs, logs)
            for c in all_cbs:
                c.on_epoch_end(epoch, logs)
            if self.stop_training:
                break
        for c in all_cbs:
            c.on_train_end()
        return hist

    # ------------------------------------------------------------ misc API
    def summary(self, print_fn=print):
        self._ensure_graph()
        rows = [("Layer (type)", "Output Shape", "Param #")]
        for l in self.layers:
            shape = "(None, " + ", ".join(map(str, l.output_shape or ())) + ")"
            rows.append((f"{l.name} ({type(l).__name__})", shape, str(l.count_params())))
        w = [max(len(r[i]) for r in rows) + 2 for i in range(3)]
        line = "-" * sum(w)
        out = [f'Model: "{self.name}"', line]
        for k, r in enumerate(rows):
            out.append("".join(c.ljust(w[i]) for i, c in enumerate(r)))
            if k == 0:
                out.append("=" * sum(w))
        total = self.count_params()
        trainable = sum(int(np.prod(s)) for l, wn, s, i, tr, lay in self._weight_specs() if tr and l.trainable)
        out += ["=" * sum(w), f"Total params: {total}", f"Trainable params: {trainable}",
                f"Non-trainable params: {total - trainable}"]
        print_fn("\n".join(out))

    def get_config(self):
        self._ensure_graph()
        layers = []
        index = {id(l): i for i, l in enumerate(self._all_layers)}
        for l in self._all_layers:
            inbound = []
            for n in self._nodes:
                if n.layer is l:
                    inbound = [n2.layer.name for n2 in n.inputs]
            layers.append({"class_name": type(l).__name__, "config": l.get_config(), "inbound": inbound})
        return {"name": self.name, "layers": layers,
                "inputs": [n.layer.name for n in self._inputs], "outputs": [n.layer.name for n in self._outputs],
                "multi_output": self._multi, "multi_input": getattr(self, "_multi_in", False)}

    @classmethod
    def from_config(cls, config):
        from pyggml.layers import get_class
        made, nodes = {}, {}
        for entry in config["layers"]:
            klass = get_class(entry["class_name"])
            layer = InputLayer.from_config(entry["config"]) if klass is InputLayer else klass.from_config(entry["config"])
            made[entry["config"]["name"]] = (layer, entry["inbound"])
        order = [e["config"]["name"] for e in config["layers"]]

        def node_of(name):
            if name in nodes:
                return nodes[name]
            layer, inbound = made[name]
            if isinstance(layer, InputLayer):
                node = Node(layer.shape, layer, [])
            else:
                parents = [node_of(p) for p in inbound]
                node = layer(parents if len(parents) > 1 else parents[0])
            nodes[name] = node
            return node
        for nm in order:
            node_of(nm)
        ins = [nodes[n] for n in config["inputs"]]
        outs = [nodes[n] for n in config["outputs"]]
        return cls(ins if config.get("multi_input") else ins[0], outs if config.get("multi_output") else outs[0],
                   name=config.get("name"))

    def _copy_weights_from(self, other, tau=None):
        """Copy (tau None or 1) or blend other's weights into ours on the backend."""
        self._check_compiled("copying weights")
        other._check_compiled("copying weights")
        mine, theirs = self._wt, other._wt
        if set(mine) != set(theirs) or any(mine[k].shape != theirs[k].shape for k in mine):
            raise ValueError("the models do not have the same weights")
        key = id(other._wctx)
        cache = getattr(self, "_blend_cache", None)
        if cache is None or cache[0] != key:
            if cache is not None:
                cache[1].free()
            cache = (key, _Blender(self, other))
            self._blend_cache = cache
        cache[1].run(1.0 if tau is None else float(tau))

    def save(self, path):
        from pyggml.saving.gguf_io import save_model
        save_model(self, path)

    def save_weights(self, path):
        from pyggml.saving.gguf_io import save_weights
        save_weights(self, path)

    def load_weights(self, path):
        from pyggml.saving.gguf_io import load_weights
        load_weights(self, path)

    def free(self):
        """Release the model's native memory.  Idempotent."""
        if self._freed:
            return
        with self._lock:
            for d in list(self._dependents):
                try:
                    d._on_model_freed()
                except Exception:
                    pass
            cache = getattr(self, "_blend_cache", None)
            if cache is not None:
                cache[1].free()
                self._blend_cache = None
            self._drop_executors()
            self._free_weights()
            if getattr(self, "_backend", None) is not None:
                self._backend.free()
                self._backend = None
            self._freed = True


class _Blender:
    """target = tau * source + (1 - tau) * target for every weight, as one graph."""

    def __init__(self, target, source):
        names = sorted(target._wt)
        self.ctx = Context(n_tensors=8 * len(names) + 16, graph_size=8 * len(names) + 64)
        self.in_ctx = Context(n_tensors=4)
        self.tau = self.in_ctx.new_tensor((1,))
        self.one_minus = self.in_ctx.new_tensor((1,))
        dev = target._backend
        self.backend = dev if dev.is_cpu else Backend(dev.name)     # see graph._Executor
        self.buf = BackendBuffer(self.in_ctx, self.backend)
        self.graph = Graph(self.ctx, 8 * len(names) + 64)
        for k in names:
            t, s = target._wt[k], source._wt[k]
            mixed = ops.add(ops.mul(s, self.tau, ctx=self.ctx), ops.mul(t, self.one_minus, ctx=self.ctx), ctx=self.ctx)
            self.graph.build_forward(ops.cpy(mixed, t, ctx=self.ctx))
        self.sched = Scheduler([self.backend], graph_size=16 * len(names) + 128)
        self._own_backend = self.backend is not dev

    def run(self, tau):
        self.tau.set(np.array([tau], dtype=np.float32))
        self.one_minus.set(np.array([1.0 - tau], dtype=np.float32))
        self.sched.compute(self.graph, n_threads=1)

    def free(self):
        self.sched.free()
        self.buf.free()
        self.ctx.free()
        self.in_ctx.free()
        if self._own_backend:
            self.backend.free()
