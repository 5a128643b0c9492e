"""``pyggml.ops``: operations over ``pyggml.core.Tensor``, for custom layers
and hand-built graphs.

Every ggml operation of ``pyggml.core.ops`` is here under its ggml name and
arguments (ggml dims: 0 is numpy's last axis).  Inside ``Layer.call`` (while a
model builds its graph) results go to that graph without ``ctx=``, and a
layer's ``Variable`` may stand wherever a Tensor is expected.  Tensors also
support ``+ - * / @`` and unary ``-`` with numpy's broadcasting.

(``pyggml.activations`` has the activations as functions that train:
``activations.sigmoid(x)``, ``activations.softmax(x, axis=-1)``, ...)

Besides ggml's operations, with numpy's axes:

- ``constant(array, dtype="float32")``, ``arange(start, stop=None, step=1)``, ``shape(x)``
- ``reduce_sum``, ``reduce_mean`` (``axis=None`` or an int, ``keepdims``),
  ``concatenate(tensors, axis=-1)``, ``permute_axes(x, axes)``, ``swapaxes``,
  ``flatten_rows``, ``square``
- ``dropout(x, rate)`` (inside a training graph only; identity otherwise)
"""

import builtins
import functools
import inspect
import numbers
import sys

import numpy as np

from pyggml import _ops_image as image  # noqa: F401  (keras.ops.image)
from pyggml import (_fold, _logits, _ops_autodiff, _ops_control, _ops_image_extra, _ops_layout, _ops_math, _ops_more,
                    _ops_nn, _ops_numpy, _scope, _symbolic, _tensor_arrays, _wide)
from pyggml._ops_linalg import tensordot  # noqa: F401
from pyggml._ops_signal import fft, fft2, ifft2, slice  # noqa: F401, A004
from pyggml._tensor_arrays import as_ops_result, holds_64, keras_widths, refuse_tensor_array
from pyggml._validation import axis_index
from pyggml._validation import host as _host
from pyggml.core import ops as _core_ops
from pyggml.core import Tensor
from pyggml.variables import Variable, WeightName, unwrap_name

_GGML_NAMES = [n for n in dir(_core_ops) if not n.startswith("_")]


def _resolve(v):
    if isinstance(v, Variable):
        return v.graph_tensor()
    if isinstance(v, (list, tuple)) and builtins.any(isinstance(e, Variable) for e in v):   # ops.any shadows it
        return type(v)(_resolve(e) for e in v)
    return v


def _accepting_variables(fn):
    @functools.wraps(fn)
    def op(*args, **kwargs):
        return fn(*[_resolve(a) for a in args], **{k: _resolve(v) for k, v in kwargs.items()})
    return op


globals().update({n: _accepting_variables(getattr(_core_ops, n)) for n in _GGML_NAMES})


def as_tensor(x):
    """A Tensor for a Tensor, a Variable (its graph tensor) or an array (a constant)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, Variable):
        return x.graph_tensor()
    w = _ops_numpy._watched(x)          # an array the recording GradientTape watches
    return w if w is not None else constant(x)


def shape(x):
    """Keras's ``ops.shape``: a tensor's (or a Variable's) shape as a tuple of ints, numpy's
    order (the batch first inside a model's graph)."""
    if isinstance(x, Variable):
        return tuple(int(d) for d in x.shape)           # in a graph or not: the same
    if isinstance(x, _wide.Wide):
        return x.shape
    if isinstance(x, Tensor):
        known = _fold.noted([x])            # a folded volume in a custom call: its Keras shape
        return tuple(int(d) for d in (known[0] if known else x.shape))
    return tuple(np.shape(x))


def convert_to_numpy(x):
    """Keras's ``ops.convert_to_numpy``: a numpy array of an array, a number or a Variable (its
    current value); a graph tensor has no value until its graph runs, so it is refused."""
    x = unwrap_name(x)
    if isinstance(x, Variable):
        return x.numpy()
    if isinstance(x, Tensor) and x.ctx.value_source is not None:
        return x.numpy()                 # a GradientTape's tensor: computed on first read
    if isinstance(x, Tensor):
        raise TypeError("convert_to_numpy: a graph tensor has no value while its graph is being built; "
                        "call it on arrays (the results of ops called outside a model's graph)")
    return np.asarray(_host(x))


# --- constants ------------------------------------------------------------------------

def constant(value, dtype="float32"):
    """A tensor holding ``value`` (a number or an array) in the graph being built."""
    a = np.asarray(value)
    refuse_tensor_array(a, "constant")
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"constant: expected real numbers, got dtype {a.dtype}")
    if dtype not in ("float32", "int32"):
        raise ValueError(f"constant: dtype must be 'float32' or 'int32', got {dtype!r}")
    if a.ndim > 4:
        raise ValueError(f"constant: at most 4 dimensions, got {a.shape}")
    t = _scope.require("ops.constant").constant(a.reshape(a.shape or (1,)), dtype)
    _ops_numpy.remember_host_value(t, a.astype(np.int64 if dtype == "int32" else np.float32))
    return t


def arange(start, stop=None, step=1, dtype=None):
    """``numpy.arange`` as a constant tensor: int32 when ``start``, ``stop`` and ``step`` are
    whole numbers (positions for Embedding), else float32, as Keras's; or ``dtype``."""
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if values.size == 0:
        raise ValueError("arange: empty range")
    if dtype is None:
        dtype = "int32" if values.dtype.kind in "biu" else "float32"
    dtype = {"int": "int32", "float": "float32", "int64": "int32", "float64": "float32"}.get(dtype, dtype)
    if dtype not in ("float32", "int32"):
        raise ValueError(f"arange: dtype must be 'float32' or 'int32', got {dtype!r}")
    if _scope.current() is None:
        # outside a graph (a layer's build or __init__, as keras-io's positional encoders): at once
        return as_ops_result(values.astype(np.int32 if dtype == "int32" else np.float32))
    return constant(values, dtype)


# --- shapes -------------------------------------------------------------------------------

_axis = axis_index


def permute_axes(x, axes):
    """numpy's ``transpose(x, axes)``: output axis i is input axis ``axes[i]``."""
    x = as_tensor(x)
    r = len(x.shape)
    axes = tuple(int(a) % r for a in axes)
    if sorted(axes) != list(range(r)):
        raise ValueError(f"permute_axes: {axes} is not a permutation of {r} axes")
    if axes == tuple(range(r)):
        return x
    # ggml's permute says where each ggml dim goes; numpy axis i is ggml dim r-1-i
    dest = list(range(4))
    for i, p in enumerate(axes):
        dest[r - 1 - p] = r - 1 - i
    return _core_ops.cont(_core_ops.permute(x, dest))


def swapaxes(x, a, b):
    if isinstance(x, (np.ndarray, list, tuple)) and _ops_numpy._watched(x) is None:
        return _tensor_arrays.as_ops_result(np.swapaxes(np.asarray(x), a, b))     # values at once, as Keras
    x = as_tensor(x)
    r = len(x.shape)
    a, b = _axis(a, r, "swapaxes"), _axis(b, r, "swapaxes")
    axes = list(range(r))
    axes[a], axes[b] = axes[b], axes[a]
    return permute_axes(x, axes)


def flatten_rows(x):
    """(d0, ..., dk, c) -> (d0 * ... * dk, c), contiguous."""
    x = as_tensor(x)
    s = x.shape
    x = x if x.is_contiguous else _core_ops.cont(x)
    return _core_ops.reshape(x, (int(np.prod(s[:-1])) if len(s) > 1 else 1, s[-1]))


def _last_axis_reduce(x, axis, keepdims, mean, what):
    x = as_tensor(x)
    shape = x.shape
    r = len(shape)
    if axis is None:
        total = _core_ops.sum(x if x.is_contiguous else _core_ops.cont(x))
        out = _core_ops.scale(total, 1.0 / x.nelements) if mean else total
        return _core_ops.reshape(out, (1,) * r) if keepdims else out
    ax = _axis(axis, r, what)
    moved = swapaxes(x, ax, r - 1) if ax != r - 1 else (x if x.is_contiguous else _core_ops.cont(x))
    s = _core_ops.sum_rows(moved)                       # the last axis becomes 1
    if mean:
        s = _core_ops.scale(s, 1.0 / shape[ax])
    if ax != r - 1:
        s = swapaxes(s, ax, r - 1)
    if keepdims:
        return s
    out_shape = tuple(d for i, d in enumerate(shape) if i != ax) or (1,)
    return _core_ops.reshape(s if s.is_contiguous else _core_ops.cont(s), out_shape)


def reduce_sum(x, axis=None, keepdims=False):
    """Sum over ``axis`` (numpy's), or over everything with ``axis=None``."""
    return _last_axis_reduce(x, axis, keepdims, False, "reduce_sum")


def reduce_mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (numpy's), or over everything with ``axis=None``."""
    return _last_axis_reduce(x, axis, keepdims, True, "reduce_mean")


def square(x):
    """Keras's ops.square: x * x (an array or a weight outside a graph is computed at once)."""
    x = unwrap_name(x)
    if not isinstance(x, Tensor) and _scope.current() is None:
        a = x.numpy() if isinstance(x, Variable) else np.asarray(x)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"square: expected a tensor or real numbers, got {type(x).__name__} of dtype {a.dtype}")
        return np.square(a.astype(np.float32))
    return _core_ops.sqr(as_tensor(x))


def dropout(x, rate, training=None):
    """Zero a fraction ``rate`` of x's values and scale the rest by 1/(1-rate)
    when training (by default: when the graph being built is a training graph);
    x itself otherwise."""
    x = as_tensor(x)
    b = _scope.require("ops.dropout")
    if training is None:
        training = b.training
    if not 0 <= rate <= 1:
        raise ValueError(f"dropout rate must be in [0, 1], got {rate!r}")
    if not training or rate == 0:
        return x
    return _core_ops.mul(x if x.is_contiguous else _core_ops.cont(x), b.random_keep_mask(x.shape, float(rate)))


# --- Keras's ops (pyggml._ops_numpy) ----------------------------------------------------------

def _shared(ggml_op, keras_op):
    """One name for ggml's op and Keras's: ggml's for low-level graph code (a Tensor
    outside any model's graph, or ``ctx=``), Keras's inside a model's graph and on arrays."""
    @functools.wraps(keras_op)
    def op(*args, ctx=None, **kwargs):
        tape = _scope.tape_of(args[:1]) if ctx is None and _scope.current() is None else None
        if tape is not None:
            # a GradientTape's tensor after its block: Keras's op, recorded on that tape
            with _scope.entered(tape):
                return keras_op(*args, **kwargs)
        if ctx is not None or (_scope.current() is None and args and isinstance(args[0], Tensor)):
            try:
                return ggml_op(*args, ctx=ctx, **kwargs)
            except TypeError as e:
                if not kwargs or "keyword argument" not in str(e):
                    raise
                raise TypeError(f"{keras_op.__name__}: a graph Tensor outside any model's graph takes ggml's "
                                f"low-level form ({e}); Keras's arguments ({', '.join(kwargs)}) work inside a "
                                f"layer's call or a Lambda, or on numpy arrays") from None
        return keras_op(*args, **kwargs)
    op.__doc__ = (f"{keras_op.__doc__ or ''}\n\nLow-level form (a Tensor outside a model's graph, or ctx=): "
                  f"ggml's {ggml_op.__doc__ or ggml_op.__name__}")
    return op


# ggml's unary ops that Keras's ``keras.ops`` also has under the same name: a Tensor takes ggml's op
# as before; an array or a number is a constant inside a graph and is computed at once outside one
_KERAS_UNARY = ("abs", "cos", "sin", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "silu", "softplus", "elu",
                "gelu")


def _keras_unary(name):
    ggml_op = globals()[name]

    def apply(t, kwargs):
        ctx = kwargs.pop("ctx", None)
        return _apply(t, kwargs, {"ctx": ctx} if ctx is not None else {})

    def _apply(t, kwargs, extra):
        if name == "sigmoid" and isinstance(t, Tensor) and not extra:
            y = ggml_op(t)
            _logits.note(y, t, "sigmoid")           # (a cross-entropy of y computes from t)
            return y
        if name == "gelu":
            approximate = kwargs.pop("approximate", True)
            if not isinstance(approximate, (bool, np.bool_)):
                raise TypeError(f"gelu: approximate must be True or False, got {approximate!r}")
            return ggml_op(t, **extra) if approximate else _core_ops.gelu_erf(t, **extra)
        if name == "elu":
            alpha = kwargs.pop("alpha", 1.0)
            if not isinstance(alpha, (int, float, np.number)) or isinstance(alpha, bool):
                raise TypeError(f"elu: alpha must be a number, got {alpha!r}")
            y = ggml_op(t, **extra)
            if float(alpha) == 1.0:
                return y
            # alpha * (exp(x) - 1) below zero: relu(x) - alpha * relu(-elu(x))
            neg = _core_ops.relu(_core_ops.neg(y, **extra), **extra)
            return _core_ops.sub(_core_ops.relu(t, **extra), _core_ops.scale(neg, float(alpha), **extra), **extra)
        if kwargs:
            raise TypeError(f"{name}() got unexpected keyword arguments {sorted(kwargs)}")
        return ggml_op(t, **extra)

    @functools.wraps(ggml_op)
    def op(x, ctx=None, **kwargs):
        x = unwrap_name(x)
        if isinstance(x, Variable) and ctx is None and _scope.current() is None:
            x = x.numpy()                     # a weight outside a graph: its values, computed at once
        if ctx is not None:
            return apply(_resolve(x), dict(kwargs, ctx=ctx))
        if isinstance(x, (Tensor, Variable)):
            t = _resolve(x)
            # integers (a Lambda on ids, an int input) compute as floats, as Keras promotes them
            return apply(_ops_numpy._f(t) if isinstance(t, Tensor) and t.dtype != "f32" else t, dict(kwargs))
        if _scope.current() is not None:
            return apply(_ops_numpy._f(x), dict(kwargs))
        a = np.asarray(x)
        refuse_tensor_array(a, name)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"{name}: expected a tensor or real numbers, got {type(x).__name__} of dtype {a.dtype}")
        if a.ndim > 4:
            raise ValueError(f"{name}: at most 4 dimensions, got an array of shape {a.shape}")
        from pyggml import _eager
        out = _eager.evaluate(lambda t: apply(t, dict(kwargs)),
                              [np.ascontiguousarray(a, dtype=np.float32).reshape(a.shape or (1,))])
        return out.reshape(a.shape)
    op.__doc__ = (f"Keras's ops.{name} on a tensor, an array or a number (computed at once outside a graph); "
                  f"on a Tensor, ggml's {ggml_op.__doc__ or name}")
    return op


globals().update({n: _keras_unary(n) for n in _KERAS_UNARY})


# the modules of Keras's functions; a name that is also ggml's must be in its module's SHARED_WITH_GGML
_KERAS_MODULES = (_ops_numpy, _ops_math, _ops_nn, _ops_control, _ops_more, _ops_layout, _ops_autodiff)


def _install_keras_ops():
    names = {}
    for module in _KERAS_MODULES:
        shared = getattr(module, "SHARED_WITH_GGML", ())
        for n in module.__all__:
            if n in names:
                raise ImportError(f"pyggml.ops: {n} is defined by two modules")
            if n in _GGML_NAMES and n not in shared:
                raise ImportError(f"pyggml.ops: {module.__name__}.{n} is also ggml's op: list it in SHARED_WITH_GGML")
            keras_op = getattr(module, n)
            names[n] = _shared(globals()[n], keras_op) if n in shared else keras_op
    globals().update(names)
    return set(names)


__all__ = sorted(set(_GGML_NAMES) | {
    "as_tensor", "constant", "arange", "permute_axes", "swapaxes", "flatten_rows", "reduce_sum", "reduce_mean",
    "square", "concatenate", "dropout", "shape", "convert_to_numpy", "slice", "fft", "fft2", "ifft2",
    "tensordot"} | _install_keras_ops())


# --- Keras's ops on plain values inside a graph -----------------------------------------------
# Keras's ops on Python numbers and numpy arrays give concrete values, in a layer's call too
# (``ops.linspace(ops.log(1.0), ops.log(1000.0), 16)`` has shape (16,)): with no tensor among its
# arguments such an op computes on the host as outside a graph (ggml has no 0-d tensors, so a graph
# constant would have shape (1,)).  Its arrays become constants of the graph where they meet
# tensors (OpsArray, Layer.__call__).  convert_to_tensor and constant still make graph tensors.
_NOT_HOST = {"convert_to_tensor"}
_HOST_WHEN_PLAIN = (set(_KERAS_UNARY) | {"square"} |
                    {n for m in _KERAS_MODULES for n in m.__all__}) - _NOT_HOST
_PLAIN_LEAVES = (str, bytes, numbers.Number, np.generic, np.dtype, type, builtins.slice)


def _plain(value, depth=0):
    """True for numbers, numeric numpy arrays (not watched by a recording GradientTape) and
    lists, tuples and dicts of them; False for tensors, Variables, nodes, functions, ... and a
    model's weight names (``model.trainable_weights``: their Variables; a constant made of one in a
    GradientTape would cut the gradient to it)."""
    if type(value) is WeightName:
        return False
    if value is None or value is Ellipsis or isinstance(value, _PLAIN_LEAVES):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf" and _ops_numpy._watched(value) is None
    if isinstance(value, (list, tuple)) and depth < 8:
        return builtins.all(_plain(v, depth + 1) for v in value)
    if type(value) is dict and depth < 8:
        return builtins.all(_plain(v, depth + 1) for v in value.values())
    return False


def _graph_ready(out):
    """False when a host result has a complex or empty array (what a graph cannot hold)."""
    items = out if isinstance(out, (list, tuple)) else [out]
    return builtins.all(not isinstance(a, np.ndarray) or (a.size and a.dtype.kind in "biuf") for a in items)


def _axis_on_a_volume(name, sig, args, kwargs):
    """Refuse an axis op on a folded volume (pyggml._fold: (batch * D, H, W, C) in the graph)
    whose axis is not the channels': its result would be that of the folded tensor, not
    Keras's (a custom layer's ops.sum(x, axis=3) on (batch, D, H, W, C))."""
    folded = _fold.noted([a for a in args if isinstance(a, Tensor)] +
                         [v for v in kwargs.values() if isinstance(v, Tensor)])
    if folded is None or not builtins.any(_fold.folds(s) for s in folded):
        return
    try:
        bound = sig.bind(*args, **kwargs).arguments
    except TypeError:
        return
    for key in ("axis", "axes"):
        axis = bound.get(key)
        if axis is None:
            continue
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        full = next(s for s in folded if _fold.folds(s))
        if builtins.any(not isinstance(a, (int, np.integer)) or a % len(full) != len(full) - 1 for a in axes):
            shape = (None,) + tuple(full[1:])
            raise ValueError(f"ops.{name}({key}={axis!r}) on a volume of shape {shape}: "
                             f"inside a layer's call pyggml holds volumes as (batch * depth, height, width, "
                             f"channels), so only the channels' axis (-1) works there; reshape the volume to 4 "
                             f"dimensions first (ops.reshape) or use the 3-D layers")


# --- Keras's ops on symbolic nodes (a functional model's tensors) ------------------------------
# Keras's ops that keep an integer input's dtype (sum, max, einsum, matmul of int32 are int32);
# computed on the host in float32 (exact below 2**24), their results go back to that dtype
_INT_KEEPING = {"sum", "prod", "max", "min", "amax", "amin", "cumsum", "cumprod", "einsum", "matmul", "dot",
                "tensordot", "inner", "outer", "trace", "vdot", "kron", "cross", "nansum", "nanmax", "nanmin",
                "nanprod", "nancumsum", "nancumprod", "segment_sum", "segment_max", "segment_min", "segment_prod",
                "ptp"}


def _int_inputs(args, kwargs):
    """The integer dtype an op's array inputs share (bools count as int32), or None when an
    input is a float array or a float number."""
    found = []

    def walk(v, depth=0):
        if isinstance(v, (np.ndarray, np.generic)) and not isinstance(v, (np.str_, np.bytes_)):
            found.append(np.dtype(np.int32) if v.dtype == np.bool_ else v.dtype)
        elif isinstance(v, float):
            found.append(np.dtype(np.float32))
        elif isinstance(v, (list, tuple)) and depth < 2:
            for e in v:
                walk(e, depth + 1)
    walk(args)
    walk(list(kwargs.values()))
    if not found or builtins.any(d.kind not in "iu" for d in found):
        return None
    return found[0] if builtins.all(d == found[0] for d in found) else np.dtype(np.int32)


def _eager_result(name, out, args, kwargs, explicit_dtype):
    out = as_ops_result(out)
    if explicit_dtype:
        return out
    if name in _INT_KEEPING and isinstance(out, np.ndarray) and out.dtype.kind == "f":
        kind = _int_inputs(args, kwargs)
        if kind is not None:
            return as_ops_result(np.rint(out).astype(kind if kind.itemsize <= 4 else np.int32))
    if holds_64(args) or holds_64(kwargs):
        return out
    return keras_widths(out)


# ops whose results on integer arrays are integers (or bools): numpy's, where values pass int32
_EXACT_WIDE_INTS = frozenset((
    "add", "subtract", "multiply", "floor_divide", "mod", "negative", "absolute", "abs", "sum", "prod", "max",
    "min", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "maximum", "minimum", "sort", "argsort",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "where", "clip", "square", "sign"))


def _wide_ints(args, kwargs, depth=0):
    """Whether an argument is an integer array (or a Python int) with a value beyond int32."""
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, (list, tuple)) and depth < 2:
            if _wide_ints(a, {}, depth + 1):
                return True
        elif isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
            if not -2 ** 31 <= int(a) < 2 ** 31:
                return True
        elif isinstance(a, np.ndarray) and a.dtype.kind in "iu" and a.size and \
                (a.dtype.itemsize > 4 or (a.dtype.kind == "u" and a.dtype.itemsize == 4)) and \
                (int(a.min()) < -2 ** 31 or int(a.max()) >= 2 ** 31):
            return True
    return False


def _symbolic_aware(name, fn):
    host_when_plain = name in _HOST_WHEN_PLAIN
    try:
        sig = inspect.signature(fn)
        axis_op = "axis" in sig.parameters or "axes" in sig.parameters
    except (TypeError, ValueError):
        sig, axis_op = None, False
    dtype_at = list(sig.parameters).index("dtype") if sig is not None and "dtype" in sig.parameters else None

    def explicit_dtype(args, kwargs):
        """The call names a dtype (ops.cast(x, "int64") keeps it)."""
        return kwargs.get("dtype") is not None or (dtype_at is not None and len(args) > dtype_at and
                                                   args[dtype_at] is not None)

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if builtins.any(_ops_numpy._is_torch(a) or (isinstance(a, (list, tuple)) and
                                                     builtins.any(_ops_numpy._is_torch(i) for i in a))
                        for a in args + tuple(kwargs.values())):
            # torch tensors as the numpy arrays they hold (their dtypes: a bool tensor's sum is int32)
            args = tuple(_ops_numpy._torch_free(a) for a in args)
            kwargs = {k: _ops_numpy._torch_free(v) for k, v in kwargs.items()}
        if _symbolic.NODE_TYPES and _symbolic.holds_node(args, kwargs):
            return _symbolic.apply(name, args, kwargs)       # becomes a layer (layers.core.symbolic_op)
        if name in _EXACT_WIDE_INTS and _scope.current() is None and _wide_ints(args, kwargs):
            # integers beyond int32 (int64 ids, timestamps) where the result is integers: numpy's,
            # exact and int64 as Keras's torch backend gives it (ggml's int32 would wrap)
            return as_ops_result(getattr(np, name)(*args, **kwargs))
        if _scope.current() is not None and _wide.eager_arrays(args, kwargs) and _wide.takes(name) and \
                not (host_when_plain and _plain(args) and _plain(kwargs)):
            # an array of more than four dimensions meeting tensors (a window mask): a wide constant
            args, kwargs = _wide_constants(args), {k: _wide_constants([v])[0] for k, v in kwargs.items()}
        if _scope.current() is not None and _wide_variable(args, kwargs):
            # a weight of more than four dimensions (a layer's add_weight((3, 3, c, 8, 4))): its Wide
            args, kwargs = _wide_variables(args), {k: _wide_variables([v])[0] for k, v in kwargs.items()}
        if _wide.holds(args, kwargs):
            return _wide.apply(name, fn, sig, args, kwargs)   # a tensor of more than 4 dimensions
        if _scope.current() is None and _wide.takes(name) and _wide.eager_arrays(args, kwargs):
            return _eager_result(name, _wide_on_arrays(name, op, args, kwargs), args, kwargs,
                                 explicit_dtype(args, kwargs))
        if axis_op and _fold.in_custom_call():
            _axis_on_a_volume(name, sig, args, kwargs)
        if host_when_plain and _scope.current() is not None and _plain(args) and _plain(kwargs):
            with _scope.paused():                             # no tensor involved: a value, as Keras's
                out = _wide_on_arrays(name, op, args, kwargs) if _wide.takes(name) and \
                    _wide.eager_arrays(args, kwargs) else fn(*args, **kwargs)
            if _graph_ready(out):
                return _eager_result(name, out, args, kwargs, explicit_dtype(args, kwargs))
            # complex or empty: no graph can hold it, and the op in the graph says so
        out = fn(*args, **kwargs)
        # computed at once: arrays that a graph tensor later meets become graph constants
        return _eager_result(name, out, args, kwargs, explicit_dtype(args, kwargs)) if _scope.current() is None else out
    return op


def _wide_on_arrays(name, op, args, kwargs):
    """An op called at once on arrays of more than four dimensions: numpy moves the values of
    the layout ops; the others run in a graph on them as wide tensors (pyggml._wide)."""
    if name in _ops_numpy._HOST_LAYOUT:
        bound = inspect.signature(getattr(_ops_numpy, name)).bind(*args, **kwargs)
        values = [v for v in bound.arguments.values() if isinstance(v, np.ndarray)]
        return _ops_numpy._layout_on_host(name, bound.arguments, values)
    from pyggml import _eager
    arrays = []

    def slot(v):
        if isinstance(v, np.ndarray) and v.ndim > _wide.MAX_DIMS:
            arrays.append(v)
            return _WideSlot(len(arrays) - 1, v.shape)
        if isinstance(v, (list, tuple)) and builtins.any(isinstance(e, np.ndarray) for e in v):
            return type(v)(slot(e) for e in v)
        return v
    args, kwargs = [slot(a) for a in args], {k: slot(v) for k, v in kwargs.items()}

    def run(*ts):
        def put(v):
            if isinstance(v, _WideSlot):
                return _wide.Wide(ts[v.index], v.shape)
            if isinstance(v, (list, tuple)) and builtins.any(isinstance(e, _WideSlot) for e in v):
                return type(v)(put(e) for e in v)
            return v
        return op(*[put(a) for a in args], **{k: put(v) for k, v in kwargs.items()})
    return _eager.evaluate(run, [np.ascontiguousarray(a).reshape(-1) for a in arrays])


def _is_wide_variable(v):
    return isinstance(v, Variable) and len(v.shape) > _wide.MAX_DIMS


def _wide_variable(args, kwargs):
    for v in (*args, *kwargs.values()):
        if _is_wide_variable(v) or (isinstance(v, (list, tuple)) and builtins.any(_is_wide_variable(e) for e in v)):
            return True
    return False


def _wide_variables(values):
    def one(v):
        if _is_wide_variable(v):
            return v.graph_tensor()
        if isinstance(v, (list, tuple)) and builtins.any(_is_wide_variable(e) for e in v):
            return type(v)(one(e) for e in v)
        return v
    return [one(v) for v in values]


def _wide_constants(values):
    def one(v):
        if isinstance(v, np.ndarray) and v.ndim > _wide.MAX_DIMS and _ops_numpy._watched(v) is None:
            return _ops_numpy.wide_constant(v)
        if isinstance(v, (list, tuple)) and builtins.any(isinstance(e, np.ndarray) for e in v):
            return type(v)(one(e) for e in v)
        return v
    return [one(v) for v in values]


class _WideSlot:
    __slots__ = ("index", "shape")

    def __init__(self, index, shape):
        self.index, self.shape = index, shape


def _install_symbolic():
    g = globals()
    for n in __all__:
        fn = g.get(n)
        if callable(fn) and not isinstance(fn, type) and n not in ("shape", "convert_to_numpy", "constant",
                                                                   "as_tensor", "ndim", "size", "dtype",
                                                                   "is_tensor"):
            g[n] = _symbolic_aware(n, fn)
    g["image"] = _ImageOps()


class _ImageOps:
    """``ops.image``: its functions take symbolic nodes too."""

    def __getattr__(self, name):
        module = _ops_image_extra if name in _ops_image_extra.__all__ else image_module
        fn = getattr(module, name)
        if name.startswith("_") or not callable(fn):
            return fn
        return _symbolic_aware(f"image.{name}", fn)

    def __dir__(self):
        return list(image_module.__all__) + list(_ops_image_extra.__all__)


def _dtype_like(v):
    return isinstance(v, (str, np.dtype, type)) and not isinstance(v, bool)


def _keras_or_ggml_view(ggml_view):
    @functools.wraps(ggml_view)
    def view(x, *args, **kwargs):
        """Keras's ``ops.view(x, dtype)``: the same bytes read as another dtype (on arrays; the
        last axis scales by the itemsizes' ratio).  ggml's ``view(a, shape, strides=None,
        offset=0)`` of a Tensor otherwise."""
        if "dtype" in kwargs or (len(args) == 1 and not kwargs and _dtype_like(args[0])):
            dtype = kwargs.pop("dtype") if "dtype" in kwargs else args[0]
            if kwargs or (args and "dtype" not in kwargs and len(args) > 1):
                raise TypeError(f"view: Keras's form is view(x, dtype), got extra arguments {sorted(kwargs)}")
            if isinstance(x, (Tensor, Variable)) or _scope.current() is not None:
                raise TypeError("view(x, dtype) reinterprets an array's bytes; ggml has no such op in a graph: "
                                "use ops.cast to convert values")
            a = np.ascontiguousarray(np.asarray(x))
            try:
                target = np.dtype(dtype)
                out = a.view(target) if a.ndim else a.reshape(1).view(target)
            except (TypeError, ValueError) as e:
                raise ValueError(f"view: cannot read an array of {a.dtype} {a.shape} as {dtype!r} ({e})") from None
            return as_ops_result(out)
        return ggml_view(x, *args, **kwargs)
    return view


view = _keras_or_ggml_view(globals()["view"])        # ggml's view, installed above
image_module = image
_install_symbolic()
_wide.OPS[0] = sys.modules[__name__]
_tensor_arrays.UFUNC_OPS.update({u: globals()[n] for u, n in _tensor_arrays.UFUNC_NAMES.items()})


class _Namespace:
    """Keras's sub-namespaces of its ops (``keras.ops.nn.sigmoid``, ``keras.ops.numpy.add``,
    ``keras.ops.linalg.inv``): the same functions as ``pyggml.ops``."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        fn = globals().get(attr) if not attr.startswith("_") else None
        if fn is None or attr not in __all__:
            raise AttributeError(f"pyggml.ops.{self._name} has no function {attr!r}")
        return fn

    def __dir__(self):
        return list(__all__)

    def __repr__(self):
        return f"<pyggml.ops.{self._name}>"


nn, numpy, linalg = _Namespace("nn"), _Namespace("numpy"), _Namespace("linalg")
