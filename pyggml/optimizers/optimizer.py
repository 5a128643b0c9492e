"""The optimizer contract: per-step scalars on the host, the update as graph ops.

A training graph ends with each trainable weight's update.  An optimizer says
what state it keeps per weight (``slot_names``: tensors of the weight's
shape, zero at the start: Adam's ``m`` and ``v``), which numbers change from
step to step (``scalars()``: the learning rate, bias corrections; computed
here, on the host, from ``iterations``), and how a weight and its slots move
given its gradient (``update``: ggml ops writing the new values in place).
The state lives with whoever trains (a model's ``fit``, or a ``Trainer``),
so one optimizer's state serves every batch size.
"""

import math

import numpy as np

from pyggml import ops
from pyggml._validation import check_number, is_number
from pyggml.optimizers import schedules

__all__ = ["Optimizer", "scalar"]


def scalar(scalars, i):
    """Element i of the per-step scalars tensor, as a 1-element tensor (it broadcasts)."""
    return ops.view(scalars, (1,), offset=4 * i)


def _rate(name, v):
    if isinstance(v, schedules.LearningRateSchedule) or (callable(v) and not is_number(v)):
        return v
    return check_number(name, v, 0.0)


class Optimizer:
    """Base class: ``learning_rate`` (a number, a schedule or a callable of the step),
    ``weight_decay`` (decoupled, as Keras 3), ``clipnorm``, ``clipvalue``,
    ``global_clipnorm``.  ``iterations`` counts the steps taken."""

    name = "optimizer"
    slot_names = ()

    def __init__(self, learning_rate=0.001, weight_decay=None, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, name=None, **kwargs):
        for k in ("use_ema", "ema_momentum", "ema_overwrite_frequency", "loss_scale_factor",
                  "gradient_accumulation_steps"):
            if kwargs.pop(k, None) not in (None, False, 0.99, 1):
                raise ValueError(f"{type(self).__name__}: {k} is not supported")
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments: {sorted(kwargs)}")
        self._lr = _rate("learning_rate", learning_rate)
        self.weight_decay = None if weight_decay is None else check_number("weight_decay", weight_decay, 0.0)
        if sum(c is not None for c in (clipnorm, clipvalue, global_clipnorm)) > 1:
            raise ValueError("give at most one of clipnorm, clipvalue and global_clipnorm")
        self.clipnorm = None if clipnorm is None else check_number("clipnorm", clipnorm, 0.0, low_open=True)
        self.clipvalue = None if clipvalue is None else check_number("clipvalue", clipvalue, 0.0, low_open=True)
        self.global_clipnorm = None if global_clipnorm is None else \
            check_number("global_clipnorm", global_clipnorm, 0.0, low_open=True)
        if name is not None:
            self.name = name
        self.iterations = 0

    # --- the learning rate ---------------------------------------------------------------
    @property
    def learning_rate(self):
        """The rate the next step uses (a schedule is evaluated at ``iterations``).
        Set a number, a schedule or a callable of the step."""
        lr = self._lr
        if isinstance(lr, (int, float)):
            return float(lr)
        v = float(lr(self.iterations))
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"the learning-rate schedule gave {v} at step {self.iterations}")
        return v

    @learning_rate.setter
    def learning_rate(self, value):
        self._lr = _rate("learning_rate", value)

    lr = learning_rate

    @property
    def schedule(self):
        """The schedule or callable behind the rate, or None for a fixed rate."""
        return None if isinstance(self._lr, (int, float)) else self._lr

    # --- what subclasses define ---------------------------------------------------------------
    def scalars(self):
        """float32 numbers the next step's update reads (``iterations`` steps done so far)."""
        return np.array([self.learning_rate, self.weight_decay or 0.0], dtype=np.float32)

    def update(self, param, grad, slots, scalars):
        """Ops that write the new value of ``param`` (and of its ``slots``) in place,
        given its gradient; returns the tensors to compute, the one that writes
        ``param`` last (a weight's constraint is applied to that one's result)."""
        raise NotImplementedError

    def slot_initial_value(self, slot):
        """The value a slot starts at (0 unless the optimizer says otherwise)."""
        return 0.0

    def apply_gradients(self, grads_and_vars):
        """One step on given gradients: ``[(gradient, Variable), ...]`` (Keras's form, e.g.
        ``zip(model.gradients(x, y).values(), model.trainable_variables)``); a None
        gradient is skipped.  The variables must belong to a compiled model; the
        optimizer's state for them is the model's own when this is its optimizer."""
        from pyggml.variables import Variable
        by_home = {}
        for g, v in grads_and_vars:
            if not isinstance(v, Variable):
                raise TypeError(f"apply_gradients takes (gradient, Variable) pairs, got a {type(v).__name__}")
            if g is None:
                continue
            a = np.asarray(g)
            if a.dtype == object or a.dtype.kind not in "biuf":
                raise TypeError(f"the gradient of {v.name!r} must be numbers, got dtype {a.dtype}")
            if a.shape != v.shape:
                raise ValueError(f"the gradient of {v.name!r} has shape {a.shape}, the variable {v.shape}")
            a = np.ascontiguousarray(a, dtype=np.float32)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"the gradient of {v.name!r} holds NaN or inf")
            if v.home is None:
                raise ValueError(f"variable {v.name!r} is not on a device yet: compile the model that holds it")
            by_home.setdefault(id(v.home), (v.home, []))[1].append((a, v))
        for home, pairs in by_home.values():
            home.apply_gradients(self, pairs)

    # --- shared pieces ---------------------------------------------------------------------------
    @property
    def n_scalars(self):
        return len(self.scalars())

    def clip(self, grad, global_scale=None):
        """The gradient after clipvalue / clipnorm (global_clipnorm comes in as ``global_scale``)."""
        if self.clipvalue is not None:
            return ops.clamp(grad, -self.clipvalue, self.clipvalue)
        if self.clipnorm is not None:
            return ops.mul(grad, _clip_factor(ops.sqrt(ops.sum(ops.sqr(grad))), self.clipnorm))
        if global_scale is not None:
            return ops.mul(grad, global_scale)
        return grad

    def decay(self, param, scalars, lr_index=0):
        """Decoupled weight decay, ``param - lr * weight_decay * param``, as a tensor (or param)."""
        if not self.weight_decay:
            return param
        return ops.sub(param, ops.mul(ops.scale(param, self.weight_decay), scalar(scalars, lr_index)))

    def get_config(self):
        lr = self._lr
        cfg = {"learning_rate": schedules.serialize(lr) if isinstance(lr, schedules.LearningRateSchedule)
               else (float(lr) if isinstance(lr, (int, float)) else self.learning_rate)}
        for k in ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm"):
            if getattr(self, k) is not None:
                cfg[k] = getattr(self, k)
        return cfg

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        lr = config.get("learning_rate")
        if isinstance(lr, dict):
            config["learning_rate"] = schedules.deserialize(lr, custom_objects)
        return cls(**config)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


def _clip_factor(norm, c):
    """min(1, c / norm) as c / (norm + relu(c - norm)), a 1-element tensor."""
    denom = ops.add(norm, ops.relu(ops.scale_bias(norm, -1.0, c)))
    return ops.div(ops.constant(np.array([c], dtype=np.float32)), denom)


def global_clip_scale(grads, c):
    """min(1, c / ||all grads||) over every gradient, a 1-element tensor."""
    total = None
    for g in grads:
        s = ops.sum(ops.sqr(g))
        total = s if total is None else ops.add(total, s)
    return _clip_factor(ops.sqrt(total), c)
