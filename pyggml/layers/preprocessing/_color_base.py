"""Shared argument forms of Keras 3's colour augmentation layers.

Their ``factor`` is a number ``f`` in the layer's bounds ``[low, high]``, meaning
the range ``(low, f)``, or a ``(lower, upper)`` pair inside the bounds (Keras's
``_set_factor`` with ``_FACTOR_BOUNDS``); ``value_range`` is the ``(low, high)``
the images' values span."""

from pyggml.layers.preprocessing.image_layer import factor_range
from pyggml.layers.preprocessing.random_brightness import check_value_range

__all__ = ["bounded_factor", "check_color_range", "draw_from", "ColorChannels"]


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


class ColorChannels:
    """Mixed in before an image layer whose maths needs RGB (or grey) images: a model refuses an input of
    another channel count when it is built, not at the first batch."""

    color_channels = (1, 3)            # None: any count

    def compute_output_shape(self, input_shape):
        out = super().compute_output_shape(input_shape)
        c = tuple(input_shape)[1 if self.data_format == "channels_first" else -1]
        if self.color_channels and c is not None and c not in self.color_channels:
            grey = " or grey ones (1 channel)" if 1 in self.color_channels else ""
            raise ValueError(f"{type(self).__name__} takes RGB images (3 channels){grey}, got inputs of shape "
                             f"{tuple(input_shape)}")
        return out
