"""Keras's neural-network functions of ``keras.ops`` (activations, losses,
normalizations, convolutions, attention, signal), with numpy's axes: on graph tensors
(built from ggml ops that train) and on arrays (computed at once).  ``pyggml.ops``
installs them (its ``_KERAS_MODULES``).

Inside a model's graph every function here is composed of ops with a backward pass
(``relu``, ``step``, ``exp``, ``log``, ``mul_mat``, ``im2col``, ``get_rows``, ``acc``,
``pool_2d``, ``soft_max``), so a layer's ``call`` or a ``Lambda`` that uses them trains.
Called outside a graph on arrays they compute at once and return numpy arrays.
``ctc_decode`` is for arrays only (a search over label sequences, not a function that
trains); it says so with a TypeError inside a graph.

Complex values are pairs ``(real, imag)`` as in ``ops.fft``.  Graph tensors have at most
four dimensions, the batch included.
"""

import inspect
import math

import numpy as np

from pyggml import _ops_numpy as _k
from pyggml import _scope, _wide
from pyggml._conv_arith import same_pads, transpose_pads, valid_size
from pyggml._ops_signal import _complex_pair, _matmul_last
from pyggml._validation import is_int, is_number
from pyggml.core import Tensor
from pyggml.core import ops as _c
from pyggml.variables import Variable

__all__ = ["celu", "glu", "hard_shrink", "hard_silu", "hard_tanh", "soft_shrink", "sparse_plus", "sparsemax",
           "squareplus", "tanh_shrink", "threshold", "multi_hot", "normalize", "psnr", "layer_normalization",
           "rms_normalization", "batch_normalization", "categorical_crossentropy",
           "sparse_categorical_crossentropy", "binary_crossentropy", "dot_product_attention", "conv",
           "conv_transpose", "depthwise_conv", "separable_conv", "max_pool", "average_pool", "erf", "erfinv",
           "einsum", "in_top_k", "segment_sum", "segment_max", "extract_sequences", "rfft", "irfft", "stft",
           "istft", "polar", "pad", "ctc_loss", "ctc_decode", "sparse_sigmoid", "unfold",
           "adaptive_average_pool", "adaptive_max_pool"]

# names that are also ggml ops of pyggml.core.ops: ggml's form for a Tensor outside a model's graph
SHARED_WITH_GGML = ("pad",)

EPSILON = 1e-7                          # Keras's backend.epsilon()
_LOWEST = float(np.finfo(np.float32).min)
MAX_PAIRS = 2 ** 27                     # sparsemax's pairwise comparisons (512 MiB of float32)
_eager = _k._eager
_f = _k._f
_cont = _k._cont


def _in_graph(*xs):
    """Inside a graph being built, or given a graph tensor (a Variable outside a graph is
    its current value, as in Keras's eager calls)."""
    return _scope.current() is not None or any(isinstance(x, Tensor) for x in xs)


def _shape(x):
    if isinstance(x, (Variable, _wide.Wide)):
        return tuple(int(d) for d in x.shape)
    if isinstance(x, Tensor):
        return tuple(int(d) for d in x.shape)
    return tuple(np.shape(x))


def _array(x, what):
    a = x.numpy() if isinstance(x, Variable) else np.asarray(x)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected real numbers, got dtype {a.dtype}")
    return a


def _one():
    return _k._t(np.float32(1.0))


def _sigmoid(x):
    """1 / (1 + e^-x) as exp(-softplus(-x)): both have a backward pass."""
    return _c.exp(_c.neg(_c.softplus(_c.neg(x))))


def _tanh(x):
    """tanh from exp (ggml's tanh has no backward pass): 1 - 2 / (e^2x + 1)."""
    return _one() - _c.scale(_cont(_k.reciprocal(_c.exp(_c.scale(_cont(x), 2.0)) + 1.0)), 2.0)


def _flag(v, what, name):
    """A bool argument (True/False, numpy's bools, 0 or 1)."""
    if isinstance(v, (bool, np.bool_)) or (is_int(v) and int(v) in (0, 1)):
        return bool(v)
    raise TypeError(f"{what}: {name} must be True or False, got {v!r}")


def _choice(v, choices, what, name):
    if not isinstance(v, str) or v not in choices:
        raise ValueError(f"{what}: {name} must be one of {', '.join(repr(c) for c in choices)}, got {v!r}")
    return v


MAX_INT = 2 ** 31 - 1                   # sizes, strides and lengths ggml takes as C ints


def _number(v, what, name):
    if not is_number(v) or isinstance(v, bool):
        raise TypeError(f"{what}: {name} must be a number, got {v!r}")
    return float(v)


# --- activations -------------------------------------------------------------------------------

@_eager("x")
def celu(x, alpha=1.0):
    """max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1)."""
    alpha = _number(alpha, "celu", "alpha")
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0")
    x = _f(x)
    neg = _c.neg(_c.relu(_c.neg(x)))                               # min(x, 0)
    return _c.relu(x) + _c.scale(_cont(_c.exp(_c.scale(_cont(neg), 1.0 / alpha)) - 1.0), alpha)


@_eager("x")
def glu(x, axis=-1):
    """The gated linear unit: a * sigmoid(b), with x split into halves a, b along ``axis``."""
    x = _f(x)
    ax = _k._axis(axis, len(x.shape), "glu")
    if x.shape[ax] % 2:
        raise ValueError(f"glu: axis {axis} must have an even length, got {x.shape[ax]} (shape {tuple(x.shape)})")
    a, b = _k.split(x, 2, axis=ax)
    return a * _sigmoid(b)


@_eager("x")
def hard_shrink(x, threshold=0.5):
    """x where |x| > threshold, 0 elsewhere."""
    t = _number(threshold, "hard_shrink", "threshold")
    x = _f(x)
    return x * _c.step(_cont(_c.abs(x) - t))


@_eager("x")
def hard_silu(x):
    """x * relu6(x + 3) / 6 (``ops.hard_swish`` is the same function)."""
    return _k.hard_swish(x)


@_eager("x")
def hard_tanh(x):
    """x clipped to [-1, 1]."""
    return _k.clip(_f(x), -1.0, 1.0)


@_eager("x")
def soft_shrink(x, threshold=0.5):
    """x - threshold above threshold, x + threshold below -threshold, 0 between."""
    t = _number(threshold, "soft_shrink", "threshold")
    x = _f(x)
    return _c.relu(_cont(x - t)) - _c.relu(_cont(_c.neg(x) - t))


@_eager("x")
def sparse_plus(x):
    """0 for x <= -1, (x + 1)^2 / 4 between, x for x >= 1."""
    x = _f(x)
    inner = _k.clip(x, -1.0, 1.0) + 1.0
    return _c.scale(_c.sqr(_cont(inner)), 0.25) + _c.relu(_cont(x - 1.0))


@_eager("x")
def sparse_sigmoid(x):
    """0 for x <= -1, (x + 1) / 2 between, 1 for x >= 1."""
    return _c.scale(_cont(_k.clip(_f(x), -1.0, 1.0) + 1.0), 0.5)


@_eager("x")
def sparsemax(x, axis=-1):
    """The Euclidean projection of x onto the probability simplex along ``axis``
    (Martins & Astudillo): max(x - tau, 0).  The support is found by comparing every
    pair of entries (no sort), so the axis costs n^2 values."""
    x = _f(x)
    r = len(x.shape)
    ax = _k._axis(axis, r, "sparsemax")
    rows, kept = _k._to_last(x, (ax,))                             # (m, n)
    m, n = int(rows.shape[0]), int(rows.shape[1])
    if m * n * n > MAX_PAIRS:
        raise ValueError(f"sparsemax: {m} rows of {n} entries compare {m * n * n} pairs, more than {MAX_PAIRS} "
                         f"(this sparsemax compares every pair instead of sorting)")
    zi = _c.reshape(rows, (m, 1, n))                               # z_i along the last axis
    zj = _c.reshape(rows, (m, n, 1))                               # z_j along the middle
    ge = _k.greater_equal(zi, zj)                                  # [z_i >= z_j], (m, n, n)
    count = _k.sum(ge, axis=-1, keepdims=True)                     # k(z_j)
    above = _k.sum(ge * zi, axis=-1, keepdims=True)                # sum of z_i >= z_j
    support = _c.step(_cont(_one() + count * zj - above))          # (m, n, 1): 1 in the support
    support = _c.reshape(_cont(support), (m, n))
    size = _k.sum(support, axis=-1, keepdims=True)
    tau = (_k.sum(support * rows, axis=-1, keepdims=True) - 1.0) / size
    y = _c.relu(_cont(rows - tau))
    y = _c.reshape(_cont(y), kept + (n,))
    order = [i for i in range(r) if i != ax] + [ax]
    return _k._permute(y, [order.index(i) for i in range(r)])


@_eager("x")
def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2."""
    b = _number(b, "squareplus", "b")
    if b < 0:
        raise ValueError(f"squareplus: b must be >= 0, got {b}")
    x = _f(x)
    return _c.scale(_cont(x + _c.sqrt(_cont(_c.sqr(x) + b))), 0.5)


@_eager("x")
def tanh_shrink(x):
    """x - tanh(x)."""
    x = _f(x)
    return x - _tanh(x)


@_eager("x")
def threshold(x, threshold, default_value):
    """x where x > threshold, ``default_value`` elsewhere."""
    t = _number(threshold, "threshold", "threshold")
    d = _number(default_value, "threshold", "default_value")
    x = _f(x)
    return _c.step(_cont(x - t)) * (x - d) + d


def erf(x):
    """The error function.  On arrays: exact (float64, then float32); in a graph:
    Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), built from exp, which trains."""
    if not _in_graph(x):
        return _erf_exact(_array(x, "erf").astype(np.float64)).astype(np.float32)
    x = _f(x)
    p, a = 0.3275911, (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
    ax = _c.abs(x)
    t = _k.reciprocal(_c.scale(_cont(ax), p) + 1.0)
    poly = _c.scale(t, a[4])
    for coef in reversed(a[:4]):
        poly = (poly + coef) * t
    tail = poly * _c.exp(_c.neg(_c.sqr(x)))
    return _c.sgn(x) * (_one() - tail)


_erf_exact = np.vectorize(math.erf, otypes=[np.float64])


# Giles's single-precision erfinv ("Approximating the erfinv function", 2010): a polynomial in
# w - 2.5 for w = -log(1 - x^2) < 5, in sqrt(w) - 3 beyond
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefs, v):
    p = _c.scale(v, 0.0) + coefs[0]
    for c in coefs[1:]:
        p = p * v + c
    return p


def erfinv(x):
    """The inverse error function.  On arrays: float64 Newton steps from an estimate; in a
    graph: Giles's polynomial approximation (erf of the result within 5e-8 of x), which
    trains; |x| >= 1 gives inf/nan."""
    if _in_graph(x):
        t = _f(x)
        w = _c.neg(_c.log(_cont((_one() - t) * (t + 1.0))))       # (1 - x)(1 + x): exact near |x| = 1
        central = _horner(_ERFINV_CENTRAL, w - 2.5)
        tail = _horner(_ERFINV_TAIL, _c.sqrt(w) - 3.0)
        inner = _c.step(_cont(_c.neg(w) + 5.0))                     # 1 where w < 5
        return (central * inner + tail * (_one() - inner)) * t
    a = _array(x, "erfinv").astype(np.float64)
    out = np.full(a.shape, np.nan)
    out[a == 1] = np.inf
    out[a == -1] = -np.inf
    inside = np.abs(a) < 1
    y = a[inside]
    # Winitzki's estimate, then Newton on erf(z) - y
    w = np.log1p(-y * y)
    c = 2 / (np.pi * 0.147) + w / 2
    z = np.sign(y) * np.sqrt(np.sqrt(c * c - w / 0.147) - c)
    for _ in range(6):
        z = z - (_erf_exact(z) - y) / (2 / np.sqrt(np.pi) * np.exp(-z * z))
    out[inside] = z
    return out.astype(np.float32)


# --- encodings, norms --------------------------------------------------------------------------

def multi_hot(inputs, num_classes=None, axis=-1, dtype=None, sparse=False, **kwargs):
    """Integer class indices (batch, k) as multi-hot rows (batch, num_classes): 1 for each class
    present (a 1-D input gives one row).  As Keras's: the one-hot axis goes to ``axis``, then
    axis 1 (axis 0 for a 1-D input) is reduced.  ``num_tokens`` is Keras's older name for
    num_classes."""
    if num_classes is None:
        num_classes = kwargs.pop("num_tokens", None)
    if kwargs:
        raise TypeError(f"multi_hot: unexpected keyword arguments {sorted(kwargs)}")
    if not is_int(num_classes) or num_classes < 1:
        raise ValueError(f"multi_hot: num_classes must be a positive int, got {num_classes!r}")
    if sparse:
        raise ValueError("multi_hot: sparse=True is not available (pyggml's tensors are dense)")
    if dtype not in (None, "float32", "int32", "bool"):
        raise ValueError(f"multi_hot: dtype must be float32, int32 or bool, got {dtype!r}")
    r = len(_shape(inputs))
    ax = _k._axis(axis, r + 1, "multi_hot")
    order = list(range(r))
    order.insert(ax, r)                                            # the classes (last) moved to axis
    reduce_axis = 1 if r > 1 else 0
    if not _in_graph(inputs):
        a = _array(inputs, "multi_hot")
        if a.dtype.kind not in "iu":
            raise TypeError(f"multi_hot: class indices must be integers, got dtype {a.dtype}")
        hot = np.transpose(a[..., None] == np.arange(int(num_classes)), order).any(axis=reduce_axis)
        return hot.astype(np.dtype(dtype or "float32"))
    x = inputs.graph_tensor() if isinstance(inputs, Variable) else inputs
    oh = _class_rows(x, int(num_classes))
    if order != list(range(r + 1)):
        oh = _k.transpose(oh, order)
    return _k.max(oh, axis=reduce_axis)


@_eager("x")
def normalize(x, axis=-1, order=2, epsilon=None):
    """x divided by its ``order``-norm along ``axis`` (at least ``epsilon``, 1e-7 by default)."""
    if not is_int(order) or order < 1:
        raise ValueError(f"normalize: order must be an int >= 1, got {order!r}")
    eps = EPSILON if epsilon is None else _number(epsilon, "normalize", "epsilon")
    if eps < 0:
        raise ValueError(f"normalize: epsilon must be >= 0, got {epsilon!r}")
    x = _f(x)
    if order == 2:
        inv = _k.rsqrt(_k.sum(_c.sqr(x), axis, keepdims=True))
        return x * _k.minimum(inv, 1.0 / eps) if eps > 0 else x * inv
    n = _k.norm(x, ord=int(order), axis=axis, keepdims=True)
    return _k.divide(x, _k.maximum(n, eps))


@_eager("x1", "x2")
def psnr(x1, x2, max_val):
    """The peak signal-to-noise ratio of x2 against x1 over all values, in dB:
    20 log10(max_val) - 10 log10(mean((x1 - x2)^2))."""
    mv = _number(max_val, "psnr", "max_val")
    if mv <= 0:
        raise ValueError(f"psnr: max_val must be positive, got {max_val}")
    if not (_broadcasts(_shape(x1), _shape(x2)) or _broadcasts(_shape(x2), _shape(x1))):
        raise ValueError(f"psnr: x1 and x2 must have one shape, got {_shape(x1)} and {_shape(x2)}")
    a, b = _f(x1), _f(x2)
    mse = _k.mean(_c.sqr(_cont(a - b)))
    return _c.scale(_c.log(mse), -10.0 / math.log(10.0)) + 20.0 * math.log10(mv)


def _along_axes(v, shape, axes, what, name):
    """A per-axis parameter (a number, or an array/tensor of the reduced axes' shape)
    shaped to broadcast against x of ``shape``."""
    if is_number(v):
        return float(v)
    t = _f(v)
    want = tuple(shape[a] for a in axes)
    got = tuple(int(d) for d in t.shape)
    if int(np.prod(got)) != int(np.prod(want)):
        raise ValueError(f"{what}: {name} must have the shape {want} of the axes {axes}, got {got}")
    full = tuple(d if i in axes else 1 for i, d in enumerate(shape))
    return _c.reshape(_cont(t), full)


@_eager("x", "gamma", "beta")
def layer_normalization(x, gamma=None, beta=None, axis=-1, epsilon=None, rms_scaling=False):
    """(x - mean) / sqrt(var + epsilon) over ``axis`` (an int or a tuple), times ``gamma``
    plus ``beta``; ``rms_scaling=True`` (Keras's argument) gives x / sqrt(var + epsilon) *
    gamma (x not centred, no beta).  epsilon defaults to 1e-7."""
    rms = _flag(rms_scaling, "layer_normalization", "rms_scaling")
    eps = EPSILON if epsilon is None else _number(epsilon, "layer_normalization", "epsilon")
    x = _f(x)
    shape = tuple(int(d) for d in x.shape)
    axes = _k._axes(axis, len(shape), "layer_normalization")
    centred = x - _k.mean(x, axes, keepdims=True)
    inv = _k.rsqrt(_k.mean(_c.sqr(_cont(centred)), axes, keepdims=True) + eps)
    # rms_scaling (Keras's): x itself over the standard deviation, times gamma, no beta
    y = x * inv if rms else centred * inv
    if gamma is not None:
        y = y * _along_axes(gamma, shape, axes, "layer_normalization", "gamma")
    if beta is not None and not rms:
        y = y + _along_axes(beta, shape, axes, "layer_normalization", "beta")
    return y


@_eager("x", "scale")
def rms_normalization(x, scale=1, axis=-1, epsilon=None):
    """x / sqrt(mean(x^2) + epsilon) over ``axis``, times ``scale`` (broadcast as numpy's);
    epsilon defaults to 1e-7."""
    eps = EPSILON if epsilon is None else _number(epsilon, "rms_normalization", "epsilon")
    x = _f(x)
    shape = tuple(int(d) for d in x.shape)
    axes = _k._axes(axis, len(shape), "rms_normalization")
    y = x * _k.rsqrt(_k.mean(_c.sqr(x), axes, keepdims=True) + eps)
    if scale is None or (is_number(scale) and float(scale) == 1.0):
        return y
    if is_number(scale):
        return y * float(scale)
    sc = _f(scale)
    if not _broadcasts(tuple(int(d) for d in sc.shape), shape):
        raise ValueError(f"rms_normalization: scale of shape {tuple(sc.shape)} does not broadcast to x's {shape}")
    return y * sc                                                   # numpy's broadcasting, as Keras


@_eager("x", "mean", "variance", "offset", "scale")
def batch_normalization(x, mean, variance, axis, offset=None, scale=None, epsilon=1e-3):
    """(x - mean) / sqrt(variance + epsilon) * scale + offset, with mean, variance, offset and
    scale given per entry of ``axis`` (the features)."""
    eps = _number(epsilon, "batch_normalization", "epsilon")
    x = _f(x)
    shape = tuple(int(d) for d in x.shape)
    ax = (_k._axis(axis, len(shape), "batch_normalization"),)

    def per(v, name):
        return _along_axes(v, shape, ax, "batch_normalization", name)
    y = (x - per(mean, "mean")) * _k.rsqrt(per(variance, "variance") + eps)
    if scale is not None:
        y = y * per(scale, "scale")
    if offset is not None:
        y = y + per(offset, "offset")
    return y


# --- losses ---------------------------------------------------------------------------------------

def _check_same(target, output, what):
    """Keras wants one shape; a target that broadcasts to the output's (one per sample
    of a batch built later) is taken too."""
    if not _broadcasts(_shape(target), _shape(output)):
        raise ValueError(f"{what}: target and output must have one shape, got {_shape(target)} and "
                         f"{_shape(output)}")


@_eager("target", "output")
def categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """-sum(target * log(p)) along ``axis``: p = softmax(output) for logits, else output
    rescaled to sum to 1 and clipped to [1e-7, 1 - 1e-7] (Keras's)."""
    _check_same(target, output, "categorical_crossentropy")
    t, o = _f(target), _f(output)
    if _flag(from_logits, "categorical_crossentropy", "from_logits"):
        logp = _k.log_softmax(o, axis=axis)
    else:
        p = _k.divide(o, _k.sum(o, axis=axis, keepdims=True))
        logp = _c.log(_cont(_k.clip(p, EPSILON, 1.0 - EPSILON)))
    return _c.neg(_k.sum(t * logp, axis=axis))


@_eager("target", "output")
def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
    """categorical_crossentropy with integer class targets (the output's shape without
    ``axis``; a trailing axis of length 1 is squeezed)."""
    o = _f(output)
    oshape = tuple(int(d) for d in o.shape)
    ax = _k._axis(axis, len(oshape), "sparse_categorical_crossentropy")
    tshape = _shape(target)
    if len(tshape) == len(oshape) and tshape[-1] == 1:
        tshape = tshape[:-1]
        target = _k.reshape(target, tshape or (1,))
    want = tuple(d for i, d in enumerate(oshape) if i != ax)
    if tshape != want:
        raise ValueError(f"sparse_categorical_crossentropy: target must have the shape {want} (output {oshape} "
                         f"without axis {axis}), got {_shape(target)}")
    hot = _class_rows(target, oshape[ax])                          # classes last
    if ax != len(oshape) - 1:
        hot = _k.transpose(hot, [i for i in range(ax)] + [len(oshape) - 1] +
                           [i for i in range(ax, len(oshape) - 1)])
    return categorical_crossentropy(hot, o, from_logits=from_logits, axis=ax)


@_eager("target", "output")
def binary_crossentropy(target, output, from_logits=False):
    """-(t log p + (1 - t) log(1 - p)) entry by entry: p = sigmoid(output) for logits
    (computed stably), else output clipped to [1e-7, 1 - 1e-7]."""
    _check_same(target, output, "binary_crossentropy")
    t, o = _f(target), _f(output)
    if _flag(from_logits, "binary_crossentropy", "from_logits"):
        return _c.softplus(o) - t * o                              # = -(t log s + (1-t) log(1-s))
    p = _k.clip(o, EPSILON, 1.0 - EPSILON)
    return _c.neg(t * _c.log(_cont(p)) + (_one() - t) * _c.log(_cont(_one() - p)))


def _class_rows(target, n):
    """One-hot rows (a new last axis of n) of class indices: ints, or a float tensor of
    whole numbers (a loss's targets), compared with 0..n-1 without an int32 node, so that
    a training graph keeps only float tensors."""
    if isinstance(target, (Tensor, Variable)):
        t = target.graph_tensor() if isinstance(target, Variable) else target
        if t.dtype == "f32":
            col = _c.reshape(_cont(t), tuple(int(d) for d in t.shape) + (1,))
            return _k.equal(col, _k._t(np.arange(n, dtype=np.float32)))
        return _k.one_hot(t, n)
    a = np.asarray(target)
    if a.dtype.kind == "f" and np.all(a == np.round(a)):
        a = a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"class indices must be integers, got dtype {a.dtype}")
    return _k.one_hot(a, n)


# --- attention ------------------------------------------------------------------------------------

def _heads_first(t):
    return _k.transpose(t, (0, 2, 1, 3))


@_eager("query", "key", "value", "bias", "mask")
def dot_product_attention(query, key, value, bias=None, mask=None, scale=None, is_causal=False,
                          flash_attention=None, attn_logits_soft_cap=None):
    """softmax(q k^T * scale + bias, masked) v, in Keras's layout: query (batch, Tq, heads, dim),
    key and value (batch, Tk, kv_heads, dim) with heads a multiple of kv_heads (grouped
    queries); bias and mask broadcast to (batch, heads, Tq, Tk); mask is true where a query
    may attend; ``is_causal`` lets query i see keys 0..i.  scale defaults to 1/sqrt(dim).
    ``flash_attention`` gives the same numbers (there is one kernel)."""
    what = "dot_product_attention"
    q, k, v = _f(query), _f(key), _f(value)
    qs, ks, vs = (tuple(int(d) for d in t.shape) for t in (q, k, v))
    if not (len(qs) == len(ks) == len(vs) and len(qs) in (3, 4)):
        raise ValueError(f"{what}: query, key and value must be 3-D or 4-D tensors (batch, seq, heads, dim), got "
                         f"{qs}, {ks}, {vs}")
    if len(qs) == 3:
        q, k, v = (_k.expand_dims(t, 2) for t in (q, k, v))
        qs, ks, vs = qs[:2] + (1,) + qs[2:], ks[:2] + (1,) + ks[2:], vs[:2] + (1,) + vs[2:]
    b, tq, nh, dh = qs
    if ks[0] != b or vs[0] != b or ks[1] != vs[1] or ks[2] != vs[2] or ks[3] != dh:
        raise ValueError(f"{what}: key must be (batch, Tk, kv_heads, {dh}) and value (batch, Tk, kv_heads, dv), "
                         f"got query {qs}, key {ks}, value {vs}")
    if nh % ks[2]:
        raise ValueError(f"{what}: the query's {nh} heads must be a multiple of the key's {ks[2]} heads")
    if attn_logits_soft_cap is not None:
        cap = _number(attn_logits_soft_cap, what, "attn_logits_soft_cap")
        if cap <= 0:
            raise ValueError(f"{what}: attn_logits_soft_cap must be positive, got {cap}")
    if flash_attention is not None:
        _flag(flash_attention, what, "flash_attention")
    tk = ks[1]
    sc = 1.0 / math.sqrt(dh) if scale is None else _number(scale, what, "scale")
    group = nh // ks[2]
    if group > 1:                                                   # kv head j serves query heads j*group..
        heads = np.repeat(np.arange(ks[2]), group).astype(np.int32)
        k, v = _k.take(k, heads, axis=2), _k.take(v, heads, axis=2)
    qh, kh = _heads_first(q), _heads_first(k)                      # (b, h, t, d)
    logits = _c.scale(_c.mul_mat(kh, qh), sc)                      # (b, h, tq, tk)
    if attn_logits_soft_cap is not None:
        logits = _c.scale(_cont(_tanh(_c.scale(_cont(logits), 1.0 / cap))), cap)
    full = (b, nh, tq, tk)
    if bias is not None:
        bt = _f(bias)
        if not _broadcasts(tuple(bt.shape), full):
            raise ValueError(f"{what}: bias of shape {tuple(bt.shape)} does not broadcast to {full}")
        logits = logits + _k.broadcast_to(bt, full)
    keep = None
    if mask is not None:
        mt = _f(mask)
        if not _broadcasts(tuple(mt.shape), full):
            raise ValueError(f"{what}: mask of shape {tuple(mt.shape)} does not broadcast to {full}")
        keep = _c.step(_c.abs(mt))
    if _flag(is_causal, what, "is_causal"):
        tri = np.tril(np.ones((tq, tk), dtype=np.float32))
        keep = _k._t(tri) if keep is None else keep * _k._t(tri)
    if keep is not None:
        logits = logits + (_k.broadcast_to(keep, full) - 1.0) * 1e9
    probs = _c.soft_max(_cont(logits))
    vt = _k.transpose(v, (0, 2, 3, 1))                             # (b, h, dv, tk)
    out = _c.mul_mat(vt, probs)                                     # (b, h, tq, dv)
    out = _heads_first(out)                                         # (b, tq, h, dv)
    if len(_shape(query)) == 3:
        out = _k.squeeze(out, 2)
    return out


def _broadcasts(src, dst):
    return len(src) <= len(dst) and all(s in (1, d) for s, d in zip(src[::-1], dst[::-1]))


# --- convolutions and pooling -------------------------------------------------------------------

def _spatial_ints(v, rank, what, name):
    vals = (v,) * rank if is_int(v) else tuple(v) if isinstance(v, (list, tuple)) else None
    if vals is None or len(vals) != rank or not all(is_int(e) and 1 <= e <= MAX_INT for e in vals):
        raise ValueError(f"{what}: {name} must be a positive int or {rank} of them, got {v!r}")
    return tuple(int(e) for e in vals)


def _layout(inputs, data_format, what):
    """x channels-last (N, *spatial, C), its rank (1 or 2), and whether it came channels-first."""
    if data_format is not None:
        _choice(data_format, ("channels_last", "channels_first"), what, "data_format")
    x = _f(inputs)
    r = len(x.shape)
    if r not in (3, 4):
        raise ValueError(f"{what}: inputs must be 3-D (batch, length, channels) or 4-D (batch, height, width, "
                         f"channels); ggml tensors have at most 4 dimensions (no 3-D convolutions), got shape "
                         f"{tuple(x.shape)}")
    first = data_format == "channels_first"
    if first:
        x = _k.transpose(x, (0,) + tuple(range(2, r)) + (1,))
    return x, r - 2, first


def _restore(y, first):
    if not first:
        return y
    r = len(y.shape)
    return _k.transpose(y, (0, r - 1) + tuple(range(1, r - 1)))


def _padding_arg(padding, what):
    p = padding.lower() if isinstance(padding, str) else padding
    return _choice(p, ("valid", "same"), what, "padding")


def _to_nchw(x, rank):
    """channels-last (N, *spatial, C) -> (N, C, H, W) (H = 1 for 1-D)."""
    if rank == 1:
        n, w, c = (int(d) for d in x.shape)
        return _c.reshape(_cont(_k.transpose(x, (0, 2, 1))), (n, c, 1, w))
    return _k.transpose(x, (0, 3, 1, 2))


def _conv_geometry(spatial, kernel, strides, dilation, padding, what):
    """Per spatial axis (H, W): pads (before, after) and the output size."""
    pads, outs = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilation):
        span = (k - 1) * d + 1
        if padding == "same":
            out, before, after = same_pads(size, span, s)
            pads.append((before, after))
        else:
            if size < span:
                raise ValueError(f"{what}: an input of size {size} is smaller than the (dilated) kernel's {span} "
                                 f"with padding='valid'")
            out = valid_size(size, span, s)
            pads.append((0, 0))
        outs.append(out)
    return pads, outs


def _pad_hw(xc, pads, fill=0.0):
    """(N, C, H, W) padded by pads ((top, bottom), (left, right)) with ``fill``; trains (acc)."""
    (t, b), (l, r) = pads
    if not (t or b or l or r):
        return xc
    return pad(xc, [(0, 0), (0, 0), (t, b), (l, r)], constant_values=fill)


def _conv_cl(x, w, rank, strides, dilation, padding, what):
    """x channels-last (N, *spatial, C), w (*kernel, C, O) -> (N, *out, O): an f32 im2col (its
    kernel argument only a shape: never a weight, which ggml's backward pass cannot take) and
    one mul_mat."""
    kernel = tuple(int(d) for d in w.shape[:rank])
    cout = int(w.shape[-1])
    xc = _to_nchw(x, rank)                                          # (N, C, H, W)
    n, c, h, wd = (int(d) for d in xc.shape)
    kh, kw = (1,) + kernel if rank == 1 else kernel
    sh, sw = (1,) + strides if rank == 1 else strides
    dh, dw = (1,) + dilation if rank == 1 else dilation
    pads, _ = _conv_geometry((h, wd), (kh, kw), (sh, sw), (dh, dw), padding, what)
    ph, pw = _symmetric_part(pads)
    xc = _pad_hw(xc, ((pads[0][0] - ph, pads[0][1] - ph), (pads[1][0] - pw, pads[1][1] - pw)))
    shape_only = _scope.require(what).ctx.new_tensor((cout, c, kh, kw))
    cols = _c.im2col(shape_only, xc, sw, sh, pw, ph, dw, dh, True, "f32")  # (N, OH, OW, C*kh*kw)
    oh, ow = int(cols.shape[1]), int(cols.shape[2])
    kk = c * kh * kw
    cols = _c.reshape(cols, (n * oh * ow, kk))
    wm = _k.transpose(w, (rank + 1, rank) + tuple(range(rank)))   # (O, C, *kernel)
    wm = _c.reshape(_cont(wm), (cout, kk))
    y = _c.mul_mat(wm, cols)                                        # (N*OH*OW, O)
    return _c.reshape(y, (n, ow, cout) if rank == 1 else (n, oh, ow, cout))


def _symmetric_part(pads):
    """The padding im2col applies itself (equal on both sides of an axis), per axis."""
    return tuple(b if b == a else 0 for b, a in pads)


@_eager("inputs", "kernel")
def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """Keras's ``ops.conv`` in 1-D and 2-D: inputs (batch, *spatial, channels) (channels first
    with data_format="channels_first"), kernel (*kernel_size, channels / groups, filters);
    padding "valid" or "same" (Keras's: the odd cell after), strides and dilation."""
    what = "conv"
    x, rank, first = _layout(inputs, data_format, what)
    w = _f(kernel)
    if len(w.shape) != rank + 2:
        raise ValueError(f"conv: the kernel must be {rank + 2}-D (*kernel_size, in_channels, filters) for "
                         f"{rank}-D inputs, got shape {tuple(w.shape)}")
    strides = _spatial_ints(strides, rank, what, "strides")
    dilation = _spatial_ints(dilation_rate, rank, what, "dilation_rate")
    padding = _padding_arg(padding, what)
    c, kin, cout = int(x.shape[-1]), int(w.shape[-2]), int(w.shape[-1])
    if c % kin or cout % (c // kin):
        raise ValueError(f"conv: the inputs' {c} channels must be a multiple of the kernel's {kin} input channels "
                         f"(groups), and the filters ({cout}) a multiple of the groups")
    groups = c // kin
    if groups == 1 and _scope.fused():
        # pyggml's channels-last convolution, the op the Conv layers use: its gradients have
        # gradients of their own (a gradient penalty through ops.conv: StyleGAN's equalized
        # layers), where im2col's backward has none
        kernel_oc = _cont(_k.transpose(w, (rank + 1,) + tuple(range(rank + 1))))    # (O, *kernel, C)
        if rank == 1:
            y = _c.conv_2d_cl(_cont(_c.reshape(_cont(x), (int(x.shape[0]), 1) + tuple(int(d) for d in x.shape[1:]))),
                              _c.reshape(kernel_oc, (cout, 1) + tuple(int(d) for d in kernel_oc.shape[1:])), None,
                              (1,) + strides, padding, (1,) + dilation)
            y = _c.reshape(y, (int(y.shape[0]),) + tuple(int(d) for d in y.shape[2:]))
        else:
            y = _c.conv_2d_cl(_cont(x), kernel_oc, None, strides, padding, dilation)
    elif groups == 1:
        y = _conv_cl(x, w, rank, strides, dilation, padding, what)
    else:
        xs = _k.split(x, groups, axis=-1)
        ws = _k.split(w, groups, axis=-1)
        y = _k.concatenate([_conv_cl(a, b, rank, strides, dilation, padding, what) for a, b in zip(xs, ws)],
                           axis=-1)
    return _restore(y, first)


def _dilate_and_pad(x, axis, stride, before, after):
    """x with stride - 1 zeros between its entries along ``axis`` and ``before``/``after``
    zeros around (negative: entries cut), as a product with a constant 0/1 matrix (trains)."""
    n = int(x.shape[axis])
    z = (n - 1) * stride + 1
    total = z + before + after
    if total < 1:
        raise ValueError("conv_transpose: the output would be empty")
    if total * n > _k.MAX_CONSTANT:
        raise ValueError(f"conv_transpose: an output axis of {total} values is too large")
    place = np.zeros((total, n), dtype=np.float32)
    for i in range(n):
        j = i * stride + before
        if 0 <= j < total:
            place[j, i] = 1.0
    if place.shape == (n, n) and np.array_equal(place, np.eye(n)):
        return x
    r = len(x.shape)
    moved = _k._swap_last(x, axis)
    shape = tuple(int(d) for d in moved.shape)
    rows = _c.reshape(_cont(moved), (int(np.prod(shape[:-1])), n))
    y = _c.reshape(_c.mul_mat(_k._t(place), rows), shape[:-1] + (total,))
    return _k._swap_last(y, axis) if axis != r - 1 else y


@_eager("inputs", "kernel")
def conv_transpose(inputs, kernel, strides=1, padding="valid", output_padding=None, data_format=None,
                   dilation_rate=1):
    """Keras's ``ops.conv_transpose`` in 1-D and 2-D: kernel (*kernel_size, filters, in_channels);
    the output size follows Keras's rule for padding "valid"/"same" and ``output_padding``."""
    what = "conv_transpose"
    x, rank, first = _layout(inputs, data_format, what)
    w = _f(kernel)
    if len(w.shape) != rank + 2:
        raise ValueError(f"conv_transpose: the kernel must be {rank + 2}-D (*kernel_size, filters, in_channels) "
                         f"for {rank}-D inputs, got shape {tuple(w.shape)}")
    if int(w.shape[-1]) != int(x.shape[-1]):
        raise ValueError(f"conv_transpose: the kernel's last axis ({int(w.shape[-1])}) must be the inputs' "
                         f"{int(x.shape[-1])} channels")
    strides = _spatial_ints(strides, rank, what, "strides")
    dilation = _spatial_ints(dilation_rate, rank, what, "dilation_rate")
    padding = _padding_arg(padding, what)
    if output_padding is not None:
        output_padding = _spatial_ints_zero(output_padding, rank, what)
        for op, s, d in zip(output_padding, strides, dilation):
            if op >= max(s, d):
                raise ValueError(f"conv_transpose: output_padding {op} must be smaller than the stride {s} "
                                 f"(or the dilation)")
    kernel_size = tuple(int(d) for d in w.shape[:rank])
    y = x
    for i in range(rank):
        span = (kernel_size[i] - 1) * dilation[i] + 1
        before, after = transpose_pads(span, strides[i], padding, None if output_padding is None
                                        else output_padding[i])
        y = _dilate_and_pad(y, 1 + i, strides[i], before, after)
    # a stride-1 valid convolution with the flipped kernel, its in/out axes swapped
    flipped = w
    for i in range(rank):
        kk = kernel_size[i]
        if kk > 1:
            flipped = _k.take(flipped, np.arange(kk - 1, -1, -1), axis=i)
    flipped = _k.transpose(flipped, tuple(range(rank)) + (rank + 1, rank))
    out = _conv_cl(y, flipped, rank, (1,) * rank, dilation, "valid", what)
    return _restore(out, first)


def _spatial_ints_zero(v, rank, what):
    vals = (v,) * rank if is_int(v) else tuple(v) if isinstance(v, (list, tuple)) else None
    if vals is None or len(vals) != rank or not all(is_int(e) and e >= 0 for e in vals):
        raise ValueError(f"{what}: output_padding must be an int >= 0 or {rank} of them, got {v!r}")
    return tuple(int(e) for e in vals)


def _depthwise(x, w, rank, strides, dilation, padding, what):
    """x channels-last (N, *spatial, C), w (*kernel, C, M) -> (N, *out, C * M): the C * N
    one-channel images unfolded by one im2col, each channel's windows times its M taps."""
    kernel = tuple(int(d) for d in w.shape[:rank])
    c, m = int(w.shape[-2]), int(w.shape[-1])
    if c != int(x.shape[-1]):
        raise ValueError(f"{what}: the kernel's input channels ({c}) must be the inputs' {int(x.shape[-1])}")
    xc = _to_nchw(x, rank)                                          # (N, C, H, W)
    n, _, h, wd = (int(d) for d in xc.shape)
    kh, kw = (1,) + kernel if rank == 1 else kernel
    sh, sw = (1,) + strides if rank == 1 else strides
    dh, dw = (1,) + dilation if rank == 1 else dilation
    pads, _ = _conv_geometry((h, wd), (kh, kw), (sh, sw), (dh, dw), padding, what)
    images = _c.reshape(_cont(_k.transpose(xc, (1, 0, 2, 3))), (c * n, 1, h, wd))
    ph, pw = _symmetric_part(pads)
    images = _pad_hw(images, ((pads[0][0] - ph, pads[0][1] - ph), (pads[1][0] - pw, pads[1][1] - pw)))
    shape_only = _scope.require(what).ctx.new_tensor((1, 1, kh, kw))
    cols = _c.im2col(shape_only, images, sw, sh, pw, ph, dw, dh, True, "f32")   # (C*N, OH, OW, kh*kw)
    oh, ow = int(cols.shape[1]), int(cols.shape[2])
    taps = kh * kw
    cols = _c.reshape(cols, (c, n * oh * ow, taps))
    cmk = _c.reshape(_cont(_k.transpose(w, (rank, rank + 1) + tuple(range(rank)))), (c, m, taps))
    y = _c.mul_mat(cmk, cols)                                       # (C, N*OH*OW, M)
    y = _k.transpose(y, (1, 0, 2))                                  # (N*OH*OW, C, M)
    return _c.reshape(_cont(y), (n, ow, c * m) if rank == 1 else (n, oh, ow, c * m))


@_eager("inputs", "kernel")
def depthwise_conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """Keras's ``ops.depthwise_conv`` in 1-D and 2-D: kernel (*kernel_size, channels,
    depth_multiplier); output channel c * multiplier + j is channel c convolved with kernel
    [..., c, j]."""
    what = "depthwise_conv"
    x, rank, first = _layout(inputs, data_format, what)
    w = _f(kernel)
    if len(w.shape) != rank + 2:
        raise ValueError(f"{what}: the kernel must be {rank + 2}-D (*kernel_size, channels, multiplier), got "
                         f"shape {tuple(w.shape)}")
    strides = _spatial_ints(strides, rank, what, "strides")
    dilation = _spatial_ints(dilation_rate, rank, what, "dilation_rate")
    padding = _padding_arg(padding, what)
    return _restore(_depthwise(x, w, rank, strides, dilation, padding, what), first)


@_eager("inputs", "depthwise_kernel", "pointwise_kernel")
def separable_conv(inputs, depthwise_kernel, pointwise_kernel, strides=1, padding="valid", data_format=None,
                   dilation_rate=1):
    """A depthwise convolution followed by a 1x1 one: pointwise_kernel (*1s, channels *
    multiplier, filters)."""
    what = "separable_conv"
    x, rank, first = _layout(inputs, data_format, what)
    dw, pw = _f(depthwise_kernel), _f(pointwise_kernel)
    if len(dw.shape) != rank + 2 or len(pw.shape) != rank + 2:
        raise ValueError(f"{what}: both kernels must be {rank + 2}-D, got {tuple(dw.shape)} and {tuple(pw.shape)}")
    if any(int(d) != 1 for d in pw.shape[:rank]) or int(pw.shape[-2]) != int(dw.shape[-2]) * int(dw.shape[-1]):
        raise ValueError(f"{what}: pointwise_kernel must be (*1s, channels * multiplier = "
                         f"{int(dw.shape[-2]) * int(dw.shape[-1])}, filters), got {tuple(pw.shape)}")
    strides = _spatial_ints(strides, rank, what, "strides")
    dilation = _spatial_ints(dilation_rate, rank, what, "dilation_rate")
    padding = _padding_arg(padding, what)
    y = _depthwise(x, dw, rank, strides, dilation, padding, what)
    y = _conv_cl(y, pw, rank, (1,) * rank, (1,) * rank, "valid", what)
    return _restore(y, first)


def _pool(inputs, pool_size, strides, padding, data_format, op, what):
    x, rank, first = _layout(inputs, data_format, what)
    size = _spatial_ints(pool_size, rank, what, "pool_size")
    strides = size if strides is None else _spatial_ints(strides, rank, what, "strides")
    padding = _padding_arg(padding, what)
    spatial = tuple(int(d) for d in x.shape[1:-1])
    for n, k in zip(spatial, size):
        if padding == "valid" and n < k:
            raise ValueError(f"{what}: an input of size {n} is smaller than the pool's {k} with padding='valid'")
    xc = _to_nchw(x, rank)                                          # (N, C, H, W)
    (kh, kw), (sh, sw) = ((1,) + size, (1,) + strides) if rank == 1 else (size, strides)
    hw = (1,) + spatial if rank == 1 else spatial
    pads, outs = _conv_geometry(hw, (kh, kw), (sh, sw), (1, 1), padding, what)
    # padding explicit (the lowest float for max), so that ggml's pool_2d takes whole windows
    xc = _pad_hw(xc, pads, _LOWEST if op == "max" else 0.0)
    y = _c.pool_2d(_cont(xc), op, kw, kh, sw, sh, 0, 0)             # (N, C, OH, OW)
    if op == "avg" and any(b or a for b, a in pads):
        # Keras's average counts only the window's cells inside the input
        cells = [np.minimum(np.arange(o) * s - b + k, n) - np.maximum(np.arange(o) * s - b, 0)
                 for o, s, (b, _), k, n in zip(outs, (sh, sw), pads, (kh, kw), hw)]
        y = y * _k._t((kh * kw / np.outer(cells[0], cells[1])).astype(np.float32))
    if rank == 1:
        n, c, _, ow = (int(d) for d in y.shape)
        y = _k.transpose(_c.reshape(_cont(y), (n, c, ow)), (0, 2, 1))
    else:
        y = _k.transpose(y, (0, 2, 3, 1))
    return _restore(y, first)


@_eager("inputs")
def max_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """The largest value of each window (1-D or 2-D; strides default to pool_size)."""
    return _pool(inputs, pool_size, strides, padding, data_format, "max", "max_pool")


@_eager("inputs")
def average_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """The mean of each window (with padding "same", over the window's cells inside the input)."""
    return _pool(inputs, pool_size, strides, padding, data_format, "avg", "average_pool")


@_eager("input")
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002 - Keras's name
    """Keras's (and PyTorch's) ``unfold``: the sliding blocks of channels-first images (N, C, H,
    W) as columns (N, C * kh * kw, L), each column channel-major then row-major over the
    window, L the number of blocks; ``padding`` zeros on both sides of each axis."""
    what = "unfold"
    x = _f(input)
    if len(x.shape) != 4:
        raise ValueError(f"{what}: input must be 4-D (batch, channels, height, width), got {tuple(x.shape)}")
    (kh, kw) = _spatial_ints(kernel_size, 2, what, "kernel_size")
    (dh, dw) = _spatial_ints(dilation, 2, what, "dilation")
    (sh, sw) = _spatial_ints(stride, 2, what, "stride")
    pads = (padding,) * 2 if is_int(padding) else tuple(padding) if isinstance(padding, (list, tuple)) else None
    if pads is None or len(pads) != 2 or not all(is_int(p) and 0 <= p <= MAX_INT for p in pads):
        raise ValueError(f"{what}: padding must be an int >= 0 or 2 of them, got {padding!r}")
    n, c, h, w = (int(d) for d in x.shape)
    for size, p, k, d in zip((h, w), pads, (kh, kw), (dh, dw)):
        if size + 2 * p < (k - 1) * d + 1:
            raise ValueError(f"{what}: a padded size of {size + 2 * p} is smaller than the (dilated) kernel's "
                             f"{(k - 1) * d + 1}")
    shape_only = _scope.require(what).ctx.new_tensor((1, c, kh, kw))
    cols = _c.im2col(shape_only, _cont(x), sw, sh, int(pads[1]), int(pads[0]), dw, dh, True, "f32")
    oh, ow = int(cols.shape[1]), int(cols.shape[2])
    cols = _c.reshape(cols, (n, oh * ow, c * kh * kw))
    return _k.transpose(cols, (0, 2, 1))


_MAX_ADAPTIVE = 1 << 26          # entries of an axis's pooling table (input length x output length)


def _adaptive_bins(n, out):
    """PyTorch's (and Keras's) adaptive bins: bin i covers [floor(i n / out), ceil((i + 1) n / out))."""
    starts = (np.arange(out) * n) // out
    ends = -((-(np.arange(out) + 1) * n) // out)
    return starts, ends


def _adaptive_axis(x, axis, out, op):
    """x pooled along ``axis`` into ``out`` adaptive bins: the mean as a product with a constant
    averaging matrix, the max as a max over each bin's entries (gathered; a shorter bin repeats
    its last entry, which leaves its max unchanged)."""
    n = int(x.shape[axis])
    starts, ends = _adaptive_bins(n, out)
    r = len(x.shape)
    moved = _k._swap_last(x, axis)
    shape = tuple(int(d) for d in moved.shape)
    rows = _c.reshape(_cont(moved), (int(np.prod(shape[:-1])), n))
    if op == "avg":
        avg = np.zeros((out, n), dtype=np.float32)
        for i, (a, b) in enumerate(zip(starts, ends)):
            avg[i, a:b] = 1.0 / (b - a)
        y = _c.mul_mat(_k._t(avg), rows)                            # (rows, out)
    else:
        width = int((ends - starts).max())
        idx = np.minimum(starts[:, None] + np.arange(width)[None, :], ends[:, None] - 1).astype(np.int32)
        y = _k.max(_k.take(rows, idx, axis=-1), axis=-1)            # (rows, out)
    y = _c.reshape(_cont(y), shape[:-1] + (out,))
    return _k._swap_last(y, axis) if axis != r - 1 else y


def _adaptive_pool(inputs, output_size, data_format, op, what):
    x, rank, first = _layout(inputs, data_format, what)
    size = _spatial_ints(output_size, rank, what, "output_size")
    spatial = tuple(int(d) for d in x.shape[1:-1])
    for n, o in zip(spatial, size):
        if o > _MAX_ADAPTIVE or n * o > _MAX_ADAPTIVE:
            raise ValueError(f"{what}: an output size of {o} from {n} makes a pooling table of {n * o} entries, "
                             f"more than {_MAX_ADAPTIVE}")
    # (an output longer than the input repeats entries: bins of one or two, PyTorch's and Keras's)
    for i, o in enumerate(size):
        if o != spatial[i] or op == "max":
            x = _adaptive_axis(x, 1 + i, o, op)
    return _restore(x, first)


@_eager("inputs")
def adaptive_average_pool(inputs, output_size, data_format=None):
    """Keras's ``adaptive_average_pool`` (1-D, 2-D): the mean over PyTorch's adaptive bins, so
    that each spatial axis becomes ``output_size`` long."""
    return _adaptive_pool(inputs, output_size, data_format, "avg", "adaptive_average_pool")


@_eager("inputs")
def adaptive_max_pool(inputs, output_size, data_format=None):
    """Keras's ``adaptive_max_pool`` (1-D, 2-D): the largest value of each adaptive bin."""
    return _adaptive_pool(inputs, output_size, data_format, "max", "adaptive_max_pool")


# --- einsum ---------------------------------------------------------------------------------------

def _parse_einsum(subscripts, shapes):
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: subscripts must be a string, got {subscripts!r}")
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, out = s.split("->")
    else:
        lhs, out = s, None
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: {len(terms)} operands in {subscripts!r}, got {len(shapes)}")
    used = set(c for c in s if c.isalpha())
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used]
    ell_rank = 0
    for t, shp in zip(terms, shapes):
        if "..." in t:
            ell_rank = max(ell_rank, len(shp) - (len(t) - 3))
    ell = "".join(spare[:ell_rank])
    fixed = []
    for t, shp in zip(terms, shapes):
        if "..." in t:
            k = len(shp) - (len(t) - 3)
            t = t.replace("...", ell[ell_rank - k:] if k else "")
        if len(t) != len(shp) or not all(c.isalpha() for c in t):
            raise ValueError(f"einsum: term {t!r} does not match an operand of shape {shp}")
        fixed.append(t)
    if out is None:
        counts = {}
        for t in fixed:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    sizes = {}
    for t, shp in zip(fixed, shapes):
        for c, d in zip(t, shp):
            if sizes.setdefault(c, d) != d:
                raise ValueError(f"einsum: index {c!r} has sizes {sizes[c]} and {d} in {subscripts!r}")
    if any(c not in sizes for c in out) or len(set(out)) != len(out):
        raise ValueError(f"einsum: the output {out!r} names an index no operand has, or repeats one")
    return fixed, out, sizes


def _sublists(first, rest):
    """numpy's other form, ``einsum(a, [0, 1], b, [1], [0])`` (an operand then its axes' integer
    labels, the output's labels last), as a subscripts string and the operands."""
    items = (first,) + tuple(rest)
    operands, labels = list(items[0::2]), list(items[1::2])
    out = None
    if len(labels) < len(operands):
        if len(operands) - len(labels) != 1 or not isinstance(operands[-1], (list, tuple)):
            raise TypeError("einsum: subscripts must be a string, or operands each followed by a list of "
                            "axis labels (numpy's sublist form)")
        out = operands.pop()
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def word(ls):
        if not isinstance(ls, (list, tuple)) or not all(is_int(v) and 0 <= v < len(letters) for v in ls):
            raise TypeError(f"einsum: subscripts must be a string, or each operand followed by a list of axis labels "
                            f"(ints in [0, {len(letters)})), got {ls!r}")
        return "".join(letters[v] for v in ls)
    text = ",".join(word(ls) for ls in labels) + ("" if out is None else "->" + word(out))
    return text, tuple(operands)


def einsum(subscripts, *operands, **kwargs):
    """numpy's einsum.  In a graph: diagonals (an index repeated within an operand) taken with
    get_rows, indices of one operand only summed, then each pair of operands (left to right) as
    transposes, reshapes and one batched matrix product; every intermediate and the result have
    at most 4 dimensions."""
    if kwargs:
        raise TypeError(f"einsum: unexpected keyword arguments {sorted(kwargs)}")
    if not isinstance(subscripts, str):
        subscripts, operands = _sublists(subscripts, operands)
    if not operands:
        raise ValueError("einsum: needs at least one operand")
    shapes = [_shape(o) for o in operands]
    terms, out, sizes = _parse_einsum(subscripts, shapes)
    if not _in_graph(*operands):
        arrays = [_array(o, "einsum") for o in operands]
        return np.einsum(",".join(terms) + "->" + out, *arrays).astype(np.float32)
    ts = [o if isinstance(o, _wide.Wide) else _f(o) for o in operands]
    terms = list(terms)
    for i in range(len(ts)):
        if isinstance(ts[i], _wide.Wide) and len(set(terms[i])) != len(terms[i]):
            raise ValueError(f"einsum: a diagonal ({terms[i]!r}) of a tensor of {len(terms[i])} dimensions: reshape it "
                             f"to at most 4 dimensions first")
        ts[i], terms[i] = _diagonals(ts[i], terms[i], sizes)
    while len(ts) > 2:
        # the first two operands contracted, keeping the indices the others or the output use
        rest = "".join(terms[2:]) + out
        keep = "".join(dict.fromkeys(c for c in terms[0] + terms[1] if c in rest))
        ts[:2] = [_einsum_graph(terms[:2], keep, sizes, ts[:2])]
        terms[:2] = [keep]
    return _einsum_graph(terms, out, sizes, ts)


def _diagonals(x, term, sizes):
    """x's diagonal over each index its term repeats ("ii->i"): the two axes moved last, merged,
    and every (n + 1)-th entry taken."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        p = term.index(c)
        q = term.index(c, p + 1)
        others = [j for j in range(len(term)) if j not in (p, q)]
        n = sizes[c]
        moved = _k.transpose(x, others + [p, q]) if others + [p, q] != list(range(len(term))) else x
        lead = tuple(int(moved.shape[j]) for j in range(len(others)))
        flat = _c.reshape(_cont(moved), lead + (n * n,))
        x = _k.take(flat, (np.arange(n) * (n + 1)).astype(np.int32), axis=-1)
        term = "".join(term[j] for j in others) + c
    return x, term


def _moved(x, order):
    """numpy's transpose of a graph tensor, of any number of dimensions (pyggml._wide)."""
    if list(order) == list(range(len(order))):
        return x
    return _wide.transpose(x, order) if isinstance(x, _wide.Wide) else _k.transpose(x, order)


def _summed(x, axis):
    if isinstance(x, _wide.Wide):
        return _wide.apply("sum", _k.sum, inspect.signature(_k.sum), (x,), {"axis": axis})
    return _k.sum(x, axis=axis)


def _einsum_graph(terms, out, sizes, ts):
    """One- or two-operand einsum of graph tensors (no repeated index within an operand); an
    operand or the result may have more than four dimensions (pyggml._wide)."""
    terms, ts = list(terms), list(ts)
    # indices of one operand only that the output drops: summed first
    for i, t in enumerate(terms):
        others = "".join(terms[:i] + terms[i + 1:]) + out
        drop = [j for j, c in enumerate(t) if c not in others]
        if drop:
            if len(drop) == len(t):
                ts[i] = _c.reshape(_summed(ts[i], None), (1,))
                terms[i] = ""
            else:
                ts[i] = _summed(ts[i], tuple(drop))
                terms[i] = "".join(c for j, c in enumerate(t) if j not in drop)
    if len(ts) == 1:
        t, x = terms[0], ts[0]
        if not out:
            return x if not t else _c.reshape(_summed(x, None), (1,))
        return _moved(x, [t.index(c) for c in out])
    (ta, tb), (a, b) = terms, ts
    batch = [c for c in out if c in ta and c in tb]
    contract = [c for c in ta if c in tb and c not in out]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]

    def arranged(x, t, free):
        if not t:
            return _c.reshape(x, (1, 1, 1))
        x = _moved(x, [t.index(c) for c in batch + free + contract])
        dims = [int(np.prod([sizes[c] for c in g])) for g in (batch, free, contract)]
        return _wide.reshape(x, tuple(dims))
    am, bm = arranged(a, ta, free_a), arranged(b, tb, free_b)
    y = _c.mul_mat(bm, am)                                          # (batch, free_a, free_b)
    got = batch + free_a + free_b
    shape = tuple(sizes[c] for c in got)
    if not got:
        return _c.reshape(y, (1,))
    return _moved(_wide.wrap(_cont(y), shape), [got.index(c) for c in out])


# --- selection, segments, sequences ---------------------------------------------------------------

def in_top_k(targets, predictions, k):
    """Whether each target class is among the ``k`` largest predictions of its row (ties
    count in, as TensorFlow's).  On arrays a bool array; in a graph a float 0/1 tensor."""
    if not is_int(k) or k < 1:
        raise ValueError(f"in_top_k: k must be a positive int, got {k!r}")
    ps, ts = _shape(predictions), _shape(targets)
    if len(ps) != 2 or ts != ps[:1]:
        raise ValueError(f"in_top_k: predictions must be (batch, classes) and targets (batch,), got {ps} and {ts}")
    if not _in_graph(targets, predictions):
        p = _array(predictions, "in_top_k").astype(np.float64)
        t = _array(targets, "in_top_k")
        if t.dtype.kind not in "iu":
            raise TypeError(f"in_top_k: targets must be integers, got dtype {t.dtype}")
        valid = (t >= 0) & (t < ps[1])
        own = p[np.arange(ps[0]), np.clip(t, 0, ps[1] - 1)]
        # a NaN prediction ranks above every number (PyTorch's topk, Keras's torch backend); a
        # NaN target is never in, an infinite one is ranked as the others
        above = ((p > own[:, None]) | np.isnan(p)).sum(-1)
        return valid & (above < k) & ~np.isnan(own)
    p = _f(predictions)
    hot = _class_rows(targets, ps[1])
    # the target's own prediction: picked, not summed as hot * p (0 * inf is NaN)
    own = _k.sum(_k.where(hot, p, 0.0), axis=-1, keepdims=True)
    above = _k.sum(_k.greater(p, own), axis=-1) + _k.sum(_k._nan_mask(p), axis=-1)
    return _k.less(above, float(k)) * _k.sum(hot, axis=-1) * \
        _c.scale_bias(_k._nan_mask(_k.squeeze(own, -1)), -1.0, 1.0)


def _segment_args(data, segment_ids, num_segments, what):
    ds, ss = _shape(data), _shape(segment_ids)
    if len(ss) != 1 or not ds or ss[0] != ds[0]:
        raise ValueError(f"{what}: segment_ids must be 1-D with one id per row of data, got {ss} for data {ds}")
    if num_segments is None:
        known = _k.host_value(segment_ids) if not isinstance(segment_ids, (list, tuple)) else \
            np.asarray(segment_ids)
        if known is None:
            raise ValueError(f"{what}: num_segments must be given when segment_ids are computed in the graph")
        num_segments = int(np.max(known)) + 1 if np.size(known) else 0
    if not is_int(num_segments) or num_segments < 1:
        raise ValueError(f"{what}: num_segments must be a positive int, got {num_segments!r}")
    _k._check_size((int(num_segments),) + tuple(ds[1:]) + ((ds[0],) if what == "segment_max" else ()), what)
    return int(num_segments)


def segment_sum(data, segment_ids, num_segments=None, sorted=False):
    """The sums of data's rows per segment id (ids outside [0, num_segments) are dropped);
    num_segments defaults to max(id) + 1 when the ids are known."""
    n = _segment_args(data, segment_ids, num_segments, "segment_sum")
    if not _in_graph(data, segment_ids):
        d = _array(data, "segment_sum").astype(np.float64)
        ids = _int_ids(segment_ids, "segment_sum")
        out = np.zeros((n,) + d.shape[1:])
        keep = (ids >= 0) & (ids < n)
        np.add.at(out, ids[keep], d[keep])
        return out.astype(np.float32)
    d = _f(data)
    ds = tuple(int(s) for s in d.shape)
    hot = _k.one_hot(segment_ids, n)                                # (rows, n)
    flat = _c.reshape(_cont(d), (ds[0], int(np.prod(ds[1:])) if len(ds) > 1 else 1))
    y = _k.transpose(hot, (1, 0)) @ flat                           # (n, features)
    return _c.reshape(_cont(y), (n,) + ds[1:])


def segment_max(data, segment_ids, num_segments=None, sorted=False):
    """The largest of data's rows per segment id; an empty segment gives float32's lowest
    value (as TensorFlow's)."""
    n = _segment_args(data, segment_ids, num_segments, "segment_max")
    if not _in_graph(data, segment_ids):
        d = _array(data, "segment_max").astype(np.float32)
        ids = _int_ids(segment_ids, "segment_max")
        out = np.full((n,) + d.shape[1:], _LOWEST, dtype=np.float32)
        keep = (ids >= 0) & (ids < n)
        np.maximum.at(out, ids[keep], d[keep])
        return out
    d = _f(data)
    ds = tuple(int(s) for s in d.shape)
    rows = ds[0]
    feat = int(np.prod(ds[1:])) if len(ds) > 1 else 1
    hot = _c.reshape(_cont(_k.transpose(_k.one_hot(segment_ids, n), (1, 0))), (n, rows, 1))
    flat = _c.reshape(_cont(d), (1, rows, feat))
    masked = hot * flat + (hot - 1.0) * (-_LOWEST)                   # off-segment rows: lowest
    y = _k.max(masked, axis=1)                                      # (n, features)
    return _c.reshape(_cont(y), (n,) + ds[1:])


def _int_ids(ids, what):
    a = np.asarray(ids.numpy() if isinstance(ids, Variable) else ids)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{what}: segment_ids must be integers, got dtype {a.dtype}")
    return a.astype(np.int64)


def _frames_count(n, length, stride, what):
    if not is_int(length) or length < 1 or not is_int(stride) or stride < 1:
        raise ValueError(f"{what}: sequence_length and sequence_stride must be positive ints, got {length!r} and "
                         f"{stride!r}")
    if n < length:
        raise ValueError(f"{what}: the last axis ({n}) is shorter than sequence_length {length}")
    return 1 + (n - length) // stride


@_eager("x")
def extract_sequences(x, sequence_length, sequence_stride):
    """Frames of ``sequence_length`` along the last axis, every ``sequence_stride``:
    (..., n) -> (..., frames, sequence_length)."""
    x = _f(x)
    n = int(x.shape[-1])
    count = _frames_count(n, sequence_length, sequence_stride, "extract_sequences")
    idx = np.arange(count)[:, None] * int(sequence_stride) + np.arange(int(sequence_length))[None, :]
    return _k.take(x, idx.astype(np.int32), axis=-1)


# --- Fourier transforms -----------------------------------------------------------------------------

def _fft_length(n, fft_length, what):
    if fft_length is None:
        return n
    if not is_int(fft_length) or fft_length < 1:
        raise ValueError(f"{what}: fft_length must be a positive int, got {fft_length!r}")
    if int(fft_length) * max(n, 1) > _k.MAX_CONSTANT:
        raise ValueError(f"{what}: fft_length {fft_length} is too large (its DFT matrices would pass 2**30 values)")
    return int(fft_length)


def _rfft_matrices(n, length):
    """(n, length // 2 + 1) cosine and minus-sine matrices of the real DFT of x cut or padded to length."""
    m = length // 2 + 1
    t = np.arange(n)[:, None]
    angle = 2 * np.pi * t * np.arange(m)[None, :] / length
    keep = (t < length).astype(np.float64)
    return (np.cos(angle) * keep).astype(np.float32), (-np.sin(angle) * keep).astype(np.float32)


def rfft(x, fft_length=None):
    """The DFT of real x along its last axis (cut or zero-padded to ``fft_length``): a pair
    (real, imag) of (..., fft_length // 2 + 1)."""
    n = _shape(x)[-1] if _shape(x) else 0
    if n < 1:
        raise ValueError("rfft: x needs a last axis")
    length = _fft_length(n, fft_length, "rfft")
    if not _in_graph(x):
        y = np.fft.rfft(_array(x, "rfft").astype(np.float64), n=length)
        return y.real.astype(np.float32), y.imag.astype(np.float32)
    t = _f(x)
    c, s = _rfft_matrices(n, length)
    return _matmul_last(t, c), _matmul_last(t, s)


def _irfft_matrices(m, length):
    """(m, length) matrices: y = real @ A + imag @ B, numpy's irfft (the first length // 2 + 1
    entries used; the imaginary parts of entry 0 and of length / 2 ignored)."""
    k = np.arange(m)[:, None]
    t = np.arange(length)[None, :]
    weight = np.where((k == 0) | ((length % 2 == 0) & (k == length // 2)), 1.0, 2.0)
    weight = weight * (k <= length // 2)
    angle = 2 * np.pi * k * t / length
    return ((weight * np.cos(angle)) / length).astype(np.float32), ((-weight * np.sin(angle)) / length).astype(
        np.float32)


def irfft(x, fft_length=None):
    """The inverse of rfft: x = (real, imag) of (..., m) -> real (..., fft_length), fft_length
    defaulting to 2 (m - 1)."""
    real, imag = _complex_pair(x, "irfft")
    m = _shape(real)[-1] if _shape(real) else 0
    if m < 1:
        raise ValueError("irfft: x needs a last axis")
    length = _fft_length(2 * (m - 1), fft_length, "irfft")
    if length < 1:
        raise ValueError("irfft: fft_length must be given for a last axis of length 1")
    if not _in_graph(real, imag):
        z = _array(real, "irfft").astype(np.float64) + 1j * _array(imag, "irfft").astype(np.float64)
        return np.fft.irfft(z, n=length).astype(np.float32)
    a, b = _irfft_matrices(m, length)
    return _matmul_last(_f(real), a) + _matmul_last(_f(imag), b)


def _window(window, sequence_length, fft_length, what):
    """Keras's window, padded to fft_length in the middle (None: ones)."""
    if not is_int(fft_length) or not 1 <= fft_length <= 2 ** 20:
        raise ValueError(f"{what}: fft_length must be a positive int (at most 2**20), got {fft_length!r}")
    if not is_int(sequence_length) or not 1 <= sequence_length <= fft_length:
        raise ValueError(f"{what}: sequence_length must be an int in [1, fft_length={fft_length}], got "
                         f"{sequence_length!r}")
    n = int(sequence_length)
    if window is None:
        return np.ones(fft_length), None
    if isinstance(window, str):
        periodic = 2 * np.pi * np.arange(n) / n
        if window == "hann":
            win = 0.5 - 0.5 * np.cos(periodic)
        elif window == "hamming":
            win = 0.54 - 0.46 * np.cos(periodic)
        else:
            raise ValueError(f"{what}: window must be 'hann', 'hamming', an array or None, got {window!r}")
    else:
        win = _array(window, what).astype(np.float64)
        if win.shape != (n,):
            raise ValueError(f"{what}: a window array must have shape ({n},) (sequence_length), got {win.shape}")
    left = (fft_length - n) // 2
    return np.pad(win, (left, fft_length - n - left)), win


def stft(x, sequence_length, sequence_stride, fft_length, window="hann", center=True):
    """The short-time Fourier transform along the last axis: frames of fft_length every
    sequence_stride (reflect-padded by fft_length // 2 at both ends when ``center``), each
    times the window, through rfft: a pair (real, imag) of (..., frames, fft_length // 2 + 1)."""
    what = "stft"
    win, _ = _window(window, sequence_length, fft_length, what)
    if not is_int(sequence_stride) or sequence_stride < 1:
        raise ValueError(f"{what}: sequence_stride must be a positive int, got {sequence_stride!r}")
    shape = _shape(x)
    if not shape:
        raise ValueError(f"{what}: x needs a last axis")
    center = _flag(center, what, "center")
    if center and shape[-1] <= fft_length // 2:
        raise ValueError(f"{what}: with center=True the last axis ({shape[-1]}) must be longer than "
                         f"fft_length // 2 = {fft_length // 2} (reflect padding)")
    half = fft_length // 2
    if not _in_graph(x):
        a = _array(x, what).astype(np.float64)
        if center:
            a = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(half, half)], mode="reflect")
        count = _frames_count(a.shape[-1], fft_length, sequence_stride, what)
        idx = np.arange(count)[:, None] * sequence_stride + np.arange(fft_length)[None, :]
        y = np.fft.rfft(a[..., idx] * win, n=fft_length)
        return y.real.astype(np.float32), y.imag.astype(np.float32)
    t = _f(x)
    if center:
        t = pad(t, [(0, 0)] * (len(shape) - 1) + [(half, half)], mode="reflect")
    frames = extract_sequences(t, fft_length, sequence_stride)
    frames = frames * _k._t(win.astype(np.float32))
    return rfft(frames, fft_length)


def istft(x, sequence_length, sequence_stride, fft_length, length=None, window="hann", center=True):
    """The inverse of stft: each frame's irfft times the window, overlapped and added, divided
    by the overlapped squared window (where it is not ~0); ``length`` cuts the result
    (after the centre padding is removed).  With ``window=None``, Keras's scaling: the
    overlapped frames times fft_length / (sequence_stride * their count), which is
    TensorFlow's plain overlap-add wherever every frame position is covered."""
    what = "istft"
    center = _flag(center, what, "center")
    real, imag = _complex_pair(x, what)
    win, _ = _window(window, sequence_length, fft_length, what)
    if not is_int(sequence_stride) or sequence_stride < 1:
        raise ValueError(f"{what}: sequence_stride must be a positive int, got {sequence_stride!r}")
    shape = _shape(real)
    if len(shape) < 2:
        raise ValueError(f"{what}: x must be (..., frames, fft_length // 2 + 1), got {shape}")
    frames = shape[-2]
    total = fft_length + sequence_stride * (frames - 1)
    norm = np.zeros(total)
    for f in range(frames):
        norm[f * sequence_stride:f * sequence_stride + fft_length] += win * win
    scale = np.where(norm > 1e-10, 1.0 / np.where(norm > 1e-10, norm, 1.0), 1.0)
    if window is None:
        scale = scale * fft_length / sequence_stride                  # Keras's scaling without a window
    start = fft_length // 2 if center else 0
    if length is not None:
        if not is_int(length) or length < 1:
            raise ValueError(f"{what}: length must be a positive int, got {length!r}")
        end = start + int(length)
    else:
        end = total - fft_length // 2 if center else total
    if end > total or end <= start:
        raise ValueError(f"{what}: the result would run from {start} to {end} of {total} samples")
    if not _in_graph(real, imag):
        z = _array(real, what).astype(np.float64) + 1j * _array(imag, what).astype(np.float64)
        seg = np.fft.irfft(z, n=fft_length) * win                 # (..., frames, fft_length)
        y = np.zeros(seg.shape[:-2] + (total,))
        for f in range(frames):
            y[..., f * sequence_stride:f * sequence_stride + fft_length] += seg[..., f, :]
        return (y * scale)[..., start:end].astype(np.float32)
    seg = irfft((real, imag), fft_length) * _k._t(win.astype(np.float32))
    y = _overlap_add(seg, sequence_stride, total)
    return _k.take(y, np.arange(start, end, dtype=np.int32), axis=-1) * _k._t(scale[start:end].astype(np.float32))


def _overlap_add(seg, stride, total):
    """Frames seg (..., F, n) added at offsets f * stride: each frame cut into k = ceil(n / stride)
    chunks of one stride, and chunk i of every frame shifted i chunks down (padding) and
    summed; memory stays k times the result's."""
    shape = tuple(int(d) for d in seg.shape)
    lead, frames, n = shape[:-2], shape[-2], shape[-1]
    k = -(-n // stride)
    rows = int(np.prod(lead)) if lead else 1
    seg = _c.reshape(_cont(seg), (rows, frames, n))
    if k * stride > n:
        seg = pad(seg, [(0, 0), (0, 0), (0, k * stride - n)])
    chunks = _c.reshape(_cont(seg), (rows, frames, k, stride))
    out = None
    for i in range(k):
        part = _k.take(chunks, np.array([i], dtype=np.int32), axis=2)              # (rows, F, 1, stride)
        part = _c.reshape(_cont(part), (rows, frames, stride))
        part = pad(part, [(0, 0), (i, k - 1 - i), (0, 0)])                        # (rows, F + k - 1, stride)
        out = part if out is None else out + part
    y = _c.reshape(_cont(out), (rows, (frames + k - 1) * stride))
    y = _k.take(y, np.arange(total, dtype=np.int32), axis=-1)
    return _c.reshape(_cont(y), lead + (total,))


def polar(abs_, angle):
    """abs_ * (cos(angle) + i sin(angle)), as a pair (real, imag)."""
    if _shape(abs_) != _shape(angle) and not _broadcasts(_shape(abs_), _shape(angle)) and \
            not _broadcasts(_shape(angle), _shape(abs_)):
        raise ValueError(f"polar: abs_ and angle shapes {_shape(abs_)} and {_shape(angle)} do not broadcast")
    if not _in_graph(abs_, angle):
        r = _array(abs_, "polar").astype(np.float64)
        a = _array(angle, "polar").astype(np.float64)
        return (r * np.cos(a)).astype(np.float32), (r * np.sin(a)).astype(np.float32)
    r, a = _f(abs_), _f(angle)
    return r * _c.cos(a), r * _c.sin(a)


# --- pad --------------------------------------------------------------------------------------------

def _pad_widths(pad_width, ndim, what):
    try:
        w = np.asarray(pad_width)
        if w.dtype.kind not in "iu":
            raise TypeError
        w = np.broadcast_to(w, (ndim, 2)) if w.ndim <= 2 else None
    except (TypeError, ValueError):
        w = None
    if w is None or (w < 0).any():
        raise ValueError(f"{what}: pad_width must be non-negative ints: one, a (before, after) pair or one pair per "
                         f"axis ({ndim}), got {pad_width!r}")
    return [(int(b), int(a)) for b, a in w]


@_eager("x")
def pad(x, pad_width, mode="constant", constant_values=None):
    """numpy's pad: ``mode`` "constant" (``constant_values``, 0 by default), "reflect" or
    "symmetric".  (ggml's ``pad(a, p0, p1, p2, p3)`` is ``pyggml.core.ops.pad``.)"""
    what = "pad"
    _choice(mode, ("constant", "reflect", "symmetric"), what, "mode")
    if constant_values is not None and mode != "constant":
        raise ValueError(f"{what}: constant_values is only for mode='constant', got mode={mode!r}")
    fill = 0.0 if constant_values is None else _number(constant_values, what, "constant_values")
    x = _f(x)
    shape = tuple(int(d) for d in x.shape)
    widths = _pad_widths(pad_width, len(shape), what)
    new = tuple(d + b + a for d, (b, a) in zip(shape, widths))
    _k._check_dims(new, what)
    _k._check_size(new, what)
    if new == shape:
        return x
    if mode == "constant":
        base = np.full(new, fill, dtype=np.float32)
        base[tuple(slice(b, b + d) for d, (b, _) in zip(shape, widths))] = 0.0
        strides = [4]
        for d in reversed(new[1:]):
            strides.append(strides[-1] * d)
        strides = tuple(reversed(strides))
        offset = int(sum(b * s for (b, _), s in zip(widths, strides)))
        return _c.acc(_k._t(base), _cont(x), nb=strides, offset=offset)
    y = x
    for i, (d, (b, a)) in enumerate(zip(shape, widths)):
        if not (b or a):
            continue
        idx = np.pad(np.arange(d), (b, a), mode=mode).astype(np.int32)
        y = _k.take(y, idx, axis=i)
    return y


# --- CTC ----------------------------------------------------------------------------------------------

def _log_softmax_np(z):
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def ctc_loss(target, output, target_length, output_length, mask_index=0):
    """The connectionist temporal classification loss per sequence: target (batch,
    max_label_length) class ids (padded past each length), output (batch, time, classes)
    logits (log_softmax is applied), target_length and output_length (batch,), and the blank
    class ``mask_index``.  Returns (batch,) negative log-likelihoods (inf on arrays where no
    alignment exists).  In a graph the forward (alpha) recursion is unrolled over the static
    time axis in log space (logsumexp), so it trains; the targets may be float class ids."""
    what = "ctc_loss"
    if _in_graph(target, output, target_length, output_length):
        return _ctc_loss_graph(target, output, target_length, output_length, mask_index, what)
    y = _array(output, what).astype(np.float64)
    t = _array(target, what)
    tl, ol = _array(target_length, what), _array(output_length, what)
    if y.ndim != 3 or t.ndim != 2 or t.shape[0] != y.shape[0] or tl.shape != (y.shape[0],) or \
            ol.shape != (y.shape[0],):
        raise ValueError(f"{what}: expected output (batch, time, classes), target (batch, labels) and lengths "
                         f"(batch,), got {y.shape}, {t.shape}, {tl.shape}, {ol.shape}")
    if t.dtype.kind not in "iu" or tl.dtype.kind not in "iu" or ol.dtype.kind not in "iu":
        raise TypeError(f"{what}: target and the lengths must be integers")
    n_classes = y.shape[2]
    if not is_int(mask_index) or not 0 <= mask_index < n_classes:
        raise ValueError(f"{what}: mask_index must be a class in [0, {n_classes}), got {mask_index!r}")
    logp = _log_softmax_np(y)
    out = np.zeros(y.shape[0])
    for i in range(y.shape[0]):
        steps, n = int(ol[i]), int(tl[i])
        if not 0 <= steps <= y.shape[1] or not 0 <= n <= t.shape[1]:
            raise ValueError(f"{what}: lengths of sequence {i} ({n}, {steps}) exceed the arrays")
        labels = t[i, :n].astype(np.int64)
        if ((labels < 0) | (labels >= n_classes)).any():
            raise ValueError(f"{what}: target of sequence {i} has a class outside [0, {n_classes})")
        ext = np.full(2 * n + 1, int(mask_index))
        ext[1::2] = labels
        alpha = np.full(2 * n + 1, -np.inf)
        if steps == 0:
            out[i] = 0.0 if n == 0 else np.inf
            continue
        alpha[0] = logp[i, 0, ext[0]]
        if n:
            alpha[1] = logp[i, 0, ext[1]]
        skip = np.zeros(2 * n + 1, dtype=bool)
        skip[2:] = (ext[2:] != mask_index) & (ext[2:] != ext[:-2])
        for s in range(1, steps):
            prev1 = np.concatenate([[-np.inf], alpha[:-1]])
            prev2 = np.where(skip, np.concatenate([[-np.inf, -np.inf], alpha[:-2]]), -np.inf)
            alpha = np.logaddexp(np.logaddexp(alpha, prev1), prev2) + logp[i, s, ext]
        final = np.logaddexp(alpha[-1], alpha[-2]) if n else alpha[-1]
        out[i] = -final
    return out.astype(np.float32)


_NEG = 1e30          # log(0) in the graph's recursion: finite, so that products with 0/1 matrices stay exact


def _lengths(v, b, what, name):
    """A (batch, 1) float tensor of per-sequence lengths (an array, a (batch,) or (batch, 1) tensor)."""
    shape = _shape(v)
    if shape not in ((b,), (b, 1)):
        raise ValueError(f"{what}: {name} must have shape (batch,) = ({b},), got {shape}")
    return _c.reshape(_cont(_f(v)), (b, 1))


def _ctc_loss_graph(target, output, target_length, output_length, blank, what):
    y = _f(output)
    if len(y.shape) != 3:
        raise ValueError(f"{what}: output must be (batch, time, classes), got {tuple(y.shape)}")
    b, steps, classes = (int(d) for d in y.shape)
    tshape = _shape(target)
    if len(tshape) != 2 or tshape[0] != b:
        raise ValueError(f"{what}: target must be (batch, max_label_length) = ({b}, ...), got {tshape}")
    if not is_int(blank) or not 0 <= blank < classes:
        raise ValueError(f"{what}: mask_index must be a class in [0, {classes}), got {blank!r}")
    n = tshape[1]
    s = 2 * n + 1
    logp = _k.log_softmax(y, axis=-1)
    labels = _class_rows(target, classes)                           # (b, n, classes)
    place = np.zeros((s, n), dtype=np.float32)
    place[2 * np.arange(n) + 1, np.arange(n)] = 1.0
    blanks = np.zeros((s, classes), dtype=np.float32)
    blanks[0::2, blank] = 1.0
    ext = einsum("sl,blc->bsc", place, labels) + _k._t(blanks)     # (b, s, classes): the extended labels
    emit = einsum("btc,bsc->bts", logp, ext)                        # (b, time, s): log p of each state's label
    if n > 1:
        # a label may follow the one two states back (skipping a blank) unless it repeats it
        same = _k.sum(labels[:, 1:] * labels[:, :-1], axis=-1)      # (b, n - 1)
        to_state = np.zeros((n - 1, s), dtype=np.float32)
        to_state[np.arange(n - 1), 2 * np.arange(1, n) + 1] = 1.0
        skip = _k.dot(_one() - same, _k._t(to_state))              # (b, s)
        skip_penalty = (skip - 1.0) * _NEG
    else:
        skip_penalty = None
    shift1 = np.eye(s, k=1, dtype=np.float32)                        # alpha[s - 1] -> s
    shift2 = np.eye(s, k=2, dtype=np.float32)
    fill1 = np.where(np.arange(s) < 1, -_NEG, 0.0).astype(np.float32)
    fill2 = np.where(np.arange(s) < 2, -_NEG, 0.0).astype(np.float32)
    start = np.where(np.arange(s) < 2, 0.0, -_NEG).astype(np.float32)
    out_len = _lengths(output_length, b, what, "output_length")
    alpha = emit[:, 0] + _k._t(start)                                 # (b, s)
    for t in range(1, steps):
        a1 = _k.dot(alpha, _k._t(shift1)) + _k._t(fill1)
        a2 = _k.dot(alpha, _k._t(shift2)) + _k._t(fill2)
        if skip_penalty is not None:
            a2 = a2 + skip_penalty
        # logsumexp over the three predecessors; its max is a max pool (exact), not b + relu(a - b),
        # which would lose a finite log-probability next to the -1e30 of an unreachable state
        new = _k.logsumexp(_k.stack([alpha, a1, a2], axis=-1), axis=-1) + emit[:, t]
        running = _k.greater(out_len, float(t))                      # (b, 1): sequences still going
        alpha = new * running + alpha * (_one() - running)
    tl = _lengths(target_length, b, what, "target_length")
    tl = _c.reshape(_cont(tl), (b,))
    last = _class_rows(_c.scale(tl, 2.0), s) + _class_rows(_c.scale(tl, 2.0) - 1.0, s)   # the two end states
    return _c.neg(_k.logsumexp(alpha + (last - 1.0) * _NEG, axis=-1))


def ctc_decode(inputs, sequence_lengths, strategy="greedy", beam_width=100, top_paths=1, merge_repeated=True,
               mask_index=0):
    """Decode CTC outputs (batch, time, classes), on arrays.  "greedy": the best class per
    step, repeats merged, blanks (``mask_index``) dropped; returns (decoded (1, batch, time)
    padded with -1, scores (batch, 1) = minus the sum of the chosen inputs) as Keras's.
    "beam_search": a prefix beam search over log_softmax(inputs), ``top_paths`` best
    sequences (top_paths, batch, time) and their log-probabilities (batch, top_paths)."""
    what = "ctc_decode"
    if _in_graph(inputs, sequence_lengths):
        raise TypeError("ctc_decode works on arrays (the model's predictions), not inside a model's graph")
    x = _array(inputs, what).astype(np.float64)
    lengths = _array(sequence_lengths, what)
    if x.ndim != 3 or lengths.shape != (x.shape[0],):
        raise ValueError(f"{what}: expected inputs (batch, time, classes) and sequence_lengths (batch,), got "
                         f"{x.shape} and {lengths.shape}")
    b, steps, classes = x.shape
    blank = classes - 1 if mask_index is None else mask_index
    if not is_int(blank) or not 0 <= blank < classes:
        raise ValueError(f"{what}: mask_index must be a class in [0, {classes}), got {mask_index!r}")
    if strategy == "greedy":
        idx = x.argmax(-1)
        best = x.max(-1)
        past = np.arange(steps)[None, :] >= lengths[:, None]
        idx = np.where(past, blank, idx)
        best = np.where(past, 0.0, best)
        if merge_repeated:
            rep = np.pad(idx[:, 1:] == idx[:, :-1], ((0, 0), (1, 0)))
            idx = np.where(rep, blank, idx)
        out = np.full((b, steps), -1, dtype=np.int32)
        for i in range(b):
            kept = idx[i][idx[i] != blank]
            out[i, :len(kept)] = kept
        return out[None], (-best.sum(1))[:, None].astype(np.float32)
    if strategy != "beam_search":
        raise ValueError(f"{what}: strategy must be 'greedy' or 'beam_search', got {strategy!r}")
    if not is_int(beam_width) or beam_width < 1 or not is_int(top_paths) or not 1 <= top_paths <= beam_width:
        raise ValueError(f"{what}: beam_width must be a positive int and top_paths in [1, beam_width], got "
                         f"{beam_width!r} and {top_paths!r}")
    logp = _log_softmax_np(x)
    decoded = np.full((top_paths, b, steps), -1, dtype=np.int32)
    scores = np.full((b, top_paths), -np.inf)
    for i in range(b):
        beams = _prefix_beam_search(logp[i, :int(lengths[i])], blank, beam_width, merge_repeated)
        for p, (prefix, score) in enumerate(beams[:top_paths]):
            decoded[p, i, :len(prefix)] = prefix
            scores[i, p] = score
    return decoded, scores.astype(np.float32)


def _prefix_beam_search(logp, blank, width, merge_repeated):
    """[(prefix tuple, log-probability)] best first; each prefix carries (ends in blank,
    ends in its last label) log-probabilities."""
    beams = {(): (0.0, -np.inf)}
    for row in logp:
        nxt = {}

        def add(prefix, pb, pnb):
            ob, onb = nxt.get(prefix, (-np.inf, -np.inf))
            nxt[prefix] = (np.logaddexp(ob, pb), np.logaddexp(onb, pnb))
        for prefix, (pb, pnb) in beams.items():
            total = np.logaddexp(pb, pnb)
            add(prefix, total + row[blank], -np.inf)
            for c in range(len(row)):
                if c == blank:
                    continue
                if prefix and prefix[-1] == c and merge_repeated:
                    add(prefix, -np.inf, pnb + row[c])               # the repeat merges
                    add(prefix + (c,), -np.inf, pb + row[c])         # a new label after a blank
                else:
                    add(prefix + (c,), -np.inf, total + row[c])
        ranked = sorted(nxt.items(), key=lambda kv: -np.logaddexp(*kv[1]))
        beams = dict(ranked[:width])
    ranked = sorted(((p, float(np.logaddexp(*v))) for p, v in beams.items()), key=lambda pv: -pv[1])
    return ranked
