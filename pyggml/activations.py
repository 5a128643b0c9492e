"""Activations as functions over tensors that train (Keras's names).

Use them in a layer's ``call`` (``activations.gelu(x)``) or by name
(``Dense(8, activation="gelu")``).  In a graph computed on the CPU, tanh,
sigmoid, exact gelu, elu and leaky_relu are ggml's own ops (pyggml's patches
give them backward passes); elsewhere (other backends, where those backward
passes would run on the CPU) they are composed from ops every backend trains
(exact identities, or an erf accurate to 1.5e-7).
"""

import math

import numpy as np

from pyggml import _logits, _scope, _symbolic, _wide, ops
from pyggml._tensor_arrays import as_ops_result
from pyggml._validation import check_number
from pyggml.core import Tensor
from pyggml.core import ops as core_ops
from pyggml.variables import Variable

__all__ = ["relu", "sigmoid", "tanh", "gelu", "silu", "swish", "elu", "leaky_relu", "softmax", "log_softmax",
           "linear", "relu6", "selu", "softplus", "softsign", "exponential", "hard_sigmoid", "hard_silu",
           "hard_swish", "hard_tanh", "mish", "celu", "glu", "log_sigmoid", "soft_shrink", "sparse_plus",
           "squareplus", "tanh_shrink", "sparsemax", "hard_shrink", "sparse_sigmoid", "threshold", "get", "name_of", "serialize", "deserialize"]

_SQRT1_2 = 1.0 / math.sqrt(2.0)


_ALONG_AN_AXIS = ("softmax", "log_softmax", "sparsemax")


def _eager_on_arrays(fn):
    """Outside a graph, on arrays (or Variables), compute at once and return a float32 array (an
    OpsArray, as pyggml.ops's results), as Keras's activations do eagerly (``keras.activations.softmax(logits[None])``)."""
    import functools

    @functools.wraps(fn)
    def act(x, *args, **kwargs):
        if type(x) is _wide.Wide:
            # more than four dimensions in a call: softmax along its axis, the others value by value
            if fn.__name__ in _ALONG_AN_AXIS:
                return getattr(ops, fn.__name__)(x, *args, **kwargs)
            return _wide.Wide(fn(x.t, *args, **kwargs), x.shape)
        if _scope.current() is not None or isinstance(x, Tensor):
            return fn(x, *args, **kwargs)
        if _symbolic.NODE_TYPES and _symbolic.holds_node((x,) + args, kwargs):
            # a functional model's tensor (keras-io's MobileViT: activations.swish(x)): a layer
            return _symbolic.apply(f"activations.{fn.__name__}", (x,) + args, kwargs)
        from pyggml import _eager
        a = x.numpy() if isinstance(x, Variable) else np.asarray(x)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"{fn.__name__}: expected real numbers, got dtype {a.dtype}")
        if a.ndim > 4:
            raise ValueError(f"{fn.__name__}: at most 4 dimensions, got an array of shape {a.shape}")
        out = _eager.evaluate(lambda t: fn(t, *args, **kwargs), [a.astype(np.float32).reshape(a.shape or (1,))])
        # as pyggml.ops's results, with .numpy(); of the input's shape, but glu's (half an axis)
        return as_ops_result(out.reshape(a.shape) if out.size == a.size else out)
    return act


@_eager_on_arrays
def relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """Keras's relu: x above ``threshold`` (0 at or below it), capped to [0, ``max_value``] if
    given, plus ``negative_slope * (x - threshold)`` below ``threshold``.

    Exact in float32: the cap and the threshold pick x or the bound by a 0/1 mask (or ggml's
    clamp), never ``m - relu(m - x)``, whose large constants rounded small values away."""
    negative_slope = check_number("relu negative_slope", negative_slope)
    threshold = check_number("relu threshold", threshold)
    if max_value is not None:
        max_value = check_number("relu max_value", max_value)
        if max_value < 0.0:
            raise ValueError(f"relu max_value must be >= 0, got {max_value}")
    x = _plain(x)
    if max_value is None and threshold == 0.0:
        if negative_slope == 0.0:
            return ops.relu(x)
        return leaky_relu(x, negative_slope)
    if threshold == 0.0:                    # (max_value is set here)
        pos = x if _scope.fused() else ops.relu(x)
    else:
        pos = ops.mul(x, ops.step(ops.scale_bias(x, 1.0, -threshold)))     # x where x > t, else 0
    if max_value is not None:
        if _scope.fused():
            pos = ops.clamp(pos, 0.0, max_value)              # its backward pass is pyggml's (CPU)
        else:
            if threshold < 0.0:
                pos = ops.relu(pos)          # x in (t, 0) is clipped to 0 like Keras's
            pos = _capped(pos, max_value)
    if negative_slope == 0.0:
        return pos
    below = ops.relu(ops.neg(x) if threshold == 0.0 else ops.scale_bias(x, -1.0, threshold))   # relu(t - x)
    return ops.sub(pos, ops.scale(below, negative_slope))


def _capped(x, m):
    """min(x, m) exactly, from ops every backend trains: x where x <= m, else m (the
    gradient is 1 below m, 0 above it)."""
    over = ops.step(ops.scale_bias(x, 1.0, -m))              # 1 where x > m
    keep = ops.scale_bias(over, -1.0, 1.0)                   # 1 where x <= m
    return ops.add(ops.mul(x, keep), ops.scale(over, m))


def _plain(x):
    x = ops.as_tensor(x)
    return x if x.is_contiguous else ops.cont(x)


@_eager_on_arrays
def sigmoid(x):
    x = ops.as_tensor(x)
    if _scope.fused():
        y = ops.sigmoid(_plain(x))
    else:
        # exp(-softplus(-x)): stable for either sign, and every op has a backward pass
        y = ops.exp(ops.neg(ops.softplus(ops.neg(x))))
    _logits.note(y, x, "sigmoid")           # (a cross-entropy of y computes from x: pyggml._logits)
    return y


@_eager_on_arrays
def tanh(x):
    if _scope.fused():
        return ops.tanh(_plain(x))
    # 2 sigmoid(2x) - 1
    return ops.scale_bias(sigmoid(ops.scale(ops.as_tensor(x), 2.0)), 2.0, -1.0)


def _erf(x):
    """erf by Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7), from ops with a backward pass."""
    p, a1, a2, a3, a4, a5 = 0.3275911, 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429
    ax = ops.abs(x)
    t = ops.exp(ops.neg(ops.log(ops.scale_bias(ax, p, 1.0))))            # 1 / (1 + p|x|)
    poly = ops.scale(t, a5)
    for coef in (a4, a3, a2, a1):
        poly = ops.mul(ops.scale_bias(poly, 1.0, coef), t)
    e = ops.exp(ops.neg(ops.sqr(x)))
    y = ops.scale_bias(ops.mul(poly, e), -1.0, 1.0)                      # erf(|x|)
    return ops.mul(y, ops.sgn(x))


@_eager_on_arrays
def gelu(x, approximate=False):
    """Exact gelu (Keras's and PyTorch's default): x (1 + erf(x / sqrt 2)) / 2;
    ``approximate=True`` gives the tanh form."""
    x = ops.as_tensor(x)
    if approximate:
        # (ggml's own gelu is this form from an f16 table: +-2e-3, too coarse to train with)
        cube = ops.mul(ops.sqr(x), x)
        inner = ops.scale(ops.add(x, ops.scale(cube, 0.044715)), math.sqrt(2.0 / math.pi))
        return ops.mul(x, ops.scale_bias(tanh(inner), 0.5, 0.5))
    if _scope.fused():
        return ops.gelu_erf(_plain(x))
    return ops.mul(x, ops.scale_bias(_erf(ops.scale(x, _SQRT1_2)), 0.5, 0.5))


@_eager_on_arrays
def silu(x):
    return ops.silu(ops.as_tensor(x))


swish = silu


@_eager_on_arrays
def elu(x, alpha=1.0):
    if _scope.fused():
        x = _plain(x)
        if alpha == 1.0:
            return ops.elu(x)
        if alpha >= 0:
            # any alpha: the fused bias + activation op with a zero bias (one pass each way)
            return ops.bias_act(x, _zero(), "elu", float(alpha))
    # relu(x) + alpha (exp(min(x, 0)) - 1), with min(x, 0) = -relu(-x)
    x = ops.as_tensor(x)
    neg_part = ops.neg(ops.relu(ops.neg(x)))
    return ops.add(ops.relu(x), ops.scale_bias(ops.exp(neg_part), alpha, -alpha))


def _zero():
    """A one-element zero, shared by the graph being built (a bias that adds nothing)."""
    cache = _scope.require("activations").cache
    t = cache.get("activations_zero")
    if t is None:
        t = cache["activations_zero"] = ops.constant(np.zeros(1, dtype=np.float32))
    return t


@_eager_on_arrays
def leaky_relu(x, negative_slope=0.2):
    if _scope.fused() and negative_slope >= 0:
        # the fused bias + activation op with a zero bias, which keeps NaN as PyTorch (ggml's own
        # leaky_relu turns NaN into 0: pyggml's ops use it for that, nan_to_num and where)
        return ops.bias_act(_plain(x), _zero(), "leaky_relu", float(negative_slope))
    # relu(x) - slope relu(-x); Keras's default slope is 0.2
    x = ops.as_tensor(x)
    return ops.sub(ops.relu(x), ops.scale(ops.relu(ops.neg(x)), negative_slope))


@_eager_on_arrays
def softmax(x, axis=-1):
    x = ops.as_tensor(x)
    r = len(x.shape)
    ax = axis + r if axis < 0 else axis
    if not 0 <= ax < r:
        raise ValueError(f"softmax: axis {axis} out of range for a tensor of {r} dims")
    if ax != r - 1:
        return ops.swapaxes(softmax(ops.swapaxes(x, ax, r - 1)), ax, r - 1)
    y = ops.soft_max(x if x.is_contiguous else ops.cont(x))
    _logits.note(y, x, "softmax")
    return y


@_eager_on_arrays
def log_softmax(x, axis=-1):
    """log(softmax(x)) as x - logsumexp(x): exact where softmax underflows (a logit 300 below
    the largest gives -300, and its gradient, not a floor)."""
    return ops.log_softmax(ops.as_tensor(x), axis)


@_eager_on_arrays
def linear(x):
    return ops.as_tensor(x)


def _from_ops(name, op_name=None):
    """Keras's activation ``name`` as the pyggml.ops function of that name (graph tensors,
    with a backward pass; at once on arrays)."""
    def act(x, *args, **kwargs):
        return getattr(ops, op_name or name)(ops.as_tensor(x), *args, **kwargs)
    act.__name__ = act.__qualname__ = name
    act.__doc__ = f"Keras's ``{name}`` activation (``pyggml.ops.{op_name or name}``)."
    return _eager_on_arrays(act)


@_eager_on_arrays
def relu6(x):
    """min(max(x, 0), 6), exactly (``relu(x, max_value=6)``)."""
    return relu(x, max_value=6.0)


selu = _from_ops("selu")
softplus = _from_ops("softplus")
softsign = _from_ops("softsign")
exponential = _from_ops("exponential", "exp")
hard_sigmoid = _from_ops("hard_sigmoid")
hard_silu = _from_ops("hard_silu")
hard_swish = hard_silu
hard_tanh = _from_ops("hard_tanh")
mish = _from_ops("mish")
celu = _from_ops("celu")
glu = _from_ops("glu")
log_sigmoid = _from_ops("log_sigmoid")
soft_shrink = _from_ops("soft_shrink")
sparse_plus = _from_ops("sparse_plus")
squareplus = _from_ops("squareplus")
tanh_shrink = _from_ops("tanh_shrink")
sparsemax = _from_ops("sparsemax")
hard_shrink = _from_ops("hard_shrink")
sparse_sigmoid = _from_ops("sparse_sigmoid")
threshold = _from_ops("threshold")

_BY_NAME = {
    "relu": relu, "sigmoid": sigmoid, "tanh": tanh, "softmax": softmax, "gelu": gelu,
    "silu": silu, "swish": silu, "leaky_relu": leaky_relu, "elu": elu, "linear": linear,
    "log_softmax": log_softmax, "relu6": relu6, "selu": selu, "softplus": softplus, "softsign": softsign,
    "exponential": exponential, "hard_sigmoid": hard_sigmoid, "hard_silu": hard_silu, "hard_swish": hard_silu,
    "hard_tanh": hard_tanh, "mish": mish, "celu": celu, "glu": glu, "log_sigmoid": log_sigmoid,
    "soft_shrink": soft_shrink, "sparse_plus": sparse_plus, "squareplus": squareplus,
    "tanh_shrink": tanh_shrink, "sparsemax": sparsemax, "hard_shrink": hard_shrink,
    "sparse_sigmoid": sparse_sigmoid, "threshold": threshold,
}


def get(name):
    """The activation for a name (None and 'linear' are the identity), or a callable as given."""
    if name is None:
        return linear
    if callable(name):
        return name
    if isinstance(name, str) and name.startswith("ops.") and callable(getattr(ops, name[4:], None)) and \
            name[4:] in ops.__all__:
        return getattr(ops, name[4:])          # (name_of's name for a keras.ops function)
    if isinstance(name, str) and name not in _BY_NAME:
        # a function of your own, registered (``package>name``) or in custom_objects / a
        # custom_object_scope, as Keras finds it when a saved or cloned layer is rebuilt
        from pyggml.saving.object_registration import get_registered_object
        try:
            found = get_registered_object(name)
        except ValueError:
            found = None
        if callable(found) and not isinstance(found, type):
            return found
    if not isinstance(name, str) or name not in _BY_NAME:
        raise ValueError(f"unknown activation {name!r}; known: {sorted(_BY_NAME)} (a function of your own is found "
                         f"by name when registered with @keras.saving.register_keras_serializable() or given in "
                         f"custom_objects)")
    return _BY_NAME[name]


def name_of(act):
    """The name an activation is saved under ('linear' for None)."""
    if act is None:
        return "linear"
    if isinstance(act, str):
        get(act)
        return act
    for k, v in _BY_NAME.items():
        if v is act:
            return k
    name = getattr(act, "__name__", None)
    if isinstance(name, str) and getattr(ops, name, None) is act and callable(act):
        # keras.ops's function of an activation's name (``activation=ops.gelu``, whose default is
        # the tanh form; the activation's is the exact one): saved as itself, found again so
        return f"ops.{name}"
    from pyggml.saving.object_registration import get_registered_name
    return get_registered_name(act) if hasattr(act, "__name__") else "custom"


serialize = name_of
deserialize = get          # Keras's: a name (or a callable) back to the activation
