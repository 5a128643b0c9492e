"""Weight constraints (Keras's): a projection applied to a weight after every
optimizer update (``fit``, ``Trainer.step``, ``optimizer.apply_gradients``),
inside the training graph, as Keras applies them after each step.

Give them to a layer (``Dense(8, kernel_constraint=MaxNorm(2))``, a name:
``"max_norm"``, ``"non_neg"``, ``"unit_norm"``, ``"min_max_norm"``, or a config
dict) or to ``add_weight``.  A constraint sees the weight in Keras's layout (a
Dense kernel as ``(in, units)``, a Conv2D kernel as ``(kh, kw, in, filters)``;
see ``Variable.keras_axes``), so Keras's ``axis`` defaults mean what they mean
in Keras: ``MaxNorm(2)`` (axis 0) bounds each unit's incoming weights.  The
weight's own value is then written back in pyggml's layout.

Called on a tensor a constraint returns the projected tensor; on an array, the
projected array.  Your own: a subclass of ``Constraint`` whose ``__call__(w)``
uses ``pyggml.ops`` (registered with ``@pyggml.saving.register_serializable()``
and with a ``get_config``, to save and load).
"""

import numpy as np

from pyggml import _eager, _wide, ops
from pyggml._validation import check_number, is_int
from pyggml.regularizers import as_array, graph_input
from pyggml.saving.object_registration import get_registered_name, get_registered_object, register_builtin

__all__ = ["Constraint", "MaxNorm", "MinMaxNorm", "NonNeg", "UnitNorm", "max_norm", "min_max_norm", "non_neg",
           "unit_norm", "get", "serialize", "deserialize"]

_EPSILON = 1e-7             # Keras's backend epsilon


def _check_axis(axis, who):
    """None, an int or a list/tuple of distinct ints (Keras's ``axis``), normalised for the config."""
    if axis is None:
        return None
    if is_int(axis):
        return int(axis)
    if isinstance(axis, (list, tuple)) and axis and all(is_int(a) for a in axis):
        if len(set(int(a) for a in axis)) != len(axis):
            raise ValueError(f"{who}: axis entries must be distinct, got {axis!r}")
        return [int(a) for a in axis]
    raise TypeError(f"{who}: axis must be an int, a list of ints or None, got {axis!r}")


def _norms(w, axis, who):
    """The L2 norms of w over ``axis`` (keeping the reduced axes as 1)."""
    r = len(w.shape)
    axes = range(r) if axis is None else ([axis] if is_int(axis) else axis)
    resolved = []
    for a in axes:
        b = a + r if a < 0 else a
        if not 0 <= b < r:
            raise ValueError(f"{who}: axis {a} is out of range for a weight of shape {tuple(w.shape)} "
                             f"(in Keras's layout)")
        resolved.append(b)
    s = ops.sqr(w if w.is_contiguous else ops.cont(w))
    for a in sorted(set(resolved)):
        s = ops.reduce_sum(s, axis=a, keepdims=True)
    return ops.sqrt(s)


class Constraint:
    """Base class: ``__call__(w)`` returns the projected weight.  Subclasses define
    ``project(t)`` on a tensor (then arrays work too) or override ``__call__``."""

    # the projection acts value by value: it is applied to the stored weight as it is
    layout_free = False

    def __call__(self, w):
        t = graph_input(w)
        if t is None:
            a = as_array(w, type(self).__name__)
            return np.asarray(_eager.evaluate(lambda v: self(v), [a]), dtype=np.float32).reshape(a.shape)
        if isinstance(t, _wide.Wide) and type(self) in _BUILTIN.values() and hasattr(self, "axis"):
            return self._project_wide(t)
        return self.project(t)

    def _project_wide(self, t):
        """A built-in norm constraint on a weight of more than four dimensions: its norm axes
        moved last and joined, the others joined, projected as a matrix over its axis 1, and
        put back."""
        import copy
        r = len(t.shape)
        axes = list(range(r)) if self.axis is None else [self.axis] if is_int(self.axis) else list(self.axis)
        for a in axes:
            if not -r <= a < r:
                raise ValueError(f"{type(self).__name__}: axis {a} is out of range for a weight of shape "
                                 f"{tuple(t.shape)}")
        axes = sorted({a % r for a in axes})
        keep = [a for a in range(r) if a not in axes]
        moved = ops.transpose(t, tuple(keep + axes))
        rows = int(np.prod([t.shape[a] for a in keep])) if keep else 1
        flat = ops.reshape(moved, (rows, int(np.prod([t.shape[a] for a in axes]))))
        matrix = copy.copy(self)
        matrix.axis = 1
        out = ops.reshape(matrix.project(flat), tuple(t.shape[a] for a in keep + axes))
        return ops.transpose(out, tuple(int(i) for i in np.argsort(keep + axes)))

    def project(self, t):
        return t

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self.get_config() == other.get_config()

    __hash__ = object.__hash__


@register_builtin
class MaxNorm(Constraint):
    """Norms over ``axis`` at most ``max_value``: ``w * clip(n, 0, max) / (eps + n)``."""

    def __init__(self, max_value=2, axis=0):
        self.max_value = check_number("MaxNorm max_value", max_value, 0.0)
        self.axis = _check_axis(axis, "MaxNorm")

    def project(self, t):
        n = _norms(t, self.axis, "MaxNorm")
        desired = ops.clamp(n, 0.0, self.max_value)
        return ops.mul(t, ops.div(desired, ops.scale_bias(n, 1.0, _EPSILON)))

    def get_config(self):
        return {"max_value": self.max_value, "axis": self.axis}


@register_builtin
class MinMaxNorm(Constraint):
    """Norms over ``axis`` moved into [min_value, max_value] at ``rate``:
    ``desired = rate * clip(n, min, max) + (1 - rate) * n``; ``w * desired / (eps + n)``."""

    def __init__(self, min_value=0.0, max_value=1.0, rate=1.0, axis=0):
        self.min_value = check_number("MinMaxNorm min_value", min_value, 0.0)
        self.max_value = check_number("MinMaxNorm max_value", max_value, 0.0)
        if self.min_value > self.max_value:
            raise ValueError(f"MinMaxNorm: min_value ({min_value}) must not exceed max_value ({max_value})")
        self.rate = check_number("MinMaxNorm rate", rate, 0.0, 1.0)
        self.axis = _check_axis(axis, "MinMaxNorm")

    def project(self, t):
        n = _norms(t, self.axis, "MinMaxNorm")
        clipped = ops.clamp(n, self.min_value, self.max_value)
        desired = ops.add(ops.scale(clipped, self.rate), ops.scale(n, 1.0 - self.rate)) if self.rate != 1.0 \
            else clipped
        return ops.mul(t, ops.div(desired, ops.scale_bias(n, 1.0, _EPSILON)))

    def get_config(self):
        return {"min_value": self.min_value, "max_value": self.max_value, "rate": self.rate, "axis": self.axis}


@register_builtin
class NonNeg(Constraint):
    """Negative values become 0."""

    layout_free = True

    def project(self, t):
        return ops.relu(t)


@register_builtin
class UnitNorm(Constraint):
    """Norms over ``axis`` of 1: ``w / (eps + n)``."""

    def __init__(self, axis=0):
        self.axis = _check_axis(axis, "UnitNorm")

    def project(self, t):
        n = _norms(t, self.axis, "UnitNorm")
        return ops.div(t if t.is_contiguous else ops.cont(t), ops.scale_bias(n, 1.0, _EPSILON))

    def get_config(self):
        return {"axis": self.axis}


# Keras's lower-case aliases
max_norm, min_max_norm, non_neg, unit_norm = MaxNorm, MinMaxNorm, NonNeg, UnitNorm

_BUILTIN = {"MaxNorm": MaxNorm, "MinMaxNorm": MinMaxNorm, "NonNeg": NonNeg, "UnitNorm": UnitNorm,
            "Constraint": Constraint}
_BY_NAME = {"max_norm": MaxNorm, "min_max_norm": MinMaxNorm, "non_neg": NonNeg, "unit_norm": UnitNorm}
_BY_NAME.update(_BUILTIN)


def get(identifier):
    """A constraint for a name (``"max_norm"``, ``"non_neg"``, ``"unit_norm"``,
    ``"min_max_norm"``: Keras's defaults), a config dict, a Constraint, a class or a
    function of the weight; None gives None."""
    if identifier is None:
        return None
    if isinstance(identifier, Constraint):
        return identifier
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier)
        if cls is None:
            raise ValueError(f"unknown constraint {identifier!r}; use one of {sorted(_BY_NAME)}, a Constraint "
                             f"or a function")
        return cls()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, type):
        if issubclass(identifier, Constraint):
            return identifier()
        raise TypeError(f"a constraint class must subclass pyggml.constraints.Constraint, got {identifier!r}")
    if callable(identifier):
        return identifier
    raise TypeError(f"a constraint must be a name, a config dict, a Constraint or a function, "
                    f"got {type(identifier).__name__}")


def serialize(constraint):
    """A JSON-able dict ``{"class_name": ..., "config": {...}}`` (a function:
    ``{"class_name": "function", "config": <its registered name>}``); None for None."""
    if constraint is None:
        return None
    if isinstance(constraint, Constraint):
        cls = type(constraint)
        name = cls.__name__ if _BUILTIN.get(cls.__name__) is cls else get_registered_name(cls)
        return {"class_name": name, "config": constraint.get_config()}
    if callable(constraint):
        return {"class_name": "function", "config": get_registered_name(constraint)}
    raise TypeError(f"not a constraint: {constraint!r}")


def deserialize(config, custom_objects=None):
    """The constraint a ``serialize`` dict (or Keras's) describes; a name works too."""
    if config is None:
        return None
    if isinstance(config, str):
        return get(config)
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"a constraint config is a dict with 'class_name' and 'config', got {config!r}")
    name, cfg = config["class_name"], config.get("config") or {}
    if name == "function":
        fn = get_registered_object(cfg if isinstance(cfg, str) else config.get("registered_name"), custom_objects)
        if not callable(fn):
            raise ValueError(f"the constraint function {cfg!r} is not callable")
        return fn
    cls = _BUILTIN.get(name) if not (custom_objects and name in custom_objects) else None
    if cls is None:
        cls = get_registered_object(config.get("registered_name") or name, custom_objects)
    if not (isinstance(cls, type) and issubclass(cls, Constraint)):
        raise ValueError(f"{name!r} is not a constraint class")
    if not isinstance(cfg, dict):
        raise ValueError(f"the config of constraint {name!r} must be a dict, got {cfg!r}")
    return cls.from_config(cfg)
