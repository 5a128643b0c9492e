"""The epoch loop of ``fit`` and the pass of ``evaluate``.

One loop for arrays and for generators: the data becomes a ``Dataset`` whose
batches run through the model's training step (a short last batch runs with
its own batch size); callbacks get Keras's hooks with ``logs``; metrics and
losses are averaged over samples; validation runs at the end of each epoch.
"""

import warnings

import numpy as np

from pyggml import _random
from pyggml._validation import check_fraction, check_int, check_positive_int, is_int
from pyggml.callbacks import Callback, CallbackList, History, ProgbarLogger
from pyggml.models import data_adapter as da

__all__ = ["fit", "evaluate", "predict", "make_dataset", "check_batch_size"]


def check_batch_size(batch_size, default=32, what="batch_size"):
    if batch_size is None:
        return default
    if not is_int(batch_size) or batch_size < 1:
        raise ValueError(f"{what} must be a positive int, got {batch_size!r}")
    # (larger than the data: one batch of all of it, as Keras; past 2**20 rows, batches of 2**20)
    return int(min(batch_size, 1 << 20))


def _repeats_forever(x):
    from pyggml.utils.dataset_utils import INFINITE_CARDINALITY, Dataset as DataPipeline
    return isinstance(x, DataPipeline) and x.cardinality() == INFINITE_CARDINALITY


def _class_indices(model, y):
    """y (an array) holds integer class indices for the model's one output of several classes."""
    try:
        outputs = list(model.outputs or ())
    except Exception:                          # a subclassed model not built yet
        return False
    if y is None or da.is_generator_like(y) or isinstance(y, (list, tuple, dict)) or len(outputs) != 1:
        return False
    a = np.asarray(y)
    shape = tuple(getattr(outputs[0], "feature_shape", ()) or ())
    if a.dtype.kind not in "iu" or not shape or shape[-1] is None or shape[-1] < 2 or a.ndim < 1:
        return False
    return a.shape[1:] in (tuple(shape[:-1]), tuple(shape[:-1]) + (1,))


def _first_targets(x):
    """The targets of a re-iterable dataset's first batch (looked at ahead, as Keras's adapters
    peek), or None (a one-pass generator is not looked at)."""
    if not hasattr(x, "__iter__") or hasattr(x, "__next__"):
        return None
    try:
        first = next(iter(x))
    except Exception:
        return None
    try:
        return da.unpack_item(first, True)[1]
    except Exception:
        return None


def _yields_no_targets(x, y):
    """fit's data has inputs only: no y with arrays, or a dataset whose first item is x alone."""
    if not da.is_generator_like(x):
        return y is None
    if y is not None or not hasattr(x, "__iter__") or hasattr(x, "__next__"):
        return False                      # a one-pass generator is not looked at ahead
    try:
        first = next(iter(x))
    except Exception:
        return False
    return da.unpack_item(first, True)[1] is None


def _adds_losses(model):
    """Some layer of the model calls add_loss in its call (noted while the graph was traced)."""
    from pyggml.layers import weight_rules
    try:
        layers = model._ensure_graph().layers
    except Exception:                          # a model whose graph waits for data
        return False
    return any(l.__dict__.get("_adds_losses", False) for l in weight_rules.layer_tree(layers))


def _resolve_crossentropy(model, y):
    """Keras's "crossentropy" loss on an output of several units, by the first targets seen:
    sparse when they have one axis fewer than the output or a last axis of 1, else categorical
    (compile's spec made again with it, the graphs made for the other dropped)."""
    spec, names = model._compile_spec, model.output_names
    if y is None:
        return
    sparse = {}
    for i in spec.crossentropy_pending:
        yi = y.get(names[i]) if isinstance(y, dict) else \
            (y[i] if i < len(y) else None) if isinstance(y, (list, tuple)) and len(names) > 1 else y
        try:
            shape, rank = np.shape(yi), len(model.outputs[i].feature_shape) + 1
        except ValueError:                  # (ragged lists: the data's checks say what is wrong)
            continue
        if yi is None:
            continue
        sparse[i] = len(shape) < rank or (len(shape) > 0 and shape[-1] == 1)
    if sparse:
        model._compile_spec = spec.with_crossentropy_resolved(sparse)
        if model._rt is not None:
            model._rt.drop_graphs()


def make_dataset(model, x, y, sample_weight, class_weight, batch_size, steps=None, what="fit",
                 with_targets=True):
    """A Dataset of checked batches from arrays or a generator-like source."""
    if steps is not None:
        check_positive_int("steps", steps)
    if with_targets and model._compile_spec.loss_defaulted and (_yields_no_targets(x, y) or _adds_losses(model)):
        # Keras's compile() without a loss, then fit on inputs alone (the endpoint-layer pattern),
        # or on a model whose layers add losses (with targets too: Keras's loss is then its
        # layers' add_loss alone, the targets unused): it trains on add_loss, not on the default loss
        optimizer, metrics, loss_weights, args, kwargs = model.__dict__.pop("_compile_args")
        model.compile(model.optimizer if model.optimizer is not None else optimizer, None, metrics, loss_weights,
                      *args, **kwargs)
    if with_targets and model._compile_spec.loss_defaulted and \
            _class_indices(model, _first_targets(x) if da.is_generator_like(x) else y):
        # compile() without a loss, then class indices for a many-class output: Keras's "accuracy"
        # reads them as sparse labels; the defaulted loss takes them so too
        optimizer, metrics, loss_weights, args, kwargs = model.__dict__.pop("_compile_args")
        model.compile(model.optimizer if model.optimizer is not None else optimizer,
                      "sparse_categorical_crossentropy", metrics, loss_weights, *args, **kwargs)
    if with_targets and model._compile_spec.crossentropy_pending:
        _resolve_crossentropy(model, _first_targets(x) if da.is_generator_like(x) else y)
    if not da.is_generator_like(x) and hasattr(model, "_relax_for"):
        model._relax_for(x)       # (a Sequential given data of another shape: its graph first, then the specs)
    tspecs = model.target_specs if with_targets else None
    untargeted = with_targets and all(not s.has_loss for s in tspecs)
    training = what in ("fit", "train_on_batch")      # data augmentation runs on these batches only
    if da.is_generator_like(x):
        if y is not None:
            raise ValueError(f"{what}: y must be None when x is a generator or dataset (it yields (x, y))")
        losses = model._compile_spec.losses if with_targets else None

        gspecs = model.graph_specs
        # a graph per length bucket, when padding is masked and no output (nor target) has that length
        bucket = any(s.bucket for s in gspecs) and all(None not in o.feature_shape for o in model.outputs)

        def adapt(item):
            bx, by, bw = da.unpack_item(item, with_targets)
            xs, n = model.prepare_inputs(bx, training=training, one_batch=True)
            # (the specs read after: a Sequential made again for a batch of another shape has new ones)
            if bucket and n is not None:
                xs = da.bucketed(xs, model.graph_specs)
            if not with_targets:
                return da.Batch(xs)
            specs = model.target_specs
            if by is None:
                if untargeted:
                    return da.Batch(xs, [None] * len(specs), [None] * len(specs))
                raise ValueError(f"{what}: the data yields no targets (it must yield (x, y) or (x, y, w))")
            ys = da.adapt_targets(specs, by, n)
            ws = da.adapt_weights(specs, losses, bw, class_weight, ys, n)
            return da.Batch(xs, ys, ws)
        if steps is None and _repeats_forever(x):
            raise ValueError(f"{what}: the dataset repeats forever (repeat() with no count), so an epoch "
                             f"never ends: pass the number of batches (steps_per_epoch to fit, "
                             f"validation_steps for validation data, steps to evaluate and predict)")
        return da.GeneratorDataset(x, adapt, steps)
    stage = None
    if training and any(getattr(n.layer, "host_training", False) for n in model._ensure_graph().host_nodes):
        # augmentation: the raw inputs are kept and the host layers run on each batch, new draws each time
        xs, n = da.adapt_inputs(model.input_specs, x)
        multi = len(xs) > 1

        def stage(batch_xs, batch_training):
            return model.prepare_inputs(batch_xs if multi else batch_xs[0], training=batch_training)[0]
    else:
        # (None: a model called on arrays with no training=, see Model._plain_predict).  Inputs
        # whose rows differ (a batch of disjoint graphs) are one batch: in predict (a model called
        # on them) and the one-batch calls; fit and evaluate cannot cut them into batches
        xs, n = model.prepare_inputs(x, training=model.__dict__.get("_host_training", False),
                                     one_batch=what in ("predict", "train_on_batch", "test_on_batch"))
        if n is None:
            if not with_targets:
                return da.OneBatch(da.Batch(xs))
            ys = da.adapt_targets(tspecs, y, None) if y is not None else [None] * len(tspecs)
            if y is None and not untargeted:
                raise ValueError(f"{what} needs targets y")
            ws = da.adapt_weights(tspecs, model._compile_spec.losses, sample_weight, class_weight, ys, None)
            return da.OneBatch(da.Batch(xs, ys, ws))
    if n == 0:
        raise ValueError(f"{what} needs at least one row")
    if not with_targets:
        ds = da.ArrayDataset(xs, None, None, n, batch_size)
    elif y is None:
        if not untargeted:
            raise ValueError(f"{what} needs targets y")
        ds = da.ArrayDataset(xs, [None] * len(tspecs), [None] * len(tspecs), n, batch_size, stage)
    else:
        ys = da.adapt_targets(tspecs, y, n)
        ws = da.adapt_weights(tspecs, model._compile_spec.losses, sample_weight, class_weight, ys, n)
        ds = da.ArrayDataset(xs, ys, ws, n, batch_size, stage)
    ds.limit_steps(steps)
    return ds


class _Averages:
    """Sample-weighted running means of the loss and each head's loss, and the metrics."""

    def __init__(self, model):
        self.model = model
        self.spec = model._compile_spec
        self.names = model.output_names
        # the labels' shape as given, for metrics of the user's: (n, 1) labels stay (n, 1), as in Keras
        self.tails = [getattr(t, "labels_tail", None) for t in model.target_specs]
        self.keys = self.spec.all_metric_keys()
        for _, m, _, _ in self.keys:
            m.reset_state()
        # metrics that layers' calls update (filled in as the model's graphs are built)
        self.calls = model.__dict__.setdefault("_call_metrics", [])
        for m in self.calls:
            m.reset_state()
        self.total = 0.0
        self.heads = None
        self.seen = 0

    def add(self, n, loss, heads, outs, ys, masks=None, ws=None):
        self.total += loss * n
        self.seen += n
        hs = [0.0 if h is None else h * n for h in heads]
        self.heads = hs if self.heads is None else [a + b for a, b in zip(self.heads, hs)]
        for i, m, _, weighted in self.keys:
            mask = None if not masks else masks[i]
            w = ws[i] if weighted and ws is not None else None
            if w is not None and mask is not None:
                w = w.reshape(len(w), -1) * mask.reshape(len(mask), -1)      # (n, 1) per sample, by the steps
            y = ys[i]
            if y is None:
                continue                # no targets given (an add_loss model evaluated on x alone)
            tail = self.tails[i] if i < len(self.tails) else None
            if tail is not None and y is not None and not type(m).__module__.startswith("pyggml.") and \
                    y.size == len(y) * int(np.prod(tail)) and tuple(y.shape[1:]) != tail:
                y = y.reshape((len(y),) + tail)
            m.update_state(y, outs[i], mask if w is None else w)

    @property
    def wants_outputs(self):
        return bool(self.keys)

    def logs(self):
        logs = {"loss": self.total / max(self.seen, 1)}
        tracker = self.model._tracker()              # model.metrics' "loss" (Keras 3's loss tracker)
        tracker.total, tracker.count = float(self.total), float(self.seen)
        if sum(l is not None for l in self.spec.losses) > 1 and self.heads is not None:   # (Keras: several losses)
            for nm, h, l in zip(self.names, self.heads, self.spec.losses):
                if l is not None:
                    logs[f"{nm}_loss"] = h / max(self.seen, 1)
        for _, m, key, _ in self.keys:
            logs[key] = _log_value(m.result())
        for m in self.calls:
            logs.setdefault(m.name, _log_value(m.result()))
        return logs


def _log_value(r):
    """A metric's result in the logs: a float, or an array (Precision at several thresholds)."""
    a = np.asarray(r)
    return float(a) if a.size == 1 else a.astype(np.float32)


def _weight_kinds(batch):
    if batch.ws is None:
        return None
    # (the weights' width: 1 per sample, else one per cell or per step of the output)
    return tuple(None if w is None else int(w.shape[1]) for w in batch.ws)


def own_evaluate(model):
    """Whether the model's class (or a class of the user's it derives from) overrides evaluate."""
    return any("evaluate" in c.__dict__ for c in type(model).__mro__ if c.__module__.split(".")[0] != "pyggml")


def evaluate_overridden(model, validation_data, batch_size, steps):
    """fit's validation through the user's own ``evaluate`` (keras-io's deep_recommender refreshes
    its retrieval candidates there), as Keras 3's fit validates with ``self.evaluate``."""
    if da.is_generator_like(validation_data):
        logs = model.evaluate(validation_data, steps=steps, verbose=0, return_dict=True)
    else:
        vx, vy, vw = da.unpack_validation_data(validation_data)
        logs = model.evaluate(vx, vy, sample_weight=vw, batch_size=batch_size, steps=steps, verbose=0,
                              return_dict=True)
    if not isinstance(logs, dict):
        raise TypeError(f"fit: {type(model).__name__}.evaluate(..., return_dict=True) must return a dict of logs, "
                        f"got {type(logs).__name__}")
    return logs


def run_evaluation(model, dataset, callbacks=None):
    """{"loss": ..., heads, metrics} over the dataset, in inference mode."""
    avg = _Averages(model)
    for bi, batch in enumerate(dataset.batches()):
        if callbacks is not None:
            callbacks.call("on_test_batch_begin", bi, {})
        ev = model._evaluator_for(batch, _weight_kinds(batch))
        loss, heads, outs = ev.run(batch.xs, batch.ys, batch.ws, want_outputs=avg.wants_outputs)
        avg.add(batch.n, loss, heads, outs, batch.ys, ev.last_masks, batch.ws)
        if callbacks is not None:
            callbacks.call("on_test_batch_end", bi, avg.logs())
            if model.__dict__.get("stop_evaluating"):        # a callback's (Keras's): after this batch
                break
    if avg.seen == 0:
        raise ValueError("evaluate: the data gave no batches")
    return avg.logs()


def _with_progbar(cbs, verbose):
    """The callbacks plus Keras's ProgbarLogger when verbose asks for progress and none was given
    (it prints fit's and evaluate's progress: one place for it)."""
    if verbose in (1, 2) and not any(isinstance(c, ProgbarLogger) for c in cbs):
        return cbs + [ProgbarLogger()]
    return cbs


def check_verbose(verbose):
    """Keras's verbose (0, 1, 2, True, False or "auto") as 0, 1 or 2."""
    if verbose not in (0, 1, 2, True, False, "auto"):
        raise ValueError("verbose must be 0, 1, 2 or 'auto'")
    return 1 if verbose in ("auto", True) else int(verbose)


def check_callbacks(callbacks):
    """The callbacks as a list, each a pg.callbacks.Callback."""
    cbs = list(callbacks or [])
    for c in cbs:
        if not isinstance(c, Callback):
            raise TypeError(f"callbacks must be pg.callbacks.Callback instances, got {type(c).__name__}")
    return cbs


def check_validation_args(validation_steps, validation_batch_size):
    """fit's validation_steps and validation_batch_size checked (each None or a positive int)."""
    if validation_steps is not None:
        check_positive_int("validation_steps", validation_steps)
    if validation_batch_size is not None:
        check_batch_size(validation_batch_size, what="validation_batch_size")


def check_fit_args(epochs, initial_epoch, verbose, validation_split, steps_per_epoch, validation_freq, callbacks):
    """fit's arguments checked (the fused loop's and the custom steps' alike): (epochs,
    initial_epoch, verbose as 0/1/2, steps_per_epoch, the callbacks as a list)."""
    epochs = check_int("epochs", epochs, 0)
    initial_epoch = check_int("initial_epoch", initial_epoch, 0)
    verbose = check_verbose(verbose)
    check_fraction("validation_split", validation_split, high_open=True)
    if steps_per_epoch is not None:
        steps_per_epoch = check_positive_int("steps_per_epoch", steps_per_epoch)
    if not is_int(validation_freq) or validation_freq < 1:
        raise ValueError(f"validation_freq must be a positive int, got {validation_freq!r}")
    cbs = check_callbacks(callbacks)
    return epochs, initial_epoch, verbose, steps_per_epoch, cbs


def begin_fit(model, cbs, verbose, epochs, steps, initial_epoch):
    """fit's start, for the fused loop and the custom steps alike: (the History, the callbacks
    with the progress bar, the generator, the first epoch) after ``on_train_begin`` (a callback
    that restored a backup, BackupAndRestore, says where to resume)."""
    history = History()
    cl = CallbackList(_with_progbar(cbs, verbose) + [history], model,
                      {"epochs": epochs, "steps": steps, "verbose": verbose})
    model.stop_training = False
    rng = _random.rng()
    cl.call("on_train_begin", {})
    resume = [c.resume_epoch for c in cbs if getattr(c, "resume_epoch", None) is not None]
    return history, cl, rng, max([initial_epoch] + resume)


def ran_out(epoch, start):
    """An epoch that got no batches: in the fit's first epoch, the data has none (an error); later,
    a generator ran out, and training stops there with Keras's warning (True)."""
    if epoch == start:
        raise ValueError("fit: the data gave no batches for its first epoch (an empty generator or dataset?)")
    warnings.warn("Your input ran out of data; interrupting training. Make sure that the data can give at least "
                  "steps_per_epoch * epochs batches (a generator that ends, or a dataset without repeat())",
                  UserWarning, stacklevel=4)
    return True


def fit(model, x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data, shuffle,
        class_weight, sample_weight, initial_epoch, steps_per_epoch, validation_steps, validation_batch_size,
        validation_freq):
    epochs, initial_epoch, verbose, steps_per_epoch, cbs = check_fit_args(
        epochs, initial_epoch, verbose, validation_split, steps_per_epoch, validation_freq, callbacks)
    check_validation_args(validation_steps, validation_batch_size)
    data = make_dataset(model, x, y, sample_weight, class_weight, batch_size, steps_per_epoch)
    val = None
    if validation_data is not None:
        if da.is_generator_like(validation_data):
            val = make_dataset(model, validation_data, None, None, None, validation_batch_size or batch_size,
                               validation_steps, "validation_data")
        else:
            vx, vy, vw = da.unpack_validation_data(validation_data)
            val = make_dataset(model, vx, vy, vw, None, validation_batch_size or batch_size, validation_steps,
                               "validation_data")
    elif validation_split > 0:
        if not isinstance(data, da.ArrayDataset):
            raise ValueError("validation_split needs arrays; give a generator's validation set as validation_data")
        data, val = data.split(validation_split, validation_batch_size)
        if class_weight is not None:
            # Keras weighs only the training rows by class: the held-out rows keep their own weights
            _, val = make_dataset(model, x, y, sample_weight, None, batch_size).split(validation_split,
                                                                                    validation_batch_size)
        # Keras: steps_per_epoch counts the training part's batches, validation_steps the held-out part's
        data.limit_steps(steps_per_epoch)
        val.limit_steps(validation_steps)
    if val is not None:
        val.go_on = False                 # Keras: each validation starts at the data's first batch
    history, cl, rng, start = begin_fit(model, cbs, verbose, epochs, data.steps, initial_epoch)
    logs = {}
    for epoch in range(start, epochs):
        cl.call("on_epoch_begin", epoch, {})
        avg = _Averages(model)
        for bi, batch in enumerate(data.batches(epoch, shuffle, rng)):
            cl.call("on_train_batch_begin", bi, {})
            step = model._train_step_for(batch, _weight_kinds(batch))
            loss, heads, outs = step.step(batch.xs, batch.ys, batch.ws, want_outputs=avg.wants_outputs)
            avg.add(batch.n, loss, heads, outs, batch.ys, step.last_masks, batch.ws)
            blogs = avg.logs()
            cl.call("on_train_batch_end", bi, blogs)
            if model.stop_training:
                break
        if avg.seen == 0 and ran_out(epoch, start):
            break
        logs = avg.logs()
        if val is not None and (epoch + 1 - initial_epoch) % validation_freq == 0:
            # Keras's test hooks around the validation (SwapEMAWeights evaluates with the averages)
            model.stop_evaluating = False
            cl.call("on_test_begin", {})
            val_logs = evaluate_overridden(model, validation_data, validation_batch_size or batch_size,
                                           validation_steps) if validation_data is not None and \
                own_evaluate(model) else run_evaluation(model, val, cl)
            cl.call("on_test_end", val_logs)
            for k, v in val_logs.items():
                logs["val_" + k] = v
        logs["learning_rate"] = model.optimizer.learning_rate
        cl.call("on_epoch_end", epoch, logs)
        if model.stop_training:
            break
    if epochs > start and model.optimizer.use_ema:
        # Keras: the weights end as their moving averages
        model.optimizer.finalize_variable_values(model.trainable_variables)
    cl.call("on_train_end", logs)
    return history


def evaluate(model, x, y, batch_size, verbose, sample_weight, steps, callbacks, return_dict):
    verbose = check_verbose(verbose)
    data = make_dataset(model, x, y, sample_weight, None, batch_size, steps, "evaluate")
    cl = CallbackList(_with_progbar(check_callbacks(callbacks), verbose), model,
                      {"steps": data.steps, "verbose": verbose})
    model.stop_evaluating = False                 # (a callback sets it to stop: Keras's)
    cl.call("on_test_begin", {})
    logs = run_evaluation(model, data, cl)
    cl.call("on_test_end", logs)
    return _results(model, logs, return_dict)


def _results(model, logs, return_dict):
    """evaluate's return: the logs, or the loss alone, or [loss, *metrics] in metrics_names order."""
    if return_dict:
        return logs
    values = [logs[k] for k in model.metrics_names if k in logs]
    return values[0] if len(values) == 1 else values


def _one_batch(model, x, y, sample_weight, class_weight, what):
    if da.is_generator_like(x):
        raise TypeError(f"{what} takes arrays (one batch), not a generator or dataset: "
                        f"use {'fit' if what == 'train_on_batch' else 'evaluate'} for those")
    data = make_dataset(model, x, y, sample_weight, class_weight, 1 << 62, None, what)
    return next(iter(data.batches()))


def train_on_batch(model, x, y, sample_weight, class_weight, return_dict):
    """Keras's train_on_batch: one optimizer step on all the rows given; the loss (and metrics)
    of that step, as evaluate returns them."""
    batch = _one_batch(model, x, y, sample_weight, class_weight, "train_on_batch")
    avg = _Averages(model)
    step = model._train_step_for(batch, _weight_kinds(batch))
    loss, heads, outs = step.step(batch.xs, batch.ys, batch.ws, want_outputs=avg.wants_outputs)
    avg.add(batch.n, loss, heads, outs, batch.ys, step.last_masks, batch.ws)
    return _results(model, avg.logs(), return_dict)


def test_on_batch(model, x, y, sample_weight, return_dict):
    """Keras's test_on_batch: evaluate on all the rows given, as one batch."""
    batch = _one_batch(model, x, y, sample_weight, None, "test_on_batch")
    return _results(model, run_evaluation(model, da.OneBatch(batch)), return_dict)


class BatchCalls:
    """Keras's one-batch calls, for Model (its ``_locked`` and ``predict``), and the reset of
    its stateful layers."""

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """One optimizer step on all of x: its loss (and metrics) as evaluate returns them.
        Optimizer state carries over, as between fit calls."""
        return self._locked("train_on_batch", train_on_batch, x, y, sample_weight, class_weight, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """evaluate on all of x as one batch."""
        return self._locked("test_on_batch", test_on_batch, x, y, sample_weight, return_dict)

    def predict_on_batch(self, x):
        """predict on all of x as one batch (a list or dict of inputs too)."""
        parts = list(x.values()) if isinstance(x, dict) else list(x) if isinstance(x, (list, tuple)) else [x]
        rows = [len(p) for p in parts if np.ndim(p) > 0]
        return self.predict(x, batch_size=max(rows + [1]))

    # --- stateful recurrent layers (their states carry over between these calls) ------------
    def stateful_layers(self):
        """The layers (nested ones included) with ``stateful=True``."""
        from pyggml.layers import weight_rules
        return [l for l in weight_rules.layer_tree(self._ensure_graph().layers)
                if l is not self and getattr(l, "stateful", False) is True and hasattr(l, "reset_states")]

    def reset_states(self):
        """Set the states of every stateful layer to zeros (Keras's ``model.reset_states()``)."""
        self.check_alive()
        for l in self.stateful_layers():
            l.reset_states()

    reset_state = reset_states


def predict(model, x, batch_size, steps):
    """[outputs] for every row of x (arrays or a generator of inputs)."""
    rt = model._runtime()
    fast = _fast_input(model, x, batch_size)
    if fast is not None:                                # one batch, already as the graph takes it
        pred = rt.predictor(((len(fast),) + fast.shape[1:],))
        model._predict_fast = (fast.shape, fast.dtype, len(fast) <= check_batch_size(None), pred, rt)
        return pred.run([fast])
    data = make_dataset(model, x, None, None, None, batch_size, steps, "predict", with_targets=False)
    chunks = None
    for batch in data.batches():
        outs = _predict_batch(rt, batch.xs, batch.n)
        chunks = [[o] for o in outs] if chunks is None else [c + [o] for c, o in zip(chunks, outs)]
    if chunks is None:
        raise ValueError("predict: the data gave no batches")
    return [np.concatenate(c, axis=0) for c in chunks]


def model_predict(model, x, batch_size, verbose, steps, callbacks):
    """Model.predict past its repeat path (predict_repeat): checked and run under the model's
    lock, batch by batch with callbacks and progress when asked for."""
    quiet = not callbacks and verbose in (0, False)
    model.check_alive()
    bs = check_batch_size(batch_size)
    if steps is not None:
        check_positive_int("steps", steps)
    with model._lock:
        return predict(model, x, bs, steps) if quiet else \
            predict_with_callbacks(model, x, bs, steps, verbose, callbacks)


def predict_with_callbacks(model, x, batch_size, steps, verbose, callbacks):
    """predict batch by batch with Keras's on_predict_* calls (their logs: {"outputs": ...})
    and its progress bar for verbose 1 or 2."""
    verbose = check_verbose(verbose)
    if callbacks is not None and not isinstance(callbacks, (list, tuple)):
        raise TypeError(f"callbacks must be a list of Callback, got {type(callbacks).__name__}")
    rt = model._runtime()
    data = make_dataset(model, x, None, None, None, batch_size, steps, "predict", with_targets=False)
    cl = CallbackList(_with_progbar(list(callbacks or []), verbose), model,
                      {"steps": data.steps, "verbose": verbose})
    model.stop_predicting = False                 # (a callback sets it to stop: Keras's)
    cl.call("on_predict_begin", {})
    chunks = None
    for bi, batch in enumerate(data.batches()):
        cl.call("on_predict_batch_begin", bi, {})
        outs = _predict_batch(rt, batch.xs, batch.n)
        chunks = [[o] for o in outs] if chunks is None else [c + [o] for c, o in zip(chunks, outs)]
        cl.call("on_predict_batch_end", bi, {"outputs": outs if len(outs) > 1 else outs[0]})
        if model.stop_predicting:
            break
        model.check_alive()                      # (a callback may have freed it)
    if chunks is None:
        raise ValueError("predict: the data gave no batches")
    cl.call("on_predict_end", {})
    return [np.concatenate(c, axis=0) for c in chunks]


def predict_repeat(model, x, batch_size, steps):
    """predict's last one-batch call again (the same shape, dtype and layout): its graph at
    once, the checks it passed not repeated; None when x is not that call's kind of input.
    model._predict_fast: (shape, dtype, fits the default batch, predictor, runtime)."""
    fast = model._predict_fast
    if fast is None or type(x) is not np.ndarray or steps is not None or x.shape != fast[0] or \
            x.dtype != fast[1] or not x.flags.c_contiguous or \
            not (fast[2] if batch_size is None else type(batch_size) is int and x.shape[0] <= batch_size <= 1 << 20):
        return None
    with model._lock:
        if model._predict_fast is not fast or fast[4] is not model._rt or fast[3].freed:
            return None
        fast[4].ensure_bound()
        pred = fast[3]
        return pred.run_one(x) if pred.one else pred.run([x])


def _predict_batch(rt, xs, b):
    """The outputs of one batch; a short last batch runs as its own batch, in a graph of its rows
    (as Keras: a call that mixes rows, a batch mean or Concatenate(axis=0), or counts them in a
    state, saw padded rows when it ran padded in the b-row graph)."""
    return rt.predictor(tuple((len(a),) + tuple(a.shape[1:]) for a in xs)).run(xs)


def _fast_input(model, x, batch_size):
    """x itself when it is one batch exactly as the graph takes it (no checks left to do)."""
    if type(x) is not np.ndarray or model._multi_in or model._topology.host_nodes:
        return None
    spec = model.graph_specs[0]
    if x.dtype != (np.int32 if spec.dtype == "int32" else np.float32) or spec.index_limit is not None or \
            not 0 < len(x) <= batch_size or not x.flags.c_contiguous or x.shape[1:] != spec.feature_shape:
        return None
    return x


def gradients(model, x, y, sample_weight):
    """{weight name: gradient of the compiled loss} for one batch (see Model.gradients)."""
    xs, n = model.prepare_inputs(x)
    ys = da.adapt_targets(model.target_specs, y, n)
    ws = da.adapt_weights(model.target_specs, model._compile_spec.losses, sample_weight, None, ys, n)
    trainable, sig = model._trainable_now()
    step = model._runtime().gradient_step(model._shapes(xs), _weight_kinds(da.Batch(xs, ys, ws)), trainable, sig)
    return step.run(xs, ys, ws)[1]
