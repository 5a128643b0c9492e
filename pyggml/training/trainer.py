"""Trainer: a long-lived training context stepped by hand, for reinforcement
learning and custom loops; Snapshot: a frozen copy of the weights.

A trainer trains its model's own weights in place with an optimizer state of
its own (a copy of the model's optimizer, its step counter at 0, its slots on
the device): fresh for each new trainer, apart from the model's ``fit`` state,
kept for the trainer's whole life.  Predictions run on graphs of their own
and never touch the training graph's memory.
"""

import os
import threading
import weakref

import numpy as np

from pyggml._lifetime import Freeable
from pyggml._validation import check_number, is_int, is_number
from pyggml.errors import FreedError
from pyggml.models import Model
from pyggml.models import data_adapter as da
from pyggml.models.rebuild import from_own_config
from pyggml.models.training_loop import check_batch_size

__all__ = ["Trainer", "Snapshot"]

_SNAPSHOTS = weakref.WeakSet()


def _after_fork_in_child():
    # a lock another thread held at fork time would never be released in the child
    for s in list(_SNAPSHOTS):
        s._lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _copy_optimizer(opt):
    fresh = type(opt).from_config(opt.get_config())
    fresh.iterations = 0
    return fresh


class Trainer(Freeable):
    """``pg.Trainer(model, batch_size, nbatch_logical=None, loss_mask=None)``."""

    def __init__(self, model, batch_size, nbatch_logical=None, loss_mask=None):
        if not isinstance(model, Model):
            raise TypeError(f"model must be a compiled Sequential or functional Model, got {type(model).__name__}")
        model.check_alive()
        if not model.compiled:
            raise ValueError("the model must be compiled (model.compile(...)) before making a Trainer")
        batch_size = check_batch_size(batch_size)
        accumulate = model.optimizer.gradient_accumulation_steps
        if nbatch_logical is None:
            period = accumulate or 1             # the optimizer's own (Keras's) accumulation
        else:
            if not is_int(nbatch_logical) or nbatch_logical < batch_size or nbatch_logical % batch_size:
                raise ValueError(f"nbatch_logical must be a multiple of batch_size ({batch_size}), "
                                 f"got {nbatch_logical!r}")
            period = int(nbatch_logical) // batch_size
            if accumulate and accumulate != period:
                raise ValueError(f"nbatch_logical={nbatch_logical} accumulates {period} batches, the optimizer's "
                                 f"gradient_accumulation_steps {accumulate}: give one of the two")
        specs = model.target_specs
        n_out = int(np.prod(specs[0].feature_shape)) if None not in specs[0].feature_shape else None
        losses = model.get_compile_config()["loss"]
        if loss_mask is not None:
            if not is_int(loss_mask):
                raise TypeError("loss_mask must be None, 1 or the number of outputs")
            if len(specs) != 1:
                raise ValueError(f"loss_mask needs a model with one output; this one has {len(specs)} "
                                 f"({', '.join(s.name for s in specs)})")
            if losses[0] not in ("mse", "mean_squared_error"):
                raise ValueError(f"loss_mask needs the loss 'mse' (weights apply to mean squared error only); "
                                 f"the model's loss is {losses[0]!r}")
            if loss_mask not in (1, n_out):
                raise ValueError(f"loss_mask must be 1 (one weight per sample) or the number of outputs "
                                 f"({n_out}), got {loss_mask}")
        self._model = model
        self.batch_size = batch_size
        self.nbatch_logical = batch_size * period
        self.loss_mask = None if loss_mask is None else int(loss_mask)
        self._n_out = n_out
        self._period = period
        self._kinds = None if loss_mask is None else (int(loss_mask),)      # the weights' width
        self._optimizer = _copy_optimizer(model.optimizer)
        self._steps = {}              # input shapes -> TrainStep (one optimizer state for all)
        self._evals = {}
        self._state = None
        self._n = 0
        self._freed = False
        self._ones = np.ones((batch_size, 1), dtype=np.float32)
        self._fixed_shapes = None
        self._fast = None                    # (x shape, y shape) of the float arrays step takes as they are
        self._cell_ones = np.ones((batch_size, n_out or 1), dtype=np.float32)
        # the weights step's fast path gives with a batch (all ones: the trainer's loss mask)
        self._fast_weights = () if loss_mask is None else (self._ones,) if int(loss_mask) == 1 else (self._cell_ones,)
        if all(d is not None for s in model.graph_specs for d in s.feature_shape):
            self._fixed_shapes = tuple((batch_size,) + s.feature_shape for s in model.graph_specs)
            self._train_step(self._fixed_shapes)
            ins, outs = model.graph_specs, model.target_specs
            if len(ins) == 1 and len(outs) == 1 and ins[0].dtype == "float32" and ins[0].index_limit is None \
                    and len(model.input_specs) == 1 and model.input_specs[0] is ins[0] \
                    and not outs[0].sparse and outs[0].has_loss and None not in outs[0].feature_shape:
                self._fast = (self._fixed_shapes[0], (batch_size,) + outs[0].feature_shape)

    # --- state -------------------------------------------------------------------------
    def _check(self):
        if self._freed:
            raise FreedError("Trainer has been freed")
        try:
            self._model.check_alive()
        except FreedError:
            raise FreedError("Trainer's model has been freed") from None

    def _usable(self, executor):
        if executor.freed:
            raise FreedError("Trainer's training graph was released: the model was compiled again or a layer's "
                             "trainable flag changed; make a new Trainer")
        return executor

    @property
    def n_steps(self):
        """The number of step() calls so far."""
        if self._freed:
            raise FreedError("Trainer has been freed")
        return self._n

    @property
    def optimizer(self):
        """The trainer's own optimizer (a copy of the model's)."""
        if self._freed:
            raise FreedError("Trainer has been freed")
        return self._optimizer

    @property
    def lr(self):
        self._check()
        return self._optimizer.learning_rate

    def set_lr(self, lr):
        """Set the learning rate from the next step on (a number >= 0)."""
        self._check()
        if not is_number(lr):
            raise TypeError(f"learning rate must be a number, got {lr!r}")
        self._optimizer.learning_rate = check_number("learning rate", lr, 0.0)

    # --- graphs ------------------------------------------------------------------------
    def _train_step(self, shapes):
        st = self._steps.get(shapes)
        if st is None:
            st = self._model.new_train_step(shapes, self._kinds, self._optimizer, self._period, state=self._state)
            self._state = st.state
            self._steps[shapes] = st
        return self._usable(st)

    def _evaluator(self, shapes):
        ev = self._evals.get(shapes)
        if ev is None:
            ev = self._evals[shapes] = self._model.new_loss_evaluator(shapes, self._kinds)
        return self._usable(ev)

    # --- data ----------------------------------------------------------------------------
    def _as_taken(self, x, y):
        """True when (x, y) is one batch exactly as the graph takes it: nothing to convert or check."""
        fast = self._fast
        return fast is not None and type(x) is np.ndarray and type(y) is np.ndarray and \
            x.shape == fast[0] and y.shape == fast[1] and x.dtype == np.float32 and \
            y.dtype == np.float32 and x.flags.c_contiguous and y.flags.c_contiguous

    def _batch(self, x, y, weights, what):
        m = self._model
        if self._freed:
            self._check()
        if weights is None and self._as_taken(x, y):
            return [x], [y], ([self._ones] if self.loss_mask == 1 else
                              [self._cell_ones] if self.loss_mask else None)
        xs, n = m.prepare_inputs(x, training=what == "step")       # augmentation in training steps only
        if n != self.batch_size:
            raise ValueError(f"{what} takes exactly {self.batch_size} rows (the batch size), got {n}")
        ys = da.adapt_targets(m.target_specs, y, n)
        if weights is None:
            if self.loss_mask is None:
                ws = None
            else:
                ws = [self._ones if self.loss_mask == 1 else np.ones((n, self._n_out), dtype=np.float32)]
        else:
            if self.loss_mask is None:
                raise ValueError("weights given to a trainer built without loss_mask; make it with "
                                 "loss_mask=1 or loss_mask=<number of outputs>")
            w = da.as_real_array(weights, "weights").astype(np.float32)
            want = (n, 1) if self.loss_mask == 1 else (n, self._n_out)
            if self.loss_mask == 1 and w.shape == (n,):
                w = w.reshape(n, 1)
            if w.shape != want:
                shown = f"({n},)" if self.loss_mask == 1 else f"({n}, {self._n_out})"
                raise ValueError(f"weights must have shape {shown} (also written {n} x {want[1]}), got {w.shape}")
            if not np.all(np.isfinite(w)):
                raise ValueError("weights must be finite")
            ws = [np.ascontiguousarray(w)]
        return xs, ys, ws

    # --- training --------------------------------------------------------------------------
    def step(self, x, y, weights=None):
        """Train on one batch of exactly batch_size rows; returns its loss."""
        if weights is None and self._as_taken(x, y):
            with self._model.lock:
                self._check()
                st = self._steps.get(self._fixed_shapes)
                if st is not None and not st.freed and st.plain:
                    loss = st.plain_step((x, y) + self._fast_weights)
                    self._n += 1
                    return loss
        xs, ys, ws = self._batch(x, y, weights, "step")
        with self._model.lock:
            self._check()
            st = self._steps.get(self._fixed_shapes) if self._fixed_shapes is not None else None
            if st is None or st.freed:
                st = self._train_step(tuple(a.shape for a in xs))
            loss = st.step(xs, ys, ws)[0]
        self._n += 1
        return loss

    def eval(self, x, y, weights=None):
        """The loss on one batch, without training."""
        self._check()
        xs, ys, ws = self._batch(x, y, weights, "eval")
        with self._model.lock:
            self._check()
            loss, _, _ = self._evaluator(tuple(a.shape for a in xs)).run(xs, ys, ws)
        return float(loss)

    def gradients(self, x, y, weights=None):
        """{weight name: gradient of the loss on this batch} at the current weights, without
        training (for custom updates: ``trainer.optimizer.apply_gradients(...)``)."""
        self._check()
        self._batch(x, y, weights, "gradients")            # the trainer's own checks
        w = None if weights is None else np.asarray(weights, dtype=np.float32)
        if w is not None and self.loss_mask == 1:
            w = w.reshape(-1)
        return self._model.gradients(x, y, sample_weight=w)

    def predict(self, x):
        """Predictions from the current weights for any number of rows."""
        self._check()
        return self._model.predict(x, batch_size=self.batch_size)

    def model(self):
        """The model, holding the trainer's current weights."""
        self._check()
        return self._model

    def snapshot(self):
        """A frozen copy of the current weights in memory of its own."""
        self._check()
        with self._model.lock:
            return Snapshot(self._model)

    def update_target(self, target, tau=1.0):
        """target = tau * live + (1 - tau) * target, for every weight, on the device."""
        self._check()
        if not isinstance(target, Snapshot) or target._model is None:
            raise TypeError("target must be a live snapshot (from Trainer.snapshot())")
        if not is_number(tau) or not 0.0 <= float(tau) <= 1.0:
            raise ValueError(f"tau must be in [0, 1], got {tau!r}")
        mine = [(n, v.shape) for n, v in self._model.named_variables()]
        theirs = [(n, v.shape) for n, v in target._model.named_variables()]
        if mine != theirs:
            raise ValueError("the snapshot does not have the same weights as this trainer's model")
        with self._model.lock, target._lock:
            self._check()
            target._check()
            target._model.blend_from(self._model, float(tau))

    def free(self):
        """Release the training graphs and optimizer state (the model stays usable).  Idempotent."""
        if self._freed:
            return
        lock = self._model.lock
        with lock:
            self._freed = True
            for e in list(self._steps.values()) + list(self._evals.values()):
                e.free()
            if self._state is not None:
                self._state.free()
            self._steps, self._evals, self._state = {}, {}, None


class Snapshot(Freeable):
    """A frozen copy of a model's weights (a target network).  It outlives the
    trainer; ``predict``, ``get_weights``, ``save``; ``free`` releases it."""

    def __init__(self, model):
        self._lock = threading.RLock()
        _SNAPSHOTS.add(self)
        clone = from_own_config(model)
        clone.compile_from_config(model.get_compile_config(), backend=model.backend_name)
        clone.blend_from(model, None)
        self._model = clone

    def _check(self):
        if self._model is None:
            raise FreedError("Snapshot has been released")

    def predict(self, x, batch_size=32):
        with self._lock:
            self._check()
            return self._model.predict(x, batch_size=batch_size)

    def get_weights(self):
        with self._lock:
            self._check()
            return self._model.get_weights()

    def save(self, path):
        with self._lock:
            self._check()
            self._model.save(path)

    def free(self):
        """Release the snapshot's memory.  Idempotent."""
        with self._lock:
            if self._model is not None:
                self._model.free()
                self._model = None

    release = free
