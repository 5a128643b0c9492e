"""Keras's math, array and shape functions of ``keras.ops``, with numpy's axes: on graph tensors
(built from ggml ops that train) and on arrays (computed at once).  ``pyggml.ops``
installs them (its ``_KERAS_MODULES``).

On arrays and numbers (outside a model's graph) each function computes at once with numpy, as
Keras's numpy backend does, and returns numpy arrays (bools for the predicates, integers for
the integer ops).  Inside a graph (a layer's ``call``, a ``Lambda``, a functional node) each
is built from ggml ops that have a backward pass; the piecewise-constant ones (floor, ceil,
round, trunc, the predicates, comparisons) have a zero gradient, as in Keras.  Booleans are
float 0/1 tensors in a graph, and integer tensors compute as float.  When every argument is
known when the graph is built (constants, shapes) the function computes on the host and gives
a constant.  A few functions whose result's shape depends on the values (``bincount`` without
``minlength``) or that work on integer bits (the bitwise ops) take arrays only and refuse a
graph tensor with a TypeError.
"""

import builtins
import functools
import inspect
import math

import numpy as np

from pyggml import _ops_numpy as _np_ops
from pyggml import _scope
from pyggml._ops_numpy import (_MAGIC, MAX_DIMS, _axes, _axis, _check_dims, _check_size, _cont, _f, _floor,
                               _nan_mask, _permute, _rint, _t, _to_last, host_constant, host_value)
from pyggml._validation import is_int, is_number
from pyggml.core import Tensor
from pyggml.core import ops as _c
from pyggml.variables import Variable

__all__ = ["absolute", "all", "any", "amax", "amin", "append", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
           "arctan2", "arctanh", "average", "cbrt", "ceil", "floor", "round", "trunc", "conj", "real", "imag",
           "copy", "identity", "cumprod", "diag", "diagflat", "diagonal", "trace", "tri", "tril", "triu", "diff",
           "exp2", "expm1", "log10", "log2", "logaddexp", "logical_xor", "flip", "rot90", "roll", "hstack",
           "vstack", "moveaxis", "ravel", "prod", "isfinite", "isinf", "isnan", "isclose", "nan_to_num",
           "divide_no_nan", "floor_divide", "mod", "signbit", "outer", "inner", "vdot", "kron", "meshgrid",
           "linspace", "logspace", "median", "quantile", "tan", "take_along_axis", "unstack", "select", "empty",
           "array", "ndim", "size", "dtype", "is_tensor", "count_nonzero", "saturate_cast", "digitize",
           "bincount", "correlate", "corrcoef", "cross", "bitwise_and", "bitwise_or", "bitwise_xor",
           "bitwise_not", "bitwise_invert", "left_shift", "right_shift"]

# names that are also ggml ops of pyggml.core.ops: ggml's form for a Tensor outside a model's graph
SHARED_WITH_GGML = ()

_SEQUENCES = {"xs", "condlist", "choicelist"}


# --- arrays at once, graphs from ggml ops ----------------------------------------------------------

def _array(v, what):
    a = v.numpy() if isinstance(v, Variable) else np.asarray(v)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected real numbers, got {type(v).__name__} of dtype {a.dtype}")
    return a


def _dual(host, *tensor_params):
    """The decorated function builds graph ops; ``host`` computes the same with numpy.  Outside a
    graph (no graph Tensor among ``tensor_params``) host runs on the arrays; inside one, host runs
    when every tensor argument is known on the host (a constant), the graph function otherwise."""
    def deco(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def op(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            in_graph = _scope.current() is not None
            values = {}
            for name in tensor_params:
                v = arguments.get(name)
                if v is None:
                    continue
                many = name in _SEQUENCES and isinstance(v, (list, tuple))
                items = list(v) if many else [v]
                if builtins.any(isinstance(e, Tensor) for e in items) and not in_graph:
                    raise TypeError(f"{fn.__name__}: a graph tensor is only usable inside a model's graph (a "
                                    f"layer's call or a Lambda)")
                if in_graph:
                    known = [host_value(e) for e in items]
                    if builtins.any(k is None for k in known):
                        return fn(**arguments)
                    items = known
                values[name] = [_array(e, fn.__name__) for e in items] if many else _array(items[0], fn.__name__)
            arguments.update(values)
            out = host(**arguments)
            if not in_graph:
                return out
            return [_constant(o, fn.__name__) for o in out] if isinstance(out, (list, tuple)) else \
                _constant(out, fn.__name__)
        return op
    return deco


def _constant(a, what):
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: the result has dtype {a.dtype}, which a graph cannot hold")
    _check_dims(a.shape, what)
    _check_size(a.shape, what)
    return host_constant(a.astype(np.float32) if a.dtype.kind in "bf" else a)


def _arrays_only(what, why):
    raise TypeError(f"{what} works on arrays (computed at once), not on a graph tensor inside a model's graph: "
                    f"{why}")


def _one():
    return _t(np.float32(1.0))


def _shape(x):
    return tuple(int(d) for d in x.shape)


def _broadcast(sa, sb, what):
    try:
        return tuple(np.broadcast_shapes(sa, sb))
    except ValueError:
        raise ValueError(f"{what}: shapes {sa} and {sb} do not broadcast") from None


def _rows(t):
    """t as (rows, last) contiguous."""
    s = _shape(t)
    return _c.reshape(_cont(t), (int(np.prod(s[:-1])) if len(s) > 1 else 1, s[-1]))


def _restore(y, x_shape, ax):
    """y of shape (rest..., n) (x's axes without ``ax``, then ``ax``) back with ``ax`` in place."""
    r = len(x_shape)
    order = [i for i in range(r) if i != ax] + [ax]
    return _permute(y, [order.index(i) for i in range(r)])


def _last(x, ax):
    """x with axis ``ax`` moved last, as (m, n) rows."""
    rows, _ = _to_last(x, (ax,))
    return rows


# --- rounding (zero gradient) ----------------------------------------------------------------------

def _ceil(x):
    r = _rint(x)
    return _cont(r + _c.step(_cont(x - r)))


def _trunc(x):
    return _cont(_c.sgn(x) * _floor(_c.abs(x)))


@_dual(lambda x: np.floor(x), "x")
def floor(x):
    """The largest whole number not above x (zero gradient)."""
    return _floor(_f(x))


@_dual(lambda x: np.ceil(x), "x")
def ceil(x):
    """The smallest whole number not below x (zero gradient)."""
    return _ceil(_f(x))


@_dual(lambda x: np.trunc(x), "x")
def trunc(x):
    """x rounded toward zero (zero gradient)."""
    return _trunc(_f(x))


def _round_host(x, decimals=0):
    if not is_int(decimals):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    return np.round(x, int(decimals))


@_dual(_round_host, "x")
def round(x, decimals=0):
    """x rounded to ``decimals`` places, halves to even as numpy (zero gradient)."""
    if not is_int(decimals):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    x = _f(x)
    if decimals == 0:
        return _rint(x)
    s = 10.0 ** int(decimals)
    return _c.scale(_rint(_c.scale(x, s)), 1.0 / s)


# --- elementwise ---------------------------------------------------------------------------------

@_dual(lambda x: np.absolute(x), "x")
def absolute(x):
    """|x| (Keras's ``absolute``; the gradient is sign(x))."""
    return _c.abs(_f(x))


@_dual(lambda x: np.tan(x), "x")
def tan(x):
    x = _f(x)
    return _c.sin(x) / _c.cos(x)


_ATAN_TERMS = 10


def _atan_poly(u):
    """arctan by its series on |u| <= tan(pi/8) (the first terms past that are below 1e-8)."""
    u2 = _c.sqr(u)
    acc = None
    for k in range(_ATAN_TERMS - 1, -1, -1):
        coef = (-1.0) ** k / (2 * k + 1)
        acc = _t(np.float32(coef)) if acc is None else _cont(acc * u2 + coef)
    return _cont(acc * u)


def _atan_unit(u):
    """arctan(u) for u in [-1, 1]: the series near 0, and pi/4 +- arctan of (u -+ 1) / (1 +- u)
    beyond tan(pi/8)."""
    t8 = math.tan(math.pi / 8)
    au = _c.abs(u)
    pos = _c.step(_cont(u - t8))
    neg = _c.step(_cont(_c.neg(u) - t8))
    mid = _one() - pos - neg
    den = au + 1.0
    a_mid = _atan_poly(u)
    a_pos = _cont(_atan_poly(_cont((u - 1.0) / den)) + math.pi / 4)
    a_neg = _cont(_atan_poly(_cont((u + 1.0) / den)) - math.pi / 4)
    return _cont(mid * a_mid + pos * a_pos + neg * a_neg)


def _pick(mask, a, b):
    """a where the 0/1 mask is 1, b elsewhere, exactly (no a - b rounding, as in b + relu(a - b))."""
    return _cont(mask * a + (_one() - mask) * b)


def _atan(x):
    big = _c.step(_cont(_c.abs(x) - 1.0))                # |x| > 1: arctan(x) = sign(x) pi/2 - arctan(1/x)
    u = x / _pick(big, _c.sqr(x), _one())                # x inside [-1, 1], 1/x outside
    a = _atan_unit(u)
    return _cont(a + big * (_c.scale(_c.sgn(x), math.pi / 2) - _c.scale(a, 2.0)))


def _atan2(y, x):
    ax, ay = _c.abs(x), _c.abs(y)
    steep = _c.step(_cont(ay - ax))
    hi = _pick(steep, ay, ax)
    lo = _pick(steep, ax, ay)
    den = hi + (_one() - _c.step(hi))                    # 1 at the origin (0 / 1 = 0)
    a = _atan_unit(_cont(lo / den))                      # in [0, pi/4]
    a = _cont(a + steep * (_t(np.float32(math.pi / 2)) - _c.scale(a, 2.0)))
    left = _c.step(_c.neg(x))
    a = _cont(a + left * (_t(np.float32(math.pi)) - _c.scale(a, 2.0)))
    below = _c.step(_c.neg(y))
    return _cont(a - _c.scale(below * a, 2.0))


@_dual(lambda x: np.arctan(x), "x")
def arctan(x):
    return _atan(_f(x))


@_dual(lambda x1, x2: np.arctan2(x1, x2), "x1", "x2")
def arctan2(x1, x2):
    """The angle of the point (x2, x1) in (-pi, pi] (numpy's argument order: y first)."""
    y, x = _f(x1), _f(x2)
    if _shape(y) != _shape(x):
        shape = _broadcast(_shape(y), _shape(x), "arctan2")
        y, x = _np_ops.broadcast_to(y, shape), _np_ops.broadcast_to(x, shape)
    return _atan2(y, x)


def _sqrt_1m(x):
    return _c.sqrt(_cont(_one() - _c.sqr(x)))


@_dual(lambda x: np.arcsin(x), "x")
def arcsin(x):
    x = _f(x)
    return _atan2(x, _sqrt_1m(x))


@_dual(lambda x: np.arccos(x), "x")
def arccos(x):
    x = _f(x)
    return _atan2(_sqrt_1m(x), x)


@_dual(lambda x: np.arcsinh(x), "x")
def arcsinh(x):
    """log(|x| + sqrt(x^2 + 1)) with x's sign (exact for negative x too)."""
    x = _f(x)
    a = _c.abs(x)
    return _c.sgn(x) * _c.log(_cont(a + _c.sqrt(_cont(_c.sqr(x) + 1.0))))


@_dual(lambda x: np.arccosh(x), "x")
def arccosh(x):
    x = _f(x)
    return _c.log(_cont(x + _c.sqrt(_cont(_c.sqr(x) - 1.0))))


@_dual(lambda x: np.arctanh(x), "x")
def arctanh(x):
    x = _f(x)
    return _c.scale(_c.log(_cont((x + 1.0) / (_one() - x))), 0.5)


@_dual(lambda x: np.cbrt(x), "x")
def cbrt(x):
    """The real cube root (negative for negative x)."""
    x = _f(x)
    return _c.sgn(x) * _c.exp(_c.scale(_c.log(_c.abs(x)), 1.0 / 3.0))


@_dual(lambda x: np.exp2(x), "x")
def exp2(x):
    return _c.exp(_c.scale(_f(x), math.log(2.0)))


@_dual(lambda x: np.expm1(x), "x")
def expm1(x):
    """exp(x) - 1, accurate near 0 too: there (u - 1) * x / log(u) with u = exp(x) (Kahan's
    form, whose rounding errors cancel), exp(x) - 1 beyond |x| = 1/2."""
    x = _f(x)
    near = _c.step(_cont(0.5 - _c.abs(x)))
    xc = _cont(x * near)                                 # 0 where not near (no precision lost)
    u = _c.exp(xc)
    u1 = _cont(u - 1.0)
    log_u = _c.log(u)
    exact = _one() - _c.step(_c.abs(u1))                # u rounds to 1: x itself
    kahan = _cont(u1 * xc / _cont(log_u + exact))
    small = _cont(kahan + exact * (xc - kahan))
    return _cont(near * small + (_one() - near) * (_c.exp(x) - 1.0))


@_dual(lambda x: np.log10(x), "x")
def log10(x):
    return _c.scale(_c.log(_f(x)), 1.0 / math.log(10.0))


@_dual(lambda x: np.log2(x), "x")
def log2(x):
    return _c.scale(_c.log(_f(x)), 1.0 / math.log(2.0))


@_dual(lambda x1, x2: np.logaddexp(x1, x2), "x1", "x2")
def logaddexp(x1, x2):
    """log(exp(x1) + exp(x2)), computed stably: the larger plus softplus(-|x1 - x2|)."""
    a, b = _f(x1), _f(x2)
    d = _cont(a - b)
    return _pick(_c.step(d), a, b) + _c.softplus(_c.neg(_c.abs(d)))


def _bool01(x):
    """1 where x is not zero (nan counts as true, as numpy), 0 elsewhere; no gradient."""
    a = _c.abs(x)
    return _cont(_c.step(a) + _isnan(x))


def _zero_nan_relu(x):
    return _c.leaky_relu(x, 0.0)


_isnan = _nan_mask                  # (1 where x is NaN: every comparison with NaN is false)


def _isinf(x):
    return _c.step(_cont(_c.abs(x) - float(np.finfo(np.float32).max)))


@_dual(lambda x1, x2: np.logical_xor(x1, x2), "x1", "x2")
def logical_xor(x1, x2):
    """1 where exactly one of x1, x2 is true (non-zero), as a float 0/1 tensor in a graph."""
    a, b = _bool01(_f(x1)), _bool01(_f(x2))
    return _cont(a + b - _c.scale(a * b, 2.0))


@_dual(lambda x: np.isnan(x), "x")
def isnan(x):
    return _isnan(_f(x))


@_dual(lambda x: np.isinf(x), "x")
def isinf(x):
    return _isinf(_f(x))


@_dual(lambda x: np.isfinite(x), "x")
def isfinite(x):
    x = _f(x)
    return _cont(_c.step(_cont(_c.abs(x) + 1.0)) - _isinf(x))


@_dual(lambda x: np.signbit(x), "x")
def signbit(x):
    """1 where x is negative (-0.0 counts on arrays; a graph sees it as 0)."""
    return _c.step(_c.neg(_f(x)))


def _isclose_host(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    return np.isclose(x1, x2, rtol=rtol, atol=atol, equal_nan=equal_nan)


@_dual(_isclose_host, "x1", "x2")
def isclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    """|x1 - x2| <= atol + rtol * |x2|, numpy's test (float 0/1 in a graph)."""
    for name, v in (("rtol", rtol), ("atol", atol)):
        if not is_number(v) or v < 0:
            raise ValueError(f"isclose: {name} must be a number >= 0, got {v!r}")
    a, b = _f(x1), _f(x2)
    slack = _cont(_c.scale(_c.abs(b), float(rtol)) + float(atol))
    close = _one() - _c.step(_cont(_c.abs(_cont(a - b)) - slack))
    close = close * _c.step(_cont(_c.abs(_cont(a - b)) + 1.0))        # nan is never close
    # equal infinities are close
    close = _np_ops.maximum(close, _isinf(a) * _isinf(b) * _c.step(_cont(a * b)))
    if equal_nan:
        close = _np_ops.maximum(close, _isnan(a) * _isnan(b))
    return close


def _nan_to_num_host(x, nan=0.0, posinf=None, neginf=None):
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


@_dual(_nan_to_num_host, "x")
def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """nan replaced by ``nan``, +-inf by ``posinf``/``neginf`` (float32's largest by default).
    The gradient is 1 at finite values and 0 at the replaced ones."""
    for name, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if v is not None and not is_number(v):
            raise TypeError(f"nan_to_num: {name} must be a number, got {v!r}")
    big = float(np.finfo(np.float32).max)
    posinf = big if posinf is None else float(posinf)
    neginf = -big if neginf is None else float(neginf)
    x = _f(x)
    finite = _cont(_c.step(_cont(_c.abs(x) + 1.0)) - _isinf(x))
    y = _cont(x * finite)                                  # nan at nan and at +-inf
    # leaky_relu with slope 0 is relu that turns nan into 0 (ggml's relu keeps nan, as PyTorch's)
    clean = _cont(_zero_nan_relu(y) - _zero_nan_relu(_c.neg(y)))
    # relu's gradient is 0 at exactly 0: there a term worth 0 with gradient 1 (the same, shifted)
    shifted = _cont(_zero_nan_relu(_cont(y + 1.0)) - _zero_nan_relu(_c.neg(_cont(y + 1.0))))
    at_zero = _one() - _bool01(y)
    clean = _cont(clean + at_zero * _cont(shifted - _c.stop_gradient(shifted)))
    inf = _isinf(x)
    pos = inf * _c.step(x)
    neg = inf * _c.step(_c.neg(x))
    out = clean + _c.scale(_isnan(x), float(nan)) if nan else clean
    if posinf:
        out = out + _c.scale(pos, posinf)
    if neginf:
        out = out + _c.scale(neg, neginf)
    return _cont(out)


def _divide_no_nan_host(x1, x2):
    x1, x2 = np.asarray(x1), np.asarray(x2)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.true_divide(x1, x2)
    return np.where(x2 == 0, np.zeros_like(q), q)


@_dual(_divide_no_nan_host, "x1", "x2")
def divide_no_nan(x1, x2):
    """x1 / x2, and 0 where x2 is 0."""
    a, b = _f(x1), _f(x2)
    zero = _one() - _bool01(b)
    shape = _broadcast(_shape(a), _shape(b), "divide_no_nan")
    b = _np_ops.broadcast_to(_cont(b + zero), shape)
    return _cont((a / b) * (_one() - zero))


def _floor_divide_host(x1, x2):
    return np.floor_divide(x1, x2)


@_dual(_floor_divide_host, "x1", "x2")
def floor_divide(x1, x2):
    """floor(x1 / x2) (zero gradient)."""
    return _floor(_np_ops.divide(_f(x1), _f(x2)))


@_dual(lambda x1, x2: np.mod(x1, x2), "x1", "x2")
def mod(x1, x2):
    """x1 - floor(x1 / x2) * x2: the remainder with the divisor's sign (numpy's)."""
    a, b = _f(x1), _f(x2)
    q = _floor(_np_ops.divide(a, b))
    return _cont(a - q * b)


# --- reductions ----------------------------------------------------------------------------------

def _any(x, axis, keepdims, what):
    x = _f(x)
    n = _np_ops.sum(_bool01(x), axis, keepdims)
    return _c.step(n)


@_dual(lambda x, axis=None, keepdims=False: np.any(x, axis=axis, keepdims=keepdims), "x")
def any(x, axis=None, keepdims=False):
    """1 where some entry along ``axis`` is true (non-zero); float 0/1 in a graph."""
    return _any(x, axis, keepdims, "any")


@_dual(lambda x, axis=None, keepdims=False: np.all(x, axis=axis, keepdims=keepdims), "x")
def all(x, axis=None, keepdims=False):
    """1 where every entry along ``axis`` is true (non-zero); float 0/1 in a graph."""
    x = _f(x)
    zero = _one() - _bool01(x)
    return _one() - _c.step(_np_ops.sum(zero, axis, keepdims))


@_dual(lambda x, axis=None, keepdims=False: np.amax(x, axis=axis, keepdims=keepdims), "x")
def amax(x, axis=None, keepdims=False):
    return _np_ops.max(x, axis, keepdims)


@_dual(lambda x, axis=None, keepdims=False: np.amin(x, axis=axis, keepdims=keepdims), "x")
def amin(x, axis=None, keepdims=False):
    return _np_ops.min(x, axis, keepdims)


def _count_nonzero_host(x, axis=None):
    return np.asarray(np.count_nonzero(x, axis=axis)).astype(np.int32)


@_dual(_count_nonzero_host, "x")
def count_nonzero(x, axis=None):
    """How many entries along ``axis`` are not zero (a float count in a graph)."""
    return _np_ops.sum(_bool01(_f(x)), axis)


def _average_host(x, axis=None, weights=None):
    return np.average(x, axis=axis, weights=weights)


@_dual(_average_host, "x", "weights")
def average(x, axis=None, weights=None):
    """The (weighted) mean over ``axis``; 1-D ``weights`` go along ``axis``, otherwise they
    have x's shape."""
    x = _f(x)
    if weights is None:
        return _np_ops.mean(x, axis)
    w = _f(weights)
    if _shape(w) != _shape(x):
        if axis is None or len(w.shape) != 1 or not is_int(axis):
            raise ValueError(f"average: weights of shape {_shape(w)} must have x's shape {_shape(x)}, or be 1-D "
                             f"along an int axis")
        ax = _axis(axis, len(x.shape), "average")
        if w.shape[0] != x.shape[ax]:
            raise ValueError(f"average: {w.shape[0]} weights for axis {axis} of length {x.shape[ax]}")
        shape = [1] * len(x.shape)
        shape[ax] = int(w.shape[0])
        w = _np_ops.broadcast_to(_c.reshape(_cont(w), tuple(shape)), _shape(x))
    return _np_ops.divide(_np_ops.sum(x * w, axis), _np_ops.sum(w, axis))


def _pairwise_product(rows):
    """The product of each row of (m, n), in log2(n) rounds of products of halves."""
    while rows.shape[1] > 1:
        n = int(rows.shape[1])
        if n % 2:
            ones = _t(np.ones((int(rows.shape[0]), 1), np.float32))
            rows = _np_ops.concatenate([rows, ones], axis=1)
        rows = _cont(rows[:, 0::2] * rows[:, 1::2])
    return rows


def _prod_host(x, axis=None, keepdims=False, dtype=None):
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=dtype)


@_dual(_prod_host, "x")
def prod(x, axis=None, keepdims=False, dtype=None):
    """The product over ``axis`` (all for None), by products of halves: exact signs and zeros,
    and the gradient of each factor is the product of the others."""
    x = _f(x)
    axes = _axes(axis, len(x.shape), "prod")
    rows, _ = _to_last(x, axes)
    y = _pairwise_product(rows)
    return _c.reshape(_cont(y), _np_ops._reduced_shape(_shape(x), axes, keepdims))


def _cumprod_host(x, axis=None, dtype=None):
    return np.cumprod(x, axis=axis, dtype=dtype)


@_dual(_cumprod_host, "x")
def cumprod(x, axis=None, dtype=None):
    """Running products along ``axis`` (of the flattened x for None): log2(n) rounds that each
    multiply by the values shifted 1, 2, 4, ... places (ones shifted in)."""
    x = _f(x)
    if axis is None:
        x = _c.reshape(_cont(x), (x.nelements,))
        axis = 0
    r = len(x.shape)
    ax = _axis(axis, r, "cumprod")
    rows = _last(x, ax)
    m, n = int(rows.shape[0]), int(rows.shape[1])
    s = 1
    while s < n:
        ones = _t(np.ones((m, s), np.float32))
        shifted = _np_ops.concatenate([ones, rows[:, :n - s]], axis=1)
        rows = _cont(rows * shifted)
        s *= 2
    kept = tuple(d for i, d in enumerate(_shape(x)) if i != ax)
    return _restore(_c.reshape(rows, kept + (n,)), _shape(x), ax)


# --- sorting-based statistics ------------------------------------------------------------------

MAX_SORT = 2 ** 22           # rows x n x n comparisons for the graph's sort (16 MiB a step)


def _sorted_rows(rows, what):
    """Each row of (m, n) sorted ascending: each value's rank from comparisons with the
    others (ties by position), then each rank's value picked; the gradient goes to the
    value that lands at each place."""
    m, n = int(rows.shape[0]), int(rows.shape[1])
    if m * n * n > MAX_SORT:
        raise ValueError(f"{what}: sorting {m} rows of {n} values in a graph compares every pair "
                         f"({m * n * n} > {MAX_SORT}); compute it on arrays or on smaller slices")
    if n == 1:
        return rows
    xi = _c.reshape(rows, (m, n, 1))
    xj = _c.reshape(rows, (m, 1, n))
    diff = _np_ops.subtract(xi, xj)                         # (m, i, j): x_i - x_j
    below = _c.step(diff)                                   # x_j < x_i
    same = _one() - _c.step(diff) - _c.step(_c.neg(diff))
    earlier = _t(np.tril(np.ones((n, n), np.float32), -1))  # j < i
    rank = _np_ops.sum(below + same * earlier, axis=2)     # (m, n)
    place = _np_ops.equal(_c.reshape(_cont(rank), (m, n, 1)), _t(np.arange(n, dtype=np.float32)))  # (m, i, k)
    return _np_ops.sum(place * xi, axis=1)                  # (m, k)


_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_host(x, q, axis=None, method="linear", keepdims=False):
    return np.quantile(x, q, axis=axis, method=method, keepdims=keepdims)


def _quantile_graph(x, q, axis, method, keepdims, what):
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"{what}: method must be one of {_QUANTILE_METHODS}, got {method!r}")
    qa = host_value(q) if isinstance(q, (Tensor, Variable)) else np.asarray(q, dtype=np.float64)
    if qa is None:
        raise TypeError(f"{what}: q must be known when the graph is built (numbers or an array), got a computed "
                        f"tensor")
    qa = np.asarray(qa, dtype=np.float64)
    if qa.ndim > 1 or np.any((qa < 0) | (qa > 1)):
        raise ValueError(f"{what}: q must be a number or a 1-D array in [0, 1], got {q!r}")
    x = _f(x)
    axes = _axes(axis, len(x.shape), what)
    rows, _ = _to_last(x, axes)
    srt = _sorted_rows(rows, what)
    n = int(rows.shape[1])
    pos = qa.reshape(-1) * (n - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    frac = pos - lo
    if method == "lower":
        hi, frac = lo, np.zeros_like(frac)
    elif method == "higher":
        lo, frac = np.ceil(pos).astype(np.int64), np.zeros_like(frac)
        hi = lo
    elif method == "midpoint":
        frac = np.where(pos > lo, 0.5, 0.0)
    elif method == "nearest":
        lo = np.rint(pos).astype(np.int64)           # numpy's nearest: halves to even
        hi, frac = lo, np.zeros_like(frac)
    # a (n, len(q)) matrix of interpolation weights: sorted @ weights
    wts = np.zeros((n, len(pos)), np.float32)
    for k in range(len(pos)):
        wts[lo[k], k] += 1.0 - frac[k]
        wts[hi[k], k] += frac[k]
    y = srt @ _t(wts)                                     # (m, len(q))
    out = _np_ops._reduced_shape(_shape(x), axes, keepdims)
    if qa.ndim == 0:
        return _c.reshape(_cont(y), out)
    if len(out) + 1 > MAX_DIMS:
        raise ValueError(f"{what}: the result would have {len(out) + 1} dims (at most {MAX_DIMS})")
    if axis is None and not keepdims:
        out = ()
    y = _c.reshape(_cont(y), (int(np.prod(out)), len(pos)))
    return _np_ops.reshape(_np_ops.transpose(y), (len(pos),) + out)


@_dual(_quantile_host, "x")
def quantile(x, q, axis=None, method="linear", keepdims=False):
    """The q-th quantile(s) over ``axis`` (numpy's methods linear, lower, higher, midpoint,
    nearest); q is a number or a 1-D array in [0, 1] (its axis first)."""
    return _quantile_graph(x, q, axis, method, keepdims, "quantile")


def _median_host(x, axis=None, keepdims=False):
    return np.median(x, axis=axis, keepdims=keepdims)


@_dual(_median_host, "x")
def median(x, axis=None, keepdims=False):
    """The median over ``axis``; its gradient goes to the middle value(s)."""
    return _quantile_graph(x, 0.5, axis, "linear", keepdims, "median")


# --- matrices ------------------------------------------------------------------------------------

def _tri_host(N, M=None, k=0, dtype=None):
    return np.tri(N, M, k, dtype=dtype or "float32")


def tri(N, M=None, k=0, dtype=None):
    """Ones on and below diagonal k of an N x M matrix (a constant)."""
    for name, v in (("N", N), ("M", M if M is not None else N)):
        if not is_int(v) or v < 1:
            raise ValueError(f"tri: {name} must be a positive int, got {v!r}")
    if not is_int(k):
        raise TypeError(f"tri: k must be an int, got {k!r}")
    _check_size((N, N if M is None else M), "tri")
    a = _tri_host(int(N), None if M is None else int(M), int(k), dtype)
    return a if _scope.current() is None else _constant(a, "tri")


def _tri_mask(x, k, lower, what):
    if not is_int(k):
        raise TypeError(f"{what}: k must be an int, got {k!r}")
    x = _f(x)
    if len(x.shape) < 2:
        raise ValueError(f"{what}: x needs at least 2 dims, got shape {_shape(x)}")
    n, m = int(x.shape[-2]), int(x.shape[-1])
    keep = np.tri(n, m, int(k), dtype=np.float32) if lower else 1.0 - np.tri(n, m, int(k) - 1, dtype=np.float32)
    return x * _t(keep)


@_dual(lambda x, k=0: np.tril(x, k), "x")
def tril(x, k=0):
    """x with the entries above diagonal k of its last two axes set to 0 (causal masks)."""
    return _tri_mask(x, k, True, "tril")


@_dual(lambda x, k=0: np.triu(x, k), "x")
def triu(x, k=0):
    """x with the entries below diagonal k of its last two axes set to 0."""
    return _tri_mask(x, k, False, "triu")


def _diag_graph(x, k, what):
    if not is_int(k):
        raise TypeError(f"{what}: k must be an int, got {k!r}")
    k = int(k)
    r = len(x.shape)
    if r == 1:
        n = int(x.shape[0])
        size = n + builtins.abs(k)
        _check_size((size, size), what)
        # x as a column padded to the matrix's rows (above for k < 0), times diagonal k of ones
        zeros = [_t(np.zeros(builtins.abs(k), np.float32))] if k else []
        col = _np_ops.concatenate(zeros + [x] if k < 0 else [x] + zeros, axis=0) if k else x
        return _c.reshape(_cont(col), (size, 1)) * _t(np.eye(size, size, k, dtype=np.float32))
    if r == 2:
        return _diagonal(x, k, 0, 1, what)
    raise ValueError(f"{what}: x must be 1-D or 2-D, got shape {_shape(x)}")


@_dual(lambda x, k=0: np.diag(x, k), "x")
def diag(x, k=0):
    """A 1-D x on diagonal k of a square matrix, or diagonal k of a 2-D x."""
    return _diag_graph(_f(x), k, "diag")


@_dual(lambda x, k=0: np.diagflat(x, k), "x")
def diagflat(x, k=0):
    """The flattened x on diagonal k of a square matrix."""
    x = _f(x)
    return _diag_graph(_c.reshape(_cont(x), (x.nelements,)), k, "diagflat")


def _diagonal(x, offset, axis1, axis2, what):
    if not is_int(offset):
        raise TypeError(f"{what}: offset must be an int, got {offset!r}")
    r = len(x.shape)
    if r < 2:
        raise ValueError(f"{what}: x needs at least 2 dims, got shape {_shape(x)}")
    a1, a2 = _axis(axis1, r, what), _axis(axis2, r, what)
    if a1 == a2:
        raise ValueError(f"{what}: axis1 and axis2 are the same axis ({axis1})")
    rest = [i for i in range(r) if i not in (a1, a2)]
    moved = _permute(x, rest + [a1, a2])
    n1, n2 = int(x.shape[a1]), int(x.shape[a2])
    k = int(offset)
    i = np.arange(builtins.max(0, -k), builtins.min(n1, n2 - k))
    if i.size == 0:
        raise ValueError(f"{what}: offset {offset} leaves no diagonal in a {n1} x {n2} matrix (ggml has no empty "
                         f"tensors)")
    kept = tuple(int(x.shape[d]) for d in rest)
    flat = _c.reshape(_cont(moved), kept + (n1 * n2,))
    return _np_ops.take(flat, (i * n2 + i + k).astype(np.int32), axis=len(kept))


@_dual(lambda x, offset=0, axis1=0, axis2=1: np.diagonal(x, offset, axis1, axis2).copy(), "x")
def diagonal(x, offset=0, axis1=0, axis2=1):
    """The entries (i, i + offset) of the axes ``axis1``, ``axis2``, as a last axis."""
    return _diagonal(_f(x), offset, axis1, axis2, "diagonal")


@_dual(lambda x, offset=0, axis1=0, axis2=1: np.trace(x, offset, axis1, axis2), "x")
def trace(x, offset=0, axis1=0, axis2=1):
    """The sum of ``diagonal(x, offset, axis1, axis2)``."""
    d = _diagonal(_f(x), offset, axis1, axis2, "trace")
    return _np_ops.sum(d, axis=-1)


def _flat(t):
    return _c.reshape(_cont(t), (t.nelements,))


@_dual(lambda x1, x2: np.outer(x1, x2), "x1", "x2")
def outer(x1, x2):
    """Every entry of x1 (flattened) times every entry of x2: (x1.size, x2.size)."""
    a, b = _flat(_f(x1)), _flat(_f(x2))
    _check_size((a.nelements, b.nelements), "outer")
    return _c.reshape(a, (a.nelements, 1)) * _c.reshape(b, (1, b.nelements))


@_dual(lambda x1, x2: np.inner(x1, x2), "x1", "x2")
def inner(x1, x2):
    """Sums of products over the last axes: shape x1.shape[:-1] + x2.shape[:-1]."""
    a, b = _f(x1), _f(x2)
    if int(a.shape[-1]) != int(b.shape[-1]):
        raise ValueError(f"inner: the last axes differ: {_shape(a)} and {_shape(b)}")
    if len(a.shape) == 1 and len(b.shape) == 1:
        return _np_ops.sum(a * b)
    out = _shape(a)[:-1] + _shape(b)[:-1]
    _check_dims(out, "inner")
    y = _rows(a) @ _np_ops.transpose(_rows(b))
    return _c.reshape(_cont(y), out or (1,))


@_dual(lambda x1, x2: np.vdot(x1, x2), "x1", "x2")
def vdot(x1, x2):
    """The sum of the products of the flattened x1 and x2 (same size)."""
    a, b = _flat(_f(x1)), _flat(_f(x2))
    if a.nelements != b.nelements:
        raise ValueError(f"vdot: x1 has {a.nelements} values and x2 {b.nelements}")
    return _np_ops.sum(a * b)


@_dual(lambda x1, x2: np.kron(x1, x2), "x1", "x2")
def kron(x1, x2):
    """The Kronecker product (1-D or 2-D in a graph: the blocks need twice the dims)."""
    a, b = _f(x1), _f(x2)
    r = builtins.max(len(a.shape), len(b.shape))
    if r > 2:
        raise ValueError(f"kron: in a graph x1 and x2 must be 1-D or 2-D (the product needs twice their dims, "
                         f"ggml has {MAX_DIMS}), got {_shape(a)} and {_shape(b)}")
    sa = (1,) * (r - len(a.shape)) + _shape(a)
    sb = (1,) * (r - len(b.shape)) + _shape(b)
    if r == 1:
        y = _c.reshape(_cont(a), (sa[0], 1)) * _c.reshape(_cont(b), (1, sb[0]))
        return _c.reshape(_cont(y), (sa[0] * sb[0],))
    _check_size((sa[0] * sb[0], sa[1] * sb[1]), "kron")
    y = _c.reshape(_cont(a), (sa[0], 1, sa[1], 1)) * _c.reshape(_cont(b), (1, sb[0], 1, sb[1]))
    return _c.reshape(_cont(y), (sa[0] * sb[0], sa[1] * sb[1]))


def _cross_host(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    return np.cross(x1, x2, axisa, axisb, axisc, axis)


@_dual(_cross_host, "x1", "x2")
def cross(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3-vectors (or 2-vectors: the z component, as numpy) along
    ``axisa``/``axisb``, the result's vectors along ``axisc`` (``axis`` sets all three)."""
    a, b = _f(x1), _f(x2)
    if axis is not None:
        axisa = axisb = axisc = axis
    aa, ab = _axis(axisa, len(a.shape), "cross"), _axis(axisb, len(b.shape), "cross")
    na, nb = int(a.shape[aa]), int(b.shape[ab])
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"cross: the vector axes must have 2 or 3 entries, got {na} and {nb}")
    ca = [_np_ops.take(a, np.array([i], np.int32), axis=aa) for i in range(na)]
    cb = [_np_ops.take(b, np.array([i], np.int32), axis=ab) for i in range(nb)]
    ca = [_np_ops.squeeze(c, aa) if len(a.shape) > 1 else c for c in ca]
    cb = [_np_ops.squeeze(c, ab) if len(b.shape) > 1 else c for c in cb]
    if na == 2 and nb == 2:
        return _cont(ca[0] * cb[1] - ca[1] * cb[0])
    zero_a = _np_ops.zeros_like(ca[0])
    zero_b = _np_ops.zeros_like(cb[0])
    ax_, ay_, az_ = ca + ([zero_a] if na == 2 else [])
    bx_, by_, bz_ = cb + ([zero_b] if nb == 2 else [])
    parts = [ay_ * bz_ - az_ * by_, az_ * bx_ - ax_ * bz_, ax_ * by_ - ay_ * bx_]
    parts = [_cont(p) for p in parts]
    out_r = len(parts[0].shape) + 1 if builtins.max(len(a.shape), len(b.shape)) > 1 else 1
    if out_r == 1:
        return _np_ops.concatenate([_c.reshape(p, (1,)) for p in parts], axis=0)
    return _np_ops.stack(parts, axis=_axis(axisc, out_r, "cross"))


def _corrcoef_host(x):
    return np.corrcoef(x)


@_dual(_corrcoef_host, "x")
def corrcoef(x):
    """Pearson's correlation of the rows of x (the variables) over its columns (observations)."""
    x = _f(x)
    if len(x.shape) == 1:
        x = _c.reshape(_cont(x), (1, int(x.shape[0])))
    if len(x.shape) != 2:
        raise ValueError(f"corrcoef: x must be 1-D or 2-D, got shape {_shape(x)}")
    centred = _cont(x - _np_ops.mean(x, axis=1, keepdims=True))
    cov = centred @ _np_ops.transpose(centred)
    d = _c.sqrt(_np_ops.sum(_c.sqr(centred), axis=1, keepdims=True))
    return cov / _np_ops.broadcast_to(d * _np_ops.transpose(d), _shape(cov))


def _correlate_host(x1, x2, mode="valid"):
    return np.correlate(x1, x2, mode)


@_dual(_correlate_host, "x1", "x2")
def correlate(x1, x2, mode="valid"):
    """numpy's correlation of two 1-D tensors: sums of x1[n + k] * x2[n] (``mode`` valid,
    same or full)."""
    if mode not in ("valid", "same", "full"):
        raise ValueError(f"correlate: mode must be 'valid', 'same' or 'full', got {mode!r}")
    a, v = _f(x1), _f(x2)
    if len(a.shape) != 1 or len(v.shape) != 1:
        raise ValueError(f"correlate: x1 and x2 must be 1-D, got {_shape(a)} and {_shape(v)}")
    swap = int(v.shape[0]) > int(a.shape[0])
    if swap:                                   # numpy: the result of the swapped pair, reversed
        a, v = v, a
    n, m = int(a.shape[0]), int(v.shape[0])
    pad = {"valid": 0, "same": m // 2, "full": m - 1}[mode]
    right = {"valid": 0, "same": m - 1 - m // 2, "full": m - 1}[mode]
    if pad or right:
        parts = ([_t(np.zeros(pad, np.float32))] if pad else []) + [a] + \
            ([_t(np.zeros(right, np.float32))] if right else [])
        a = _np_ops.concatenate(parts, axis=0)
    length = n + pad + right - m + 1
    _check_size((length, m), "correlate")
    idx = (np.arange(length)[:, None] + np.arange(m)[None, :]).astype(np.int32)
    windows = _np_ops.take(a, idx)                    # (length, m)
    y = _np_ops.sum(windows * _c.reshape(_cont(v), (1, m)), axis=1)
    if swap:
        y = _np_ops.take(y, np.arange(length - 1, -1, -1).astype(np.int32))
    return y


# --- shapes and layout ---------------------------------------------------------------------------

def _flip_graph(x, axis):
    axes = _axes(axis, len(x.shape), "flip")
    for ax in axes:
        n = int(x.shape[ax])
        if n > 1:
            x = _np_ops.take(x, np.arange(n - 1, -1, -1).astype(np.int32), axis=ax)
    return x


@_dual(lambda x, axis=None: np.flip(x, axis).copy(), "x")
def flip(x, axis=None):
    """x reversed along ``axis`` (an int, a tuple, or None: all)."""
    return _flip_graph(_f(x), axis)


def _rot90_host(array, k=1, axes=(0, 1)):
    return np.rot90(array, k, axes).copy()


@_dual(_rot90_host, "array")
def rot90(array, k=1, axes=(0, 1)):
    """x turned by 90 degrees k times in the plane of ``axes``, from the first toward the second."""
    x = _f(array)
    r = len(x.shape)
    if not is_int(k):
        raise TypeError(f"rot90: k must be an int, got {k!r}")
    if not isinstance(axes, (list, tuple)) or len(axes) != 2:
        raise ValueError(f"rot90: axes must be two axes, got {axes!r}")
    a0, a1 = _axis(axes[0], r, "rot90"), _axis(axes[1], r, "rot90")
    if a0 == a1:
        raise ValueError(f"rot90: the axes must differ, got {axes!r}")
    k = int(k) % 4
    if k == 0:
        return x
    if k == 2:
        return _flip_graph(x, (a0, a1))
    perm = list(range(r))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return _permute(_flip_graph(x, a1), perm)
    return _flip_graph(_permute(x, perm), a1)


def _roll_host(x, shift, axis=None):
    return np.roll(x, shift, axis)


@_dual(_roll_host, "x")
def roll(x, shift, axis=None):
    """x's entries moved ``shift`` places along ``axis`` (those leaving one end come in at the
    other; the flattened x for None); ints or tuples of them."""
    x = _f(x)
    shape = _shape(x)
    shifts = shift if isinstance(shift, (list, tuple)) else (shift,)
    if not builtins.all(is_int(s) for s in shifts):
        raise TypeError(f"roll: shift must be an int or a tuple of ints, got {shift!r}")
    if axis is None:
        if len(shifts) != 1:
            raise ValueError("roll: without axis, shift must be one int")
        n = x.nelements
        idx = ((np.arange(n) - int(shifts[0])) % n).astype(np.int32)
        return _c.reshape(_cont(_np_ops.take(_flat(x), idx)), shape)
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    total = {}
    for s, a in zip(shifts, axes):
        ax = _axis(a, len(shape), "roll")
        total[ax] = total.get(ax, 0) + int(s)
    for ax, s in total.items():
        n = shape[ax]
        if s % n:
            x = _np_ops.take(x, ((np.arange(n) - s) % n).astype(np.int32), axis=ax)
    return x


@_dual(lambda xs: np.hstack(xs), "xs")
def hstack(xs):
    """The tensors joined along axis 1 (axis 0 for 1-D ones)."""
    ts = [_f(v) for v in xs]
    if not ts:
        raise ValueError("hstack needs at least one tensor")
    axis = 0 if len(ts[0].shape) == 1 else 1
    return ts[0] if len(ts) == 1 else _np_ops.concatenate(ts, axis=axis)


@_dual(lambda xs: np.vstack(xs), "xs")
def vstack(xs):
    """The tensors joined along axis 0 (1-D ones as rows)."""
    ts = [_f(v) for v in xs]
    if not ts:
        raise ValueError("vstack needs at least one tensor")
    ts = [_c.reshape(_cont(t), (1, int(t.shape[0]))) if len(t.shape) == 1 else t for t in ts]
    return ts[0] if len(ts) == 1 else _np_ops.concatenate(ts, axis=0)


@_dual(lambda x, source, destination: np.moveaxis(x, source, destination), "x")
def moveaxis(x, source, destination):
    """x with axes ``source`` moved to ``destination`` (ints or tuples), the others in order."""
    x = _t(x)
    r = len(x.shape)
    src = source if isinstance(source, (list, tuple)) else (source,)
    dst = destination if isinstance(destination, (list, tuple)) else (destination,)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: {len(src)} source axes but {len(dst)} destinations")
    src = [_axis(a, r, "moveaxis") for a in src]
    dst = [_axis(a, r, "moveaxis") for a in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: repeated axis in {source!r} or {destination!r}")
    order = [i for i in range(r) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _permute(x, order)


@_dual(lambda x: np.ravel(x).copy(), "x")
def ravel(x):
    """x flattened to 1-D."""
    return _flat(_t(x))


def _append_host(x1, x2, axis=None):
    return np.append(x1, x2, axis)


@_dual(_append_host, "x1", "x2")
def append(x1, x2, axis=None):
    """x2 after x1 along ``axis`` (both flattened for None)."""
    a, b = _f(x1), _f(x2)
    if axis is None:
        return _np_ops.concatenate([_flat(a), _flat(b)], axis=0)
    return _np_ops.concatenate([a, b], axis=axis)


def _unstack_host(x, num=None, axis=0):
    x = np.asarray(x)
    ax = _axis(axis, x.ndim, "unstack")
    if num is not None and num != x.shape[ax]:
        raise ValueError(f"unstack: num={num} but axis {axis} has {x.shape[ax]} entries")
    return [np.take(x, i, axis=ax) for i in range(x.shape[ax])]


@_dual(_unstack_host, "x")
def unstack(x, num=None, axis=0):
    """The slices of x along ``axis``, as a list (``num``, when given, must be that axis's length)."""
    x = _t(x)
    r = len(x.shape)
    ax = _axis(axis, r, "unstack")
    n = int(x.shape[ax])
    if num is not None and num != n:
        raise ValueError(f"unstack: num={num} but axis {axis} has {n} entries")
    parts = _np_ops.split(x, n, axis=ax) if n > 1 else [x]
    return [_np_ops.squeeze(p, ax) if r > 1 else p for p in parts]


def _meshgrid_host(*x, indexing="xy"):
    return [a.copy() for a in np.meshgrid(*x, indexing=indexing)]


def meshgrid(*x, indexing="xy"):
    """Coordinate grids of 1-D tensors: ``indexing`` 'xy' (the first two axes swapped, as numpy)
    or 'ij'."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    in_graph = _scope.current() is not None
    known = [host_value(v) if in_graph else (None if isinstance(v, Tensor) else _array(v, "meshgrid"))
             for v in x]
    if not builtins.any(k is None for k in known):
        out = _meshgrid_host(*[np.ravel(k) for k in known], indexing=indexing)
        return [_constant(o, "meshgrid") for o in out] if in_graph else out
    if not in_graph:
        raise TypeError("meshgrid: a graph tensor is only usable inside a model's graph")
    ts = [_flat(_f(v)) for v in x]
    sizes = [int(t.shape[0]) for t in ts]
    if indexing == "xy" and len(ts) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    _check_dims(sizes, "meshgrid")
    _check_size(sizes, "meshgrid")
    out = []
    for i, t in enumerate(ts):
        pos = i
        if indexing == "xy" and len(ts) >= 2 and i < 2:
            pos = 1 - i
        shape = [1] * len(ts)
        shape[pos] = int(t.shape[0])
        out.append(_np_ops.broadcast_to(_c.reshape(t, tuple(shape)), tuple(sizes)))
    return out


def _linspace_host(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    return np.linspace(start, stop, num, endpoint, retstep, dtype, axis)


def _check_num(num, what):
    if not is_int(num) or num < 1:
        raise ValueError(f"{what}: num must be a positive int, got {num!r}")


@_dual(_linspace_host, "start", "stop")
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """``num`` evenly spaced values from start to stop (included with ``endpoint``); start and
    stop may be tensors (then the values' axis is ``axis``; the gradient reaches both)."""
    _check_num(num, "linspace")
    a, b = _f(start), _f(stop)
    shape = _broadcast(_shape(a), _shape(b), "linspace")
    div = (num - 1) if endpoint else num
    steps = np.arange(num, dtype=np.float64) / (div if div > 0 else 1)
    full = (num,) + shape
    _check_dims(full, "linspace")
    _check_size(full, "linspace")
    t = _t(steps.astype(np.float32).reshape((num,) + (1,) * len(shape)))
    a, b = _np_ops.broadcast_to(a, shape), _np_ops.broadcast_to(b, shape)
    delta = _cont(b - a)
    y = _c.reshape(_cont(a), (1,) + shape) + t * _c.reshape(delta, (1,) + shape)
    y = _np_ops.broadcast_to(y, full) if _shape(y) != full else y
    if len(shape) and axis != 0:
        y = moveaxis(y, 0, axis)
    if dtype is not None and _np_ops._dtype_kind(dtype, "linspace")[0] == "int":
        y = _floor(y)                                  # numpy's int linspace floors (an int tensor computes as float)
    if retstep:
        return y, _c.scale(delta, 1.0 / div) if div > 0 else delta
    return y


def _logspace_host(start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0):
    return np.logspace(start, stop, num, endpoint, base, dtype, axis)


@_dual(_logspace_host, "start", "stop")
def logspace(start, stop, num=50, endpoint=True, base=10, dtype=None, axis=0):
    """base ** linspace(start, stop, num, endpoint)."""
    if not is_number(base) or base <= 0:
        raise ValueError(f"logspace: base must be a positive number, got {base!r}")
    y = linspace(start, stop, num, endpoint, axis=axis)
    return _c.exp(_c.scale(_cont(y), math.log(float(base))))


def _take_along_axis_host(x, indices, axis=None):
    return np.take_along_axis(x, indices, axis)


def take_along_axis(x, indices, axis=None):
    """numpy's take_along_axis: x's entries at ``indices`` along ``axis`` (int indices of x's
    rank, the other axes broadcast; of the flattened x for None).  The gradient reaches x."""
    in_graph = _scope.current() is not None
    if not in_graph and not isinstance(x, Tensor) and not isinstance(indices, Tensor):
        a, idx = _array(x, "take_along_axis"), np.asarray(indices)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"take_along_axis: indices must be integers, got dtype {idx.dtype}")
        return _take_along_axis_host(a, idx, axis)
    if not in_graph:
        raise TypeError("take_along_axis: a graph tensor is only usable inside a model's graph")
    x = _f(x)
    if axis is None:
        x = _flat(x)
        axis = 0
    r = len(x.shape)
    ax = _axis(axis, r, "take_along_axis")
    n = int(x.shape[ax])
    known = host_value(indices) if isinstance(indices, Tensor) else np.asarray(indices)
    if known is not None:
        known = np.asarray(known)
        if known.dtype.kind not in "iu":
            raise TypeError(f"take_along_axis: indices must be integers, got dtype {known.dtype}")
        if known.ndim != r:
            raise ValueError(f"take_along_axis: indices need x's {r} dims, got shape {known.shape}")
        if known.size and (known.min() < -n or known.max() >= n):
            raise IndexError(f"take_along_axis: an index is outside [-{n}, {n}) along axis {axis}")
        idx = np.where(known < 0, known + n, known).astype(np.int64)
        ishape = idx.shape
    else:
        if indices.dtype not in ("i32", "f32"):
            raise TypeError(f"take_along_axis: indices must be an integer tensor, got {indices.dtype}")
        idx = _f(indices)
        ishape = _shape(idx)
        if len(ishape) != r:
            raise ValueError(f"take_along_axis: indices need x's {r} dims, got shape {ishape}")
    try:
        other = np.broadcast_shapes(tuple(d for i, d in enumerate(_shape(x)) if i != ax),
                                    tuple(d for i, d in enumerate(ishape) if i != ax))
    except ValueError:
        raise ValueError(f"take_along_axis: x {_shape(x)} and indices {ishape} do not broadcast outside axis "
                         f"{axis}") from None
    k = ishape[ax]
    xs = list(other)
    xs.insert(ax, n)
    ks = list(other)
    ks.insert(ax, k)
    _check_dims(ks, "take_along_axis")
    x = _np_ops.broadcast_to(x, tuple(xs)) if _shape(x) != tuple(xs) else x
    rows = _last(x, ax)                                     # (m, n)
    m = int(rows.shape[0])
    kept = tuple(other)
    if known is not None:
        # the flat positions, known now: ggml's get_rows (its gradient reaches x)
        irows = np.moveaxis(np.broadcast_to(idx, tuple(ks)), ax, -1).reshape(m, k)
        flat_idx = (irows + np.arange(m)[:, None] * n).reshape(-1).astype(np.int32)
        picked = _c.get_rows(_c.reshape(rows, (m * n, 1)), _t(flat_idx))
    else:
        # indices computed in the graph: each one compared with 0..n-1, the hits summed
        if m * k * n > MAX_SORT:
            raise ValueError(f"take_along_axis: computed indices pick by comparing each with every position "
                             f"({m * k * n} > {MAX_SORT} values); pass indices known when the graph is built")
        idx = _np_ops.broadcast_to(idx, tuple(ks)) if ishape != tuple(ks) else idx
        irows = _last(idx, ax)                              # (m, k)
        irows = _cont(irows + _c.scale(_c.step(_c.neg(irows)), float(n)))     # negative: from the end
        hits = _np_ops.equal(_c.reshape(irows, (m, k, 1)), _t(np.arange(n, dtype=np.float32)))
        picked = _np_ops.sum(hits * _c.reshape(rows, (m, 1, n)), axis=2)
    return _restore(_c.reshape(_cont(picked), kept + (k,)), tuple(ks), ax)


def _diff_host(a, n=1, axis=-1):
    a = np.asarray(a)
    if is_int(n) and a.ndim and n > a.shape[axis if is_int(axis) and -a.ndim <= axis < a.ndim else -1]:
        n = a.shape[axis if is_int(axis) and -a.ndim <= axis < a.ndim else -1]   # numpy loops n times: all empty
    return np.diff(a, n, axis)


@_dual(_diff_host, "a")
def diff(a, n=1, axis=-1):
    """The n-th differences along ``axis``: a[i + 1] - a[i], n times."""
    x = _f(a)
    if not is_int(n) or n < 0:
        raise ValueError(f"diff: n must be an int >= 0, got {n!r}")
    r = len(x.shape)
    ax = _axis(axis, r, "diff")
    if n >= int(x.shape[ax]):
        raise ValueError(f"diff: n={n} differences of {x.shape[ax]} entries leave none (ggml has no empty tensors)")
    for _ in range(int(n)):
        hi = tuple(slice(1, None) if i == ax else slice(None) for i in range(r))
        lo = tuple(slice(None, -1) if i == ax else slice(None) for i in range(r))
        x = _cont(x[hi] - x[lo])
    return x


def _select_host(condlist, choicelist, default=0):
    return np.select([np.asarray(c, bool) for c in condlist], choicelist, default)


@_dual(_select_host, "condlist", "choicelist", "default")
def select(condlist, choicelist, default=0):
    """The choice of the first true condition, entry by entry; ``default`` where none is."""
    if not isinstance(condlist, (list, tuple)) or not isinstance(choicelist, (list, tuple)):
        raise TypeError("select: condlist and choicelist must be lists")
    if len(condlist) != len(choicelist) or not condlist:
        raise ValueError(f"select: {len(condlist)} conditions for {len(choicelist)} choices (need as many, and "
                         f"at least one)")
    out = _f(default)
    for c, v in reversed(list(zip(condlist, choicelist))):
        out = _np_ops.where(_bool01(_f(c)), v, out)
    return out


# --- making arrays, asking about them --------------------------------------------------------------

def identity(n, dtype=None):
    """The n x n identity matrix (Keras's ``identity``, a constant)."""
    if not is_int(n) or n < 1:
        raise ValueError(f"identity: n must be a positive int, got {n!r}")
    return _np_ops.eye(n, dtype=dtype)


def empty(shape, dtype=None):
    """A tensor of ``shape`` (zeros: pyggml fills it)."""
    return _np_ops.zeros(shape, dtype=dtype)


def array(x, dtype=None):
    """x as a tensor: a constant in a graph, a numpy array outside."""
    if _scope.current() is None and not isinstance(x, Tensor):
        a = x.numpy() if isinstance(x, Variable) else np.asarray(x)
        return a.astype(dtype) if dtype is not None else a.copy()
    return _np_ops.convert_to_tensor(x, dtype)


@_dual(lambda x: np.array(x, copy=True), "x")
def copy(x):
    """A copy of x (the same values; the gradient passes)."""
    return _c.cont(_t(x))


@_dual(lambda x: np.conj(x), "x")
def conj(x):
    """The complex conjugate: x itself for real tensors (pyggml's are real)."""
    return _t(x)


@_dual(lambda x: np.real(x).copy(), "x")
def real(x):
    """The real part: x itself for real tensors."""
    return _t(x)


@_dual(lambda x: np.imag(x).copy(), "x")
def imag(x):
    """The imaginary part: zeros for real tensors (no gradient)."""
    return _np_ops.zeros_like(_t(x))


def _shape_any(x):
    if isinstance(x, (Tensor, Variable)):
        return tuple(int(d) for d in x.shape)
    if not isinstance(x, np.ndarray) and hasattr(x, "shape") and hasattr(x, "dtype"):
        return tuple(x.shape)               # a functional model's node: the batch is None
    return np.shape(x)


def ndim(x):
    """The number of dims (an int)."""
    return len(_shape_any(x))


def size(x):
    """The number of values (an int; None while a dim is unknown, as a functional node's batch)."""
    shape = _shape_any(x)
    if builtins.any(d is None for d in shape):
        return None
    return int(np.prod(shape, dtype=np.int64))




def dtype(x):
    """x's dtype as a standard name ('float32', 'int32', ...)."""
    if isinstance(x, Tensor):
        return str(x.dtype)             # Keras's name ("float32", "int32")
    if isinstance(x, Variable):
        return "float32"
    if not isinstance(x, np.ndarray) and isinstance(getattr(x, "dtype", None), str):
        return x.dtype
    return np.asarray(x).dtype.name


def is_tensor(x):
    """True for a graph tensor, a Variable or a numpy array (the eager tensors)."""
    return isinstance(x, (Tensor, Variable, np.ndarray))


def _saturate_host(x, dtype):
    kind, dt = _np_ops._dtype_kind(dtype, "saturate_cast")
    a = np.asarray(x)
    if kind == "bool":
        return np.clip(a, 0, 1).astype(dt)                  # Keras: [0, 1] first (a negative is False)
    if kind == "int":
        info = np.iinfo(dt)
        with np.errstate(invalid="ignore"):
            return np.clip(np.nan_to_num(a, nan=0), info.min, info.max).astype(dt)
    if kind == "float" and dt.itemsize < a.dtype.itemsize and a.dtype.kind == "f":
        info = np.finfo(dt)
        return np.clip(a, info.min, info.max).astype(dt)
    return a.astype(dt)


@_dual(_saturate_host, "x")
def saturate_cast(x, dtype):
    """x cast to ``dtype`` with values beyond its range clipped to the range first.  In a graph
    an integer dtype gives the clipped values truncated toward zero as floats (integer tensors
    compute as float; zero gradient), so the result can go on into a training graph."""
    kind, dt = _np_ops._dtype_kind(dtype, "saturate_cast")
    x = _f(x)
    if kind == "bool":
        return _np_ops.cast(_np_ops.clip(x, 0.0, 1.0), "bool")
    if kind == "int":
        info = np.iinfo(dt)
        lo = builtins.max(float(info.min), -2.0 ** 31)
        hi = builtins.min(float(info.max), 2.0 ** 31 - 128)       # float32's largest below 2**31
        return _trunc(_np_ops.clip(x, lo, hi))
    if kind == "float" and dt.itemsize < 4:
        info = np.finfo(dt)
        return _np_ops.clip(x, float(info.min), float(info.max))
    return _np_ops.cast(x, dtype)


def _digitize_host(x, bins):
    return np.digitize(x, bins).astype(np.int32)


@_dual(_digitize_host, "x")
def digitize(x, bins):
    """Which bin each value falls in: the count of (increasing) ``bins`` at or below it
    (int32 on arrays, a float count in a graph; zero gradient)."""
    b = np.asarray(host_value(bins) if isinstance(bins, Tensor) else bins, dtype=np.float64)
    if b.ndim != 1 or b.size == 0 or np.any(np.diff(b) < 0):
        raise ValueError(f"digitize: bins must be a non-empty increasing 1-D array, got {bins!r}")
    x = _f(x)
    shape = _shape(x)
    _check_dims(shape + (b.size,), "digitize")
    _check_size(shape + (b.size,), "digitize")
    col = _c.reshape(_cont(x), shape + (1,))
    at_or_above = _np_ops.greater_equal(col, _t(b.astype(np.float32)))
    return _np_ops.sum(at_or_above, axis=-1)


def _bincount_host(x, weights=None, minlength=0, sparse=False):
    x = np.asarray(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"bincount: x must hold integers, got dtype {x.dtype}")
    if x.size and x.min() < 0:
        raise ValueError("bincount: x must not hold negative values")
    if x.ndim not in (1, 2):
        raise ValueError(f"bincount: x must be 1-D or 2-D (one count per row), got shape {x.shape}")
    w = None if weights is None else np.asarray(weights)
    if w is not None and w.shape != x.shape:
        raise ValueError(f"bincount: weights of shape {w.shape} must have x's shape {x.shape}")
    out_type = np.int32 if w is None else w.dtype         # Keras: int32 counts, or the weights' type
    if x.ndim == 1:
        return np.bincount(x, w, minlength).astype(out_type)
    length = builtins.max(int(x.max()) + 1 if x.size else 0, int(minlength))
    rows = [np.bincount(r, None if w is None else w[i], length) for i, r in enumerate(x)]
    return np.stack(rows).astype(out_type)


def bincount(x, weights=None, minlength=0, sparse=False):
    """How often each value 0, 1, ... occurs in x (1-D, or 2-D counted per row), optionally
    summing ``weights``.  Its length is the largest value + 1 (at least ``minlength``): on
    arrays only, unless ``minlength`` is given, when a graph counts the values below it
    (larger ones are not counted: a graph's shape cannot depend on the values)."""
    if sparse:
        raise ValueError("bincount: sparse=True is not available (pyggml's tensors are dense)")
    if not is_int(minlength) or minlength < 0:
        raise ValueError(f"bincount: minlength must be an int >= 0, got {minlength!r}")
    in_graph = _scope.current() is not None
    xs = [x] + ([weights] if weights is not None else [])
    if not in_graph and not builtins.any(isinstance(v, Tensor) for v in xs):
        return _bincount_host(_array(x, "bincount"), None if weights is None else _array(weights, "bincount"),
                              int(minlength))
    if in_graph:
        known = [host_value(v) for v in xs]
        if not builtins.any(k is None for k in known):
            return _constant(_bincount_host(known[0], known[1] if weights is not None else None, int(minlength)),
                             "bincount")
    if not in_graph or minlength == 0:
        _arrays_only("bincount", "without minlength its length depends on the values; pass minlength to "
                     "count the values below it in a graph")
    t = _f(x)
    if len(t.shape) > 2:
        raise ValueError(f"bincount: x must be 1-D or 2-D, got shape {_shape(t)}")
    shape = _shape(t)
    _check_size(shape + (int(minlength),), "bincount")
    col = _c.reshape(_cont(t), shape + (1,))
    hits = _np_ops.equal(col, _t(np.arange(int(minlength), dtype=np.float32)))     # (..., n, L)
    if weights is not None:
        w = _f(weights)
        if _shape(w) != shape:
            raise ValueError(f"bincount: weights of shape {_shape(w)} must have x's shape {shape}")
        hits = hits * _c.reshape(_cont(w), shape + (1,))
    return _np_ops.sum(hits, axis=-2)


# --- bitwise (integer arrays only) ----------------------------------------------------------------

def _integer_arrays(name, *args):
    if _scope.current() is not None or builtins.any(isinstance(a, (Tensor, Variable)) for a in args):
        _arrays_only(name, "integer tensors compute as float in a graph, which has no bits to work on")
    # a Python int stays one (numpy keeps the array's dtype beside it)
    arrays = [a if isinstance(a, (int, bool, np.integer, np.bool_)) else np.asarray(a) for a in args]
    for a in arrays:
        if isinstance(a, np.ndarray) and a.dtype.kind not in "biu":
            raise TypeError(f"{name}: expected integers or booleans, got dtype {a.dtype}")
        if isinstance(a, float):
            raise TypeError(f"{name}: expected integers or booleans, got {a!r}")
    return arrays


def bitwise_and(x, y):
    """x & y, bit by bit, on integer (or bool) arrays."""
    return np.bitwise_and(*_integer_arrays("bitwise_and", x, y))


def bitwise_or(x, y):
    """x | y, bit by bit, on integer (or bool) arrays."""
    return np.bitwise_or(*_integer_arrays("bitwise_or", x, y))


def bitwise_xor(x, y):
    """x ^ y, bit by bit, on integer (or bool) arrays."""
    return np.bitwise_xor(*_integer_arrays("bitwise_xor", x, y))


def bitwise_not(x):
    """~x, bit by bit (logical not for bools), on integer (or bool) arrays."""
    return np.invert(*_integer_arrays("bitwise_not", x))


def bitwise_invert(x):
    """~x (the same as bitwise_not)."""
    return np.invert(*_integer_arrays("bitwise_invert", x))


def _shift_amounts(name, x, y):
    x, y = _integer_arrays(name, x, y)
    if np.any(np.asarray(y) < 0):
        raise ValueError(f"{name}: shift amounts must be >= 0, got {y!r}")
    return x, y


def left_shift(x, y):
    """x shifted left by y bits, on integer arrays."""
    return np.left_shift(*_shift_amounts("left_shift", x, y))


def right_shift(x, y):
    """x shifted right by y bits (the sign kept), on integer arrays."""
    return np.right_shift(*_shift_amounts("right_shift", x, y))
