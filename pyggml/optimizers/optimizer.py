"""The optimizer contract: per-step scalars on the host, the update as graph ops.

A training graph ends with each trainable weight's update.  An optimizer says
what state it keeps per weight (``slot_names``: tensors of the weight's
shape, zero at the start: Adam's ``m`` and ``v``), which numbers change from
step to step (``scalars()``: the learning rate, bias corrections; computed
here, on the host, from ``iterations``), and how a weight and its slots move
given its gradient (``update``: ggml ops writing the new values in place).
The state lives with whoever trains (a model's ``fit``, or a ``Trainer``),
so one optimizer's state serves every batch size.

Keras's options of every optimizer, as Keras 3 runs them:

- ``use_ema``: after each step an ``ema`` slot follows the weight,
  ``ema = m * ema + (1 - m) * w`` (m = ``ema_momentum``, 0 on the first step);
  every ``ema_overwrite_frequency`` steps the weight takes the average; at the
  end of ``fit`` (``finalize_variable_values``) the weights become their averages.
- ``loss_scale_factor``: the loss is scaled before the backward pass and the
  gradients unscaled before the update (``apply_gradients`` unscales too, as
  Keras's ``apply``; ``scale_loss`` scales a loss of your own).
- ``gradient_accumulation_steps``: fit and Trainer update every N batches with
  the mean of their gradients (``iterations`` counts updates; a schedule is
  evaluated at the batch count, as Keras); the average and the constraints run
  after every batch, as Keras's ``apply`` does.
"""

import inspect
import math

import numpy as np

from pyggml import ops
from pyggml._validation import check_bool, check_number, is_int, is_number
from pyggml.optimizers import schedules

__all__ = ["Optimizer", "scalar", "leading"]

# how apply_gradients steps Variables that no compiled model holds: set by pyggml.models.loose
# (the models package depends on the optimizers, not the reverse)
LOOSE_HANDLER = [None]


def scalar(scalars, i):
    """Element i of the per-step scalars tensor, as a 1-element tensor (it broadcasts)."""
    return ops.view(scalars, (1,), offset=4 * i)


def leading(scalars, n):
    """The first n per-step scalars (the optimizer's own, for a fused step op that takes
    exactly those; step_scalars may append the moving average's)."""
    return scalars if scalars.nelements == n else ops.view(scalars, (n,))


def _call_rate(fn, step):
    """A schedule (or a function of the step) at ``step``; a function of no arguments (Keras's
    ``learning_rate=lambda: lr_var``) called as it is."""
    if isinstance(fn, schedules.LearningRateSchedule):
        return fn(step)
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn(step)
    takes = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return fn(step) if takes else fn()


def _rate(name, v):
    if isinstance(v, schedules.LearningRateSchedule) or (callable(v) and not is_number(v)):
        return v
    return check_number(name, v, 0.0)


class StepCount(int):
    """``optimizer.iterations``: the steps taken, an int that also answers Keras's Variable calls
    on it (``iterations.numpy()``, ``.assign(n)``, ``.assign_add(1)``, ``.value``)."""

    dtype = "int64"
    shape = ()

    def __new__(cls, value, owner):
        out = int.__new__(cls, value)
        out._owner = owner
        return out

    def numpy(self):
        return np.int64(self)

    @property
    def value(self):
        return int(self)

    def assign(self, value):
        self._owner.iterations = value
        return self._owner.iterations

    def assign_add(self, delta):
        return self.assign(int(self) + int(delta))


class Optimizer:
    """Base class: ``learning_rate`` (a number, a schedule or a callable of the step),
    ``weight_decay`` (decoupled, as Keras 3), ``clipnorm``, ``clipvalue``,
    ``global_clipnorm``.  ``iterations`` counts the steps taken."""

    name = "optimizer"
    slot_names = ()
    takes_variable = False      # update(..., variable=) is given the weight's Variable (its layout)

    def __init__(self, learning_rate=0.001, weight_decay=None, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, use_ema=False, ema_momentum=0.99, ema_overwrite_frequency=None,
                 loss_scale_factor=None, gradient_accumulation_steps=None, name=None, **kwargs):
        self.use_ema = check_bool("use_ema", use_ema)
        self.ema_momentum = check_number("ema_momentum", ema_momentum, 0.0, 1.0)
        if ema_overwrite_frequency is not None and (not is_int(ema_overwrite_frequency) or
                                                    ema_overwrite_frequency < 1):
            raise ValueError(f"ema_overwrite_frequency must be an int >= 1 or None, got {ema_overwrite_frequency!r}")
        self.ema_overwrite_frequency = None if ema_overwrite_frequency is None else int(ema_overwrite_frequency)
        self.loss_scale_factor = None if loss_scale_factor is None else \
            check_number("loss_scale_factor", loss_scale_factor, 0.0, low_open=True)
        if gradient_accumulation_steps is not None and (not is_int(gradient_accumulation_steps) or
                                                        gradient_accumulation_steps < 2):
            raise ValueError(f"gradient_accumulation_steps must be an int >= 2 or None, "
                             f"got {gradient_accumulation_steps!r}")
        self.gradient_accumulation_steps = None if gradient_accumulation_steps is None else \
            int(gradient_accumulation_steps)
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

    @property
    def iterations(self):
        """The steps taken so far (Keras's counter: an int with ``numpy()`` and ``assign``)."""
        return StepCount(self.__dict__.get("_iterations", 0), self)

    @iterations.setter
    def iterations(self, value):
        v = np.asarray(value)
        whole = v.shape == () and not isinstance(value, bool) and (
            v.dtype.kind in "iu" or (v.dtype.kind == "f" and np.isfinite(v) and float(v) == int(v)))
        if not whole or int(v) < 0:
            raise ValueError(f"iterations must be a whole number >= 0, got {value!r}")
        self.__dict__["_iterations"] = int(v)

    # --- the learning rate ---------------------------------------------------------------
    @property
    def learning_rate(self):
        """The rate the next step uses (a schedule is evaluated at ``iterations``).
        Set a number, a schedule or a callable of the step."""
        lr = self._lr
        if isinstance(lr, (int, float)):
            return float(lr)
        step = self.iterations
        if self.gradient_accumulation_steps:
            # Keras evaluates a schedule at the batch count: the update after N batches is at N - 1
            n = self.gradient_accumulation_steps
            step = self.iterations * n + n - 1
        v = float(_call_rate(lr, step))
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"the learning-rate schedule gave {v} at step {step}")
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
        optimizer's state for them is the model's own when this is its optimizer.  As in
        Keras, it goes through ``apply`` (a subclass overriding either is called by fit)."""
        pairs = list(grads_and_vars)
        return self.apply([g for g, _ in pairs], [v for _, v in pairs])

    def apply(self, grads, trainable_variables=None):
        """Keras 3's form: ``apply(grads, variables)``, or ``apply(grads_and_vars)``."""
        if trainable_variables is None:
            return self._apply_pairs(list(grads))
        grads, trainable_variables = list(grads), list(trainable_variables)
        if len(grads) != len(trainable_variables):
            raise ValueError(f"apply: {len(grads)} gradients for {len(trainable_variables)} variables")
        return self._apply_pairs(list(zip(grads, trainable_variables)))

    def _apply_pairs(self, pairs):
        from pyggml.variables import Variable
        by_home = {}
        loose = []
        seen = set()
        for g, v in pairs:
            v = getattr(v, "variable", v)            # a model's trainable_weights names the Variable
            if not isinstance(v, Variable):
                raise TypeError(f"apply_gradients takes (gradient, Variable) pairs, got a {type(v).__name__}")
            if g is None or id(v) in seen:
                continue                             # (a variable listed twice steps once: layers shared)
            seen.add(id(v))
            a = np.asarray(g)
            if hasattr(v, "view_base") and a.dtype != object:       # Dense.kernel: Keras's layout
                if a.shape != v.shape:
                    raise ValueError(f"the gradient of {v.name!r} has shape {a.shape}, the variable {v.shape}")
                a, v = v.gradient_to_base(a), v.view_base
            if a.dtype == object or a.dtype.kind not in "biuf":
                raise TypeError(f"the gradient of {v.name!r} must be numbers, got dtype {a.dtype}")
            if a.shape != v.shape:
                raise ValueError(f"the gradient of {v.name!r} has shape {a.shape}, the variable {v.shape}")
            a = np.ascontiguousarray(a, dtype=np.float32)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"the gradient of {v.name!r} holds NaN or inf")
            if v.home is None or getattr(v.home.owner, "loose", False):
                loose.append((a, v))         # no compiled model holds it: the optimizer keeps it
            else:
                by_home.setdefault(id(v.home), (v.home, []))[1].append((a, v))
        if pairs and not loose and not by_home:
            # Keras: "No gradients provided for any variable"
            raise ValueError("apply_gradients: no gradients provided for any variable (every gradient is None: "
                             "does the loss depend on these variables?)")
        # one step, whatever number of models (and loose variables) the variables belong to: each
        # part updates at the same step count, which then moves on by one (Keras's iterations)
        start = self.iterations
        for home, group in by_home.values():
            self.iterations = start
            home.apply_gradients(self, group)
        if loose:
            self.iterations = start
            LOOSE_HANDLER[0](self, loose)
        # with gradient accumulation a step is every N calls (the update of their mean): Keras's
        # iterations counts those, so the update's bias corrections see the steps taken
        n = self.gradient_accumulation_steps
        calls = self.__dict__.get("_accumulated_calls", 0) + 1
        self.__dict__["_accumulated_calls"] = calls % n if n else 0
        self.iterations = start + (1 if not n or calls % n == 0 else 0)

    @property
    def steps_through_python(self):
        """True for a subclass of the user's that overrides ``apply_gradients`` or ``apply``:
        fit then calls them every step (Keras's), instead of its fused step."""
        cls = type(self)
        return cls.apply_gradients is not Optimizer.apply_gradients or cls.apply is not Optimizer.apply

    def scale_loss(self, loss):
        """``loss * loss_scale_factor`` (the loss itself without one): Keras's, for custom loops."""
        return loss if self.loss_scale_factor is None else loss * self.loss_scale_factor

    def finalize_variable_values(self, var_list):
        """With use_ema, give each Variable of ``var_list`` its moving average (fit does
        this at its end, as Keras's); otherwise nothing."""
        if not self.use_ema:
            return
        from pyggml.variables import Variable
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError(f"finalize_variable_values takes Variables, got {type(v).__name__}")
            home = v.home
            state = None if home is None else getattr(getattr(home, "owner", None), "state_of", lambda o: None)(self)
            ema = None if state is None else state.slot_values(v).get("ema")
            if ema is not None:
                v.assign(ema)

    # --- what the executors run -------------------------------------------------------------------
    @property
    def state_slot_names(self):
        """The slots a state keeps per weight: the optimizer's, and "ema" with use_ema."""
        return tuple(self.slot_names) + (("ema",) if self.use_ema else ())

    def step_scalars(self):
        """scalars() and, with use_ema, the average's: m (0 on the first step), 1 - m and
        1 when this step overwrites the weights with their averages."""
        s = self.scalars()
        if not self.use_ema:
            return s
        m = self.ema_momentum if self.iterations > 0 else 0.0
        f = self.ema_overwrite_frequency
        overwrite = 1.0 if f and (self.iterations + 1) % f == 0 else 0.0
        return np.concatenate([s, np.array([m, 1.0 - m, overwrite], dtype=np.float32)])

    @property
    def n_scalars(self):
        return len(self.step_scalars())

    def unscale(self, grad):
        """The gradient of the unscaled loss (loss_scale_factor)."""
        return grad if self.loss_scale_factor is None else ops.scale(grad, 1.0 / self.loss_scale_factor)

    def after_step(self, param, value, slots, scalars):
        """With use_ema, ops that move the ``ema`` slot towards the weight's value after the
        step (``value``: the tensor holding it) and overwrite the weight when the step
        says so; the last writes param (or nothing)."""
        if not self.use_ema:
            return []
        k = len(self.scalars())
        ema = slots["ema"]
        new = ops.add(ops.mul(ema, scalar(scalars, k)), ops.mul(value, scalar(scalars, k + 1)))
        outs = [ops.cpy(new, ema)]
        if self.ema_overwrite_frequency:
            # w + flag * (ema - w): the average on the steps that overwrite, w itself otherwise
            moved = ops.add(value, ops.mul(ops.sub(outs[0], value), scalar(scalars, k + 2)))
            outs.append(ops.cpy(moved, param))
        return outs

    # --- shared pieces ---------------------------------------------------------------------------

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
        for k in ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm", "ema_overwrite_frequency",
                  "loss_scale_factor", "gradient_accumulation_steps"):
            if getattr(self, k) is not None:
                cfg[k] = getattr(self, k)
        if self.use_ema:
            cfg.update(use_ema=True, ema_momentum=self.ema_momentum)
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
