"""Learning-rate schedules (Keras's): a schedule maps the step to a rate.

``optimizers.Adam(learning_rate=schedules.ExponentialDecay(1e-3, 1000, 0.9))``;
any callable ``f(step) -> rate`` works too.  The step is the optimizer's
``iterations`` (steps taken so far) when the rate is used.
"""

import math

from pyggml._validation import check_number, check_positive_int
from pyggml.saving.object_registration import get_registered_object, register_builtin

__all__ = ["LearningRateSchedule", "ExponentialDecay", "InverseTimeDecay", "PiecewiseConstantDecay",
           "PolynomialDecay", "CosineDecay", "CosineDecayRestarts", "serialize", "deserialize"]


class LearningRateSchedule:
    """Base class: ``__call__(step) -> learning rate``; ``get_config``."""

    def __call__(self, step):
        raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override "
                                  f"`__call__(self, step)`")

    def get_config(self):
        raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override `get_config()` "
                                  f"in order to be serializable (saving a model saves its optimizer's schedule)")

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class _StepDecay(LearningRateSchedule):
    """What ExponentialDecay and InverseTimeDecay share: their arguments and the
    decay's progress ``step / decay_steps`` (whole periods when ``staircase``)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        self.initial_learning_rate = check_number("initial_learning_rate", initial_learning_rate, 0.0)
        self.decay_steps = check_positive_int("decay_steps", decay_steps)
        self.decay_rate = check_number("decay_rate", decay_rate, 0.0)
        self.staircase = bool(staircase)

    def progress(self, step):
        p = step / self.decay_steps
        return math.floor(p) if self.staircase else p

    def get_config(self):
        return dict(initial_learning_rate=self.initial_learning_rate, decay_steps=self.decay_steps,
                    decay_rate=self.decay_rate, staircase=self.staircase)


@register_builtin
class ExponentialDecay(_StepDecay):
    def __call__(self, step):
        return self.initial_learning_rate * self.decay_rate ** self.progress(step)


@register_builtin
class InverseTimeDecay(_StepDecay):
    def __call__(self, step):
        return self.initial_learning_rate / (1.0 + self.decay_rate * self.progress(step))


@register_builtin
class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[i]`` while ``step <= boundaries[i]``; the last value after the last boundary."""

    def __init__(self, boundaries, values, name=None):
        self.boundaries = [int(b) for b in boundaries]
        self.values = [check_number("values", v, 0.0) for v in values]
        if len(self.values) != len(self.boundaries) + 1:
            raise ValueError("PiecewiseConstantDecay: values must have one more entry than boundaries")
        if self.boundaries != sorted(self.boundaries):
            raise ValueError("PiecewiseConstantDecay: boundaries must increase")

    def __call__(self, step):
        for b, v in zip(self.boundaries, self.values):
            if step <= b:
                return v
        return self.values[-1]

    def get_config(self):
        return dict(boundaries=self.boundaries, values=self.values)


@register_builtin
class PolynomialDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                 name=None):
        self.initial_learning_rate = check_number("initial_learning_rate", initial_learning_rate, 0.0)
        self.decay_steps = check_positive_int("decay_steps", decay_steps)
        self.end_learning_rate = check_number("end_learning_rate", end_learning_rate, 0.0)
        self.power = check_number("power", power)
        self.cycle = bool(cycle)

    def __call__(self, step):
        steps = self.decay_steps
        if self.cycle:
            steps = steps * max(1.0, math.ceil(step / steps)) if step > 0 else steps
        else:
            step = min(step, steps)
        frac = 1.0 - step / steps
        return (self.initial_learning_rate - self.end_learning_rate) * frac ** self.power + self.end_learning_rate

    def get_config(self):
        return dict(initial_learning_rate=self.initial_learning_rate, decay_steps=self.decay_steps,
                    end_learning_rate=self.end_learning_rate, power=self.power, cycle=self.cycle)


@register_builtin
class CosineDecay(LearningRateSchedule):
    """Keras's: optional linear warm-up from ``initial_learning_rate`` to ``warmup_target``
    over ``warmup_steps``, then a cosine decay over ``decay_steps`` to ``alpha`` times the peak."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name=None, warmup_target=None,
                 warmup_steps=0):
        self.initial_learning_rate = check_number("initial_learning_rate", initial_learning_rate, 0.0)
        self.decay_steps = check_positive_int("decay_steps", decay_steps)
        self.alpha = check_number("alpha", alpha, 0.0)
        self.warmup_target = None if warmup_target is None else check_number("warmup_target", warmup_target, 0.0)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        peak = self.initial_learning_rate
        if self.warmup_target is not None:
            if step < self.warmup_steps:
                return peak + (self.warmup_target - peak) * step / max(self.warmup_steps, 1)
            peak = self.warmup_target
            step = step - self.warmup_steps
        step = min(step, self.decay_steps)
        cos = 0.5 * (1.0 + math.cos(math.pi * step / self.decay_steps))
        return peak * ((1.0 - self.alpha) * cos + self.alpha)

    def get_config(self):
        return dict(initial_learning_rate=self.initial_learning_rate, decay_steps=self.decay_steps,
                    alpha=self.alpha, warmup_target=self.warmup_target, warmup_steps=self.warmup_steps)


@register_builtin
class CosineDecayRestarts(LearningRateSchedule):
    def __init__(self, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name=None):
        self.initial_learning_rate = check_number("initial_learning_rate", initial_learning_rate, 0.0)
        self.first_decay_steps = check_positive_int("first_decay_steps", first_decay_steps)
        self.t_mul = check_number("t_mul", t_mul, 0.0, low_open=True)
        self.m_mul = check_number("m_mul", m_mul, 0.0)
        self.alpha = check_number("alpha", alpha, 0.0)

    def __call__(self, step):
        frac = step / self.first_decay_steps
        if self.t_mul == 1.0:
            i = math.floor(frac)
            done = frac - i
        else:
            i = math.floor(math.log(1.0 - frac * (1.0 - self.t_mul)) / math.log(self.t_mul))
            total = (1.0 - self.t_mul ** i) / (1.0 - self.t_mul)
            done = (frac - total) / self.t_mul ** i
        m = self.m_mul ** i
        cos = 0.5 * m * (1.0 + math.cos(math.pi * done))
        return self.initial_learning_rate * ((1.0 - self.alpha) * cos + self.alpha)

    def get_config(self):
        return dict(initial_learning_rate=self.initial_learning_rate, first_decay_steps=self.first_decay_steps,
                    t_mul=self.t_mul, m_mul=self.m_mul, alpha=self.alpha)


def serialize(schedule):
    from pyggml.saving.object_registration import get_registered_name
    return {"class_name": get_registered_name(type(schedule)), "config": schedule.get_config()}


def deserialize(config, custom_objects=None):
    cls = get_registered_object(config["class_name"], custom_objects)
    return cls.from_config(config["config"])
