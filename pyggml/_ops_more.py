"""More of Keras's ``keras.ops`` functions, with numpy's axes: element-wise math, array
layout, NaN-aware reductions, windows, a little linear algebra and two pixel shuffles.
``pyggml.ops`` installs them (its ``_KERAS_MODULES``).

On arrays and numbers (outside a model's graph) each function computes at once with numpy,
as Keras's numpy backend does: float results come back as float32, indices as int32,
predicates as bools, and the layout functions keep their input's dtype.  Inside a graph (a
layer's ``call``, a ``Lambda``, a functional node, a ``GradientTape``) each is built from
Keras-level ops with a backward pass, so it trains; the piecewise-constant ones (the
predicates, ``searchsorted``, ``isin``, ``histogram``'s counts, ``unravel_index``, the arg
functions) have a zero gradient, and their integers are float tensors there (as
``digitize``'s).  When every argument is known when the graph is built the function
computes on the host and gives a constant.

The NaN-aware functions replace NaN by a neutral value before reducing, keeping
infinities, so NaN neither reaches the result nor the gradient (a slice of NaN alone gives
NaN, as numpy; ``nanargmax``/``nanargmin`` give -1 there, as Keras).

A few take arrays only and refuse a computed graph tensor with a TypeError: ``unique`` (its
length depends on the values), ``gcd``/``lcm``/``nextafter`` (integer or float bits, which
a graph's float ops cannot reach), and ``pinv``/``matrix_rank`` (they need a singular value
decomposition, which ggml lacks).  The windows (``hanning``, ``hamming``, ...) take the
window's length, an int, and give an array (a constant inside a graph).
"""

import builtins
import functools
import math
import warnings

import numpy as np

from pyggml import _ops_control, _ops_math, _ops_nn, _scope
from pyggml import _ops_numpy as _np_ops
from pyggml._ops_math import (MAX_SORT, _QUANTILE_METHODS, _array, _arrays_only, _bool01, _broadcast, _constant,
                              _dual, _floor, _integer_arrays, _isinf, _isnan, _one, _pick, _rint, _shape, _trunc)
from pyggml._ops_numpy import (MAX_DIMS, _axes, _axis, _check_dims, _check_size, _cont, _f, _t, _to_last,
                               host_value)
from pyggml._validation import is_int, is_number
from pyggml.core import Tensor
from pyggml.core import ops as _c
from pyggml.variables import Variable

__all__ = ["erfc", "fabs", "fmax", "fmin", "fmod", "heaviside", "hypot", "sinc", "logaddexp2", "isneginf",
           "isposinf", "isreal", "conjugate", "ldexp", "angle", "nextafter", "gcd", "lcm",
           "column_stack", "dstack", "fliplr", "flipud", "array_split", "hsplit", "vsplit", "dsplit", "empty_like",
           "geomspace", "vander", "trapezoid", "ptp", "allclose", "unravel_index", "searchsorted", "isin",
           "histogram", "unique", "cdist",
           "nansum", "nanmean", "nanmax", "nanmin", "nanprod", "nanstd", "nanvar", "nanargmax", "nanargmin",
           "nancumsum", "nancumprod", "nanmedian", "nanquantile", "nanpercentile", "percentile",
           "hanning", "hamming", "bartlett", "blackman", "kaiser",
           "matrix_power", "pinv", "logdet", "matrix_rank",
           "depth_to_space", "space_to_depth", "segment_min", "segment_prod",
           "deg2rad", "rad2deg", "bitwise_left_shift", "bitwise_right_shift", "cholesky_inverse", "i0",
           "view_as_complex", "view_as_real"]

# names that are also ggml ops of pyggml.core.ops: ggml's form for a Tensor outside a model's graph
SHARED_WITH_GGML = ()

_BIG = float(np.finfo(np.float32).max)


# --- helpers ---------------------------------------------------------------------------------------

def _out(a):
    """A host result: floats as float32; ints and bools as numpy gives them."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.kind == "f" and a.dtype != np.float32 else a


def _quiet(fn):
    """fn with numpy's floating-point and NaN-slice warnings silenced (NaN is the documented
    result there)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args, **kwargs)
    return run


def _graph_call(what, *xs):
    """True inside a graph being built; a graph tensor outside one is refused."""
    if _scope.current() is not None:
        return True
    if builtins.any(isinstance(x, Tensor) for x in xs):
        raise TypeError(f"{what}: a graph tensor is only usable inside a model's graph (a layer's call or a "
                        f"Lambda)")
    return False


def _host_only(what, why, compute, *args):
    """compute(*arrays) on arrays; inside a graph on the values known there (the results become
    constants), and a TypeError for a tensor computed in the graph."""
    if not _graph_call(what, *args):
        return compute(*args)
    known = [host_value(a) for a in args]
    if builtins.any(k is None for k in known):
        _arrays_only(what, why)
    out = compute(*known)
    if isinstance(out, (tuple, list)):
        return type(out)(_constant(o, what) for o in out)
    return _constant(out, what)


def _flag(v, what, name):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{what}: {name} must be True or False, got {v!r}")
    return bool(v)


def _special(pos=None, neg=None, nan=None):
    """+inf where the 0/1 mask ``pos`` is 1, -inf where ``neg`` is, nan where ``nan`` is, 0
    elsewhere: the mask times float32's largest value, doubled, overflows to inf (and inf - inf
    is nan); no gradient."""
    def inf(mask):
        return _c.scale(_c.scale(_cont(mask), _BIG), 2.0)
    terms = []
    if pos is not None:
        terms.append(inf(pos))
    if neg is not None:
        terms.append(_c.neg(inf(neg)))
    if nan is not None:
        terms.append(_cont(inf(nan) - inf(nan)))
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return _c.stop_gradient(_cont(out))


def _finite(x):
    """x with nan and +-inf as 0 (the gradient 1 at finite values, 0 at the others)."""
    return _ops_math.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)


def _posinf(x):
    return _isinf(x) * _c.step(x)


def _neginf(x):
    return _isinf(x) * _c.step(_c.neg(x))


def _where(m, a, b):
    """a where the 0/1 mask m is 1, b elsewhere (broadcast), infinities and nan included: the
    finite values by masks (the gradient reaches the one picked), the others added back."""
    n = _one() - m
    fin = m * _finite(a) + n * _finite(b)
    pos = m * _posinf(a) + n * _posinf(b)
    neg = m * _neginf(a) + n * _neginf(b)
    nan = m * _isnan(a) + n * _isnan(b)
    return _cont(fin + _special(pos, neg, nan))


def _fill_nan(x, fill):
    """x with nan replaced by the number ``fill`` (+-inf too); the other values, infinities
    included, stay, with a gradient of 1 at finite ones."""
    nan = _isnan(x)
    out = _finite(x)
    pos, neg = _posinf(x), _neginf(x)
    if math.isinf(fill):
        if fill > 0:
            pos = pos + nan
        else:
            neg = neg + nan
    elif fill:
        out = out + _c.scale(nan, float(fill))
    return _cont(out + _special(pos, neg))


def _not_nan_count(x, axis, keepdims):
    return _np_ops.sum(_one() - _isnan(x), axis, keepdims)


# --- element-wise ----------------------------------------------------------------------------------

# Numerical Recipes' erfcc: erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z >= 0 (relative
# error below 1.2e-7 everywhere, the far tail included)
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
         -0.82215223, 0.17087277)
_erfc_exact = np.vectorize(math.erfc, otypes=[np.float64])


@_dual(lambda x: _out(_erfc_exact(np.asarray(x, np.float64))), "x")
def erfc(x):
    """The complementary error function 1 - erf(x), with its relative precision kept in the
    tail (erfc(9) is 4e-37, not 0)."""
    x = _f(x)
    s = _one() - _c.scale(_c.step(_c.neg(x)), 2.0)          # x's sign, 1 at 0
    z = _cont(x * s)                                          # |x|, with a gradient at 0 too
    z = _where(_c.step(_cont(z - 12.0)), _t(np.float32(12.0)), z)    # erfc(12) is 0 in float32: no inf - inf
    t = _np_ops.reciprocal(_cont(_c.scale(z, 0.5) + 1.0))
    poly = _c.scale(t, _ERFC[-1])
    for coef in reversed(_ERFC[1:-1]):
        poly = _cont((poly + coef) * t)
    poly = _cont(poly + _ERFC[0])
    # z^2 = zh^2 + (z - zh)(z + zh) with zh = z to 1/16: zh^2 is exact, so exp(-z^2) keeps its
    # relative precision far in the tail (a rounded z^2 near 50 is off by 4e-6)
    zh = _c.scale(_rint(_c.scale(z, 16.0)), 1.0 / 16.0)     # no gradient: z's goes through the rest
    rest = _cont(_cont(z - zh) * _cont(z + zh))
    tail = t * _c.exp(_c.neg(_c.sqr(zh))) * _c.exp(_cont(poly - rest))
    return _cont(_c.scale(_c.step(_c.neg(x)), 2.0) + s * tail)    # 2 - tail below 0


@_dual(lambda x: _out(np.fabs(x)), "x")
def fabs(x):
    """|x| as floats (ints become floats, as numpy's fabs)."""
    return _c.abs(_f(x))


def _both(x1, x2, what):
    a, b = _f(x1), _f(x2)
    _broadcast(_shape(a), _shape(b), what)
    return a, b


@_dual(_quiet(lambda x1, x2: _out(np.fmax(x1, x2))), "x1", "x2")
def fmax(x1, x2):
    """The larger of x1 and x2, entry by entry, ignoring nan: the other value where one is nan
    (nan only where both are).  The gradient goes to the one picked (x2 at ties)."""
    a, b = _both(x1, x2, "fmax")
    nan_b = _isnan(b)
    return _where(nan_b + (_one() - nan_b) * _c.step(_cont(a - b)), a, b)


@_dual(_quiet(lambda x1, x2: _out(np.fmin(x1, x2))), "x1", "x2")
def fmin(x1, x2):
    """The smaller of x1 and x2, entry by entry, ignoring nan (nan only where both are)."""
    a, b = _both(x1, x2, "fmin")
    nan_b = _isnan(b)
    return _where(nan_b + (_one() - nan_b) * _c.step(_cont(b - a)), a, b)


def _fmod_host(x1, x2):
    a, b = np.asarray(x1), np.asarray(x2)
    out = np.fmod(a, b)
    return out.astype(np.int32) if out.dtype == np.bool_ else _out(out)


@_dual(_quiet(_fmod_host), "x1", "x2")
def fmod(x1, x2):
    """The remainder of x1 / x2 truncated toward zero (C's fmod): it has x1's sign, where
    ``mod`` has x2's; nan for x2 = 0.  The gradient is 1 for x1 and -trunc(x1 / x2) for x2."""
    a, b = _both(x1, x2, "fmod")
    q = _trunc(_np_ops.divide(a, b))
    p, e = _two_product(q, b)
    r = _cont(_cont(a - p) - e)                                # a - q * b, the product exact
    # x1 / x2 rounded to a whole number can be one off (1 / 0.1 is 10.000000149 in float32):
    # a remainder of the wrong sign, or of |x2| or more, is brought back
    sa = _c.sgn(_c.stop_gradient(a))
    ab = _c.abs(b)
    wrong_sign = _c.step(_cont(_c.neg(r) * sa))
    r = _cont(r + wrong_sign * sa * ab)
    too_big = _one() - _c.step(_cont(ab - _c.abs(r)))
    return _cont(r - too_big * (_one() - _isnan(r)) * sa * ab)


def _split(x):
    """Veltkamp's split of float32 x into hi + lo, each of at most 12 significant bits."""
    c = _c.scale(x, 4097.0)
    hi = _cont(c - _cont(c - x))
    return hi, _cont(x - hi)


def _two_product(a, b):
    """Dekker's exact product: a * b = p + e, p the float32 product (a, b below 2**115)."""
    p = _cont(a * b)
    ah, al = _split(a)
    bh, bl = _split(b)
    e = _cont(_cont(_cont(ah * bh - p) + ah * bl) + al * bh) + al * bl
    return p, _cont(e)


def _heaviside_host(x1, x2):
    return _out(np.heaviside(np.asarray(x1, np.float64), np.asarray(x2, np.float64)))


@_dual(_heaviside_host, "x1", "x2")
def heaviside(x1, x2):
    """0 where x1 < 0, 1 where x1 > 0, x2 where x1 is 0 (nan where x1 is).  The gradient
    reaches x2 where x1 is 0."""
    a, b = _both(x1, x2, "heaviside")
    nan = _isnan(a)
    zero = (_one() - _c.step(a) - _c.step(_c.neg(a))) * (_one() - nan)
    out = _where(zero, b, _c.step(a))
    return _cont(out + _special(nan=nan))


@_dual(lambda x1, x2: _out(np.hypot(x1, x2)), "x1", "x2")
def hypot(x1, x2):
    """sqrt(x1^2 + x2^2), computed as big * sqrt(1 + (small / big)^2) so that large values do
    not overflow (and the gradient at (0, 0) is 0, not nan)."""
    a, b = _both(x1, x2, "hypot")
    aa, ab = _c.abs(a), _c.abs(b)
    first = _c.step(_cont(aa - ab))
    hi, lo = _where(first, aa, ab), _where(first, ab, aa)
    safe = hi + (_one() - _bool01(hi))                        # 1 where both are 0
    ratio = lo / safe
    return _cont(hi * _c.sqrt(_cont(_c.sqr(ratio) + 1.0)))


@_dual(lambda x: _out(np.sinc(np.asarray(x, np.float64))), "x")
def sinc(x):
    """sin(pi x) / (pi x), 1 at 0 (numpy's normalized sinc).  sin(pi x) is taken of x less
    its nearest even number, exact for large x."""
    x = _f(x)
    r = _cont(x - _c.scale(_rint(_c.scale(x, 0.5)), 2.0))     # in [-1, 1], sin(pi r) = sin(pi x)
    zero = _one() - _bool01(x)
    y = _cont(_c.scale(x, math.pi) + zero)                     # 1 at 0 (no 0 / 0)
    return _pick(zero, _one(), _cont(_c.sin(_c.scale(r, math.pi)) / y))


@_dual(lambda x1, x2: _out(np.logaddexp2(np.asarray(x1, np.float64), np.asarray(x2, np.float64))), "x1", "x2")
def logaddexp2(x1, x2):
    """log2(2^x1 + 2^x2), computed stably: the larger plus log2(1 + 2^-|x1 - x2|)."""
    a, b = _both(x1, x2, "logaddexp2")
    d = _cont(a - b)
    ln2 = math.log(2.0)
    return _pick(_c.step(d), a, b) + _c.scale(_c.softplus(_c.scale(_c.abs(d), -ln2)), 1.0 / ln2)


@_dual(lambda x: np.isneginf(x), "x")
def isneginf(x):
    """True where x is -inf (float 0/1 in a graph)."""
    return _neginf(_f(x))


@_dual(lambda x: np.isposinf(x), "x")
def isposinf(x):
    """True where x is +inf (float 0/1 in a graph)."""
    return _posinf(_f(x))


def _real_or_complex(x, what):
    a = x.numpy() if isinstance(x, Variable) else np.asarray(x)
    if a.dtype == object or a.dtype.kind not in "biufc":
        raise TypeError(f"{what}: expected numbers, got {type(x).__name__} of dtype {a.dtype}")
    return a


def isreal(x):
    """True where x has no imaginary part: everywhere for real x (complex arrays are taken
    on arrays; a graph's tensors are real: ones there)."""
    if _graph_call("isreal", x):
        return _np_ops.ones_like(_t(x))
    return np.isreal(_real_or_complex(x, "isreal"))


@_dual(lambda x: np.conjugate(x), "x")
def conjugate(x):
    """The complex conjugate: x itself for real tensors (the same as ``conj``)."""
    return _t(x)


def _exponents(x2, what):
    e = np.asarray(x2)
    if e.dtype.kind not in "iu":
        raise TypeError(f"{what}: the exponent x2 must be integers, got dtype {e.dtype}")
    return e


def _ldexp_host(x1, x2):
    e = np.clip(_exponents(x2, "ldexp"), -1100, 1100).astype(np.int32)     # beyond: 0 or inf all the same
    return _out(np.ldexp(np.asarray(x1, np.float64), e))


@_dual(_quiet(_ldexp_host), "x1", "x2")
def ldexp(x1, x2):
    """x1 * 2**x2 for integer exponents x2.  In a graph the exponents must be known when it is
    built (ints, or a constant); the gradient reaches x1."""
    if isinstance(x2, (Tensor, Variable)):
        known = host_value(x2)
        if known is None:
            raise TypeError("ldexp: in a graph the exponent x2 must be known when the graph is built (integers or "
                            "a constant tensor of them), got a computed tensor")
        x2 = known
    e = np.clip(_exponents(x2, "ldexp").astype(np.int64), -300, 300)     # |x| * 2**300 overflows float32 anyway
    a = _f(x1)
    _broadcast(_shape(a), e.shape or (1,), "ldexp")
    # three exact powers of two of one sign (each within float32's range): no intermediate inf or 0
    e1 = np.trunc(e / 3).astype(np.int64)
    e2 = np.trunc((e - e1) / 2).astype(np.int64)
    e3 = e - e1 - e2
    for part in (e1, e2, e3):
        if np.any(part):
            a = a * _t(np.ldexp(np.float32(1.0), part.astype(np.int32)).astype(np.float32))
    return _cont(a)


def angle(x):
    """The angle of each value in the complex plane: 0 for x >= 0, pi for x < 0 (nan for nan).
    Complex arrays are taken on arrays.  In a graph it has a zero gradient, and -0.0 (which
    numpy gives pi) is 0."""
    if not _graph_call("angle", x):
        a = _real_or_complex(x, "angle")
        return _out(np.angle(a if a.dtype.kind in "fc" else a.astype(np.float64)))
    known = host_value(x)
    if known is not None:
        return _constant(_out(np.angle(known)), "angle")
    t = _f(x)
    nan = _isnan(t)
    return _cont(_c.scale(_c.step(_c.neg(t)), math.pi) + _special(nan=nan))


def nextafter(x1, x2):
    """The next float32 after x1 toward x2, entry by entry (on arrays only: it steps through
    the bits of float32 values, which a graph's float ops cannot reach)."""
    if _scope.current() is not None or builtins.any(isinstance(v, (Tensor, Variable)) for v in (x1, x2)):
        _arrays_only("nextafter", "it steps through the bits of float32 values, which a graph's float ops "
                     "cannot reach")
    a, b = _array(x1, "nextafter"), _array(x2, "nextafter")
    return np.nextafter(a.astype(np.float32), b.astype(np.float32))


def _integers(name, x1, x2):
    arrays = _integer_arrays(name, x1, x2)
    for a in arrays:
        if isinstance(a, (bool, np.bool_)) or (isinstance(a, np.ndarray) and a.dtype == np.bool_):
            raise TypeError(f"{name}: expected integers, got booleans")
    return arrays


def gcd(x1, x2):
    """The greatest common divisor, entry by entry, of integer arrays (always >= 0)."""
    return np.gcd(*_integers("gcd", x1, x2))


def lcm(x1, x2):
    """The least common multiple, entry by entry, of integer arrays (always >= 0)."""
    return np.lcm(*_integers("lcm", x1, x2))


# --- stacking, flipping, splitting ------------------------------------------------------------------

def _tensors(xs, what):
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{what}: xs must be a list or tuple of tensors, got {type(xs).__name__}")
    if not xs:
        raise ValueError(f"{what} needs at least one tensor")
    return [_f(v) for v in xs]


def _join(ts, axis, what):
    for t in ts[1:]:
        s0, s = _shape(ts[0]), _shape(t)
        if len(s) != len(s0) or builtins.any(a != b for i, (a, b) in enumerate(zip(s0, s)) if i != axis):
            raise ValueError(f"{what}: shapes {[_shape(t) for t in ts]} do not join along axis {axis}")
    return ts[0] if len(ts) == 1 else _np_ops.concatenate(ts, axis=axis)


@_dual(lambda xs: np.column_stack(xs), "xs")
def column_stack(xs):
    """The tensors side by side as columns: 1-D ones become columns, the others are joined
    along axis 1."""
    ts = [_c.reshape(_cont(t), (int(t.shape[0]), 1)) if len(t.shape) == 1 else t
          for t in _tensors(xs, "column_stack")]
    return _join(ts, 1, "column_stack")


@_dual(lambda xs: np.dstack(xs), "xs")
def dstack(xs):
    """The tensors joined along axis 2 (depth): (n,) becomes (1, n, 1) and (m, n) (m, n, 1)
    first."""
    ts = []
    for t in _tensors(xs, "dstack"):
        s = _shape(t)
        if len(s) == 1:
            t = _c.reshape(_cont(t), (1, s[0], 1))
        elif len(s) == 2:
            t = _c.reshape(_cont(t), s + (1,))
        ts.append(t)
    return _join(ts, 2, "dstack")


def _at_least(shape, n, what, name="x"):
    if len(shape) < n:
        raise ValueError(f"{what}: {name} must have at least {n} dims, got shape {tuple(shape)}")


def _fliplr_host(x):
    _at_least(np.shape(x), 2, "fliplr")
    return np.fliplr(x).copy()


def _flipud_host(x):
    _at_least(np.shape(x), 1, "flipud")
    return np.flipud(x).copy()


@_dual(_fliplr_host, "x")
def fliplr(x):
    """x reversed along axis 1 (left/right); x has at least 2 dims."""
    t = _f(x)
    _at_least(_shape(t), 2, "fliplr")
    return _ops_math.flip(t, axis=1)


@_dual(_flipud_host, "x")
def flipud(x):
    """x reversed along axis 0 (up/down)."""
    return _ops_math.flip(_f(x), axis=0)


def _graph_split(x, cuts, ax, what):
    n = _shape(x)[ax]
    bounds = [0] + list(cuts) + [n]
    if builtins.any(hi <= lo for lo, hi in zip(bounds[:-1], bounds[1:])):
        raise ValueError(f"{what}: the split at {list(cuts)} along an axis of {n} leaves an empty piece, which "
                         f"a graph tensor cannot be (ggml has no empty tensors)")
    return [x] if not cuts else _np_ops.split(x, list(cuts), axis=ax)


def _sections(v, what):
    if isinstance(v, bool) or not is_int(v):
        raise TypeError(f"{what}: indices_or_sections must be an int, got {v!r}")
    if v < 1:
        raise ValueError(f"{what}: indices_or_sections must be a positive int, got {v!r}")
    return int(v)


def _array_split_host(x, indices_or_sections, axis=0):
    return list(np.array_split(x, indices_or_sections, axis))


def _check_array_split(indices_or_sections, axis):
    k = _sections(indices_or_sections, "array_split")
    if isinstance(axis, bool) or not is_int(axis):
        raise TypeError(f"array_split: axis must be an int, got {axis!r}")
    return k


def array_split(x, indices_or_sections, axis=0):
    """x split into ``indices_or_sections`` (an int) pieces along ``axis``, as equal as they
    can be: the first ``n % sections`` one longer.  On arrays pieces may be empty; in a graph
    there must be at least as many entries as pieces."""
    k = _check_array_split(indices_or_sections, axis)
    return _array_split(x, k, axis)


@_dual(_array_split_host, "x")
def _array_split(x, indices_or_sections, axis=0):
    t = _t(x)
    ax = _axis(axis, len(t.shape), "array_split")
    n = _shape(t)[ax]
    if indices_or_sections > n:
        raise ValueError(f"array_split: {indices_or_sections} pieces of an axis of {n} leave an empty piece, which a "
                         f"graph tensor cannot be (ggml has no empty tensors)")
    q, r = divmod(n, indices_or_sections)
    sizes = [q + 1] * r + [q] * (indices_or_sections - r)
    return _graph_split(t, list(np.cumsum(sizes)[:-1]), ax, "array_split")


def _cuts(indices_or_sections, n, what):
    """numpy's split points: equal sections (an int that divides n) or increasing indices."""
    v = indices_or_sections
    if is_int(v) and not isinstance(v, bool):
        k = int(v)
        if k < 1 or n % k:
            raise ValueError(f"{what}: {n} entries do not split into {k} equal sections")
        return [n // k * i for i in range(1, k)]
    if isinstance(v, (Tensor, Variable)):
        known = host_value(v)
        if known is None:
            raise TypeError(f"{what}: indices_or_sections must be known when the graph is built")
        v = known
    cuts = np.asarray(v)
    if cuts.ndim != 1 or cuts.dtype.kind not in "iu":
        raise TypeError(f"{what}: indices_or_sections must be an int or a 1-D list of ints, got {v!r}")
    return [int(c) for c in cuts]


def _axis_split(name, axis, min_dims):
    """hsplit, vsplit, dsplit: numpy's split along a fixed axis."""
    def host(x, indices_or_sections):
        x = np.asarray(x)
        _at_least(x.shape, min_dims, name)
        ax = 0 if (name == "hsplit" and x.ndim == 1) else axis
        cuts = _cuts(indices_or_sections, x.shape[ax], name)
        return list(np.split(x, cuts, axis=ax))

    def fn(x, indices_or_sections):
        t = _t(x)
        s = _shape(t)
        _at_least(s, min_dims, name)
        ax = 0 if (name == "hsplit" and len(s) == 1) else axis
        cuts = _cuts(indices_or_sections, s[ax], name)
        if builtins.any(not 0 <= c <= s[ax] for c in cuts) or cuts != sorted(cuts):
            raise ValueError(f"{name}: in a graph the split indices must be increasing and within [0, {s[ax]}], "
                             f"got {cuts}")
        return _graph_split(t, cuts, ax, name)
    fn.__name__ = fn.__qualname__ = name
    return _dual(host, "x")(fn)


hsplit = _axis_split("hsplit", 1, 1)
hsplit.__doc__ = """x split along axis 1 (axis 0 for 1-D x), into ``indices_or_sections`` equal
    pieces (an int) or at the indices given (a list)."""
vsplit = _axis_split("vsplit", 0, 2)
vsplit.__doc__ = """x (at least 2-D) split along axis 0, into equal pieces (an int) or at the
    indices given."""
dsplit = _axis_split("dsplit", 2, 3)
dsplit.__doc__ = """x (at least 3-D) split along axis 2, into equal pieces (an int) or at the
    indices given."""


def _graph_dtype(dtype, what):
    if dtype is None:
        return None
    kind, _ = _np_ops._dtype_kind(dtype, what)
    return "int32" if kind == "int" else "float32"


def _empty_like_host(x, dtype=None):
    if dtype is not None:
        _np_ops._dtype_kind(dtype, "empty_like")
    return np.zeros_like(x, dtype=dtype)


@_dual(_empty_like_host, "x")
def empty_like(x, dtype=None):
    """A tensor of x's shape (and dtype, or ``dtype``); pyggml fills it with zeros."""
    return _np_ops.zeros_like(_t(x), _graph_dtype(dtype, "empty_like"))


# --- sequences and grids ------------------------------------------------------------------------

def _check_num(num, what):
    if isinstance(num, bool) or not is_int(num) or num < 1:
        raise ValueError(f"{what}: num must be a positive int, got {num!r}")


def _geomspace_host(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    _check_num(num, "geomspace")
    _check_size((num,) + np.broadcast_shapes(np.shape(start), np.shape(stop)), "geomspace")
    if np.any(np.asarray(start) == 0) or np.any(np.asarray(stop) == 0):
        raise ValueError("geomspace: start and stop must not be 0 (a geometric sequence never reaches 0)")
    out = np.geomspace(np.asarray(start, np.float64), np.asarray(stop, np.float64), num=num, endpoint=endpoint,
                       axis=axis)
    if dtype is None:
        return out.astype(np.float32)
    return out.astype(_np_ops._dtype_kind(dtype, "geomspace")[1])


@_dual(_quiet(_geomspace_host), "start", "stop")
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """``num`` values from start to stop (included with ``endpoint``) with a constant ratio
    between neighbours; start and stop must be non-zero and of one sign (nan between them
    otherwise, as numpy).  They may be tensors (the values along ``axis``; the gradient
    reaches both)."""
    _check_num(num, "geomspace")
    kind = _np_ops._dtype_kind(dtype, "geomspace")[0] if dtype is not None else "float"
    a, b = _f(start), _f(stop)
    shape = _broadcast(_shape(a), _shape(b), "geomspace")
    full = (num,) + shape
    _check_dims(full, "geomspace")
    _check_size(full, "geomspace")
    a, b = _np_ops.broadcast_to(a, shape), _np_ops.broadcast_to(b, shape)
    logs = _ops_math.linspace(_c.log(_c.abs(a)), _c.log(_c.abs(b)), num, endpoint)       # (num,) + shape
    sign = _c.reshape(_cont(_np_ops.sign(a)), (1,) + shape)
    y = _cont(sign * _c.exp(_cont(logs)))
    # the ends exactly start and stop; nan between ends of opposite signs
    parts = [_c.reshape(_cont(a), (1,) + shape)]
    inner = num - (2 if endpoint else 1)
    if inner > 0:
        mixed = _c.step(_cont(_c.neg(_np_ops.sign(a) * _np_ops.sign(b))))
        parts.append(y[1:1 + inner] + _c.reshape(_special(nan=mixed), (1,) + shape))
    if endpoint and num > 1:
        parts.append(_c.reshape(_cont(b), (1,) + shape))
    y = parts[0] if len(parts) == 1 else _np_ops.concatenate(parts, axis=0)
    if axis != 0:
        y = _ops_math.moveaxis(y, 0, axis)
    return _trunc(y) if kind == "int" else y


def _vander_args(x_shape, N, increasing):
    if len(x_shape) != 1:
        raise ValueError(f"vander: x must be 1-D, got shape {tuple(x_shape)}")
    if N is not None:
        if isinstance(N, bool) or not is_int(N):
            raise TypeError(f"vander: N must be an int, got {N!r}")
        if N < 0:
            raise ValueError(f"vander: N must be >= 0, got {N}")
    _flag(increasing, "vander", "increasing")
    n = int(x_shape[0]) if N is None else int(N)
    _check_size((int(x_shape[0]), n), "vander")
    return n


def _vander_host(x, N=None, increasing=False):
    x = np.asarray(x)
    _vander_args(x.shape, N, increasing)
    return _out(np.vander(x, N, increasing))


@_dual(_vander_host, "x")
def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D x: columns x^(N-1), ..., x, 1 (the other way round with
    ``increasing``); N defaults to len(x)."""
    t = _f(x)
    n = _vander_args(_shape(t), N, increasing)
    if n == 0:
        raise ValueError("vander: N=0 gives an empty matrix, which a graph tensor cannot be")
    m = _shape(t)[0]
    col = _c.reshape(_cont(t), (m, 1))
    powers = _t(np.ones((m, 1), np.float32))                     # x^0 .. x^(w-1), doubled each round
    while _shape(powers)[1] < n:
        w = _shape(powers)[1]
        step = _cont(powers[:, w - 1:w] * col)                  # x^w
        powers = _np_ops.concatenate([powers, _cont(powers * step)], axis=1)
    if _shape(powers)[1] > n:
        powers = _cont(powers[:, :n])
    return powers if increasing else _ops_math.flip(powers, axis=1)


def _trapezoid_host(y, x=None, dx=1.0, axis=-1):
    y = np.asarray(y)
    if y.ndim == 0:
        raise ValueError("trapezoid: y must have at least 1 dim")
    return _out(np.trapezoid(y, None if x is None else np.asarray(x), dx=dx, axis=axis))


@_dual(_trapezoid_host, "y", "x")
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of y along ``axis`` by the trapezoidal rule, at the sample points ``x``
    (1-D along the axis, or of y's shape) or spaced ``dx`` apart."""
    t = _f(y)
    s = _shape(t)
    r = len(s)
    ax = _axis(axis, r, "trapezoid")
    n = s[ax]
    out_shape = tuple(d for i, d in enumerate(s) if i != ax) or (1,)
    if n < 2:
        return _constant(np.zeros(out_shape, np.float32), "trapezoid")
    hi = tuple(slice(1, None) if i == ax else slice(None) for i in range(r))
    lo = tuple(slice(None, -1) if i == ax else slice(None) for i in range(r))
    mid = _c.scale(_cont(t[hi] + t[lo]), 0.5)
    if x is None:
        if isinstance(dx, (Tensor, Variable)) or not is_number(dx) or isinstance(dx, bool):
            raise TypeError(f"trapezoid: dx must be a number, got {dx!r}")
        w = _c.scale(mid, float(dx))
    else:
        xt = _f(x)
        xs = _shape(xt)
        if len(xs) == 1:
            if xs[0] != n:
                raise ValueError(f"trapezoid: x has {xs[0]} points for an axis of {n}")
            d = _cont(xt[1:] - xt[:-1])
            d = _c.reshape(d, tuple(n - 1 if i == ax else 1 for i in range(r)))
        else:
            if len(xs) != r or xs[ax] != n:
                raise ValueError(f"trapezoid: x of shape {xs} must be 1-D or have y's shape {s}")
            d = _cont(xt[hi] - xt[lo])
        w = mid * d
    return _np_ops.sum(w, axis=ax)


@_dual(lambda x, axis=None, keepdims=False: _out(np.ptp(x, axis=axis, keepdims=keepdims)), "x")
def ptp(x, axis=None, keepdims=False):
    """The range (max - min) over ``axis``; the gradient reaches the largest and the smallest
    entries."""
    t = _f(x)
    return _np_ops.max(t, axis, keepdims) - _np_ops.min(t, axis, keepdims)


def _tolerances(rtol, atol, equal_nan, what):
    for name, v in (("rtol", rtol), ("atol", atol)):
        if isinstance(v, bool) or not is_number(v) or v < 0:
            raise ValueError(f"{what}: {name} must be a number >= 0, got {v!r}")
    _flag(equal_nan, what, "equal_nan")


def _allclose_host(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    _tolerances(rtol, atol, equal_nan, "allclose")
    return bool(np.allclose(x1, x2, rtol=rtol, atol=atol, equal_nan=equal_nan))


@_dual(_allclose_host, "x1", "x2")
def allclose(x1, x2, rtol=1e-5, atol=1e-8, equal_nan=False):
    """True when every |x1 - x2| <= atol + rtol * |x2| (numpy's test; a float 0/1 of shape (1,)
    in a graph)."""
    _tolerances(rtol, atol, equal_nan, "allclose")
    a, b = _both(x1, x2, "allclose")
    close = _ops_math.isclose(a, b, rtol=rtol, atol=atol, equal_nan=bool(equal_nan))
    return _ops_math.all(close)


# --- indices and counting ------------------------------------------------------------------------

def _dims(shape, what):
    dims = (shape,) if is_int(shape) and not isinstance(shape, bool) else shape
    if not isinstance(dims, (list, tuple)) or not dims or \
            not builtins.all(is_int(d) and not isinstance(d, bool) and d >= 1 for d in dims):
        raise ValueError(f"{what}: shape must be positive ints, got {shape!r}")
    return tuple(int(d) for d in dims)


def _unravel_host(indices, shape):
    dims = _dims(shape, "unravel_index")
    a = np.asarray(indices)
    if a.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must be integers, got dtype {a.dtype}")
    size = int(np.prod(dims, dtype=np.int64))
    if a.size and (a.min() < 0 or a.max() >= size):
        raise ValueError(f"unravel_index: an index is outside [0, {size}) for shape {dims}")
    return tuple(i.astype(np.int32) for i in np.unravel_index(a, dims))


@_dual(_unravel_host, "indices")
def unravel_index(indices, shape):
    """The coordinates in an array of ``shape`` of flat indices: a tuple of one array per
    axis (int32; float whole numbers in a graph, with no gradient)."""
    dims = _dims(shape, "unravel_index")
    if int(np.prod(dims, dtype=np.int64)) > 2 ** 24:
        raise ValueError(f"unravel_index: in a graph the flat indices are float32, exact up to 2**24; shape "
                         f"{dims} has more entries")
    rem = _c.stop_gradient(_f(indices))
    coords = []
    for d in reversed(dims[1:]):
        q = _floor(_cont(rem / _t(np.float32(d))))             # exact: a whole quotient divides exactly
        coords.append(_cont(rem - _c.scale(q, float(d))))
        rem = q
    coords.append(rem)
    return tuple(reversed(coords))


def _searchsorted_host(sorted_sequence, values, side="left"):
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    seq = np.asarray(sorted_sequence)
    if seq.ndim != 1:
        raise ValueError(f"searchsorted: sorted_sequence must be 1-D, got shape {seq.shape}")
    return np.searchsorted(seq, values, side=side).astype(np.int32)


def _column(t, n, what):
    """t of shape S as S + (1,), checked to compare with n values (S + (n,) within ggml's dims)."""
    s = _shape(t)
    _check_dims(s + (n,), what)
    _check_size(s + (n,), what)
    return _c.reshape(_cont(t), s + (1,))


@_dual(_searchsorted_host, "sorted_sequence", "values")
def searchsorted(sorted_sequence, values, side="left"):
    """Where each value would go into the 1-D increasing ``sorted_sequence`` to keep it sorted:
    before equal entries (``side="left"``) or after them ("right").  int32 on arrays, a float
    count in a graph (no gradient); nan goes last, as numpy sorts it."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    seq = _f(sorted_sequence)
    if len(seq.shape) != 1:
        raise ValueError(f"searchsorted: sorted_sequence must be 1-D, got shape {_shape(seq)}")
    n = _shape(seq)[0]
    v = _f(values)
    col = _column(v, n, "searchsorted")
    seq_nan = _isnan(seq)
    nan_v = _isnan(v)
    if side == "left":
        count = _np_ops.sum(_c.step(_cont(col - seq)), axis=-1)                    # entries below v
        extra = _np_ops.sum(_one() - seq_nan)                                      # nan goes after the numbers
    else:
        count = _np_ops.sum((_one() - _c.step(_cont(seq - col))) * (_one() - seq_nan), axis=-1)
        extra = _np_ops.sum(seq_nan)
    return _cont(count + nan_v * extra)


def _isin_host(x1, x2, assume_unique=False, invert=False):
    _flag(assume_unique, "isin", "assume_unique")
    _flag(invert, "isin", "invert")
    return np.isin(x1, x2, assume_unique=assume_unique, invert=invert)


@_dual(_isin_host, "x1", "x2")
def isin(x1, x2, assume_unique=False, invert=False):
    """True where an entry of x1 is among x2's values (False with ``invert``); nan is in
    nothing.  A float 0/1 in a graph (no gradient)."""
    _flag(assume_unique, "isin", "assume_unique")
    invert = _flag(invert, "isin", "invert")
    a = _f(x1)
    b = _f(x2)
    b = _c.reshape(_cont(b), (b.nelements,))
    n = _shape(b)[0]
    hits = _np_ops.equal(_column(a, n, "isin"), b) * (_one() - _isnan(b)) * \
        _c.reshape(_cont(_one() - _isnan(a)), _shape(a) + (1,))
    found = _c.step(_np_ops.sum(hits, axis=-1))
    return _cont(_one() - found) if invert else found


def _histogram_args(bins, range):  # noqa: A002 - Keras's name
    if isinstance(bins, bool) or not is_int(bins):
        raise TypeError(f"histogram: bins must be an int, got {bins!r}")
    if bins < 1:
        raise ValueError(f"histogram: bins must be a positive int, got {bins}")
    _check_size((int(bins) + 1,), "histogram")
    if range is None:
        return int(bins), None
    if not isinstance(range, (list, tuple)) or len(range) != 2 or \
            not builtins.all(is_number(v) and not isinstance(v, bool) and math.isfinite(v) for v in range):
        raise ValueError(f"histogram: range must be a tuple of two finite numbers (low, high), got {range!r}")
    if range[1] < range[0]:
        raise ValueError(f"histogram: range's high end must not be below its low end, got {range!r}")
    return int(bins), (float(range[0]), float(range[1]))


def _histogram_host(x, bins=10, range=None):  # noqa: A002
    bins, rng = _histogram_args(bins, range)
    _check_size((bins + 1,), "histogram")
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"histogram: x must be 1-D, got shape {a.shape}")
    if rng is None and a.size and not np.all(np.isfinite(a)):
        raise ValueError("histogram: x holds nan or inf, so its range (min, max) is not finite; pass range")
    counts, edges = np.histogram(a, bins=bins, range=rng)
    return counts.astype(np.int32), edges.astype(np.float32)


@_dual(_histogram_host, "x")
def histogram(x, bins=10, range=None):  # noqa: A002 - Keras's name
    """(counts, edges): how many entries of the 1-D x fall in each of ``bins`` equal bins over
    ``range`` (x's min and max by default), the last bin closed.  int32 counts and float32
    edges on arrays; in a graph float counts (no gradient) and edges that follow x's min and
    max."""
    bins, rng = _histogram_args(bins, range)
    t = _f(x)
    if len(t.shape) != 1:
        raise ValueError(f"histogram: x must be 1-D, got shape {_shape(t)}")
    n = _shape(t)[0]
    _check_size((n, bins), "histogram")
    frac = np.linspace(0.0, 1.0, bins + 1)
    if rng is not None:
        lo, hi = rng
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        e = np.linspace(lo, hi, bins + 1).astype(np.float32)
        edges = _t(e)
    else:
        lo, hi = _np_ops.min(t), _np_ops.max(t)                   # (1,)
        same = _one() - _bool01(_cont(hi - lo))
        lo, hi = _cont(lo - _c.scale(same, 0.5)), _cont(hi + _c.scale(same, 0.5))
        edges = _cont(_c.reshape(lo, (1,)) * _t((1.0 - frac).astype(np.float32)) +
                      _c.reshape(hi, (1,)) * _t(frac.astype(np.float32)))
    col = _c.reshape(_cont(t), (n, 1))
    low = _np_ops.greater_equal(col, edges[:-1])                                       # (n, bins)
    below_next = _np_ops.less(col, edges[1:])
    last = np.zeros(bins, np.float32)
    last[-1] = 1.0
    upper = below_next + _np_ops.equal(col, edges[-1:]) * _t(last)                      # the last bin is closed
    inside = low * upper * (_one() - _isnan(col))
    return _np_ops.sum(inside, axis=0), edges


def unique(x, sorted=True, return_index=False, return_inverse=False, return_counts=False, axis=None,  # noqa: A002
           size=None, fill_value=None):
    """The distinct values of x (of the flattened x, or the distinct slices along ``axis``),
    ascending, and as asked: the index of each one's first occurrence, the indices that
    rebuild x from them, and how often each occurs (int32).  With ``size`` the values are cut
    to or padded to ``size`` (with ``fill_value``, 0 by default; counts and indices with 0).
    nan values are each distinct.  On arrays only: the number of distinct values depends on
    the values (inside a graph it computes from values known when the graph is built)."""
    for name, v in (("sorted", sorted), ("return_index", return_index), ("return_inverse", return_inverse),
                    ("return_counts", return_counts)):
        _flag(v, "unique", name)
    if axis is not None and (isinstance(axis, bool) or not is_int(axis)):
        raise TypeError(f"unique: axis must be an int or None, got {axis!r}")
    if size is not None and (isinstance(size, bool) or not is_int(size) or size < 1):
        raise ValueError(f"unique: size must be a positive int or None, got {size!r}")
    if size is not None:
        _check_size((int(size),), "unique")
    if fill_value is not None and (not is_number(fill_value) or isinstance(fill_value, bool)):
        raise TypeError(f"unique: fill_value must be a number or None, got {fill_value!r}")

    def compute(a):
        a = _array(a, "unique")
        ax = None if axis is None else _axis(axis, a.ndim, "unique")
        out = np.unique(a, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts,
                        axis=ax, equal_nan=False)
        out = list(out) if isinstance(out, tuple) else [out]
        values = out[0]
        dim = 0 if ax is None else ax
        if size is not None and values.shape[dim] != size:
            have = values.shape[dim]
            if have > size:
                values = np.take(values, np.arange(size), axis=dim)
            else:
                pad = [(0, 0)] * values.ndim
                pad[dim] = (0, size - have)
                values = np.pad(values, pad, constant_values=0 if fill_value is None else fill_value)
            for i, flag in ((1, return_index), (len(out) - 1, return_counts)):
                if flag:
                    out[i] = out[i][:size] if have > size else np.pad(out[i], (0, size - have))
        out[0] = _out(values)
        for i in range(1, len(out)):
            out[i] = out[i].astype(np.int32)
        return out[0] if len(out) == 1 else tuple(out)
    return _host_only("unique", "the number of distinct values depends on the values (a graph's shapes are fixed "
                      "when it is built)", compute, x)


def _cdist_host(x, y):
    a, b = np.asarray(x, np.float64), np.asarray(y, np.float64)
    _cdist_shapes(a.shape, b.shape)
    d = a[..., :, None, :] - b[..., None, :, :]
    return _out(np.sqrt(np.sum(d * d, axis=-1)))


def _cdist_shapes(sx, sy):
    if len(sx) < 2 or len(sy) < 2:
        raise ValueError(f"cdist: x and y must be (..., m, d) and (..., n, d), got shapes {tuple(sx)} and "
                         f"{tuple(sy)}")
    if sx[-1] != sy[-1]:
        raise ValueError(f"cdist: x's vectors have {sx[-1]} entries and y's {sy[-1]}; they must match")
    return _broadcast(tuple(sx[:-2]), tuple(sy[:-2]), "cdist")


@_dual(_cdist_host, "x", "y")
def cdist(x, y):
    """The Euclidean distance between each vector (row) of x and each of y: (..., m, d) and
    (..., n, d) give (..., m, n).  In a graph the gradient at a distance of 0 is 0."""
    a, b = _f(x), _f(y)
    sx, sy = _shape(a), _shape(b)
    batch = _cdist_shapes(sx, sy)
    m, n, d = sx[-2], sy[-2], sx[-1]
    full = batch + (m, n, d)
    if len(full) > MAX_DIMS:
        raise ValueError(f"cdist: in a graph the pairwise differences need {len(full)} dims (ggml has "
                         f"{MAX_DIMS}); x and y may have at most one batch axis, got {sx} and {sy}")
    _check_size(full, "cdist")
    diff = _c.reshape(_cont(a), sx[:-1] + (1, d)) - _c.reshape(_cont(b), sy[:-2] + (1, n, d))
    s = _np_ops.sum(_c.sqr(_cont(diff)), axis=-1)
    zero = _one() - _bool01(s)
    return _cont(_c.sqrt(_cont(s + zero)) * (_one() - zero))


# --- NaN-aware reductions ------------------------------------------------------------------------

def _nan_host(fn, floats=False):
    """numpy's NaN-aware reduction: float results as float32 (``floats``: always floats)."""
    def host(x, axis=None, keepdims=False):
        out = np.asarray(fn(np.asarray(x), axis=axis, keepdims=keepdims))
        return out.astype(np.float32) if floats or out.dtype.kind == "f" else out
    return _quiet(host)


@_dual(_nan_host(np.nansum), "x")
def nansum(x, axis=None, keepdims=False):
    """The sum over ``axis`` with nan counted as 0 (0 for a slice of nan alone)."""
    return _np_ops.sum(_fill_nan(_f(x), 0.0), axis, keepdims)


@_dual(_nan_host(np.nanmean, floats=True), "x")
def nanmean(x, axis=None, keepdims=False):
    """The mean over ``axis`` of the entries that are not nan (nan for a slice of nan alone)."""
    t = _f(x)
    return _np_ops.sum(_fill_nan(t, 0.0), axis, keepdims) / _not_nan_count(t, axis, keepdims)


def _nan_extreme(x, axis, keepdims, largest):
    t = _f(x)
    y = (_np_ops.max if largest else _np_ops.min)(_fill_nan(t, -math.inf if largest else math.inf), axis, keepdims)
    none = _one() - _c.step(_not_nan_count(t, axis, keepdims))
    return _cont(y + _special(nan=none))


@_dual(_nan_host(np.nanmax), "x")
def nanmax(x, axis=None, keepdims=False):
    """The largest value over ``axis`` ignoring nan (nan for a slice of nan alone); the
    gradient goes to the largest entry."""
    return _nan_extreme(x, axis, keepdims, True)


@_dual(_nan_host(np.nanmin), "x")
def nanmin(x, axis=None, keepdims=False):
    """The smallest value over ``axis`` ignoring nan (nan for a slice of nan alone)."""
    return _nan_extreme(x, axis, keepdims, False)


@_dual(_nan_host(np.nanprod), "x")
def nanprod(x, axis=None, keepdims=False):
    """The product over ``axis`` with nan counted as 1."""
    return _ops_math.prod(_fill_nan(_f(x), 1.0), axis=axis, keepdims=keepdims)


def _nanvar(x, axis, keepdims):
    t = _f(x)
    keep = _one() - _isnan(t)
    count = _np_ops.sum(keep, axis, True)
    filled = _fill_nan(t, 0.0)
    mean = _np_ops.sum(filled, axis, True) / count
    dev = _cont((filled - mean) * keep)
    var = _np_ops.sum(_c.sqr(dev), axis, True) / count
    axes = _axes(axis, len(t.shape), "nanvar")
    return var if keepdims else _c.reshape(_cont(var), _np_ops._reduced_shape(_shape(t), axes, False))


@_dual(_nan_host(np.nanvar, floats=True), "x")
def nanvar(x, axis=None, keepdims=False):
    """The (population) variance over ``axis`` of the entries that are not nan."""
    return _nanvar(x, axis, keepdims)


@_dual(_nan_host(np.nanstd, floats=True), "x")
def nanstd(x, axis=None, keepdims=False):
    """The (population) standard deviation over ``axis`` of the entries that are not nan (its
    gradient at 0 is 0)."""
    return _np_ops._sqrt_of_sum(_nanvar(x, axis, keepdims))


def _nanarg_host(largest):
    def host(x, axis=None, keepdims=False):
        a = np.asarray(x)
        if a.ndim and axis is not None:
            _axis(axis, a.ndim, "nanargmax" if largest else "nanargmin")
        arg = np.argmax if largest else np.argmin
        if a.dtype.kind != "f":
            return np.asarray(arg(a, axis=axis, keepdims=keepdims)).astype(np.int32)
        nan = np.isnan(a)
        idx = arg(np.where(nan, -np.inf if largest else np.inf, a), axis=axis, keepdims=keepdims)
        return np.where(np.all(nan, axis=axis, keepdims=keepdims), -1, idx).astype(np.int32)
    return host


def _nanarg(x, axis, keepdims, largest, what):
    """The first index of the largest (smallest) value that is not nan, as numpy (ggml's argmax
    takes the last of ties): n - max(hit_j * (n - j)), -1 where there is none; no gradient."""
    t = _c.stop_gradient(_f(x))
    shape = _shape(t)
    if axis is None:
        t = _c.reshape(_cont(t), (t.nelements,))
        ax = 0
    else:
        ax = _axis(axis, len(shape), what)
    filled = _fill_nan(t, -math.inf if largest else math.inf)
    if not largest:
        filled = _c.neg(filled)
    hit = _np_ops.equal(filled, _np_ops.max(filled, axis=ax, keepdims=True))
    n = _shape(t)[ax]
    rev = np.arange(n, 0, -1, dtype=np.float32).reshape(tuple(n if i == ax else 1 for i in range(len(_shape(t)))))
    first = _cont(_c.scale(_np_ops.max(hit * _t(rev), axis=ax, keepdims=True), -1.0) + float(n))
    none = _one() - _c.step(_not_nan_count(t, ax, True))
    idx = _cont(first - none * (first + 1.0))
    if axis is None:
        out = (1,) * len(shape) if keepdims else (1,)
    else:
        out = _np_ops._reduced_shape(shape, (ax,), keepdims)
    return _c.cast(_c.reshape(idx, out), "i32")


@_dual(_nanarg_host(True), "x")
def nanargmax(x, axis=None, keepdims=False):
    """The index of the largest value along ``axis`` ignoring nan (of the flattened x for
    None); -1 for a slice of nan alone (int32, no gradient)."""
    return _nanarg(x, axis, keepdims, True, "nanargmax")


@_dual(_nanarg_host(False), "x")
def nanargmin(x, axis=None, keepdims=False):
    """The index of the smallest value along ``axis`` ignoring nan; -1 for a slice of nan
    alone."""
    return _nanarg(x, axis, keepdims, False, "nanargmin")


def _nancum_host(fn):
    def host(x, axis=None, dtype=None):
        a = np.asarray(x)
        if axis is not None:
            _axis(axis, builtins.max(a.ndim, 1), fn.__name__)
        dt = None if dtype is None else _np_ops._dtype_kind(dtype, fn.__name__)[1]
        out = fn(a.astype(np.int32) if a.dtype == np.bool_ else a, axis=axis, dtype=dt)
        return out if dtype is not None or out.dtype.kind in "iu" else _out(out)
    return _quiet(host)


@_dual(_nancum_host(np.nancumsum), "x")
def nancumsum(x, axis=None, dtype=None):
    """Running sums along ``axis`` (of the flattened x for None) with nan counted as 0."""
    if dtype is not None:
        _np_ops._dtype_kind(dtype, "nancumsum")
    t = _f(x)
    # the finite values summed by a product with a triangle of ones (where 0 * inf would be nan),
    # the infinities counted apart
    def run(v):
        return _np_ops.cumsum(v, axis=axis)
    pos, neg = _c.step(run(_posinf(t))), _c.step(run(_neginf(t)))
    return _cont(run(_finite(t)) + _special(pos, neg))


@_dual(_nancum_host(np.nancumprod), "x")
def nancumprod(x, axis=None, dtype=None):
    """Running products along ``axis`` (of the flattened x for None) with nan counted as 1."""
    if dtype is not None:
        _np_ops._dtype_kind(dtype, "nancumprod")
    return _ops_math.cumprod(_fill_nan(_f(x), 1.0), axis=axis)


def _known_q(q, what, scale):
    """q as a float64 array in [0, 1] (percentiles divided by 100), known when the graph is built."""
    qa = host_value(q) if isinstance(q, (Tensor, Variable)) else q
    if qa is None:
        raise TypeError(f"{what}: q must be known when the graph is built (numbers or an array), got a computed "
                        f"tensor")
    qa = np.asarray(qa)
    if qa.dtype.kind not in "iuf" or qa.ndim > 1 or np.any(~((qa >= 0) & (qa <= scale))):
        raise ValueError(f"{what}: q must be a number or a 1-D array in [0, {scale:g}], got {q!r}")
    return qa.astype(np.float64) / scale


def _sorted_rows(rows, what):
    """Each row of (m, n) sorted ascending, infinities included: each value's rank from
    comparisons with the others (ties, inf with inf too, by position), then each rank's value
    picked by 0/1 masks, the infinities apart (0 * inf would be nan).  The gradient goes to
    the value that lands at each place."""
    m, n = _shape(rows)
    if m * n * n > MAX_SORT:
        raise ValueError(f"{what}: sorting {m} rows of {n} values in a graph compares every pair "
                         f"({m * n * n} > {MAX_SORT}); compute it on arrays or on smaller slices")
    if n == 1:
        return rows
    xi = _c.reshape(rows, (m, n, 1))
    diff = _np_ops.subtract(xi, _c.reshape(rows, (m, 1, n)))     # (m, i, j): x_i - x_j
    below = _c.step(diff)                                        # x_j < x_i
    same = _one() - _c.step(diff) - _c.step(_c.neg(diff))        # equal (or inf - inf)
    earlier = _t(np.tril(np.ones((n, n), np.float32), -1))       # j < i
    rank = _np_ops.sum(below + same * earlier, axis=2)          # (m, n)
    place = _np_ops.equal(_c.reshape(_cont(rank), (m, n, 1)), _t(np.arange(n, dtype=np.float32)))   # (m, i, k)
    fin = _np_ops.sum(place * _finite(xi), axis=1)
    pos = _np_ops.sum(place * _posinf(xi), axis=1)
    neg = _np_ops.sum(place * _neginf(xi), axis=1)
    return _cont(fin + _special(pos, neg))


def _nanquantile_graph(x, q, axis, method, keepdims, what, scale=1):
    """The quantiles of the entries that are not nan: each row sorted with nan as +inf (last),
    the positions q * (count - 1) then picked by weights that depend on each row's count."""
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"{what}: method must be one of {_QUANTILE_METHODS} in a graph, got {method!r}")
    qa = _known_q(q, what, scale)
    x = _f(x)
    axes = _axes(axis, len(x.shape), what)
    rows, _ = _to_last(x, axes)                                 # (m, n)
    m, n = _shape(rows)
    nq = builtins.max(qa.size, 1)
    _check_size((m, nq, n), what)
    srt = _sorted_rows(_fill_nan(rows, math.inf), what)         # nan last
    count = _np_ops.sum(_one() - _isnan(rows), axis=1, keepdims=True)      # (m, 1), no gradient
    pos = (count - 1.0) * _t(qa.reshape(1, -1).astype(np.float32))       # (m, nq)
    pos = _c.reshape(_cont(pos), (m, nq, 1))
    j = _t(np.arange(n, dtype=np.float32).reshape(1, 1, n))
    if method == "linear":
        w = _c.relu(_cont(_one() - _c.abs(_cont(j - pos))))
    else:
        lo, hi = _floor(pos), _floor(pos)
        hi = _cont(hi + _c.step(_cont(pos - lo)))               # ceil
        if method == "lower":
            w = _np_ops.equal(j, lo)
        elif method == "higher":
            w = _np_ops.equal(j, hi)
        elif method == "midpoint":
            w = _c.scale(_cont(_np_ops.equal(j, lo) + _np_ops.equal(j, hi)), 0.5)
        else:                                                   # nearest: halves to even, as numpy
            w = _np_ops.equal(j, _rint(pos))
    srt = _c.reshape(srt, (m, 1, n))
    y = _np_ops.sum(_finite(srt) * w, axis=2)                   # (m, nq); infinities picked apart
    pos = _c.step(_np_ops.sum(_posinf(srt) * w, axis=2))
    neg = _c.step(_np_ops.sum(_neginf(srt) * w, axis=2))
    y = _cont(y + _special(pos, neg, _one() - _c.step(count)))
    out = _np_ops._reduced_shape(_shape(x), axes, keepdims)
    if qa.ndim == 0:
        return _c.reshape(y, out)
    if len(out) + 1 > MAX_DIMS:
        raise ValueError(f"{what}: the result would have {len(out) + 1} dims (at most {MAX_DIMS})")
    if axis is None and not keepdims:
        out = ()
    y = _c.reshape(y, (int(np.prod(out)), nq))
    return _np_ops.reshape(_np_ops.transpose(y), (nq,) + out)


def _quantile_host(fn, what):
    def host(x, q, axis=None, method="linear", keepdims=False):
        return _out(fn(np.asarray(x, np.float64), q, axis=axis, method=method, keepdims=keepdims))
    host.__name__ = what
    return _quiet(host)


@_dual(_quiet(lambda x, axis=None, keepdims=False: _out(np.nanmedian(np.asarray(x, np.float64), axis=axis,
                                                                      keepdims=keepdims))), "x")
def nanmedian(x, axis=None, keepdims=False):
    """The median over ``axis`` of the entries that are not nan (nan for a slice of nan alone);
    its gradient goes to the middle value(s)."""
    return _nanquantile_graph(x, 0.5, axis, "linear", keepdims, "nanmedian")


@_dual(_quantile_host(np.nanquantile, "nanquantile"), "x", "q")
def nanquantile(x, q, axis=None, method="linear", keepdims=False):
    """The q-th quantile(s) over ``axis`` of the entries that are not nan; q a number or a 1-D
    array in [0, 1] (its axis first).  In a graph: numpy's methods linear, lower, higher,
    midpoint and nearest."""
    return _nanquantile_graph(x, q, axis, method, keepdims, "nanquantile")


@_dual(_quantile_host(np.nanpercentile, "nanpercentile"), "x", "q")
def nanpercentile(x, q, axis=None, method="linear", keepdims=False):
    """The q-th percentile(s) (q in [0, 100]) over ``axis`` of the entries that are not nan."""
    return _nanquantile_graph(x, q, axis, method, keepdims, "nanpercentile", scale=100)


@_dual(_quantile_host(np.percentile, "percentile"), "x", "q")
def percentile(x, q, axis=None, method="linear", keepdims=False):
    """The q-th percentile(s) (q in [0, 100], a number or a 1-D array: its axis first) over
    ``axis``: ``quantile`` of q / 100."""
    return _ops_math._quantile_graph(x, _known_q(q, "percentile", 100), axis, method, keepdims, "percentile")


# --- windows -----------------------------------------------------------------------------------

def _window(name, fn, x, *extra):
    if isinstance(x, (Tensor, Variable)):
        known = host_value(x)
        if known is None:
            raise TypeError(f"{name}: x is the window's length, an int known when the graph is built; got a "
                            f"computed tensor")
        x = known
    m = np.asarray(x)
    if m.size != 1 or m.dtype.kind not in "iu":
        raise TypeError(f"{name}: x must be the window's length, an int, got {x!r}")
    m = int(m.reshape(()))
    _check_size((builtins.max(m, 0),), name)
    w = fn(m, *extra).astype(np.float32)
    if _scope.current() is None:
        return w
    if m < 1:
        raise ValueError(f"{name}: a window of length {m} is empty, which a graph tensor cannot be")
    return _constant(w, name)


def hanning(x):
    """The Hann window of length x (an int): an array, a constant inside a graph."""
    return _window("hanning", np.hanning, x)


def hamming(x):
    """The Hamming window of length x (an int)."""
    return _window("hamming", np.hamming, x)


def bartlett(x):
    """The Bartlett (triangular) window of length x (an int)."""
    return _window("bartlett", np.bartlett, x)


def blackman(x):
    """The Blackman window of length x (an int)."""
    return _window("blackman", np.blackman, x)


def kaiser(x, beta):
    """The Kaiser window of length x (an int) and shape ``beta`` (a number)."""
    if isinstance(beta, bool) or not is_number(beta):
        raise TypeError(f"kaiser: beta must be a number, got {beta!r}")
    return _window("kaiser", np.kaiser, x, float(beta))


# --- linear algebra ----------------------------------------------------------------------------

def _square(shape, what):
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"{what}: x must be a square matrix or a batch of them (..., n, n), got shape "
                         f"{tuple(shape)}")


def _linalg(what, fn):
    try:
        return fn()
    except np.linalg.LinAlgError as e:
        raise ValueError(f"{what}: {e}") from None


def _power_arg(n):
    if isinstance(n, bool) or not is_int(n):
        raise TypeError(f"matrix_power: n must be an int, got {n!r}")
    if builtins.abs(int(n)) >= 2 ** 63:
        raise ValueError(f"matrix_power: n must be below 2**63 in magnitude, got {n}")
    return int(n)


def _matrix_power_host(x, n):
    n = _power_arg(n)
    a = np.asarray(x)
    _square(a.shape, "matrix_power")
    if n < 0 and a.dtype.kind != "f":
        a = a.astype(np.float64)
    return _out(_linalg("matrix_power", lambda: np.linalg.matrix_power(a, n)))


@_dual(_matrix_power_host, "x")
def matrix_power(x, n):
    """x @ x @ ... (n times) of a square matrix (or a batch), by repeated squaring: the
    identity for n = 0, powers of the inverse for n < 0 (inside a graph the inverse is
    unrolled for matrices up to 8 x 8)."""
    n = _power_arg(n)
    t = _f(x)
    s = _shape(t)
    _square(s, "matrix_power")
    if n == 0:
        return _constant(np.broadcast_to(np.eye(s[-1], dtype=np.float32), s).copy(), "matrix_power")
    base = _ops_control.inv(t) if n < 0 else t
    k = builtins.abs(n)
    result = None
    while True:
        if k & 1:
            result = base if result is None else _np_ops.matmul(result, base)
        k >>= 1
        if not k:
            return result
        base = _np_ops.matmul(base, base)


def _rcond(rcond, what, name="rcond"):
    if rcond is not None and (isinstance(rcond, bool) or not is_number(rcond) or rcond < 0):
        raise ValueError(f"{what}: {name} must be a number >= 0 or None, got {rcond!r}")


def pinv(x, rcond=None):
    """The Moore-Penrose pseudo-inverse of each matrix (..., m, n) -> (..., n, m), by numpy's
    SVD: singular values up to ``rcond`` times the largest count as 0.  On arrays only (ggml
    has no SVD; inside a graph it computes from values known when the graph is built)."""
    _rcond(rcond, "pinv")

    def compute(a):
        a = _array(a, "pinv")
        if a.ndim < 2:
            raise ValueError(f"pinv: x must be a matrix or a batch of them, got shape {a.shape}")
        return _out(_linalg("pinv", lambda: np.linalg.pinv(a.astype(np.float64), rcond=rcond)))
    return _host_only("pinv", "it needs a singular value decomposition, which a graph lacks", compute, x)


def _logdet_host(x):
    a = np.asarray(x)
    _square(a.shape, "logdet")
    return _out(np.linalg.slogdet(a.astype(np.float64))[1])


@_dual(_logdet_host, "x")
def logdet(x):
    """log(det(x)) of each (symmetric positive definite) square matrix: log |det| by an LU
    factorisation.  Inside a graph it is unrolled for matrices up to 8 x 8 and trains."""
    t = _f(x)
    _square(_shape(t), "logdet")
    return _ops_control.slogdet(t)[1]


def matrix_rank(x, tol=None):
    """The rank of each matrix (int32): its singular values above ``tol`` (numpy's default
    threshold for None).  On arrays only (it needs an SVD)."""
    _rcond(tol, "matrix_rank", "tol")

    def compute(a):
        a = _array(a, "matrix_rank")
        if a.ndim < 2:
            raise ValueError(f"matrix_rank: x must be a matrix or a batch of them, got shape {a.shape}")
        return np.asarray(_linalg("matrix_rank", lambda: np.linalg.matrix_rank(a, tol=tol))).astype(np.int32)
    return _host_only("matrix_rank", "it needs a singular value decomposition, which a graph lacks", compute, x)


# --- pixel shuffles ----------------------------------------------------------------------------

def _block_args(shape, block_size, data_format, what):
    if isinstance(block_size, bool) or not is_int(block_size):
        raise TypeError(f"{what}: block_size must be an int, got {block_size!r}")
    if block_size < 2:
        raise ValueError(f"{what}: block_size must be at least 2, got {block_size}")
    if data_format is None:
        data_format = "channels_last"
    if not isinstance(data_format, str) or data_format.lower() not in ("channels_last", "channels_first"):
        raise ValueError(f"{what}: data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
    if len(shape) != 4:
        raise ValueError(f"{what}: x must be 4-D (batch, height, width, channels) or (batch, channels, height, "
                         f"width), got shape {tuple(shape)}")
    return int(block_size), data_format.lower() == "channels_first"


def _shuffle(x, shape, b, first, to_space, reshape, transpose, what):
    """depth_to_space / space_to_depth in TensorFlow's DCR order (the channel of block offset
    (i, j) and channel c is (i * b + j) * C + c), with reshapes and transposes of at most 4
    dims: ``reshape``/``transpose`` are numpy's on arrays, the graph's ops otherwise."""
    if first:
        x = transpose(x, (0, 2, 3, 1))
        shape = (shape[0], shape[2], shape[3], shape[1])
    n, h, w, c = shape
    if to_space:
        if c % (b * b):
            raise ValueError(f"{what}: {c} channels do not split into blocks of {b} x {b} (block_size ** 2 = "
                             f"{b * b} must divide them)")
        cc = c // (b * b)
        y = transpose(reshape(x, (n * h, w, b, b * cc)), (0, 2, 1, 3))
        y = reshape(y, (n, h * b, w * b, cc))
    else:
        if h % b or w % b:
            raise ValueError(f"{what}: height {h} and width {w} must be multiples of block_size {b}")
        y = transpose(reshape(x, (n * (h // b), b, w // b, b * c)), (0, 2, 1, 3))
        y = reshape(y, (n, h // b, w // b, b * b * c))
    return transpose(y, (0, 3, 1, 2)) if first else y


def _pixel_shuffle(to_space, what):
    def host(x, block_size, data_format="channels_last"):
        a = np.asarray(x)
        b, first = _block_args(a.shape, block_size, data_format, what)
        return np.ascontiguousarray(_shuffle(a, a.shape, b, first, to_space, np.reshape, np.transpose, what))

    def fn(x, block_size, data_format="channels_last"):
        t = _t(x)
        b, first = _block_args(_shape(t), block_size, data_format, what)
        return _shuffle(t, _shape(t), b, first, to_space, _np_ops.reshape, _np_ops.transpose, what)
    fn.__name__ = fn.__qualname__ = what
    return _dual(host, "x")(fn)


depth_to_space = _pixel_shuffle(True, "depth_to_space")
depth_to_space.__doc__ = """Channels moved into blocks of space (pixel shuffle): (N, H, W, C * b * b)
    -> (N, H * b, W * b, C) for ``block_size`` b (channels first: (N, C * b * b, H, W) -> (N, C,
    H * b, W * b)), in TensorFlow's DCR order: the value at block offset (i, j) and channel c
    comes from channel (i * b + j) * C + c."""
space_to_depth = _pixel_shuffle(False, "space_to_depth")
space_to_depth.__doc__ = """Blocks of space moved into channels, the inverse of ``depth_to_space``:
    (N, H * b, W * b, C) -> (N, H, W, C * b * b) (channels first: (N, C, H * b, W * b) -> (N,
    C * b * b, H, W))."""


# --- segments ------------------------------------------------------------------------------------

def _segment_host(data, segment_ids, n, ufunc, fill, what):
    d = _ops_nn._array(data, what).astype(np.float32)
    ids = _ops_nn._int_ids(segment_ids, what)
    out = np.full((n,) + d.shape[1:], fill, dtype=np.float32)
    keep = (ids >= 0) & (ids < n)
    ufunc.at(out, ids[keep], d[keep])
    return out


def _segment_masks(data, segment_ids, n, what):
    """The segments' masks (n, rows, 1) and data's rows (1, rows, features)."""
    d = _f(data)
    ds = _shape(d)
    rows = ds[0]
    feat = int(np.prod(ds[1:])) if len(ds) > 1 else 1
    _check_size((n, rows, feat), what)
    hot = _c.reshape(_cont(_np_ops.transpose(_np_ops.one_hot(segment_ids, n), (1, 0))), (n, rows, 1))
    return hot, _c.reshape(_cont(d), (1, rows, feat)), ds


def segment_min(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002 - Keras's name
    """The smallest of data's rows per segment id (ids outside [0, num_segments) are dropped);
    an empty segment gives float32's largest value (as TensorFlow's, and as ``segment_max``
    gives its lowest).  num_segments defaults to max(id) + 1 when the ids are known."""
    n = _ops_nn._segment_args(data, segment_ids, num_segments, "segment_min")
    if not _ops_nn._in_graph(data, segment_ids):
        return _segment_host(data, segment_ids, n, np.minimum, _BIG, "segment_min")
    hot, flat, ds = _segment_masks(data, segment_ids, n, "segment_min")
    masked = hot * flat + (_one() - hot) * _BIG                 # off-segment rows: the largest value
    return _c.reshape(_cont(_np_ops.min(masked, axis=1)), (n,) + ds[1:])


def segment_prod(data, segment_ids, num_segments=None, sorted=False):  # noqa: A002 - Keras's name
    """The product of data's rows per segment id (ids outside [0, num_segments) are dropped;
    an empty segment gives 1).  The gradient of each factor is the product of the others."""
    n = _ops_nn._segment_args(data, segment_ids, num_segments, "segment_prod")
    if not _ops_nn._in_graph(data, segment_ids):
        return _segment_host(data, segment_ids, n, np.multiply, 1.0, "segment_prod")
    hot, flat, ds = _segment_masks(data, segment_ids, n, "segment_prod")
    factors = _cont(hot * flat + (_one() - hot))                # off-segment rows: 1
    return _c.reshape(_cont(_ops_math.prod(factors, axis=1)), (n,) + ds[1:])


# --- angles, shifts and one more factorisation --------------------------------------------------

def _as_float(x):
    """x with integers (and bools) as float32, as Keras's angle conversions give floats."""
    if isinstance(x, (Tensor, Variable)) or _scope.current() is not None:
        return x
    a = np.asarray(x)
    return a.astype(np.float32) if a.dtype.kind in "biu" else x


def deg2rad(x):
    """Keras's ``ops.deg2rad``: ``x * pi / 180`` (integers become float32)."""
    return _np_ops.multiply(_as_float(x), math.pi / 180.0)


def rad2deg(x):
    """Keras's ``ops.rad2deg``: ``x * 180 / pi`` (integers become float32)."""
    return _np_ops.multiply(_as_float(x), 180.0 / math.pi)


def bitwise_left_shift(x, y):
    """Keras's other name of ``left_shift``."""
    return _ops_math.left_shift(x, y)


def bitwise_right_shift(x, y):
    """Keras's other name of ``right_shift``."""
    return _ops_math.right_shift(x, y)


def cholesky_inverse(x, upper=False):
    """Keras's ``ops.cholesky_inverse``: the inverse of ``A`` from its Cholesky factor ``x``
    (``A = x x^T`` for a lower factor, ``x^T x`` with ``upper=True``), square matrices in the
    last two axes; it trains in a graph (through ``inv``)."""
    upper = _flag(upper, "cholesky_inverse", "upper")
    t = _ops_math.moveaxis(x, -1, -2)
    a = _np_ops.matmul(t, x) if upper else _np_ops.matmul(x, t)
    return _ops_control.inv(a)



# Abramowitz & Stegun 9.8.1 and 9.8.2: I0 on |x| <= 3.75 as a polynomial of (x / 3.75)^2 (relative
# error below 1.6e-7), and sqrt(|x|) exp(-|x|) I0 beyond as a polynomial of 3.75 / |x| (below 1.9e-7)
_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
_I0_LARGE = (0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537,
             -0.01647633, 0.00392377)


def _poly(t, coefs):
    y = _t(np.float32(coefs[-1]))
    for c in reversed(coefs[:-1]):
        y = _cont(_c.scale_bias(_cont(y * t), 1.0, float(c)))
    return y


@_dual(lambda x: _out(np.i0(np.asarray(x, np.float64))), "x")
def i0(x):
    """Keras's ``ops.i0``: the modified Bessel function of the first kind, order 0 (integers
    give float32).  In a graph, a polynomial on each side of |x| = 3.75 (float32's precision;
    its gradient is the polynomials'); on arrays, numpy's."""
    x = _f(x)
    ax = _c.abs(x)
    small = _poly(_c.sqr(_c.scale(ax, 1.0 / 3.75)), _I0_SMALL)
    far = _cont(_c.scale_bias(_cont(ax - 3.75), 1.0, 0.0))
    beyond = _c.relu(far)                                                     # |x| - 3.75 where larger, else 0
    big_x = _c.scale_bias(beyond, 1.0, 3.75)                                  # max(|x|, 3.75): no 1 / 0
    large = _cont(_poly(_cont(_t(np.float32(3.75)) / big_x), _I0_LARGE) * _c.exp(big_x)) / _c.sqrt(big_x)
    return _pick(_c.step(far), _cont(large), small)


def _complex_on_host(x, what):
    if isinstance(x, (Tensor, Variable)) or _scope.current() is not None:
        raise TypeError(f"{what}: ggml has no complex tensors, so pyggml computes it on arrays only (outside a "
                        f"model's graph); inside one, keep the real and imaginary parts as two tensors")
    return np.asarray(x)


def view_as_complex(x):
    """Keras's ``ops.view_as_complex``: (..., 2) real and imaginary parts -> complex64 (...), on
    arrays."""
    a = _complex_on_host(x, "view_as_complex")
    if a.ndim == 0 or a.shape[-1] != 2 or a.dtype.kind not in "biuf":
        raise ValueError(f"view_as_complex: expected real numbers of shape (..., 2), got {a.dtype} {a.shape}")
    return (a[..., 0].astype(np.float32) + 1j * a[..., 1].astype(np.float32)).astype(np.complex64)


def view_as_real(x):
    """Keras's ``ops.view_as_real``: complex (...) -> float32 (..., 2) of its real and imaginary
    parts, on arrays."""
    a = _complex_on_host(x, "view_as_real")
    if a.dtype.kind != "c":
        raise ValueError(f"view_as_real: expected complex numbers, got dtype {a.dtype}")
    return np.stack([a.real, a.imag], axis=-1).astype(np.float32)
