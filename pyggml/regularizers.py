"""Regularizers (Keras's): penalties on weights or on a layer's output, added to
the training loss inside the graph (so the gradients include them).

Give them to a layer (``Dense(8, kernel_regularizer=L2(1e-4))``, a name:
``"l1"``, ``"l2"``, ``"l1_l2"``, or a config dict) or to ``add_weight``.
``fit``'s and ``evaluate``'s reported loss includes the penalties, as Keras's
does; metrics do not.  A regularizer is called on a tensor and returns its
penalty, a 1-element tensor (in a model's graph); called on an array (or a
Variable outside a graph) it returns the same penalty as a float.

Weight penalties see a weight in Keras's layout (a Dense kernel as
``(in, units)``, a Conv2D kernel as ``(kh, kw, in, filters)``, ...; see
``Variable.keras_axes``), so ``OrthogonalRegularizer(mode="rows")`` means what
it means in Keras.  An activity regularizer's penalty is divided by the batch
size (Keras 3).

Your own: a subclass of ``Regularizer`` whose ``__call__(x)`` uses
``pyggml.ops`` (registered with ``@pyggml.saving.register_serializable()`` and
with a ``get_config``, to save and load), or a plain function of the weight.
"""

import math

import numpy as np

from pyggml import _eager, _scope, ops
from pyggml._validation import is_number
from pyggml.core import Tensor
from pyggml.core import ops as core_ops
from pyggml.saving.object_registration import get_registered_name, get_registered_object, register_builtin
from pyggml.variables import Variable

__all__ = ["Regularizer", "L1", "L2", "L1L2", "OrthogonalRegularizer", "l1", "l2", "l1_l2",
           "orthogonal_regularizer", "get", "serialize", "deserialize", "penalty_tensor"]

_EPSILON = 1e-7             # Keras's backend epsilon (normalisation guard)


def _factor(name, value, default):
    """A non-negative finite factor (None gives the default)."""
    if value is None:
        return default
    if not is_number(value):
        raise TypeError(f"{name} must be a non-negative number, got {value!r}")
    v = float(value)
    if math.isnan(v) or math.isinf(v) or v < 0:
        raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")
    return v


def graph_input(x):
    """x as a tensor of the graph being built, or None when x is data (an array, or a
    Variable while no graph is being built)."""
    from pyggml import _wide
    if isinstance(x, (Tensor, _wide.Wide)):
        return x
    if isinstance(x, Variable) and _scope.current() is not None:
        return x.graph_tensor()
    return None


def as_array(x, who):
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{who}: expected an array of numbers, got dtype {a.dtype}")
    if a.ndim > 4 or a.size == 0:
        raise ValueError(f"{who}: expected a non-empty array of at most 4 dimensions, got shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float32)


def penalty_tensor(value, who="a penalty"):
    """A regularizer's (or add_loss's) value as a 1-element f32 tensor of the graph
    being built: a number becomes a constant, a larger tensor is summed (Keras
    sums an added loss)."""
    if isinstance(value, Variable):
        value = value.graph_tensor()
    if isinstance(value, Tensor):
        if value.dtype != "f32":
            raise TypeError(f"{who} must be a float32 tensor, got {value.dtype}")
        if value.nelements != 1:
            value = ops.sum(value if value.is_contiguous else ops.cont(value))
        return ops.reshape(value, (1,)) if tuple(value.shape) != (1,) else value
    if is_number(value):
        if not math.isfinite(float(value)):
            raise ValueError(f"{who} is not finite: {value!r}")
        return ops.constant(np.array([float(value)], dtype=np.float32))
    raise TypeError(f"{who} must be a tensor or a number, got {type(value).__name__}")


class Regularizer:
    """Base class: ``__call__(x)`` gives the penalty of x.  Subclasses define
    ``penalty(t)`` on a tensor (then arrays work too) or override ``__call__``."""

    # the penalty does not depend on how the weight's axes are laid out (sums of
    # element-wise terms): it is taken on the stored weight, without a transposed copy
    layout_free = False

    def __call__(self, x):
        t = graph_input(x)
        if t is None:
            a = as_array(x, type(self).__name__)
            return float(np.asarray(_eager.evaluate(lambda v: penalty_tensor(self(v)), [a])).reshape(-1)[0])
        return self.penalty(t)

    def penalty(self, t):
        return ops.constant(np.zeros(1, dtype=np.float32))

    def get_config(self):
        raise NotImplementedError(f"{type(self).__name__} does not define get_config()")

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        try:
            cfg = self.get_config()
        except NotImplementedError:
            return f"{type(self).__name__}()"
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in cfg.items())})"

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        try:
            return self.get_config() == other.get_config()
        except NotImplementedError:
            return self is other

    __hash__ = object.__hash__


def _sum_abs(t):
    return ops.sum(ops.abs(t if t.is_contiguous else ops.cont(t)))


def _sum_sqr(t):
    return ops.sum(ops.sqr(t if t.is_contiguous else ops.cont(t)))


@register_builtin
class L1(Regularizer):
    """``l1 * sum(abs(x))``."""

    layout_free = True

    def __init__(self, l1=0.01):
        self.l1 = _factor("l1", l1, 0.01)

    def penalty(self, t):
        return ops.scale(_sum_abs(t), self.l1)

    def get_config(self):
        return {"l1": self.l1}


@register_builtin
class L2(Regularizer):
    """``l2 * sum(square(x))``."""

    layout_free = True

    def __init__(self, l2=0.01):
        self.l2 = _factor("l2", l2, 0.01)

    def penalty(self, t):
        return ops.scale(_sum_sqr(t), self.l2)

    def get_config(self):
        return {"l2": self.l2}


@register_builtin
class L1L2(Regularizer):
    """``l1 * sum(abs(x)) + l2 * sum(square(x))``."""

    layout_free = True

    def __init__(self, l1=0.0, l2=0.0):
        self.l1 = _factor("l1", l1, 0.0)
        self.l2 = _factor("l2", l2, 0.0)

    def penalty(self, t):
        terms = []
        if self.l1:
            terms.append(ops.scale(_sum_abs(t), self.l1))
        if self.l2:
            terms.append(ops.scale(_sum_sqr(t), self.l2))
        if not terms:
            return super().penalty(t)
        return terms[0] if len(terms) == 1 else ops.add(terms[0], terms[1])

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}


def _unit_rows(t):
    """Each row of a 2-D tensor divided by its L2 norm (at least epsilon), from ops that train."""
    sq = ops.sum_rows(ops.sqr(t))                                               # (rows, 1)
    e2 = _EPSILON * _EPSILON
    floor = ops.scale_bias(ops.relu(ops.scale_bias(sq, 1.0, -e2)), 1.0, e2)     # max(sq, eps^2)
    inv = ops.exp(ops.scale(ops.log(floor), -0.5))
    return ops.mul(t, inv)


@register_builtin
class OrthogonalRegularizer(Regularizer):
    """``factor`` times the mean absolute dot product of the L2-normalised rows
    (``mode="rows"``) or columns (``"columns"``) of a 2-D weight, each pair once
    (Keras's: ``factor * 0.5 * sum(|P - diag P|) / (n (n - 1) / 2)``)."""

    def __init__(self, factor=0.01, mode="rows"):
        self.factor = _factor("factor", factor, 0.01)
        if mode not in ("rows", "columns"):
            raise ValueError(f"OrthogonalRegularizer: mode must be 'rows' or 'columns', got {mode!r}")
        self.mode = mode

    def penalty(self, t):
        if len(t.shape) != 2:
            raise ValueError(f"OrthogonalRegularizer takes a 2-D weight (rank 2), got shape {tuple(t.shape)}")
        x = t if t.is_contiguous else ops.cont(t)
        if self.mode == "columns":
            x = ops.cont(core_ops.transpose(x))
        n = x.shape[0]
        if n < 2:
            raise ValueError(f"OrthogonalRegularizer(mode={self.mode!r}) needs at least 2 {self.mode} to compare, "
                             f"got a weight of shape {tuple(t.shape)}")
        u = _unit_rows(x)
        product = ops.mul_mat(u, u)                                     # (n, n): u @ u.T
        off = ops.mul(product, ops.constant(1.0 - np.eye(n, dtype=np.float32)))
        pairs = n * (n - 1) / 2.0
        return ops.scale(ops.sum(ops.abs(off)), self.factor * 0.5 / pairs)

    def get_config(self):
        return {"factor": self.factor, "mode": self.mode}


# Keras's lower-case aliases
l1, l2, l1_l2, orthogonal_regularizer = L1, L2, L1L2, OrthogonalRegularizer

_BUILTIN = {"L1": L1, "L2": L2, "L1L2": L1L2, "OrthogonalRegularizer": OrthogonalRegularizer,
            "Regularizer": Regularizer}
_BY_NAME = {"l1": L1, "l2": L2, "orthogonal_regularizer": OrthogonalRegularizer}
_BY_NAME.update(_BUILTIN)


def _named(name):
    if name == "l1_l2":
        # Keras documents 'l1_l2' as l1=0.01 and l2=0.01 (tf.keras's l1_l2 defaults)
        return L1L2(l1=0.01, l2=0.01)
    cls = _BY_NAME.get(name)
    if cls is None:
        raise ValueError(f"unknown regularizer {name!r}; use one of 'l1', 'l2', 'l1_l2', "
                         f"'orthogonal_regularizer', a Regularizer or a function")
    return cls()


def get(identifier):
    """A regularizer for a name (``"l1"``, ``"l2"``, ``"l1_l2"``: Keras's default
    factors, 0.01), a config dict (``serialize``'s), a Regularizer, a class, or a
    function of the weight; None gives None."""
    if identifier is None:
        return None
    if isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str):
        return _named(identifier)
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, type):
        if issubclass(identifier, Regularizer):
            return identifier()
        raise TypeError(f"a regularizer class must subclass pyggml.regularizers.Regularizer, got {identifier!r}")
    if callable(identifier):
        return identifier
    raise TypeError(f"a regularizer must be a name, a config dict, a Regularizer or a function, "
                    f"got {type(identifier).__name__}")


def serialize(regularizer):
    """A JSON-able dict: ``{"class_name": ..., "config": {...}}`` (a function:
    ``{"class_name": "function", "config": <its registered name>}``); None for None."""
    if regularizer is None:
        return None
    if isinstance(regularizer, Regularizer):
        cls = type(regularizer)
        name = cls.__name__ if _BUILTIN.get(cls.__name__) is cls else get_registered_name(cls)
        return {"class_name": name, "config": regularizer.get_config()}
    if callable(regularizer):
        return {"class_name": "function", "config": get_registered_name(regularizer)}
    raise TypeError(f"not a regularizer: {regularizer!r}")


def deserialize(config, custom_objects=None):
    """The regularizer a ``serialize`` dict (or Keras's, with "module" and
    "registered_name") describes; a name works too."""
    if config is None:
        return None
    if isinstance(config, str):
        return _named(config)
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"a regularizer config is a dict with 'class_name' and 'config', got {config!r}")
    name, cfg = config["class_name"], config.get("config") or {}
    if name == "function":
        fn = get_registered_object(cfg if isinstance(cfg, str) else config.get("registered_name"), custom_objects)
        if not callable(fn):
            raise ValueError(f"the regularizer function {cfg!r} is not callable")
        return fn
    cls = _BUILTIN.get(name) if not (custom_objects and name in custom_objects) else None
    if cls is None:
        cls = get_registered_object(config.get("registered_name") or name, custom_objects)
    if not (isinstance(cls, type) and issubclass(cls, Regularizer)):
        raise ValueError(f"{name!r} is not a regularizer class")
    if not isinstance(cfg, dict):
        raise ValueError(f"the config of regularizer {name!r} must be a dict, got {cfg!r}")
    return cls.from_config(cfg)
