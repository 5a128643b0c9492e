"""TimeDistributed(layer): the same layer (the same weights) on every step.

(N, steps, ...) is reshaped to (N * steps, ...), the layer runs once on all
the rows, and its output is reshaped back to (N, steps, ...): one call, not
one per step.  The wrapped layer's weights are named ``layer.<weight>``.
A padding mask of the input passes through to the output (the steps stay).
"""

import numpy as np

from pyggml import _fold, ops
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.layers.wrappers.wrapping import build_sublayer, check_layer, serialize_layer, sublayer_output_shape
from pyggml.saving.object_registration import register_builtin

__all__ = ["TimeDistributed"]


@register_builtin
class TimeDistributed(Layer):
    supports_masking = True             # the steps stay
    takes_5d = True                     # frames of videos (pyggml._fold)

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = check_layer("TimeDistributed", layer)

    @staticmethod
    def _inner_shape(input_shape):
        if not isinstance(input_shape, tuple) or len(input_shape) < 3:
            raise ValueError(f"TimeDistributed expects inputs of shape (steps, ...) with at least one "
                             f"feature axis, got {tuple(input_shape)[1:]}")
        return (None,) + tuple(input_shape[2:])

    def build(self, input_shape):
        build_sublayer(self.layer, self._inner_shape(tuple(input_shape)))

    def compute_output_shape(self, input_shape):
        inner = sublayer_output_shape(self.layer, self._inner_shape(tuple(input_shape)))
        if isinstance(inner, list):
            raise ValueError("TimeDistributed: the wrapped layer must have one output")
        return (input_shape[0], input_shape[1]) + tuple(inner[1:])

    def call(self, inputs, training=None, mask=None):
        """A padding mask (batch, steps) must match the inputs' first two axes; the wrapped
        layer gets each step's entry (batch * steps,) when its call takes a mask, as Keras's."""
        n, feats = _fold.batch_and_features(inputs)
        steps = feats[0]
        if mask is not None:
            mshape = tuple(int(d) for d in mask.shape)
            if mshape != (n, steps):
                raise ValueError(f"TimeDistributed: the mask has shape {mshape}, the inputs' (batch, timesteps) are "
                                 f"{(n, steps)}")
        # frames of videos (N, T, H, W, C) come folded: (N * T, H, W, C) are the rows already (a
        # new view of them: the wrapped layer takes them as images, not as the volume they were)
        rows = ops.reshape(contiguous(inputs), (n * steps,) + feats[1:])
        if mask is not None and self.layer._accepts("mask"):
            m = mask if not isinstance(mask, np.ndarray) else ops.constant(np.asarray(mask, np.float32))
            y = self.layer(rows, training=training, mask=ops.reshape(contiguous(m), (n * steps,)))
        else:
            y = self.layer(rows, training=training)
        if len(y.shape) == 4:
            return y                    # (N * T, ...) is the fold of (N, T, ...): pyggml._fold
        return ops.reshape(contiguous(y), (n, steps) + tuple(y.shape[1:]))

    def get_config(self):
        cfg = super().get_config()
        cfg["layer"] = serialize_layer(self.layer)
        return cfg
