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
- ``reduce_sum``, ``reduce_mean`` (``axis=None`` or an int, ``keepdims``); ``sum`` and
  ``mean`` take Keras's ``axis``/``keepdims`` too (ggml's forms without them),
  ``concatenate(tensors, axis=-1)``, ``permute_axes(x, axes)``, ``swapaxes``,
  ``flatten_rows``, ``square``, and Keras's ``maximum``, ``minimum`` (that train),
  ``expand_dims``, ``squeeze``
- ``dropout(x, rate)`` (inside a training graph only; identity otherwise)
"""

import builtins
import functools

import numpy as np

from pyggml import _scope
from pyggml._validation import is_int
from pyggml.core import ops as _core_ops
from pyggml.core import Tensor
from pyggml.variables import Variable

_GGML_NAMES = [n for n in dir(_core_ops) if not n.startswith("_")]


def _resolve(v):
    if isinstance(v, Variable):
        return v.graph_tensor()
    if isinstance(v, (list, tuple)) and any(isinstance(e, Variable) for e in v):
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
    return constant(x)


def shape(x):
    """Keras's ``ops.shape``: a tensor's (or a Variable's) shape as a tuple of ints, numpy's
    order (the batch first inside a model's graph)."""
    if isinstance(x, (Tensor, Variable)):
        return tuple(int(d) for d in as_tensor(x).shape)
    return tuple(np.shape(x))


# --- constants ------------------------------------------------------------------------

def constant(value, dtype="float32"):
    """A tensor holding ``value`` (a number or an array) in the graph being built."""
    a = np.asarray(value)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"constant: expected real numbers, got dtype {a.dtype}")
    if dtype not in ("float32", "int32"):
        raise ValueError(f"constant: dtype must be 'float32' or 'int32', got {dtype!r}")
    if a.ndim > 4:
        raise ValueError(f"constant: at most 4 dimensions, got {a.shape}")
    return _scope.require("ops.constant").constant(a.reshape(a.shape or (1,)), dtype)


def arange(start, stop=None, step=1, dtype="int32"):
    """``numpy.arange`` as a constant tensor (int32 by default: positions for Embedding)."""
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if values.size == 0:
        raise ValueError("arange: empty range")
    return constant(values, dtype)


# --- shapes -------------------------------------------------------------------------------

def _axis(axis, ndim, what):
    if not is_int(axis):
        raise TypeError(f"{what}: axis must be an int, got {axis!r}")
    ax = int(axis) + ndim if axis < 0 else int(axis)
    if not 0 <= ax < ndim:
        raise ValueError(f"{what}: axis {axis} out of range for a tensor of {ndim} dims")
    return ax


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


_UNSET = object()
_ggml_mean = mean            # ggml's forms, under their names when called as ggml's
_ggml_sum = sum


def _keras_reduce(x, axis, keepdims, is_mean, what):
    """Keras's ``ops.sum``/``ops.mean``: over ``axis`` (None, an int or a tuple of ints)."""
    x = as_tensor(x)
    if axis is None or is_int(axis):
        return _last_axis_reduce(x, axis, bool(keepdims), is_mean, what)
    try:
        axes = [_axis(a, len(x.shape), what) for a in axis]
    except TypeError:
        raise TypeError(f"{what}: axis must be None, an int or a tuple of ints, got {axis!r}") from None
    if not axes or len(set(axes)) != len(axes):
        raise ValueError(f"{what}: axis {axis!r} must name distinct axes")
    out = x
    for a in axes:
        out = _last_axis_reduce(out, a, True, is_mean, what)
    if keepdims:
        return out
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes) or (1,)
    return _core_ops.reshape(out if out.is_contiguous else _core_ops.cont(out), shape)


def mean(x, axis=_UNSET, keepdims=_UNSET, ctx=None):
    """``mean(x, axis=None, keepdims=False)`` as Keras's ``ops.mean`` (numpy's axes, an
    int or a tuple) whenever ``axis`` or ``keepdims`` is given; ggml's ``mean(x)`` (over
    the last axis, kept as 1) when neither is."""
    if axis is _UNSET and keepdims is _UNSET:
        return _ggml_mean(_resolve(x), ctx=ctx)
    return _keras_reduce(x, None if axis is _UNSET else axis, keepdims is not _UNSET and keepdims, True, "mean")


def sum(x, axis=_UNSET, keepdims=_UNSET, ctx=None):
    """``sum(x, axis=None, keepdims=False)`` as Keras's ``ops.sum`` whenever ``axis`` or
    ``keepdims`` is given; ggml's ``sum(x)`` (of everything, shape (1,)) when neither is."""
    if axis is _UNSET and keepdims is _UNSET:
        return _ggml_sum(_resolve(x), ctx=ctx)
    return _keras_reduce(x, None if axis is _UNSET else axis, keepdims is not _UNSET and keepdims, False, "sum")


def maximum(x, y):
    """Keras's ``ops.maximum``: the larger of x and y, element by element (numpy's
    broadcasting; either may be a number), as ``y + relu(x - y)``, which trains."""
    if not isinstance(x, (Tensor, Variable)):
        x, y = y, x
    x = as_tensor(x)
    if isinstance(y, (Tensor, Variable)):
        y = as_tensor(y)
        return _core_ops.relu(x - y) + y
    y = float(y)
    return _core_ops.scale_bias(_core_ops.relu(x - y), 1.0, y)


def minimum(x, y):
    """Keras's ``ops.minimum``: the smaller of x and y, as ``y - relu(y - x)``."""
    if not isinstance(x, (Tensor, Variable)):
        x, y = y, x
    x = as_tensor(x)
    if isinstance(y, (Tensor, Variable)):
        y = as_tensor(y)
        return y - _core_ops.relu(y - x)
    y = float(y)
    return _core_ops.scale_bias(_core_ops.relu(_core_ops.scale_bias(x, -1.0, y)), -1.0, y)


def expand_dims(x, axis):
    """Keras's ``ops.expand_dims``: x with a new axis of size 1 at ``axis`` (numpy's)."""
    x = as_tensor(x)
    r = len(x.shape)
    ax = _axis(axis, r + 1, "expand_dims")
    if r + 1 > 4:
        raise ValueError(f"expand_dims: tensors have at most 4 dims, x already has {r} ({x.shape})")
    shape = tuple(x.shape[:ax]) + (1,) + tuple(x.shape[ax:])
    return _core_ops.reshape(x if x.is_contiguous else _core_ops.cont(x), shape)


def squeeze(x, axis=None):
    """Keras's ``ops.squeeze``: x without its axes of size 1 (``axis``: an int or a tuple of
    them, each of size 1; None: every axis of size 1)."""
    x = as_tensor(x)
    r = len(x.shape)
    if axis is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    else:
        axes = [_axis(a, r, "squeeze") for a in ((axis,) if is_int(axis) else axis)]
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: axis {a} of a tensor of shape {x.shape} has size {x.shape[a]}, not 1")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes) or (1,)
    return _core_ops.reshape(x if x.is_contiguous else _core_ops.cont(x), shape)


def square(x):
    return _core_ops.sqr(as_tensor(x))


def _concat_tree(xs, dim):
    """ggml's concat of several tensors along ggml dim ``dim``, in a balanced tree
    (each value is copied log2(len(xs)) times, not once per later tensor)."""
    xs = list(xs)
    while len(xs) > 1:
        joined = [_core_ops.concat(a, b, dim) for a, b in zip(xs[0::2], xs[1::2])]
        if len(xs) % 2:
            joined.append(xs[-1])
        xs = joined
    return xs[0]


def concatenate(tensors, axis=-1):
    """Join tensors along ``axis`` (numpy's).  On the CPU, ggml's concat (pyggml's
    patches give it a backward pass); elsewhere a sum of products with constant 0/1
    placement matrices (ops every backend trains)."""
    xs = [as_tensor(t) for t in tensors]
    if len(xs) < 2:
        raise ValueError("concatenate needs at least two tensors")
    r = len(xs[0].shape)
    if any(len(t.shape) != r for t in xs):
        raise ValueError(f"concatenate: tensors of different ranks {[t.shape for t in xs]}")
    ax = _axis(axis, r, "concatenate")
    for t in xs[1:]:
        if any(t.shape[i] != xs[0].shape[i] for i in range(r) if i != ax):
            raise ValueError(f"concatenate: shapes {[t.shape for t in xs]} differ outside axis {axis}")
    if _scope.fused():
        return _concat_tree(xs, r - 1 - ax)
    if ax != r - 1:
        xs = [swapaxes(t, ax, r - 1) for t in xs]
    total = builtins.sum(int(t.shape[-1]) for t in xs)
    y, off = None, 0
    for t in xs:
        f = int(t.shape[-1])
        place = np.zeros((total, f), dtype=np.float32)
        place[off + np.arange(f), np.arange(f)] = 1.0
        part = _core_ops.mul_mat(constant(place), flatten_rows(t))
        y = part if y is None else _core_ops.add(y, part)
        off += f
    y = _core_ops.reshape(y, tuple(xs[0].shape[:-1]) + (total,))
    return swapaxes(y, ax, r - 1) if ax != r - 1 else y


def dropout(x, rate, training=None):
    """Zero a fraction ``rate`` of x's values and scale the rest by 1/(1-rate)
    when training (by default: when the graph being built is a training graph);
    x itself otherwise."""
    x = as_tensor(x)
    b = _scope.require("ops.dropout")
    if training is None:
        training = b.training
    if not 0 <= rate < 1:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
    if not training or rate == 0:
        return x
    return _core_ops.mul(x if x.is_contiguous else _core_ops.cont(x), b.random_keep_mask(x.shape, float(rate)))


__all__ = sorted(set(_GGML_NAMES) | {
    "as_tensor", "constant", "arange", "permute_axes", "swapaxes", "flatten_rows", "reduce_sum", "reduce_mean",
    "square", "concatenate", "dropout", "shape", "maximum", "minimum", "expand_dims", "squeeze"})
