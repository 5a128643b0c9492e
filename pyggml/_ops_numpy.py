"""Keras's ``keras.ops`` functions over graph tensors, with numpy's axes and
Keras's names, arguments and defaults; ``pyggml.ops`` exports them.

Each is built from ggml operations that have a backward pass (or is marked as
having no gradient: comparisons, ``argmax``, ``sign``, ``zeros_like``), so
they train inside a layer's ``call``, a ``Lambda`` or a loss.  Called outside
a graph on numpy arrays (or Variables), they compute at once and return numpy
arrays, as Keras's ops do eagerly.

ggml tensors have at most 4 dimensions; the functions check shapes and axes
before any ggml call and raise ValueError/TypeError naming what was expected.
Booleans are float tensors of 0 and 1 in a graph (``greater``, ``equal``, ...;
``where`` takes them); on arrays, as Keras's, the comparisons give bool arrays and
the ops that move values keep an integer or bool array's dtype.  A reduction over every axis gives a 1-element tensor inside a
graph.
"""

import builtins
import functools
import inspect

import numpy as np

from pyggml import _logits, _scope, _wide
from pyggml.backend import _GGML_SHORT
from pyggml._tensor_arrays import refuse_tensor_array
from pyggml._validation import axis_index, host, is_int, is_number
from pyggml.core import Tensor
from pyggml.core import ops as _c
from pyggml.variables import Variable, unwrap_name

MAX_DIMS = 4

__all__ = ["mean", "sum", "max", "min", "var", "std", "moments", "argmax", "argmin", "logsumexp", "transpose",
           "reshape", "expand_dims", "squeeze", "stack", "split", "tile", "broadcast_to", "repeat", "take", "one_hot",
           "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "eye", "convert_to_tensor", "maximum",
           "minimum", "clip", "greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
           "logical_and", "logical_or", "logical_not", "power", "negative", "add", "subtract", "multiply", "divide",
           "true_divide", "reciprocal", "rsqrt", "sign", "log1p", "sinh", "cosh", "leaky_relu", "relu6",
           "hard_sigmoid", "hard_swish", "softsign", "selu", "mish", "swish", "log_sigmoid", "softmax",
           "log_softmax", "cumsum", "norm", "dot", "matmul", "concatenate", "getitem", "get_item", "cast",
           "stop_gradient"]

# the names ggml's operations also have: pyggml.ops gives ggml's form to low-level graph code
# (a Tensor outside any model's graph, or ctx=) and this one inside a model's graph or on arrays
SHARED_WITH_GGML = ("sum", "mean", "argmax", "transpose", "reshape", "repeat", "norm", "leaky_relu", "add", "cast",
                    "stop_gradient", "matmul")


# --- tensors, eager calls ----------------------------------------------------------------------------

def _holds_graph_values(x):
    """A list or tuple holding (at any depth) a tensor, a weight or a wide tensor."""
    return any(isinstance(v, (Tensor, Variable, _wide.Wide)) or (isinstance(v, (list, tuple)) and _holds_graph_values(v))
               for v in x)


def _t(x):
    """A Tensor for a Tensor, a Variable or an array/number (a float32 constant); a list of
    tensors is stacked, as Keras's convert_to_tensor (``ops.mean([loss_a, loss_b])``: the
    gradient goes on to each)."""
    x = unwrap_name(x)
    if isinstance(x, Tensor):
        v = _scope.foreign_tape_value(x)         # another tape's tensor while a tape records: its value
        if v is None:
            return x
        t = host_constant(np.asarray(v).reshape(tuple(x.shape)))
        scalars = getattr(_scope.current(), "scalars", None)
        if scalars is not None and np.ndim(v) == 0:
            scalars.add(hash(t))                 # (a 0-d loss of that tape stays 0-d here)
        return t
    if isinstance(x, Variable):
        return x.graph_tensor()
    if isinstance(x, (list, tuple)) and x and _holds_graph_values(x):
        return stack(list(x))
    if isinstance(x, _wide.Wide):
        raise ValueError(f"a tensor of shape {x.shape} ({x.ndim} dimensions) reached an op or a layer that takes "
                         f"at most 4: ggml tensors have at most 4 dimensions, and pyggml carries more inside a call "
                         f"through {_wide._FAMILIES} only; reshape it to at most 4 dimensions first")
    w = _watched(x)
    if w is not None:
        return w
    a = np.asarray(x)
    refuse_tensor_array(a, "pyggml.ops")
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"expected a tensor or real numbers, got {type(x).__name__} of dtype {a.dtype}")
    if a.ndim > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions, got an array of shape {a.shape}")
    return host_constant(a)


def _watched(x):
    """The tensor of an array that the recording GradientTape watches (its gradient is asked
    for), None for any other value."""
    if not isinstance(x, np.ndarray):
        return None
    find = getattr(_scope.current(), "watched_tensor", None)
    return None if find is None else find(x)


def host_constant(a):
    """A constant tensor for array ``a`` in the graph being built (int32 for integers, float32
    otherwise, a bool as float 0/1), remembered with ``a`` itself: the ops below compute on the
    host when every argument is such a constant (shape arithmetic: a causal mask tiled to the
    batch) and ``tile`` takes one as its repeats."""
    a = np.asarray(a)
    b = _scope.require("pyggml.ops")
    kind = "int32" if a.dtype.kind in "iu" else "float32"
    t = b.constant(np.ascontiguousarray(a.reshape(a.shape or (1,)), dtype=np.int32 if kind == "int32"
                                        else np.float32), kind)
    remember_host_value(t, a)
    return t


remember_host_value = _scope.remember_host_value


def host_value(x):
    """x's value when it is known on the host: an array or number, or a constant tensor of
    the graph being built (host_constant's); None for a computed tensor or a Variable."""
    if isinstance(x, Variable) or _watched(x) is not None:
        return None
    if isinstance(x, Tensor):
        cache = getattr(_scope.current(), "cache", None)
        entry = cache.get("host_values", {}).get(id(x)) if isinstance(cache, dict) else None
        return entry[1] if entry is not None and entry[0] is x else None
    a = np.asarray(x)
    return None if a.dtype == object or a.dtype.kind not in "biuf" else a


def _f(x):
    """_t as float32 (ints converted)."""
    t = _t(x)
    return _c.cast(t, "f32") if t.dtype == "i32" else t


def _cont(t):
    return t if t.is_contiguous else _c.cont(t)


def _graph_like(v):
    return isinstance(v, (Tensor, Variable))


def _is_torch(a):
    return type(a).__module__.startswith("torch") and hasattr(a, "detach")


def _torch_free(a):
    if _is_torch(a):
        return np.asarray(host(a))
    if isinstance(a, (list, tuple)) and any(_is_torch(i) for i in a):
        return type(a)(np.asarray(host(i)) if _is_torch(i) else i for i in a)
    return a


def _eager(*tensor_params):
    """Outside a graph, with no Tensor among its arguments, run the op at once on the
    arrays given for ``tensor_params`` (each one array, or a list of arrays)."""
    def deco(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def op(*args, **kwargs):
            if _scope.current() is not None:
                if fn.__name__ in _HOST_FOLD:
                    folded = _fold(fn.__name__, sig.bind(*args, **kwargs), tensor_params)
                    if folded is not None:
                        return folded
                out = fn(*args, **kwargs)
                scalars = getattr(_scope.current(), "scalars", None)
                if scalars is not None and isinstance(out, Tensor) and tuple(out.shape) == (1,):
                    _note_scalar(scalars, fn.__name__, sig.bind(*args, **kwargs).arguments, tensor_params, out)
                return out
            bound = sig.bind(*args, **kwargs)
            values = []
            slots = []
            scalars = False
            for name in tensor_params:
                v = bound.arguments.get(name)
                if v is None:
                    continue
                many = isinstance(v, (list, tuple)) and name in _SEQUENCE_PARAMS
                for k, item in enumerate(v if many else [v]):
                    item = unwrap_name(item)
                    if is_number(item) and not isinstance(item, np.ndarray):
                        scalars = True
                        continue                              # a Python number stays one (power's exponent)
                    tape = _scope.tape_of([item]) if isinstance(item, Tensor) else None
                    if tape is not None:
                        # a GradientTape's tensor after its block: the op is recorded on that tape
                        with _scope.entered(tape):
                            return fn(*args, **kwargs)
                    if isinstance(item, Tensor):
                        return fn(*args, **kwargs)            # a graph tensor outside its graph: fn says so
                    values.append(item.numpy() if isinstance(item, Variable) else np.asarray(host(item)))
                    slots.append((name, k if many else None))

            def rebuilt(*ts):
                arguments = dict(bound.arguments)
                for (name, k), t in zip(slots, ts):
                    if k is None:
                        arguments[name] = t
                    else:
                        arguments[name] = list(arguments[name])
                        arguments[name][k] = t
                return fn(**arguments)
            from pyggml import _eager as eager
            if fn.__name__ in ("equal", "not_equal") and any(a.dtype.kind in "SUO" for a in values):
                # strings compared (tf.equal on a text batch): numpy's answer, element by element
                a, b = (np.asarray(bound.arguments[k]) for k in ("x1", "x2"))
                return (np.equal if fn.__name__ == "equal" else np.not_equal)(a.astype(str), b.astype(str))
            if fn.__name__ in _HOST_LAYOUT and any(a.dtype.kind in "SU" for a in values):
                # strings (a text dataset's batch in a map function) only move: numpy does it
                return _HOST_LAYOUT[fn.__name__](**bound.arguments)
            for a in values:
                if a.dtype == object or a.dtype.kind not in "biuf":
                    raise TypeError(f"{fn.__name__}: expected real numbers, got dtype {a.dtype}")
            if _exact_on_host(fn.__name__, bound.arguments, values, slots):
                # comparisons, and integer or bool arrays moved (pad, tile, take, where, ...): numpy
                # computes them exactly and of Keras's dtype (bool; the integers' own), which ggml's
                # float32 would not
                return _layout_on_host(fn.__name__, bound.arguments, values, _HOST_EXACT)
            if fn.__name__ in _HOST_LAYOUT and (scalars or any(a.ndim == 0 for a in values)):
                # a 0-d operand of an op that moves values (``expand_dims(h, -1)``): ggml has no 0-d
                # tensors, so numpy moves them (float32 for floats, as ggml's)
                return _layout_on_host(fn.__name__, bound.arguments, values)
            out = eager.evaluate(rebuilt, [a.reshape(a.shape or (1,)) for a in values])
            # ggml has no 0-d tensors: numpy's scalars (a reduction over every axis, an op on
            # 0-d arrays) come back of shape (1,), and take numpy's shape () again here
            if _numpy_scalar(fn.__name__, bound, values):
                if isinstance(out, np.ndarray) and out.shape == (1,):
                    out = out.reshape(())
                elif isinstance(out, (list, tuple)) and all(isinstance(o, np.ndarray) and o.shape == (1,) for o in out):
                    out = type(out)(o.reshape(()) for o in out)
            return out
        return op
    return deco


# the element-wise ops whose result on 0-d values (and numbers) is 0-d (_note_scalar)
_ELEMENTWISE = {"add", "subtract", "multiply", "divide", "true_divide", "power", "negative", "maximum", "minimum",
                "clip", "square", "sqrt", "abs", "absolute", "exp", "log", "log1p", "reciprocal", "rsqrt", "sign",
                "floor_divide", "mod", "where", "sinh", "cosh", "leaky_relu", "relu6", "selu", "mish", "swish",
                "softsign", "hard_sigmoid", "hard_swish", "log_sigmoid"}


def _note_scalar(scalars, name, arguments, tensor_params, out):
    """In a GradientTape: note ``out`` (shape (1,)) as Keras's 0-d value when it is one: a
    reduction over every axis, or an element-wise op of such values and numbers."""
    if name in _REDUCTIONS:
        if arguments.get("axis") is None and not arguments.get("keepdims", False):
            scalars.add(hash(out))
        return
    if name not in _ELEMENTWISE:
        return                                   # (a reshape, a cumsum of a scalar: the shape asked for)
    items = [arguments[p] for p in tensor_params if arguments.get(p) is not None]
    if any(isinstance(v, Tensor) for v in items) and all(
            (isinstance(v, Tensor) and hash(v) in scalars) or
            (not isinstance(v, (Tensor, Variable, list, tuple)) and np.ndim(v) == 0) for v in items):
        scalars.add(hash(out))


def _layout_on_host(name, arguments, inputs, table=None):
    def value(v):
        if isinstance(v, Variable):
            return v.numpy()
        return [value(e) for e in v] if isinstance(v, (list, tuple)) else v
    out = (table or _HOST_LAYOUT)[name](**{k: value(v) for k, v in arguments.items()})

    def typed(a):
        # Keras's dtypes: a bool stays bool, an integer array's dtype is kept (Python ints alone give
        # int32), floats are float32 (pyggml's one float type)
        a = np.asarray(a)
        if a.dtype.kind == "b" or (a.dtype.kind in "iu" and any(v.dtype == a.dtype for v in inputs)):
            return np.ascontiguousarray(a)
        return np.array(a, dtype=np.int32 if a.dtype.kind in "iu" else np.float32, order="C")
    return [typed(o) for o in out] if isinstance(out, list) else typed(out)


def _exact_on_host(name, arguments, values, slots):
    """True where an op on arrays is numpy's (_HOST_EXACT): a comparison, or an op that only moves
    values whose moved arrays (where's condition aside) are all integers or bools."""
    if name not in _HOST_EXACT or any(isinstance(v, Tensor) for v in arguments.values()):
        return False
    if name in _HOST_BOOL:
        return True
    if name == "where" and (arguments.get("x1") is None or arguments.get("x2") is None):
        return False                     # the one-argument form: where itself says it is not built
    if name == "where":
        # Python ints or integer arrays picked from (``where(c, 1, 0)``): Keras's result is int32
        return all((is_int(v) and not isinstance(v, bool)) or (isinstance(v, np.ndarray) and v.dtype.kind in "biu")
                   for v in (arguments["x1"], arguments["x2"]))
    moved = [a for a, (p, _) in zip(values, slots) if p != "condition"]
    return bool(moved) and all(a.dtype.kind in "biu" for a in moved)


_REDUCTIONS = {"mean", "sum", "max", "min", "var", "std", "logsumexp", "argmax", "argmin", "norm", "moments"}
_ALWAYS_SCALAR = {"psnr"}           # one number of all the values, whatever the shape


def _numpy_scalar(name, bound, values):
    """True where numpy gives a 0-d result: every argument a number or a 0-d array, or a
    reduction over every axis without keepdims."""
    if all(a.ndim == 0 for a in values) or name in _ALWAYS_SCALAR:
        return True
    if name not in _REDUCTIONS or bound.arguments.get("keepdims", False):
        return False
    axis = bound.arguments.get("axes" if name == "moments" else "axis")
    if axis is None:
        return True
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return len({int(a) % values[0].ndim for a in axes if is_int(a)}) == values[0].ndim


_SEQUENCE_PARAMS = {"xs", "tensors"}


def _fold(name, bound, tensor_params):
    """Inside a graph, the op computed on the host (numpy) when every tensor argument is
    known there (host_value): a new constant remembered with its value; None otherwise."""
    arguments = dict(bound.arguments)
    for p in tensor_params:
        v = arguments.get(p)
        if v is None:
            continue
        many = isinstance(v, (list, tuple)) and p in _SEQUENCE_PARAMS
        vals = [host_value(e) for e in (v if many else [v])]
        if any(h is None for h in vals):
            return None
        arguments[p] = vals if many else vals[0]
    for k, v in arguments.items():
        if isinstance(v, (Tensor, Variable)):         # tile's repeats, take's indices
            known = host_value(v)
            if known is None:
                return None
            arguments[k] = known
    out = _HOST_FOLD[name](**arguments)

    def constant(a):                 # (five dimensions or more: a wide constant, pyggml._wide)
        return wide_constant(a) if np.ndim(a) > MAX_DIMS else host_constant(a)
    if isinstance(out, list):
        return [constant(o) for o in out]
    return constant(out)

# the ops that only rearrange values, on arrays of strings (Keras's TensorFlow backend takes them,
# as text pipelines call them on string batches): numpy's, with the arguments named as ours
_HOST_LAYOUT = {
    "transpose": lambda x, axes=None: np.transpose(x, axes),
    "reshape": lambda x, newshape: np.reshape(x, newshape),
    "expand_dims": lambda x, axis: np.expand_dims(x, axis),
    "squeeze": lambda x, axis=None: np.squeeze(x, axis),
    "concatenate": lambda tensors, axis=-1: np.concatenate(tensors, axis),
    "stack": lambda xs, axis=0: np.stack(xs, axis),
    "split": lambda x, indices_or_sections, axis=0: np.split(x, indices_or_sections, axis),
    "broadcast_to": lambda x, shape: np.broadcast_to(x, shape).copy(),
    "tile": lambda x, repeats: np.tile(x, repeats),
    "repeat": lambda x, repeats, axis=None: np.repeat(x, repeats, axis),
    "take": lambda x, indices, axis=None: np.take(x, indices, axis),
}



def _pad_on_host(x, pad_width, mode="constant", constant_values=None):
    if mode not in ("constant", "reflect", "symmetric"):
        raise ValueError(f"pad: mode must be one of ('constant', 'reflect', 'symmetric'), got {mode!r}")
    if constant_values is not None and mode != "constant":
        raise ValueError(f"pad: constant_values is only for mode='constant', got mode={mode!r}")
    fill = {} if constant_values is None else {"constant_values": constant_values}
    return np.pad(x, pad_width, mode=mode, **fill)


# what a graph computes on the host when every argument is known there (shape arithmetic)
_HOST_FOLD = dict(_HOST_LAYOUT)
_HOST_FOLD.update({
    "greater": lambda x1, x2: np.greater(x1, x2),
    "greater_equal": lambda x1, x2: np.greater_equal(x1, x2),
    "less": lambda x1, x2: np.less(x1, x2),
    "less_equal": lambda x1, x2: np.less_equal(x1, x2),
    "equal": lambda x1, x2: np.equal(x1, x2),
    "not_equal": lambda x1, x2: np.not_equal(x1, x2),
    "logical_and": lambda x1, x2: np.logical_and(x1, x2),
    "logical_or": lambda x1, x2: np.logical_or(x1, x2),
    "logical_not": lambda x: np.logical_not(x),
    "maximum": lambda x1, x2: np.maximum(x1, x2),
    "minimum": lambda x1, x2: np.minimum(x1, x2),
})

# on arrays: the comparisons (Keras's give bool; in a graph they are float 0/1) and, for integer and
# bool arrays, the ops that only move values, computed by numpy (_exact_on_host)
_HOST_BOOL = {"greater", "greater_equal", "less", "less_equal", "equal", "not_equal", "logical_and",
              "logical_or", "logical_not"}
_HOST_EXACT = dict(_HOST_LAYOUT, pad=_pad_on_host,
                   where=lambda condition, x1=None, x2=None: np.where(condition, x1, x2),
                   **{n: _HOST_FOLD[n] for n in _HOST_BOOL})


_axis = axis_index


def _axes(axis, ndim, what):
    """A sorted tuple of axes (all for None)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (Tensor, np.ndarray)):
        # axes as a tensor known on the host (TensorFlow's ops.sum(x, axis=ops.arange(1, rank)))
        known = host_value(axis) if isinstance(axis, Tensor) else axis
        if known is None or np.asarray(known).dtype.kind not in "iu" or np.ndim(known) > 1:
            raise TypeError(f"{what}: axis must be an int, ints, or a constant tensor of ints, got {axis!r}")
        axis = tuple(int(a) for a in np.asarray(known).reshape(-1))
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    out = sorted({_axis(a, ndim, what) for a in axes})
    if len(out) != len(axes):
        raise ValueError(f"{what}: repeated axis in {axis!r}")
    return tuple(out)


def _permute(x, axes):
    r = len(x.shape)
    axes = tuple(axes)
    if axes == tuple(range(r)):
        return x
    dest = list(range(4))
    for i, p in enumerate(axes):
        dest[r - 1 - p] = r - 1 - i
    return _c.cont(_c.permute(x, dest))


def _to_last(x, axes):
    """x with ``axes`` moved to the end and merged into one: (rest..., n), and the rest's shape."""
    r = len(x.shape)
    rest = [i for i in range(r) if i not in axes]
    moved = _permute(x, rest + list(axes))
    kept = tuple(x.shape[i] for i in rest)
    n = int(np.prod([x.shape[i] for i in axes]))
    return _c.reshape(_cont(moved), (int(np.prod(kept)) if kept else 1, n)), kept


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return out or (1,)


def _reduce(x, axis, keepdims, what, kind):
    x = _f(x)
    axes = _axes(axis, len(x.shape), what)
    if kind == "sum" and axis is None and not keepdims:
        return _c.sum(_cont(x))
    rows, _ = _to_last(x, axes)                     # (m, n)
    n = rows.shape[1]
    if kind in ("sum", "mean"):
        y = _c.sum_rows(rows)
        if kind == "mean":
            y = _c.scale(y, 1.0 / n)
    else:                                            # max / min: a max pool over each row (it has a backward)
        src = _c.neg(rows) if kind == "min" else rows
        y = _c.pool_2d(_c.reshape(src, (1, 1, rows.shape[0], n)), "max", n, 1, n, 1)
        y = _c.reshape(y, (rows.shape[0], 1))
        if kind == "min":
            y = _c.neg(y)
    return _c.reshape(_cont(y), _reduced_shape(x.shape, axes, keepdims))


# --- reductions ----------------------------------------------------------------------------------------

@_eager("x")
def sum(x, axis=None, keepdims=False):
    """The sum over ``axis`` (an int, a tuple, or None: all)."""
    return _reduce(x, axis, keepdims, "sum", "sum")


@_eager("x")
def mean(x, axis=None, keepdims=False):
    """The mean over ``axis`` (an int, a tuple, or None: all)."""
    return _reduce(x, axis, keepdims, "mean", "mean")


@_eager("x")
def max(x, axis=None, keepdims=False, initial=None):
    """The largest value over ``axis``; its gradient goes to the (first) largest entry."""
    y = _reduce(x, axis, keepdims, "max", "max")
    return y if initial is None else maximum(y, initial)


@_eager("x")
def min(x, axis=None, keepdims=False, initial=None):
    """The smallest value over ``axis``."""
    y = _reduce(x, axis, keepdims, "min", "min")
    return y if initial is None else minimum(y, initial)


@_eager("x")
def var(x, axis=None, keepdims=False):
    """The variance (population) over ``axis``."""
    x = _f(x)
    centred = x - _reduce(x, axis, True, "var", "mean")
    return _reduce(_c.sqr(_cont(centred)), axis, keepdims, "var", "mean")


_TINY = 1e-30
_SQRT_TINY = float(np.sqrt(np.float32(_TINY)))


def _sqrt_of_sum(v):
    """sqrt(v) of a sum of squares (v >= 0) whose gradient at v = 0 is 0, not 0 * inf = NaN
    (a norm or std of zeros, as PyTorch's): sqrt(v + tiny) - sqrt(tiny), exact at 0."""
    return _c.scale_bias(_cont(_c.sqrt(_c.scale_bias(_cont(v), 1.0, _TINY))), 1.0, -_SQRT_TINY)


@_eager("x")
def std(x, axis=None, keepdims=False):
    """The standard deviation (population) over ``axis``."""
    return _sqrt_of_sum(var(x, axis, keepdims))


@_eager("x")
def moments(x, axes, keepdims=False, synchronized=False):
    """(mean, variance) over ``axes``."""
    return mean(x, axes, keepdims), var(x, axes, keepdims)


@_eager("x")
def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over ``axis``, computed stably (the largest value taken out first)."""
    x = _f(x)
    m = _reduce(x, axis, True, "logsumexp", "max")
    s = _reduce(_c.exp(_cont(x - m)), axis, True, "logsumexp", "sum")
    y = _c.log(s) + m
    axes = _axes(axis, len(x.shape), "logsumexp")
    return y if keepdims else _c.reshape(_cont(y), _reduced_shape(x.shape, axes, False))


def _arg(x, axis, keepdims, what, smallest):
    x = _f(x)
    r = len(x.shape)
    if axis is None:
        rows = _c.reshape(_cont(x), (1, int(np.prod(x.shape))))
        out_shape = (1,) * r if keepdims else (1,)
    else:
        ax = _axis(axis, r, what)
        rows, _ = _to_last(x, (ax,))
        out_shape = _reduced_shape(x.shape, (ax,), keepdims)
    idx = _c.argmax(_c.neg(rows) if smallest else rows)
    return _c.reshape(idx, out_shape)


@_eager("x")
def argmax(x, axis=None, keepdims=False):
    """The index of the largest value along ``axis`` (of the flattened tensor for None);
    int32, no gradient."""
    return _arg(x, axis, keepdims, "argmax", False)


@_eager("x")
def argmin(x, axis=None, keepdims=False):
    """The index of the smallest value along ``axis``; int32, no gradient."""
    return _arg(x, axis, keepdims, "argmin", True)


# --- shapes --------------------------------------------------------------------------------------------

def _check_dims(shape, what):
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{what}: ggml tensors have at most {MAX_DIMS} dimensions, the result would have "
                         f"shape {tuple(shape)}")


MAX_CONSTANT = 2 ** 30     # values: a constant past this (4 GiB) is refused before numpy fills it


def _check_size(shape, what):
    n = 1
    for d in shape:
        n *= int(d)
    if n > MAX_CONSTANT:
        raise ValueError(f"{what}: a result of shape {tuple(shape)} ({n} values) is too large "
                         f"(at most 2**30 values)")


@_eager("x")
def transpose(x, axes=None):
    """numpy's transpose: the axes reversed, or in the order ``axes``."""
    x = _t(x)
    r = len(x.shape)
    if axes is None:
        axes = tuple(reversed(range(r)))
    if not isinstance(axes, (list, tuple)) or \
            sorted(int(a) % r if is_int(a) and -r <= int(a) < r else -1 for a in axes) != list(range(r)):
        raise ValueError(f"transpose: axes must be a permutation of {r} axes (each in [-{r}, {r})), got {axes!r}")
    return _permute(x, tuple(int(a) % r for a in axes))


@_eager("x")
def reshape(x, newshape):
    """numpy's reshape; one entry may be -1 (worked out from the others)."""
    x = _t(x)
    newshape = _dim_value(newshape)
    shape = (newshape,) if is_int(newshape) else tuple(_dim_value(d) for d in newshape)
    if not all(is_int(d) and (d > 0 or d == -1) for d in shape) or list(shape).count(-1) > 1:
        raise ValueError(f"reshape: the new shape must be positive ints with at most one -1, got {newshape!r}")
    n = x.nelements
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        if known == 0 or n % known:
            raise ValueError(f"reshape: cannot reshape {tuple(x.shape)} ({n} values) into {tuple(newshape)}")
        shape = tuple(n // known if d == -1 else int(d) for d in shape)
    if int(np.prod(shape)) != n:
        raise ValueError(f"reshape: cannot reshape {tuple(x.shape)} ({n} values) into {tuple(shape)}")
    if len(shape) > MAX_DIMS:
        return _wide.Wide(_cont(x), shape)           # five dimensions or more: pyggml._wide
    return _c.reshape(_cont(x), tuple(int(d) for d in shape))


@_eager("x")
def expand_dims(x, axis):
    """A new axis of length 1 at ``axis`` (a tuple of them: numpy's, each counted in the result)."""
    x = _t(x)
    r = len(x.shape)
    if isinstance(axis, (tuple, list)):
        out = r + len(axis)
        new = sorted(_axis(a, out, "expand_dims") for a in axis)
        if len(set(new)) != len(new):
            raise ValueError(f"expand_dims: axis {tuple(axis)} repeats an axis")
        rest = iter(x.shape)
        shape = [1 if i in new else next(rest) for i in range(out)]
    else:
        ax = _axis(axis, r + 1, "expand_dims")
        shape = list(x.shape)
        shape.insert(ax, 1)
    if len(shape) > MAX_DIMS:
        return _wide.Wide(_cont(x), shape)
    return _c.reshape(_cont(x), tuple(shape))


@_eager("x")
def squeeze(x, axis=None):
    """The axes of length 1 removed (``axis``: only those, which must be of length 1)."""
    x = _t(x)
    r = len(x.shape)
    if axis is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    else:
        axes = list(_axes(axis, r, "squeeze"))
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise ValueError(f"squeeze: axis {bad[0]} of {tuple(x.shape)} is not of length 1")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes) or (1,)
    return _c.reshape(_cont(x), shape)


def _swap_last(t, ax):
    r = len(t.shape)
    if ax == r - 1:
        return t
    order = list(range(r))
    order[ax], order[r - 1] = order[r - 1], order[ax]
    return _permute(t, order)


def _concat_tree(xs, dim):
    """ggml's concat of several tensors along ggml dim ``dim``, in a balanced tree
    (each value is copied log2(len(xs)) times, not once per later tensor)."""
    xs = list(xs)
    while len(xs) > 1:
        joined = [_c.concat(a, b, dim) for a, b in zip(xs[0::2], xs[1::2])]
        if len(xs) % 2:
            joined.append(xs[-1])
        xs = joined
    return xs[0]


@_eager("tensors")
def concatenate(tensors, axis=-1):
    """Join tensors along ``axis`` (numpy's).  On the CPU, ggml's concat (pyggml's
    patches give it a backward pass); elsewhere a sum of products with constant 0/1
    placement matrices (ops every backend trains)."""
    xs = [_t(t) for t in tensors]
    if len(xs) < 2:
        raise ValueError("concatenate needs at least two tensors")
    if len({t.dtype for t in xs}) > 1:
        xs = [_c.cast(t, "f32") if t.dtype == "i32" else t for t in xs]     # ints with floats: float32
    r = len(xs[0].shape)
    if any(len(t.shape) != r for t in xs):
        raise ValueError(f"concatenate: tensors of different ranks {[t.shape for t in xs]}")
    ax = _axis(axis, r, "concatenate")
    for t in xs[1:]:
        if any(t.shape[i] != xs[0].shape[i] for i in range(r) if i != ax):
            raise ValueError(f"concatenate: shapes {[t.shape for t in xs]} differ outside axis {axis}")
    if _scope.fused():
        return _concat_tree(xs, r - 1 - ax)
    xs = [_swap_last(t, ax) for t in xs]
    total = builtins.sum(int(t.shape[-1]) for t in xs)
    y, off = None, 0
    for t in xs:
        f = int(t.shape[-1])
        place = np.zeros((total, f), dtype=np.float32)
        place[off + np.arange(f), np.arange(f)] = 1.0
        rows = _c.reshape(_cont(t), (int(np.prod(t.shape[:-1])) if len(t.shape) > 1 else 1, f))
        part = _c.mul_mat(_t(place), rows)
        y = part if y is None else _c.add(y, part)
        off += f
    y = _c.reshape(y, tuple(xs[0].shape[:-1]) + (total,))
    return _swap_last(y, ax)


@_eager("xs")
def stack(xs, axis=0):
    """Tensors of one shape joined along a new axis."""
    xs = [_t(v) for v in xs]
    if not xs:
        raise ValueError("stack needs at least one tensor")
    shape = tuple(xs[0].shape)
    if any(tuple(v.shape) != shape for v in xs):
        raise ValueError(f"stack: tensors of different shapes {[tuple(v.shape) for v in xs]}")
    scalars = getattr(_scope.current(), "scalars", None)
    if scalars is not None and shape == (1,) and is_int(axis) and axis in (0, -1) and \
            all(hash(v) in scalars for v in xs):
        return concatenate(xs, axis=0) if len(xs) > 1 else _c.cont(xs[0])   # a tape's 0-d values: (n,)
    ax = _axis(axis, len(shape) + 1, "stack")
    if len(shape) + 1 > MAX_DIMS:
        return _wide.stack(xs, ax, concatenate)
    parts = [expand_dims(v, ax) for v in xs]
    if len(parts) == 1:
        return parts[0]
    return concatenate(parts, axis=ax)


@_eager("x")
def split(x, indices_or_sections, axis=0):
    """numpy's split along ``axis``: into equal sections (an int) or at the indices given."""
    x = _t(x)
    r = len(x.shape)
    ax = _axis(axis, r, "split")
    n = x.shape[ax]
    if is_int(indices_or_sections):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(f"split: {n} entries along axis {axis} do not split into {k} equal sections")
        cuts = [n // k * i for i in range(1, k)]
    else:
        cuts = [int(c) for c in indices_or_sections]
        if any(not 0 <= c <= n for c in cuts) or cuts != sorted(cuts):
            raise ValueError(f"split: indices must be increasing and within [0, {n}], got {indices_or_sections!r}")
    bounds = [0] + cuts + [n]
    moved = _permute(x, [ax] + [i for i in range(r) if i != ax]) if ax else _cont(x)
    rest = tuple(moved.shape[1:])
    flat = _c.reshape(moved, (n, int(np.prod(rest)) if rest else 1))
    back = [i for i in range(1, r)]
    back.insert(ax, 0)
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi == lo:
            raise ValueError("split: an empty section (ggml has no empty tensors)")
        part = _c.cont(_c.view(flat, (hi - lo, flat.shape[1]), offset=lo * flat.shape[1] * 4))
        part = _c.reshape(part, (hi - lo,) + rest)
        out.append(_permute(part, back) if ax else part)
    return out


@_eager("x")
def broadcast_to(x, shape):
    """x repeated along its axes of length 1 (and new leading axes) to ``shape``."""
    x = _f(x)
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_DIMS:
        return _wide.broadcast(x, shape, broadcast_to)
    src = tuple(x.shape)
    if len(src) > len(shape) or any(s not in (1, d) for s, d in zip(src[::-1], shape[::-1])):
        raise ValueError(f"broadcast_to: cannot broadcast {src} to {shape}")
    lifted = _c.reshape(_cont(x), (1,) * (len(shape) - len(src)) + src)
    if tuple(lifted.shape) == shape:
        return lifted
    target = _scope.require("broadcast_to").ctx.new_tensor(shape)
    return _c.repeat(lifted, target)


@_eager("x")
def tile(x, repeats):
    """numpy's tile: x repeated ``repeats`` times along each axis."""
    x = _f(x)
    if isinstance(repeats, (Tensor, Variable)):
        known = host_value(repeats)
        if known is None:
            raise ValueError("tile: repeats must be known when the graph is built (ints, or a tensor made from "
                             "shapes and constants), got a computed tensor")
        repeats = [int(k) for k in np.ravel(known)]
    repeats = _dim_value(repeats)
    reps = (repeats,) if is_int(repeats) else tuple(_dim_value(k) for k in repeats)
    if not all(is_int(k) and k >= 1 for k in reps):
        raise ValueError(f"tile: repeats must be positive ints, got {repeats!r}")
    r = builtins.max(len(reps), len(x.shape))
    _check_dims((1,) * (r - len(x.shape)) + tuple(x.shape), "tile")
    reps = (1,) * (r - len(reps)) + tuple(int(k) for k in reps)
    y = _c.reshape(_cont(x), (1,) * (r - len(x.shape)) + tuple(x.shape))
    for ax, k in enumerate(reps):
        if k == 1:
            continue
        shape = list(y.shape)
        # the block from this axis on, repeated k times after itself for each index before it:
        # (before, 1, block) broadcast to (before, k, block), then merged (at most 3 dims between)
        before = int(np.prod(shape[:ax])) if ax else 1
        block = int(np.prod(shape[ax:]))
        grown = broadcast_to(_c.reshape(_cont(y), (before, 1, block)), (before, k, block))
        shape[ax] *= k
        y = _c.reshape(_cont(grown), tuple(shape))
    return y


@_eager("x")
def repeat(x, repeats, axis=None):
    """numpy's repeat: each entry ``repeats`` times along ``axis`` (of the flattened
    tensor for None); ``repeats`` an int, a one-element list (the same) or one count per
    entry along the axis.  With a Tensor as the second argument this is ggml's repeat
    (x broadcast to that tensor's shape), as before."""
    if isinstance(repeats, Tensor):
        return _c.repeat(_t(x), repeats)
    counts = _repeat_counts(repeats)
    x = _f(x)
    if axis is None:
        x = _c.reshape(_cont(x), (x.nelements,))
        axis = 0
    r = len(x.shape)
    ax = _axis(axis, r, "repeat")
    shape = list(x.shape)
    if is_int(counts) and r + 1 > MAX_DIMS:
        counts = [counts] * shape[ax]     # 4 dims: no room to broadcast a new axis, so rows are picked
    if not is_int(counts):
        # a count per entry: the entries picked by index (np.repeat of their positions)
        if len(counts) != shape[ax]:
            raise ValueError(f"repeat: {len(counts)} counts for an axis of length {shape[ax]} (give one count, "
                             f"or one per entry)")
        picks = np.repeat(np.arange(shape[ax]), counts)
        if picks.size == 0:
            raise ValueError("repeat: every count is 0; the result would be empty (ggml has no empty tensors)")
        return take(x, picks, axis=ax)
    k = counts
    inner = shape[:ax + 1] + [1] + shape[ax + 1:]
    _check_dims(inner, "repeat")
    grown = broadcast_to(_c.reshape(_cont(x), tuple(inner)), tuple(shape[:ax + 1] + [k] + shape[ax + 1:]))
    shape[ax] *= k
    return _c.reshape(_cont(grown), tuple(shape))


def _repeat_counts(repeats):
    """repeat's counts: an int >= 1, or a list of ints >= 0 (one per entry); a one-element list
    or array is its one count, as numpy broadcasts it."""
    if isinstance(repeats, Variable):
        raise TypeError("repeat: repeats must be known when the graph is built (ints), got a Variable")
    if is_int(repeats):
        counts = int(repeats)
    else:
        a = np.asarray(repeats)
        if a.dtype == object or a.dtype.kind not in "iu" or a.ndim > 1:
            raise ValueError(f"repeat: repeats must be an int or a list of ints, got {repeats!r}")
        if a.size and a.min() < 0:
            raise ValueError(f"repeat: repeats must not be negative, got {repeats!r}")
        if a.size == 1:
            counts = int(a.reshape(()))
        else:
            return [int(k) for k in a]
    if counts < 1:
        raise ValueError(f"repeat: repeats must be a positive int (the result would be empty), got {repeats!r}")
    return counts


def _indices(indices, what):
    if isinstance(indices, Tensor):
        if indices.dtype != "i32":
            raise TypeError(f"{what}: indices must be an int32 tensor, got {indices.dtype}")
        return indices
    a = np.asarray(indices)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what}: indices must be integers, got dtype {a.dtype}")
    return _t(a.astype(np.int32))


@_eager("x")
def take(x, indices, axis=None):
    """numpy's take: the entries of x at ``indices`` along ``axis`` (of the flattened x for
    None).  Indices outside the axis are refused when they are known (arrays)."""
    x = _f(x)
    if axis is None:
        x = _c.reshape(_cont(x), (x.nelements,))
        axis = 0
    r = len(x.shape)
    ax = _axis(axis, r, "take")
    n = x.shape[ax]
    if not isinstance(indices, Tensor):
        a = np.asarray(indices)
        if a.dtype.kind in "iu" and a.size and (a.min() < -n or a.max() >= n):
            raise IndexError(f"take: an index is outside [-{n}, {n}) along axis {axis}")
        if a.dtype.kind in "iu":
            indices = np.where(a < 0, a + n, a)
    idx = _indices(indices, "take")
    ishape = tuple(idx.shape) if not (isinstance(indices, np.ndarray) and indices.ndim == 0) else ()
    moved = _permute(x, [ax] + [i for i in range(r) if i != ax]) if ax else _cont(x)
    rest = tuple(moved.shape[1:])
    table = _c.reshape(moved, (n, int(np.prod(rest)) if rest else 1))
    flat_idx = _c.reshape(_cont(idx), (idx.nelements,))
    try:
        rows = _c.get_rows(table, flat_idx)
    except ValueError as e:
        if "cannot be checked" not in str(e):
            raise
        # indices computed in the graph (an integer Variable reshaped, ids arithmetic): a one-hot
        # product picks the rows, which ggml cannot read out of range (an index outside gives zeros)
        rows = matmul(one_hot(flat_idx, n), table)
    out = ishape + rest
    _check_dims(out, "take")
    y = _c.reshape(rows, out or (1,))
    if ax == 0 or not out:
        return y
    # the indexed axes sit first; numpy puts them at ax
    k = len(ishape)
    order = list(range(k, k + ax)) + list(range(k)) + list(range(k + ax, len(out)))
    return _permute(y, order)


@_eager()
def one_hot(x, num_classes, axis=-1, dtype="float32", sparse=False):
    """Class indices as one-hot rows (a new last axis of ``num_classes``); floats holding
    whole numbers are taken as Keras casts them; an index outside [0, num_classes) gives a
    row of zeros."""
    if not is_int(num_classes) or num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be a positive int, got {num_classes!r}")
    if not is_int(axis):
        raise TypeError(f"one_hot: axis must be an int, got {axis!r}")
    if axis != -1:
        # the classes at another axis: made last, then moved there (Keras's one_hot(x, k, axis=1))
        r = len(x.shape) if isinstance(x, (Tensor, Variable)) else np.ndim(x)
        ax = _axis(axis, r + 1, "one_hot")
        hot = one_hot(x, num_classes, -1, dtype, sparse)
        if ax == r:
            return hot
        order = list(range(r))
        order.insert(ax, r)
        return transpose(hot, order)
    if sparse:
        raise ValueError("one_hot: sparse=True is not available (pyggml's tensors are dense)")
    if isinstance(x, Variable):
        x = x.graph_tensor()
    if not isinstance(x, Tensor):
        a = np.asarray(x)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"one_hot: class indices must be numbers, got dtype {a.dtype}")
        if a.dtype.kind == "f":
            # Keras casts float indices to int: whole numbers (a float Input's ids) are taken
            finite = np.isfinite(a)
            fractional = a[finite & (np.trunc(np.where(finite, a, 0.0)) != a)]
            if fractional.size:
                raise TypeError("one_hot: class indices must be integers (or floats holding whole numbers), "
                                f"got {fractional.ravel()[:3].tolist()}")
            a = np.clip(np.where(finite, a, -1.0), -1.0, num_classes).astype(np.int64)
        x = np.where((a < 0) | (a >= num_classes), -1, a)
    if isinstance(x, Tensor) and x.dtype == "f32":
        # a float tensor of class ids (a float Input): its values compared with the classes (a
        # value that is no whole number matches none, as Keras's JAX backend)
        col, shape = x, tuple(x.shape)
    else:
        idx = _indices(x, "one_hot")
        shape = tuple(idx.shape) if not (isinstance(x, np.ndarray) and x.ndim == 0) else ()
        col = _c.cast(_cont(idx), "f32")
    _check_dims(shape + (num_classes,), "one_hot")
    _check_size(shape + (num_classes,), "one_hot")
    # each index compared with 0..num_classes-1 (no num_classes x num_classes table: a
    # vocabulary of 50,000 would need 10 GB); an index outside the range matches nothing
    col = _c.reshape(_cont(col), shape + (1,))
    return equal(col, _t(np.arange(num_classes, dtype=np.float32)))


def _dim_value(d):
    """A shape entry as Keras code makes it: an int, or a 0-d integer array (ops.cast(ops.shape(x)[0],
    "int32") computes at once)."""
    if isinstance(d, (np.ndarray, np.generic)) and np.ndim(d) == 0 and np.asarray(d).dtype.kind in "iu":
        return int(d)
    return d


def _fill_kind(dtype, what):
    """float32 or int32 for a Keras dtype (float64, int64, ... as ggml holds them)."""
    if dtype is None:
        return "float32"
    kind, _ = _dtype_kind(dtype, what)
    return "int32" if kind == "int" else "float32"


def _shape_arg(shape, what, scalar=False):
    """A shape of positive ints; ``()`` too with ``scalar`` (a 0-d array)."""
    shape = (_dim_value(shape),) if is_int(_dim_value(shape)) else tuple(_dim_value(d) for d in shape)
    if (not shape and not scalar) or not all(is_int(d) and d > 0 for d in shape):
        raise ValueError(f"{what}: shape must be positive ints, got {shape!r}")
    _check_dims(shape, what)
    return tuple(int(d) for d in shape)


def _filled(shape, value, dtype, what):
    kind = _fill_kind(dtype, what)
    if isinstance(value, (str, bytes)) or np.asarray(value).dtype.kind not in "biuf":
        raise TypeError(f"{what}: fill_value must be a number (or an array of numbers), got {value!r}")
    shape = _shape_arg(shape, what, scalar=True)
    _check_size(shape, what)
    a = np.full(shape, value, dtype=np.int32 if kind == "int32" else np.float32)
    if _scope.current() is None or not shape:
        return a        # a 0-d value stays on the host in a graph too (ggml has no 0-d tensors)
    return _scope.current().constant(a, kind)


def zeros(shape, dtype=None):
    return _filled(shape, 0, dtype, "zeros")


def ones(shape, dtype=None):
    return _filled(shape, 1, dtype, "ones")


def full(shape, fill_value, dtype=None):
    return _filled(shape, fill_value, dtype, "full")


def eye(N, M=None, k=0, dtype=None):
    if dtype not in (None, "float32", "int32"):
        raise ValueError(f"eye: dtype must be 'float32' or 'int32', got {dtype!r}")
    shape = _shape_arg((N, N if M is None else M), "eye")
    if not is_int(k):
        raise TypeError(f"eye: k (the diagonal's offset) must be an int, got {k!r}")
    _check_size(shape, "eye")
    a = np.eye(shape[0], shape[1], int(k), dtype=np.float32)
    return a if _scope.current() is None else _scope.current().constant(a, dtype or "float32")


def zeros_like(x, dtype=None):
    """Zeros of x's shape (a constant: no gradient)."""
    return _filled_like(x, 0, dtype, "zeros_like")


def ones_like(x, dtype=None):
    return _filled_like(x, 1, dtype, "ones_like")


def full_like(x, fill_value, dtype=None):
    return _filled_like(x, fill_value, dtype, "full_like")


def _filled_like(x, value, dtype, what):
    if dtype is None and _scope.current() is None and not _graph_like(x):
        a = np.asarray(x)
        if a.dtype.kind in "biu":
            # an integer or bool array gives its own dtype, as Keras's (float32 otherwise)
            if isinstance(value, (str, bytes)) or np.asarray(value).dtype.kind not in "biuf":
                raise TypeError(f"{what}: fill_value must be a number (or an array of numbers), got {value!r}")
            return np.full(a.shape, value, dtype=a.dtype)
    return _filled(_shape_of(x), value, dtype, what)


def _shape_of(x):
    if isinstance(x, Tensor):
        return tuple(x.shape)
    if isinstance(x, Variable):
        return tuple(x.shape)
    return tuple(np.shape(x))           # () for a number: a 0-d result, as numpy's


def convert_to_tensor(x, dtype=None, sparse=None):
    """A graph tensor for x inside a graph (a constant for arrays), the array outside."""
    if _scope.current() is None:
        if dtype is None and not isinstance(x, (np.ndarray, np.generic, Variable)):
            # Python numbers and lists of them take Keras's default dtypes, int32 and float32 (numpy
            # would make them int64 and float64); arrays keep theirs
            a = np.asarray(host(x))
            kind = a.dtype.kind
            return a.astype(np.int32) if kind in "iu" and a.dtype.itemsize > 4 else \
                a.astype(np.float32) if kind == "f" and a.dtype.itemsize > 4 else a
        return np.asarray(x.numpy() if isinstance(x, Variable) else x, dtype=dtype)
    if isinstance(x, (list, tuple)) and x and _holds_graph_values(x):
        pass                                         # tensors in a list: stacked by _t
    elif isinstance(x, (np.ndarray, list, tuple)) and np.ndim(x) > MAX_DIMS and _watched(x) is None:
        return wide_constant(x, dtype)               # five dimensions or more (a window mask): pyggml._wide
    t = _t(x)
    if dtype is not None and dtype in ("float32", "int32"):
        want = "f32" if dtype == "float32" else "i32"
        return t if t.dtype == want else _c.cast(t, want)
    return t


def wide_constant(a, dtype=None):
    """A constant of the graph being built for an array of more than four dimensions: one ggml
    tensor holding its values, with its shape (pyggml._wide)."""
    a = np.asarray(a)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"expected real numbers, got dtype {a.dtype}")
    if dtype is not None and str(dtype).startswith("float"):
        a = a.astype(np.float32)
    _check_size(a.shape, "a constant")
    return _wide.Wide(host_constant(np.ascontiguousarray(a).reshape(-1)), a.shape)


# --- elementwise ---------------------------------------------------------------------------------------

def _pair(x, y):
    a, b = _f(x), _f(y)
    return a, b


def _whole(v):
    """An operand of whole numbers: an int32 tensor or weight, a Python or numpy int, an array
    of ints (bools are not)."""
    if isinstance(v, Tensor):
        return v.dtype == "i32"
    if isinstance(v, Variable):
        return str(v.dtype).startswith(("int", "uint"))
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (int, np.integer)):
        return True
    return isinstance(v, np.ndarray) and v.dtype.kind in "iu"


def _as_whole(out, *operands):
    """out as int32 where every operand is whole (Keras's result dtype: int32 + 1 is int32);
    computed in float32, exact up to 2**24."""
    if all(_whole(v) for v in operands) and out.dtype != "i32":
        return _c.cast(_cont(out), "i32")
    return out


@_eager("x1", "x2")
def add(x1, x2):
    a, b = _pair(x1, x2)
    return _as_whole(a + b, x1, x2)


@_eager("x1", "x2")
def subtract(x1, x2):
    a, b = _pair(x1, x2)
    return _as_whole(a - b, x1, x2)


@_eager("x1", "x2")
def multiply(x1, x2):
    a, b = _pair(x1, x2)
    return _as_whole(a * b, x1, x2)


@_eager("x1", "x2")
def divide(x1, x2):
    a, b = _pair(x1, x2)
    sa, sb = tuple(a.shape), tuple(b.shape)
    if sb != sa and len(sb) <= len(sa) and all(d in (1, e) for d, e in zip(sb[::-1], sa[::-1])):
        # ggml's division has no backward pass for a broadcast divisor: repeat it to x1's shape
        # (x / ops.sum(x, axis=-1, keepdims=True) trains)
        b = broadcast_to(b, sa)
    return a / b


true_divide = divide


@_eager("x")
def negative(x):
    return _c.neg(_f(x))


@_eager("x")
def reciprocal(x):
    x = _f(x)
    return _t(np.float32(1.0)) / x


@_eager("x")
def rsqrt(x):
    return reciprocal(_c.sqrt(_f(x)))


@_eager("x")
def sign(x):
    """-1, 0 or 1 (no gradient)."""
    return _c.sgn(_f(x))


@_eager("x")
def log1p(x):
    x = _f(x)
    return _c.log(_cont(x + 1.0))


@_eager("x")
def sinh(x):
    x = _f(x)
    return _c.scale(_cont(_c.exp(x) - _c.exp(_c.neg(x))), 0.5)


@_eager("x")
def cosh(x):
    x = _f(x)
    return _c.scale(_cont(_c.exp(x) + _c.exp(_c.neg(x))), 0.5)


_F32_MAX = float(np.finfo(np.float32).max)


@_eager("x1", "x2")
def _pick(a, b, m, nan_from="picked"):
    """a where the 0/1 mask m is 1, else b, exactly (b + relu(a - b) rounded small values
    away next to large ones); the gradient goes to the one picked.  An infinite operand is
    picked or left as numpy does (minimum(inf, 0) is 0: Keras's Transformer schedule at step
    0, where 0 * inf made NaN): on the CPU both are clamped to float32's range first and a
    picked infinite one is made infinite again (the clamp's backward is pyggml's CPU op); a
    NaN likewise never leaks from the operand not picked."""
    if not _scope.fused():
        return a * m + b * _c.scale_bias(_cont(m), -1.0, 1.0)
    a, b = _cont(a), _cont(b)
    # which operands are infinite, before the clamp makes them float32's largest: a picked one
    # is made infinite again (a finite float32.max stays itself)
    ia, ib = (_c.step(_cont(_c.scale_bias(_c.abs(v), 1.0, -_F32_MAX))) for v in (a, b))
    a, b = (_c.clamp(v, -_F32_MAX, _F32_MAX) for v in (a, b))
    # a NaN (the clamp keeps it, patch 0046) counts as 0 in the products, so the operand not
    # picked never leaks into the result (leaky_relu of slope 1 is x, with gradient 1, and 0 at
    # NaN); the result is NaN again where the picked one is NaN (``nan_from="any"``: where either
    # is, numpy's maximum and minimum)
    na, nb = _nan_mask(a), _nan_mask(b)
    a, b = _c.leaky_relu(a, 1.0), _c.leaky_relu(b, 1.0)
    keep_b = _c.scale_bias(_cont(m), -1.0, 1.0)
    out = _cont(a * m + b * keep_b)
    at_end = _cont(ia * m + ib * keep_b)
    out = out * _c.stop_gradient(_c.scale_bias(at_end, 2.0, 1.0))     # (3 * the largest float is inf)
    nan = _cont(na + nb) if nan_from == "any" else _cont(na * m + nb * keep_b)
    return out + _c.stop_gradient(_c.sqrt(_c.neg(_cont(nan))))    # sqrt(-1) is NaN, sqrt(-0) is 0


_MAGIC = 2.0 ** 23            # |x| + 2**23 - 2**23 rounds |x| < 2**23 to a whole number (half to even)


def _rint(x):
    """x rounded half to even, with a zero gradient: everything after ggml's stop_gradient.
    Float32 values from 2**23 on are whole already; nan and +-inf stay."""
    xs = _c.stop_gradient(_cont(x))
    a = _c.abs(xs)
    big = _c.step(_cont(a - _MAGIC))
    r = _c.sgn(xs) * _cont((_c.clamp(a, 0.0, _MAGIC) + _MAGIC) - _MAGIC)
    return _cont((_t(np.float32(1.0)) - big) * r + big * xs)          # nan: 0 * r + nan


def _floor(x):
    r = _rint(x)
    return _cont(r - _c.step(_cont(r - x)))


def _nan_mask(t):
    """1 where t is NaN, 0 elsewhere (every comparison with NaN is false: step(|t| + 1) is 0)."""
    return _c.scale_bias(_c.step(_cont(_c.scale_bias(_c.abs(t), 1.0, 1.0))), -1.0, 1.0)


def _as_f32(t):
    return _c.cast(t, "f32") if t.dtype == "i32" else t


@_eager("x1", "x2")
def maximum(x1, x2):
    """The larger of the two, entry by entry (broadcast); the gradient goes to the larger
    (to x2 at ties).  Two integer operands give int32 (Keras's dtype: ``ops.maximum(h, w)``
    of Python ints is an int), computed in float32 (exact up to 2**24)."""
    a, b = _t(x1), _t(x2)
    ints = a.dtype == "i32" and b.dtype == "i32"
    a, b = _as_f32(a), _as_f32(b)
    out = _pick(a, b, _c.step(_cont(a - b)), nan_from="any")
    return _c.cast(_cont(out), "i32") if ints else out


@_eager("x1", "x2")
def minimum(x1, x2):
    """The smaller of the two (broadcast); the gradient goes to the smaller (to x1 at ties).
    Two integer operands give int32, as maximum."""
    a, b = _t(x1), _t(x2)
    ints = a.dtype == "i32" and b.dtype == "i32"
    a, b = _as_f32(a), _as_f32(b)
    out = _pick(b, a, _c.step(_cont(a - b)), nan_from="any")
    return _c.cast(_cont(out), "i32") if ints else out


@_eager("x")
def clip(x, x_min, x_max):
    """x limited to [x_min, x_max]; the gradient is 1 inside, 0 outside.  An integer x stays
    int32 (Keras keeps x's dtype: ``Embedding(ops.clip(ids, 0, n - 1))``)."""
    if is_number(x_min) and is_number(x_max) and x_min > x_max:
        raise ValueError(f"clip: x_min {x_min} is above x_max {x_max}")
    t = _t(x)
    if t.dtype == "i32" and _index_bounds(x_min, x_max, t.nelements):
        return _clipped_indices(t, int(x_min), int(x_max))
    out = minimum(maximum(_as_f32(t), x_min), x_max)
    if t.dtype == "i32" and out.dtype != "i32":
        out = _c.cast(_cont(out), "i32")      # toward zero, as Keras casts float bounds to x's dtype
    return out


_INDEX_CLIP_LIMIT = 1 << 22      # entries of the comparison table _clipped_indices builds


def _index_bounds(x_min, x_max, n):
    """True when clip's bounds are whole numbers making a range of indices [0, x_max] small
    enough for _clipped_indices."""
    ok = all(is_number(v) and float(v).is_integer() for v in (x_min, x_max))
    return ok and 0 <= x_min <= x_max and n * (int(x_max) + 1) <= _INDEX_CLIP_LIMIT


def _clipped_indices(t, lo, hi):
    """int32 x clipped to [lo, hi] as the argmax of -|clip(x) - j| over j in 0..hi: ggml aborts on
    a row index out of range, so the core takes computed indices only from argmax, bounded by its
    width (hi + 1); ``Embedding(ops.clip(ids, 0, n - 1))`` then works in a graph."""
    shape = tuple(t.shape)
    _check_dims(shape + (hi + 1,), "clip")
    v = _c.clamp(_c.cast(_cont(t), "f32"), float(lo), float(hi))
    col = _c.reshape(_cont(v), (t.nelements, 1))
    grid = _t(np.arange(hi + 1, dtype=np.float32).reshape(1, hi + 1))
    dist = _c.neg(_c.abs(_cont(col - grid)))
    return _c.reshape(_c.argmax(dist), shape)


@_eager("x1", "x2")
def greater(x1, x2):
    a, b = _pair(x1, x2)
    return _c.step(_cont(a - b))


@_eager("x1", "x2")
def less(x1, x2):
    a, b = _pair(x1, x2)
    return _c.step(_cont(b - a))


@_eager("x1", "x2")
def greater_equal(x1, x2):
    return logical_not(less(x1, x2))


@_eager("x1", "x2")
def less_equal(x1, x2):
    return logical_not(greater(x1, x2))


@_eager("x1", "x2")
def equal(x1, x2):
    on_strings = _compare_strings(x1, x2, np.equal)
    if on_strings is not None:
        return on_strings
    return logical_not(logical_or(greater(x1, x2), less(x1, x2)))


@_eager("x1", "x2")
def not_equal(x1, x2):
    on_strings = _compare_strings(x1, x2, np.not_equal)
    if on_strings is not None:
        return on_strings
    return logical_not(equal(x1, x2))


def _compare_strings(x1, x2, compare):
    """A model's input of strings compared with a string (``thal == "fixed"`` in a structured-
    data model's call): 1 or 0 per entry, computed on the host from the strings each batch
    brings (the graph holds zeros for them, pyggml._scope.mark_strings); None for anything else."""
    for s, other in ((x1, x2), (x2, x1)):
        if isinstance(s, Tensor) and _scope.holds_strings(s):
            want = np.asarray(other.numpy() if isinstance(other, Variable) else other)
            if isinstance(other, Tensor) or want.dtype.kind not in "USO":
                raise TypeError(f"a tensor of strings compares with strings only, got {type(other).__name__}")
            want = np.char.decode(want.astype(bytes), "utf-8", "replace") if want.dtype.kind == "S" else want.astype(str)

            def fn(a, want=want):
                a = np.asarray(a)
                a = np.char.decode(a.astype(bytes), "utf-8", "replace") if a.dtype.kind == "S" else a.astype(str)
                return compare(a, want).astype(np.float32)
            return _scope.current().derived_input(s, fn, tuple(s.shape), "float32")
    return None


@_eager("x")
def logical_not(x):
    return _t(np.float32(1.0)) - _truth(x)


@_eager("x1", "x2")
def logical_and(x1, x2):
    a, b = _pair(x1, x2)
    return _truth(a) * _truth(b)


@_eager("x1", "x2")
def logical_or(x1, x2):
    a, b = _pair(x1, x2)
    return _c.step(_cont(_truth(a) + _truth(b)))


def _truth(x):
    """1 where x is non-zero (Keras's bool of a number: negatives are true), else 0."""
    return _c.step(_c.abs(_f(x)))


@_eager("condition", "x1", "x2")
def where(condition, x1=None, x2=None):
    """x1 where the condition is true (non-zero), x2 elsewhere (broadcast); Keras's ops.where
    (with the condition alone too) is pyggml._ops_control's."""
    if x1 is None or x2 is None:
        raise ValueError("where: pass both x1 and x2, or neither (then the indices of the true entries, "
                         "as ops.nonzero)")
    cond = _f(condition)
    # true where non-zero, NaN included (numpy's, torch's bool of NaN)
    c = _cont(_c.step(_c.abs(cond)) + _nan_mask(cond))
    a, b = _pair(x1, x2)
    return _as_whole(_pick(a, b, c), x1, x2)    # (where(labels == -100, 0, labels) stays int32)


@_eager("x1", "x2")
def power(x1, x2):
    """x1 ** x2: a whole exponent by products (any sign of x1), otherwise exp(x2 * log(x1))
    (x1 > 0)."""
    a = _f(x1)
    if is_number(x2) and float(x2).is_integer() and builtins.abs(float(x2)) <= 16:
        k = int(x2)
        if k == 0:
            return ones_like(a)
        y = a
        for _ in range(builtins.abs(k) - 1):
            y = y * a
        return reciprocal(y) if k < 0 else y
    b = _f(x2)
    # |x1| ** x2 as exp(x2 log(|x1| + tiny)): at x1 = 0 the value is tiny ** x2 (0 in float32 for
    # x2 > 1.5) and the gradient finite, where log(0) made it 0 * inf = NaN
    mag = _c.exp(_cont(b * _c.log(_c.scale_bias(_cont(_c.abs(a)), 1.0, _TINY))))
    # a negative x1 (numpy's and torch's): a whole exponent gives the sign of its parity, any other NaN
    neg = _c.step(_c.neg(a))
    whole = _c.scale_bias(_c.step(_cont(_c.abs(_cont(b - _floor(b))))), -1.0, 1.0)
    odd = _c.leaky_relu(_cont(b - _c.scale(_floor(_c.scale(b, 0.5)), 2.0)), 1.0)   # (0 where b is inf)
    sign = _c.scale_bias(_cont(neg * odd * whole), -2.0, 1.0)
    fractional = _cont(neg * _c.scale_bias(whole, -1.0, 1.0))
    return _cont(mag * _c.stop_gradient(sign)) + _c.stop_gradient(_c.sqrt(_c.neg(fractional)))


@_eager("x")
def leaky_relu(x, negative_slope=0.2):
    """x, and ``negative_slope * x`` below 0 (Keras's default slope, 0.2)."""
    x = _f(x)
    return _c.relu(x) - _c.scale(_cont(_c.relu(_c.neg(x))), float(negative_slope))


@_eager("x")
def relu6(x):
    return clip(x, 0.0, 6.0)


@_eager("x")
def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    return _c.scale(_cont(relu6(_f(x) + 3.0)), 1.0 / 6.0)


@_eager("x")
def hard_swish(x):
    x = _f(x)
    return x * hard_sigmoid(x)


@_eager("x")
def softsign(x):
    x = _f(x)
    return x / (_c.abs(x) + 1.0)


@_eager("x")
def selu(x):
    x = _f(x)
    alpha, lam = 1.6732632423543772, 1.0507009873554805
    neg = _c.exp(_cont(_c.neg(_c.relu(_c.neg(x))))) - 1.0
    return _c.scale(_cont(_c.relu(x) + _c.scale(_cont(neg), alpha)), lam)


@_eager("x")
def mish(x):
    x = _f(x)
    # tanh(softplus(x)) = 1 - 2 / ((1 + e^x)^2 + 1)
    grown = _c.sqr(_cont(_c.exp(x) + 1.0))
    return x * (_t(np.float32(1.0)) - _c.scale(_cont(reciprocal(grown + 1.0)), 2.0))


@_eager("x")
def swish(x):
    return _c.silu(_f(x))


@_eager("x")
def log_sigmoid(x):
    return _c.neg(_c.softplus(_c.neg(_f(x))))


@_eager("x")
def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``."""
    x = _f(x)
    r = len(x.shape)
    ax = _axis(axis, r, "softmax")
    if ax == r - 1:
        y = _c.soft_max(_cont(x))
        _logits.note(y, x, "softmax")          # (a cross-entropy of y computes from x: pyggml._logits)
        return y
    order = [i for i in range(r) if i != ax] + [ax]
    y = _c.soft_max(_permute(x, order))
    return _permute(y, [order.index(i) for i in range(r)])


@_eager("x")
def log_softmax(x, axis=-1):
    x = _f(x)
    return x - logsumexp(x, axis, keepdims=True)


MAX_CUMSUM = 8192          # entries along the summed axis: the triangular matrix is 256 MiB


@_eager("x")
def cumsum(x, axis=None, dtype=None):
    """Running sums along ``axis`` (of the flattened x for None): a product with a
    triangular matrix of ones."""
    x = _f(x)
    if axis is None:
        x = _c.reshape(_cont(x), (x.nelements,))
        axis = 0
    r = len(x.shape)
    ax = _axis(axis, r, "cumsum")
    n = x.shape[ax]
    if n > MAX_CUMSUM:
        raise ValueError(f"cumsum: axis {axis} has {n} entries; this cumsum multiplies by an n x n "
                         f"triangular matrix and takes at most {MAX_CUMSUM} (a {n} x {n} one would need "
                         f"{4 * n * n / 2**30:.1f} GiB)")
    rows, kept = _to_last(x, (ax,))                         # (m, n)
    tri = np.triu(np.ones((n, n), dtype=np.float32))       # out[j] = sum_{i <= j} x[i]
    y = _c.reshape(rows @ _t(tri), kept + (n,))
    order = [i for i in range(r) if i != ax] + [ax]
    return _permute(y, [order.index(i) for i in range(r)])


def norm(x, ord=None, axis=None, keepdims=False):
    """Keras's ``ops.norm`` (``torch.linalg.norm``'s rules, numpy's too): over one axis a vector
    norm (``ord`` None or 2, 1, inf, -inf, 0, or any other p); over two axes, or over a matrix's
    both with ``axis=None`` and an ``ord``, a matrix norm ("fro", "nuc", 1, -1, 2, -2, inf, -inf);
    ``axis=None`` and ``ord=None`` the 2-norm of all the values.  On arrays numpy computes it; in a
    graph every kind but the singular-value ones (2, -2, "nuc" of a matrix).  (ggml's LayerNorm
    ``norm(x, eps)`` is ``pyggml.core.ops.norm``.)"""
    if ord == "euclidean":
        ord = None
    if _scope.current() is None and not isinstance(x, Tensor):
        a = x.numpy() if isinstance(x, Variable) else np.asarray(host(x))
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"norm: expected real numbers, got dtype {a.dtype}")
        try:
            out = np.linalg.norm(a.astype(np.float64 if a.dtype == np.float64 else np.float32), ord=ord,
                                 axis=axis, keepdims=keepdims)
        except (ValueError, TypeError) as e:
            raise ValueError(f"norm: {e} (ord={ord!r}, axis={axis!r}, shape {a.shape})") from None
        return np.asarray(out, dtype=np.float64 if a.dtype == np.float64 else np.float32)
    return _norm_graph(x, ord, axis, keepdims)


@_eager("x")
def _norm_graph(x, ord=None, axis=None, keepdims=False):
    x = _f(x)
    r = len(x.shape)
    axes = None if axis is None else ((axis,) if is_int(axis) else tuple(axis))
    matrix = (axes is not None and len(axes) == 2) or (axes is None and ord is not None and r == 2)
    if axes is None and ord is not None and r > 2:
        raise ValueError(f"norm: with axis=None, ord={ord!r} takes a vector or a matrix, got shape {tuple(x.shape)}")
    if not matrix:
        if ord == "fro" or ord == "nuc":
            raise ValueError(f"norm: ord={ord!r} is a matrix norm; give two axes (or a matrix and axis=None)")
        p = 2.0 if ord is None else ord
        if not is_number(p):
            raise ValueError(f"norm: ord must be a number, 'fro' or 'nuc', got {ord!r}")
        p = float(p)
        if p == 2.0:
            return _sqrt_of_sum(sum(_c.sqr(x), axes, keepdims))
        if p == 1.0:
            return sum(_c.abs(x), axes, keepdims)
        if p == np.inf:
            return max(_c.abs(x), axes, keepdims)
        if p == -np.inf:
            return min(_c.abs(x), axes, keepdims)
        if p == 0.0:
            return sum(_c.step(_c.abs(x)), axes, keepdims)        # the number of non-zero values
        return power(sum(power(_c.abs(x), p), axes, keepdims), 1.0 / p)
    a0, a1 = (axis_index(a, r, "norm") for a in (axes if axes is not None else (0, 1)))
    if a0 == a1:
        raise ValueError(f"norm: a matrix norm takes two different axes, got {axis!r}")
    if ord in (None, "fro"):
        return _sqrt_of_sum(sum(_c.sqr(x), (a0, a1), keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum (over a0, then the most over a1); inf: the largest row sum
        inner, outer = (a0, a1) if ord in (1, -1) else (a1, a0)
        sums = sum(_c.abs(x), inner, True)
        pick = max if ord in (1, np.inf) else min
        out = pick(sums, outer, True)
        return out if keepdims else squeeze(out, (a0, a1))
    raise ValueError(f"norm: ord={ord!r} of a matrix (its singular values) is computed on arrays only, not "
                     f"in a graph")


@_eager("x1", "x2")
def dot(x1, x2):
    """numpy's dot for vectors and matrices (the last axis of x1 with the first of x2)."""
    a, b = _pair(x1, x2)
    if len(a.shape) == 1 and len(b.shape) == 1:
        return sum(a * b)
    if len(b.shape) == 1:
        return _c.reshape(_cont(a @ _c.reshape(_cont(b), (b.shape[0], 1))), tuple(a.shape[:-1]))
    if len(a.shape) == 1:
        return _c.reshape(_cont(_c.reshape(_cont(a), (1, a.shape[0])) @ b), tuple(b.shape[1:]))
    return a @ b


@_eager("x1", "x2")
def matmul(x1, x2):
    """numpy's matmul (``x1 @ x2``): a vector as one row (x1) or one column (x2), dropped
    from the result; stacks of matrices with the same leading dims, or times one matrix."""
    for x in (x1, x2):
        if not isinstance(x, (Tensor, Variable)) and np.ndim(x) == 0:
            raise ValueError(f"matmul: scalars have no matrix product (use multiply); got shapes "
                             f"{np.shape(x1)} and {np.shape(x2)}")
    a, b = _pair(x1, x2)
    sa, sb = tuple(a.shape), tuple(b.shape)
    ka, kb = sa[-1], sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise ValueError(f"matmul: {sa} @ {sb}: the last axis of x1 ({ka}) must equal "
                         f"{'the length of x2' if len(sb) == 1 else 'the second-to-last axis of x2'} ({kb})")
    if len(sa) == 1 and len(sb) == 1:
        return sum(a * b)
    if len(sb) == 1:
        return _c.reshape(_cont(_cont(a) @ _c.reshape(_cont(b), (sb[0], 1))), sa[:-1])
    if len(sa) == 1:
        if len(sb) == 2:
            return _c.reshape(_cont(_c.reshape(_cont(a), (1, sa[0])) @ _cont(b)), sb[-1:])
        # (k,) @ (..., k, m): the transposed stack times a as one column
        n = len(sb)
        bt = _cont(transpose(b, tuple(range(n - 2)) + (n - 1, n - 2)))
        return _c.reshape(_cont(bt @ _c.reshape(_cont(a), (sa[0], 1))), sb[:-2] + sb[-1:])
    if len(sa) > 2 and len(sb) > 2 and sa[:-2] != sb[:-2]:
        # numpy broadcasts the stacks' leading dims ((B, H, W, 3) @ (B, 1, 3, 3): simclr's colour
        # transform): both stacks are broadcast to the common leading dims
        try:
            lead = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
        except ValueError:
            raise ValueError(f"matmul: {sa} @ {sb}: the stacks' leading dims do not broadcast") from None
        _check_dims(lead + sa[-2:], "matmul")
        _check_dims(lead + sb[-2:], "matmul")
        a = a if sa[:-2] == lead else broadcast_to(a, lead + sa[-2:])
        b = b if sb[:-2] == lead else broadcast_to(b, lead + sb[-2:])
    return _cont(a) @ _cont(b)


# --- dtypes, selection -----------------------------------------------------------------------------

def _dtype_kind(dtype, what):
    """'bool', 'float' or 'int' for a Keras dtype (a name, a numpy dtype or type; ggml's
    'f32'/'i32' too)."""
    if isinstance(dtype, str) and str(dtype) in _GGML_SHORT:
        dtype = _GGML_SHORT[str(dtype)]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what}: unknown dtype {dtype!r}") from None
    if dt.kind == "b":
        return "bool", dt
    if dt.kind in "iu":
        return "int", dt
    if dt.kind == "f":
        return "float", dt
    raise TypeError(f"{what}: dtype must be a bool, int or float type, got {dtype!r}")


def stop_gradient(variable):
    """Keras's ``ops.stop_gradient``: ``variable``'s value, through which training passes no
    gradient (the backward pass treats it as a constant); an array is returned as it is."""
    if _scope.current() is None and not isinstance(variable, Tensor):
        a = variable.numpy() if isinstance(variable, Variable) else np.asarray(variable)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"stop_gradient: expected a tensor or real numbers, got dtype {a.dtype}")
        return a
    if host_value(variable) is not None and not isinstance(variable, Tensor):
        return _t(variable)                                  # a constant has no gradient anyway
    return _c.stop_gradient(_t(variable))


def cast(x, dtype):
    """Keras's ``ops.cast``: x as ``dtype``.  In a graph, floats are float32 and ints int32
    (float to int truncates toward zero), and a bool is a float 0/1 tensor (1 where x is
    not 0); on arrays, numpy's ``astype``."""
    kind, dt = _dtype_kind(dtype, "cast")
    if _scope.current() is None and not isinstance(x, Tensor):
        a = x.numpy() if isinstance(x, Variable) else np.asarray(x)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"cast: expected real numbers, got dtype {a.dtype}")
        return a.astype(dt)
    known = host_value(x)
    if known is not None:
        return host_constant(known.astype(dt))
    t = _t(x)
    if kind == "bool":
        f = _c.cast(t, "f32") if t.dtype == "i32" else t
        return _c.step(_c.abs(_cont(f)))
    want = "f32" if kind == "float" else "i32"
    return t if t.dtype == want else _c.cast(_cont(t), want)


@_eager("x")
def getitem(x, key):
    """``x[key]``: numpy's basic indexing (ints, slices, ``...``, None), which trains
    (pyggml._indexing); ``key`` may also be the list form a saved model keeps."""
    from pyggml._indexing import decode_key
    return _t(x)[decode_key(key)]


def get_item(x, key):
    """Keras's ``ops.get_item``: ``x[key]`` (``getitem``)."""
    if isinstance(x, Tensor):
        picked = tensor_index(x, key)
        if picked is not None:
            return picked
    return getitem(x, key)


def tensor_index(x, key):
    """x[..., i, ...] with one integer tensor i of one value (Grad-CAM's ``preds[:, ops.argmax(preds[0])]``):
    ops.take along that axis, the axis dropped; the other entries full slices.  None when the key
    is not of that form."""
    key = key if isinstance(key, tuple) else (key,)
    at = [i for i, k in enumerate(key) if isinstance(k, Tensor)]
    if len(at) != 1:
        return None
    t = key[at[0]]
    rest = [k for i, k in enumerate(key) if i != at[0]]
    if t.dtype != "i32" or t.nelements != 1 or Ellipsis in rest or \
            any(not (isinstance(k, slice) and k == slice(None)) for k in rest):
        return None
    if at[0] >= len(x.shape):
        raise IndexError(f"too many indices for a tensor of {len(x.shape)} dimensions")
    picked = take(x, _c.reshape(_cont(t), (1,)), axis=at[0])
    shape = tuple(int(d) for i, d in enumerate(picked.shape) if i != at[0]) or (1,)
    return _c.reshape(_cont(picked), shape)
