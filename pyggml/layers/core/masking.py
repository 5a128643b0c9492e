"""Masking: marks the steps whose features all equal ``mask_value`` as padding."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_number
from pyggml.core import Tensor
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.layers.node import Node
from pyggml.saving.object_registration import register_builtin

__all__ = ["Masking", "MaskOf"]


def _real_steps(x, mask_value):
    """(..., 1): 1 where some feature of the step differs from mask_value, else 0 (a
    constant of the step: step()'s gradient is zero)."""
    x = contiguous(ops.as_tensor(x))
    if x.dtype == "i32":
        x = ops.cast(x, "f32")
    off = ops.abs(ops.scale_bias(x, 1.0, -mask_value)) if mask_value else ops.abs(x)
    return ops.step(ops.sum_rows(off))


@register_builtin
class Masking(Layer):
    """``Masking(mask_value=0.0)``: a step (the features along the last axis) whose values
    all equal ``mask_value`` is padding: its output is zeros and the padding mask passed on
    (batch, steps) is 0 there, so the layers after it that take a mask (LSTM, GRU,
    SimpleRNN, Bidirectional, GlobalAveragePooling1D, attention, the loss) leave it out."""

    host_mask = True          # compute_mask works on arrays: an eager output carries _keras_mask
    supports_masking = True

    def __init__(self, mask_value=0.0, **kwargs):
        super().__init__(**kwargs)
        self.mask_value = check_number("Masking: mask_value", mask_value, finite=False)

    def build(self, input_shape):
        if isinstance(input_shape, (list, dict)):
            raise ValueError("Masking takes one input")
        if len(input_shape) < 2:
            raise ValueError(f"Masking takes inputs with a feature axis, got shape {tuple(input_shape)}")

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, inputs):
        x = contiguous(ops.as_tensor(inputs))
        keep = _real_steps(x, self.mask_value)
        return ops.mul(x, ops.repeat(keep, x) if tuple(keep.shape) != tuple(x.shape) else keep)

    def compute_mask(self, inputs, mask=None):
        if not isinstance(inputs, Tensor):              # on arrays: Keras's boolean mask, at once
            return np.any(np.asarray(inputs) != self.mask_value, axis=-1)
        x = ops.as_tensor(inputs)
        keep = _real_steps(x, self.mask_value)
        return ops.reshape(keep, tuple(x.shape[:-1]))

    def get_config(self):
        c = super().get_config()
        c["mask_value"] = self.mask_value
        return c


class MaskOf(Layer):
    """The padding mask a tensor of a functional model carries, as a tensor of the model
    (batch, steps; 1 for a real step, 0 for padding): what ``node._keras_mask`` gives, as
    Keras's symbolic ``_keras_mask``.  Its own output carries no mask."""

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:2])

    def call(self, inputs, mask=None):
        x = contiguous(ops.as_tensor(inputs))
        if mask is None:                                  # no mask reached it: every step is real
            x = ops.cast(x, "f32") if x.dtype == "i32" else x
            b, t = x.shape[0], x.shape[1]
            per_step = x if len(x.shape) == 2 else ops.sum_rows(ops.reshape(x, (b, t, x.nelements // (b * t))))
            return ops.reshape(ops.scale_bias(contiguous(per_step), 0.0, 1.0), (b, t))
        m = ops.as_tensor(mask)
        return contiguous(ops.cast(m, "f32") if m.dtype == "i32" else m)


def _carries_mask(node, seen=None):
    """Whether a padding mask reaches ``node`` (the rules the model's graph follows): made by an
    Embedding(mask_zero=True), a Masking or a layer's own compute_mask, passed on by the
    layers that support masking."""
    layer = node.layer
    if layer is None or not node.inputs or len(node.shape) < 2:
        return False
    if hasattr(layer, "mask_zero"):                    # an Embedding
        return bool(layer.mask_zero)
    if type(layer).compute_mask is not Layer.compute_mask:
        return True
    if not getattr(layer, "supports_masking", False):
        return False
    seen = set() if seen is None else seen
    if id(node) in seen:
        return False
    seen.add(id(node))
    return any(isinstance(i, Node) and _carries_mask(i, seen) for i in node.inputs)


def _keras_mask(node):
    """Keras's symbolic ``_keras_mask``: the padding mask this tensor carries as a node of the
    model, (batch, steps), 1 for a real step (MaskOf); None when no layer before it makes one
    or a layer between drops it."""
    if not _carries_mask(node):
        return None
    mask = node.__dict__.get("_mask_node")
    if mask is None:
        mask = node.__dict__["_mask_node"] = MaskOf()(node)
    return mask


Node._keras_mask = property(_keras_mask)        # (here: a node knows no layers)
