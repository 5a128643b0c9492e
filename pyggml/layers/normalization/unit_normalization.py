"""UnitNormalization: each sample scaled to unit L2 norm along ``axis``, and the
``l2_normalize`` the Dot layer's ``normalize=True`` shares."""

from pyggml import ops
from pyggml._validation import is_int
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["UnitNormalization", "l2_normalize"]

_FLOOR = 1e-12        # the squared norm is floored here (Keras's): a zero vector stays zero


def l2_normalize(x, axes, floor=_FLOOR):
    """x / sqrt(max(sum of x**2 over ``axes``, floor)), from ops that train; ``axes`` are
    numpy axes of x (non-negative)."""
    x = contiguous(ops.as_tensor(x))
    s = ops.sqr(x)
    for ax in sorted(set(axes)):
        s = ops.reduce_sum(s, ax, keepdims=True)
    s = contiguous(s)
    # max(s, floor) as relu(s - floor) + floor: the same value, and a gradient where s > floor
    floored = ops.scale_bias(ops.relu(ops.scale_bias(s, 1.0, -floor)), 1.0, floor)
    norm = ops.sqrt(floored)
    if tuple(norm.shape) != tuple(x.shape):
        norm = ops.repeat(norm, x)
    return ops.div(x, norm)


def normalized_axes(axis, rank, who):
    """``axis`` (an int or a list of ints, numpy's, negative from the end) as sorted
    non-negative axes of a rank-``rank`` input (batch included)."""
    items = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    out = []
    for a in items:
        if not is_int(a):
            raise TypeError(f"{who}: axis must be an int or a list of ints, got {axis!r}")
        ax = int(a) + rank if a < 0 else int(a)
        if not 0 <= ax < rank:
            raise ValueError(f"{who}: axis {a} is out of range for inputs of rank {rank} (batch included)")
        out.append(ax)
    if len(set(out)) != len(out):
        raise ValueError(f"{who}: axis {axis!r} names an axis twice")
    return sorted(out)


@register_builtin
class UnitNormalization(Layer):
    """``UnitNormalization(axis=-1)``: each sample divided by its L2 norm along ``axis``
    (an int or a list of ints; the squared norm is floored at 1e-12, as Keras's)."""

    supports_masking = True

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        if isinstance(axis, (list, tuple)):
            if not axis or not all(is_int(a) for a in axis):
                raise TypeError(f"UnitNormalization: axis must be an int or a non-empty list of ints, got {axis!r}")
            self.axis = [int(a) for a in axis]
        elif is_int(axis):
            self.axis = int(axis)
        else:
            raise TypeError(f"UnitNormalization: axis must be an int or a list of ints, got {axis!r}")

    def build(self, input_shape):
        if isinstance(input_shape, (list, dict)):
            raise ValueError("UnitNormalization takes one input")
        normalized_axes(self.axis, len(input_shape), "UnitNormalization")

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, inputs):
        x = ops.as_tensor(inputs)
        return l2_normalize(x, normalized_axes(self.axis, len(x.shape), "UnitNormalization"))

    def get_config(self):
        c = super().get_config()
        c["axis"] = self.axis
        return c
