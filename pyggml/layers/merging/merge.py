"""Merging layers: Add, Subtract, Multiply, Average and Concatenate, and Keras's
functional helpers ``add``, ``concatenate``, ...; node arithmetic (``a + b``) uses them."""

import numpy as np

from pyggml import _fold, ops
from pyggml._validation import is_int
from pyggml.core import Tensor
from pyggml.layers.layer import Layer
from pyggml.layers.node import MERGING_LAYERS
from pyggml.saving.object_registration import register_builtin
from pyggml.variables import Variable

__all__ = ["Add", "Subtract", "Multiply", "Average", "Concatenate", "add", "subtract", "multiply", "average",
           "concatenate"]


def _broadcast_shape(shapes, what):
    """numpy broadcasting of Keras shapes (None is unknown)."""
    r = max(len(s) for s in shapes)
    out = []
    for i in range(1, r + 1):
        dims = {s[-i] for s in shapes if len(s) >= i and s[-i] not in (None, 1)}
        if len(dims) > 1:
            raise ValueError(f"{what}: shapes {shapes} do not broadcast")
        if dims:
            out.append(dims.pop())
        elif any(len(s) >= i and s[-i] is None for s in shapes):
            out.append(None)
        else:
            out.append(1)
    return tuple(reversed(out))


def _or_masks(mask, owner, inputs=None, missing_real=False):
    """Keras 3.15's merged mask: a step is real where it is in any input's mask; None when an
    input has none (``missing_real``: Concatenate's features, where an input without a mask
    counts as all real, so every step is)."""
    if mask is None:
        return None
    if not isinstance(mask, (list, tuple)):
        raise ValueError(f"{owner}: the mask should be a list (one per input), got {type(mask).__name__}")
    if inputs is not None:
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"{owner}: the inputs should be a list, got {type(inputs).__name__}")
        if len(inputs) != len(mask):
            raise ValueError(f"{owner}: the inputs and the mask should have the same length, got "
                             f"{len(inputs)} inputs and {len(mask)} masks")
    present = [m for m in mask if m is not None]
    if not present:
        return None
    if len(present) < len(mask):
        if not missing_real:
            return None
        m = present[0]
        if not isinstance(m, (Tensor, Variable)):
            return np.ones(np.shape(m), bool)
        return ops.scale_bias(ops.as_tensor(m), 0.0, 1.0)
    if all(not isinstance(m, (Tensor, Variable)) for m in present):
        return np.logical_or.reduce([np.asarray(m).astype(bool) for m in present])   # arrays: at once
    out = ops.as_tensor(present[0])
    for m in present[1:]:
        m = ops.as_tensor(m)
        out = ops.sub(ops.add(out, m), ops.mul(out, m))
    return out


def _spread(m, x):
    """A (batch, steps) 0/1 mask as a tensor broadcasting over x's features."""
    m = ops.as_tensor(np.asarray(m, np.float32)) if isinstance(m, np.ndarray) or not hasattr(m, "shape") else m
    if len(m.shape) < len(x.shape):
        m = ops.reshape(m, tuple(m.shape) + (1,) * (len(x.shape) - len(m.shape)))
    return m


def masked_merge(op, inputs, mask):
    """Keras's merge of masked inputs for ops with no identity (maximum, minimum, multiply): a
    masked step of one input takes the running result's value and a masked step of the result
    the input's, so a step real in one input keeps that input's value."""
    masks = list(mask) if isinstance(mask, (list, tuple)) else [None] * len(inputs)
    if all(m is None for m in masks):
        y = inputs[0]
        for x in inputs[1:]:
            y = op(y, x)
        return y

    spread = _spread

    def pick(m, a, b):                # a where m, else b
        return b + (a - b) * m
    y, y_mask = inputs[0], None if masks[0] is None else spread(masks[0], inputs[0])
    for x, m in zip(inputs[1:], masks[1:]):
        m = None if m is None else spread(m, x)
        if m is not None:
            x = pick(m, x, y)
        if y_mask is not None:
            y = pick(y_mask, y, x)
        y_mask = y_mask + m - y_mask * m if m is not None and y_mask is not None else None
        y = op(y, x)
    return y


class _Merge(Layer):
    def takes_5d(self, shapes):
        """volumes merge with volumes of the same shape only (pyggml._fold)."""
        return len({tuple(s) for s in shapes}) == 1

    min_inputs = 2
    supports_masking = True

    def compute_mask(self, inputs, mask=None):
        return _or_masks(mask, type(self).__name__, inputs)

    def compute_output_shape(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) < self.min_inputs:
            raise ValueError(f"{type(self).__name__} must be called on a list of at least "
                             f"{self.min_inputs} inputs")
        return _broadcast_shape([tuple(s) for s in input_shape], type(self).__name__)


@register_builtin
class Add(_Merge):
    def call(self, inputs, training=None):
        y = inputs[0]
        for x in inputs[1:]:
            y = y + x
        return y


@register_builtin
class Subtract(_Merge):
    def compute_output_shape(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) != 2:
            raise ValueError("Subtract must be called on a list of exactly two inputs")
        return super().compute_output_shape(input_shape)

    def call(self, inputs, training=None):
        return inputs[0] - inputs[1]


@register_builtin
class Multiply(_Merge):
    def call(self, inputs, training=None, mask=None):
        """Keras's: a masked step counts as 1 in the product; where every input is masked
        (all have masks), the output is 0."""
        masks = list(mask) if isinstance(mask, (list, tuple)) else [None] * len(inputs)
        y, union = None, None
        for x, m in zip(inputs, masks):
            if m is not None:
                m = _spread(m, x)
                x = x * m + (1.0 - m)
                union = m if union is None else union + m - union * m
            y = x if y is None else y * x
        return y * union if union is not None and all(m is not None for m in masks) else y


@register_builtin
class Average(_Merge):
    def call(self, inputs, training=None):
        y = inputs[0]
        for x in inputs[1:]:
            y = y + x
        return ops.scale(y, 1.0 / len(inputs))


@register_builtin
class Concatenate(Layer):
    """Join inputs along ``axis`` (``axis=0``: along the batch, Keras's joining of augmented views;
    the rows then are the inputs' rows one after the other)."""

    supports_masking = True        # along the features; joining along the steps drops the mask (compute_mask)

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        if not is_int(axis):
            raise ValueError(f"Concatenate: axis must be an int, got {axis!r}")
        self.axis = int(axis)

    def compute_output_shape(self, input_shape):
        if isinstance(input_shape, tuple) and input_shape and not isinstance(input_shape[0], (tuple, list)):
            return input_shape                                  # one input (a list of one, unpacked)
        if not isinstance(input_shape, list) or not input_shape:
            raise ValueError("Concatenate must be called on a list of inputs (one or more: Keras 3 gives one back "
                             "as it is)")
        r = len(input_shape[0])
        if any(len(s) != r for s in input_shape):
            raise ValueError(f"Concatenate: inputs must have the same rank, got {input_shape}")
        ax = self.axis if self.axis >= 0 else r + self.axis
        if not 0 <= ax < r:
            raise ValueError(f"Concatenate: axis {self.axis} out of range for inputs of rank {r}")
        for s in input_shape:
            if any(s[i] != input_shape[0][i] and None not in (s[i], input_shape[0][i])
                   for i in range(r) if i != ax):
                raise ValueError(f"Concatenate: shapes {input_shape} differ outside axis {self.axis}")
        out = list(input_shape[0])
        sizes = [s[ax] for s in input_shape]
        out[ax] = None if None in sizes else sum(sizes)
        return tuple(out)

    def takes_5d(self, shapes):
        """volumes are joined along any axis but their depth (axis 1), which folds into the batch
        (pyggml._fold); all the inputs must be volumes."""
        return all(len(s) == 5 for s in shapes) and self.axis % 5 not in (0, 1)

    def call(self, inputs, training=None):
        if isinstance(inputs, (list, tuple)) and len(inputs) == 1:
            return inputs[0]                                     # (Keras 3: one input comes back as it is)
        shapes = _fold.in_shapes()
        if shapes and len(shapes[0]) == 5 and self.axis > 0:
            return ops.concatenate(inputs, self.axis - 1)        # on the folded (batch * D, H, W, C)
        return ops.concatenate(inputs, self.axis)

    def compute_mask(self, inputs, mask=None):
        """Keras's: joining along the steps joins the masks (an input without one counts as all
        real); along the features a step is real where it is in any input."""
        if mask is None:
            return None
        if not isinstance(mask, (list, tuple)):
            raise ValueError(f"Concatenate: the mask should be a list (one per input), got {type(mask).__name__}")
        if not isinstance(inputs, (list, tuple)) or len(inputs) != len(mask):
            raise ValueError(f"Concatenate: the inputs should be a list as long as the mask ({len(mask)}), got "
                             f"{len(inputs) if isinstance(inputs, (list, tuple)) else type(inputs).__name__}")
        if all(m is None for m in mask):
            return None
        r = len(inputs[0].shape)
        axis = self.axis % r
        if axis == 0:
            return None
        if axis < r - 1 and r >= 3 and all(m is None or len(m.shape) == r - 1 for m in mask):
            # joined along a step axis (the masks: the inputs' shape less the features), an input
            # without a mask counting as all real, as Keras's
            arrays = all(not isinstance(m, (Tensor, Variable)) for m in mask if m is not None)
            ones = [np.ones(tuple(int(d) for d in x.shape[:r - 1]), np.float32) for x in inputs]
            if arrays:
                return np.concatenate([np.asarray(m).astype(bool) if m is not None else o.astype(bool)
                                       for m, o in zip(mask, ones)], axis=axis)
            return ops.concatenate([ops.as_tensor(m) if m is not None else ops.constant(o)
                                    for m, o in zip(mask, ones)], axis=axis)
        return _or_masks(mask, "Concatenate", inputs, missing_real=True)

    def get_config(self):
        c = super().get_config()
        c["axis"] = self.axis
        return c


def add(inputs, **kwargs):
    """Keras's functional form: ``add([a, b])`` is ``Add()([a, b])``."""
    return Add(**kwargs)(inputs)


def subtract(inputs, **kwargs):
    return Subtract(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    return Multiply(**kwargs)(inputs)


def average(inputs, **kwargs):
    return Average(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    return Concatenate(axis=axis, **kwargs)(inputs)


MERGING_LAYERS.update(Add=Add, Subtract=Subtract, Multiply=Multiply)
