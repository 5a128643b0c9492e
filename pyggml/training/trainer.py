"""Trainer: a long-lived training context stepped by hand, for reinforcement
learning and custom loops; Snapshot: a frozen copy of the weights.

One ggml-opt context serves the trainer's whole life, so the weights, the
Adam moments and the step counter persist across steps.  Predictions run on
executors of their own and never touch the training buffers.
"""

import numpy as np

from pyggml._lifetime import Freeable
from pyggml.errors import FreedError
from pyggml.models.graph import LossEvaluator, TrainStep, build
from pyggml.models.model import Model, _as_float_array

__all__ = ["Trainer", "Snapshot"]


class Trainer(Freeable):
    """``pg.Trainer(model, batch_size, nbatch_logical=None, loss_mask=None)``."""

    def __init__(self, model, batch_size, nbatch_logical=None, loss_mask=None):
        if not isinstance(model, Model):
            raise TypeError(f"model must be a compiled Sequential or functional Model, got {type(model).__name__}")
        model._check()
        if not model._compiled:
            raise ValueError("the model must be compiled (model.compile(...)) before making a Trainer")
        batch_size = Model._check_batch_size(batch_size)
        if nbatch_logical is None:
            period = 1
        else:
            if isinstance(nbatch_logical, bool) or not isinstance(nbatch_logical, (int, np.integer)) \
                    or nbatch_logical < batch_size or nbatch_logical % batch_size:
                raise ValueError(f"nbatch_logical must be a multiple of batch_size ({batch_size}), got {nbatch_logical!r}")
            period = int(nbatch_logical) // batch_size
        n_out = int(np.prod(model._outputs[0].shape))
        if loss_mask is not None:
            if isinstance(loss_mask, bool) or not isinstance(loss_mask, (int, np.integer)):
                raise TypeError("loss_mask must be None, 1 or the number of outputs")
            if len(model._outputs) != 1 or any(l.name != "mse" for l in model._losses):
                raise ValueError(f"loss_mask needs the loss 'mse' (weights apply to mean squared error only); "
                                 f"the model's loss is {model._losses[0].name!r}")
            if loss_mask not in (1, n_out):
                raise ValueError(f"loss_mask must be 1 (one weight per sample) or the number of outputs "
                                 f"({n_out}), got {loss_mask}")
        self._model = model
        self.batch_size = batch_size
        self.nbatch_logical = batch_size * period
        self.loss_mask = None if loss_mask is None else int(loss_mask)
        self._n_out = n_out
        self._steps = 0
        self._freed = False
        self._eval = None
        model._cell_weights = [self.loss_mask is not None and self.loss_mask > 1]
        self._step = build(TrainStep, model, batch_size, weighted=self.loss_mask is not None,
                               loss_mask=self.loss_mask, opt_period=period, optimizer=_OwnLR(model.optimizer))
        self._ones = np.ones((batch_size, 1), dtype=np.float32)
        model._dependents.add(self)

    # --- state -------------------------------------------------------------------
    def _check(self):
        if self._freed:
            raise FreedError("Trainer has been freed")
        if self._model._freed:
            raise FreedError("Trainer's model has been freed")

    def _on_model_freed(self):
        self.free()

    @property
    def n_steps(self):
        """The number of step() calls so far."""
        return self._steps

    @property
    def lr(self):
        self._check()
        return self._step.optimizer.learning_rate

    def set_lr(self, lr):
        """Set the learning rate from the next step on."""
        self._check()
        self._step.optimizer.learning_rate = lr

    # --- data ---------------------------------------------------------------------
    def _batch(self, x, y, weights, what):
        m = self._model
        xs, n = m._prepare_x(x)
        if n != self.batch_size:
            raise ValueError(f"{what} takes exactly {self.batch_size} rows (the batch size), got {n}")
        ys = m._prepare_y(y, n)
        if weights is None:
            ws = [self._ones if self.loss_mask == 1 else np.ones((n, self._n_out), dtype=np.float32)] \
                if self.loss_mask is not None else None
        else:
            if self.loss_mask is None:
                raise ValueError("weights given to a trainer built without loss_mask; make it with "
                                 "loss_mask=1 or loss_mask=<number of outputs>")
            w = _as_float_array(weights, "weights").astype(np.float32)
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

    # --- training -------------------------------------------------------------------
    def step(self, x, y, weights=None):
        """Train on one batch of exactly batch_size rows; returns its loss."""
        self._check()
        xs, ys, ws = self._batch(x, y, weights, "step")
        with self._model._lock:
            loss, _, _ = self._step.step(xs, ys, ws, self.batch_size)
            self._model._trained = True
        self._steps += 1
        return float(loss)

    def eval(self, x, y, weights=None):
        """The loss on one batch, without training."""
        self._check()
        xs, ys, ws = self._batch(x, y, weights, "eval")
        with self._model._lock:
            if self._eval is None:
                self._model._cell_weights = [self.loss_mask is not None and self.loss_mask > 1]
                self._eval = build(LossEvaluator, self._model, self.batch_size, weighted=self.loss_mask is not None,
                                           loss_mask=self.loss_mask)
            loss, _, _ = self._eval.run(xs, ys, ws, self.batch_size)
        return float(loss)

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
        return Snapshot(self._model)

    def update_target(self, target, tau=1.0):
        """target = tau * live + (1 - tau) * target, for every weight, on the backend."""
        self._check()
        if not isinstance(target, Snapshot) or target._model is None:
            raise TypeError("target must be a live snapshot (from Trainer.snapshot())")
        if isinstance(tau, bool) or not isinstance(tau, (int, float, np.floating)) or not 0.0 <= float(tau) <= 1.0:
            raise ValueError(f"tau must be in [0, 1], got {tau!r}")
        live, snap = self._model._wt, target._model._wt
        if set(live) != set(snap) or any(live[k].shape != snap[k].shape for k in live):
            raise ValueError("the snapshot does not have the same weights as this trainer's model")
        with self._model._lock:
            target._model._copy_weights_from(self._model, float(tau))

    def free(self):
        """Release the training context (the model stays usable).  Idempotent."""
        if self._freed:
            return
        self._freed = True
        for e in (self._step, self._eval):
            if e is not None:
                e.free()
        self._step = self._eval = None


class _OwnLR:
    """The trainer's own learning rate, starting from the model's optimizer."""

    def __init__(self, opt):
        self._opt = opt
        self.kind = opt.kind
        self._lr = opt.learning_rate

    @property
    def learning_rate(self):
        return self._lr

    @learning_rate.setter
    def learning_rate(self, value):
        import math
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"learning rate must be a positive finite number, got {value!r}")
        self._lr = float(value)

    def hparams(self):
        h = self._opt.hparams()
        h["learning_rate"] = self._lr
        return h


class Snapshot(Freeable):
    """A frozen copy of a model's weights (a target network).  It outlives the
    trainer; ``predict``, ``get_weights``, ``save``; ``free`` releases it."""

    def __init__(self, model):
        cfg = model.get_config()
        clone = type(model).from_config(cfg)
        args = model._compile_args
        clone.compile(optimizer=type(args["optimizer"])(**args["optimizer"].get_config()), loss=args["loss"],
                      metrics=args["metrics"] or None, backend=model._backend.name,
                      loss_weights=args["loss_weights"])
        clone._copy_weights_from(model, None)
        self._model = clone

    def _check(self):
        if self._model is None:
            raise FreedError("Snapshot has been released")

    def predict(self, x, batch_size=32):
        self._check()
        return self._model.predict(x, batch_size=batch_size)

    def get_weights(self):
        self._check()
        return self._model.get_weights()

    def save(self, path):
        self._check()
        self._model.save(path)

    def free(self):
        """Release the snapshot's memory.  Idempotent."""
        if self._model is not None:
            self._model.free()
            self._model = None

    release = free
