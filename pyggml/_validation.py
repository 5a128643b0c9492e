"""Argument checks shared by the whole models layer.

Each returns the value normalised (an ``int``, a ``float``) or raises
``TypeError``/``ValueError`` with a message that names the argument and says
what was expected.  ``bool`` is never taken for a number.
"""

import math
import numbers

__all__ = ["is_int", "is_number", "check_int", "check_positive_int", "check_number", "check_fraction",
           "check_bool", "check_choice", "check_str", "int_tuple"]


def is_int(v):
    """True for Python and numpy integers, never for bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def is_number(v):
    """True for real numbers (ints and floats of any kind), never for bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def check_int(name, v, low=None, high=None):
    """An int in [low, high] (either bound may be None)."""
    if not is_int(v):
        raise TypeError(f"{name} must be an int, got {v!r}")
    v = int(v)
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"{name}={v} is too large (at most {high})")
    return v


def check_positive_int(name, v, high=2 ** 31):
    if not is_int(v):
        raise TypeError(f"{name} must be a positive int, got {v!r}")
    if v < 1:
        raise ValueError(f"{name} must be a positive int, got {v}")
    return check_int(name, v, 1, high)


def check_number(name, v, low=None, high=None, low_open=False, high_open=False, finite=True):
    """A float in the given range; ``*_open`` excludes the bound."""
    if not is_number(v):
        raise TypeError(f"{name} must be a number, got {v!r}")
    v = float(v)
    if math.isnan(v) or (finite and math.isinf(v)):
        raise ValueError(f"{name} must be a finite number, got {v}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {v}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {v}")
    return v


def check_fraction(name, v, high_open=False):
    """A number in [0, 1] (or [0, 1) with ``high_open``)."""
    if not is_number(v) or math.isnan(float(v)) or not 0.0 <= float(v) <= 1.0 or (high_open and float(v) == 1.0):
        raise ValueError(f"{name} must be in [0, 1{')' if high_open else ']'}, got {v!r}")
    return float(v)


def check_bool(name, v):
    if not isinstance(v, (bool, int)) or (is_int(v) and v not in (0, 1)):
        raise TypeError(f"{name} must be True or False, got {v!r}")
    return bool(v)


def check_choice(name, v, choices):
    if v not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {v!r}")
    return v


def check_str(name, v):
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a str, got {type(v).__name__}")
    return v


def int_tuple(name, v, n, low=1, high=1 << 16):
    """An int or a sequence of n ints -> a tuple of n ints in [low, high]."""
    if is_int(v):
        v = (v,) * n
    try:
        t = tuple(v)
    except TypeError:
        raise TypeError(f"{name} must be an int or a tuple of {n} ints, got {v!r}") from None
    if len(t) != n:
        raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v!r}")
    return tuple(check_int(name, d, low, high) for d in t)


def axis_index(axis, ndim, what):
    """``axis`` (negative from the end) as an index into ``ndim`` axes; a TypeError for a
    non-int, a ValueError naming ``what`` for one out of range."""
    if not is_int(axis):
        raise TypeError(f"{what}: axis must be an int, got {axis!r}")
    ax = int(axis) + ndim if axis < 0 else int(axis)
    if not 0 <= ax < ndim:
        raise ValueError(f"{what}: axis {axis} is out of range for a tensor of {ndim} dims")
    return ax


def ggml_name(name):
    """A name as a ggml tensor may hold it: its last 63 bytes of UTF-8 (ggml's limit counts
    bytes: 40 "ü" are 80 of them), never a character cut in two."""
    b = name.encode("utf-8", "surrogatepass")
    return name if len(b) <= 63 else b[-63:].decode("utf-8", "ignore")


def host(x):
    """Another library's tensor as numpy takes it: a torch tensor detached from its graph (an
    ``nn.Parameter``, a tensor that requires grad), on the CPU, bfloat16 as float32 (numpy has
    no bfloat16); anything else as it is."""
    if type(x).__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "dtype"):
        x = x.detach()
        if getattr(x, "device", None) is not None and x.device.type not in ("cpu", "meta"):
            x = x.cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
    return x
