"""Shared argument forms of Keras 3's colour augmentation layers.

Their ``factor`` is a number ``f`` in the layer's bounds ``[low, high]``, meaning
the range ``(low, f)``, or a ``(lower, upper)`` pair inside the bounds (Keras's
``_set_factor`` with ``_FACTOR_BOUNDS``); ``value_range`` is the ``(low, high)``
the images' values span."""

from pyggml.layers.preprocessing.image_layer import factor_range
from pyggml.layers.preprocessing.random_brightness import check_value_range

__all__ = ["bounded_factor", "check_color_range", "draw_from"]


def bounded_factor(value, name, owner, low=0.0, high=1.0):
    """(lower, upper): a number f gives (low, f); a pair is sorted; all inside [low, high]."""
    lower, upper = factor_range(value, name, owner, low, high, symmetric=False)
    if not isinstance(value, (tuple, list)) and not hasattr(value, "__len__"):
        lower = low
    return float(lower), float(upper)


def check_color_range(value, owner):
    """value_range as a (low, high) pair of floats with low < high."""
    low, high = check_value_range(value, owner)
    if not low < high:
        raise ValueError(f"{owner}: value_range must be a pair (low, high) with low < high, got {value!r}")
    return low, high


def draw_from(layer, owner):
    """Make ``layer`` (an augmentation held inside ``owner``) draw from ``owner``'s generator, so the owner's
    ``seed`` decides every draw."""
    object.__setattr__(layer, "rng", owner.rng)
    return layer
