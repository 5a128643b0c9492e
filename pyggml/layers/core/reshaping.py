"""Flatten, Reshape, Permute and RepeatVector: the same values in another shape (the batch stays first)."""

import numpy as np

from pyggml import _fold, ops
from pyggml._validation import is_int
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Flatten", "Reshape", "Permute", "RepeatVector", "Identity"]


@register_builtin
class Flatten(Layer):
    takes_5d = True

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last", "channels_first"):
            raise ValueError(f"Flatten: data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
        self.data_format = data_format or "channels_last"

    def compute_output_shape(self, input_shape):
        feats = input_shape[1:]
        return (input_shape[0], None if any(d is None for d in feats) else int(np.prod(feats)))

    def call(self, inputs, training=None):
        n, feats = _fold.batch_and_features(inputs)
        if self.data_format == "channels_first" and len(feats) >= 2:
            # as Keras: the channels (axis 1) go last first, so the order is channels-last's
            if len(feats) > 3:
                raise ValueError("Flatten(data_format='channels_first') takes inputs of at most 3 dimensions "
                                 "besides the batch")
            inputs = ops.permute_axes(inputs, (0,) + tuple(range(2, len(feats) + 1)) + (1,))
        return ops.reshape(contiguous(inputs), (n, int(np.prod(feats))))

    def get_config(self):
        cfg = super().get_config()
        cfg["data_format"] = self.data_format
        return cfg


@register_builtin
class Reshape(Layer):
    """To and from 5-D and more too (volumes, folded: pyggml._fold), up to 8 dimensions with
    the batch (the patches' reshape of keras-io's involution)."""

    takes_5d = True

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        t = (target_shape,) if is_int(target_shape) else tuple(target_shape)
        if sum(1 for d in t if d == -1) > 1:
            raise ValueError("Reshape: at most one -1 in target_shape")
        for d in t:
            if not is_int(d) or (d < 1 and d != -1):
                raise ValueError(f"Reshape: target_shape entries must be positive ints or -1, got {t}")
        if not t or len(t) > _fold.MAX_DIMS - 1:
            raise ValueError(f"Reshape: 1 to {_fold.MAX_DIMS - 1} dimensions besides the batch, got {t}")
        self.target_shape = tuple(int(d) for d in t)

    def _resolved(self, feats):
        n = int(np.prod(feats))
        t = self.target_shape
        if -1 in t:
            known = int(np.prod([d for d in t if d != -1]))
            if n % known:
                raise ValueError(f"Reshape: cannot reshape {tuple(feats)} to {t}")
            t = tuple(n // known if d == -1 else d for d in t)
        if int(np.prod(t)) != n:
            raise ValueError(f"Reshape: cannot reshape {tuple(feats)} ({n} values) to {t}")
        return t

    def compute_output_shape(self, input_shape):
        feats = input_shape[1:]
        if any(d is None for d in feats):
            if -1 in self.target_shape:
                return (input_shape[0],) + tuple(None if d == -1 else d for d in self.target_shape)
            return (input_shape[0],) + self.target_shape
        return (input_shape[0],) + self._resolved(feats)

    def call(self, inputs, training=None):
        n, feats = _fold.batch_and_features(inputs)
        target = (n,) + self._resolved(feats)
        out = ops.reshape(contiguous(inputs), _fold.graph_shape(target))
        if len(target) >= 5:
            _fold.note([out], [target])        # a volume made here (in a custom call too): its Keras shape
        return out

    def get_config(self):
        c = super().get_config()
        c["target_shape"] = self.target_shape
        return c


@register_builtin
class Permute(Layer):
    """Permute the non-batch axes; ``dims`` counts from 1, as Keras."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        d = tuple(dims)
        if sorted(d) != list(range(1, len(d) + 1)):
            raise ValueError(f"Permute: dims must be a permutation of 1..{len(d)}, got {d}")
        self.dims = d

    def compute_output_shape(self, input_shape):
        if len(self.dims) != len(input_shape) - 1:
            raise ValueError(f"Permute: dims {self.dims} do not match input shape {input_shape}")
        return (input_shape[0],) + tuple(input_shape[d] for d in self.dims)

    def call(self, inputs, training=None):
        return ops.permute_axes(inputs, (0,) + self.dims)

    def get_config(self):
        c = super().get_config()
        c["dims"] = self.dims
        return c


@register_builtin
class RepeatVector(Layer):
    """``RepeatVector(n)``: (batch, features) to (batch, n, features), each row repeated
    n times (the encoder's summary fed to every step of a decoder)."""

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        if isinstance(n, bool) or not is_int(n):
            raise TypeError(f"RepeatVector: n must be an int, got {n!r}")        # Keras's TypeError
        if n < 1:
            raise ValueError(f"RepeatVector: n must be a positive int, got {n!r}")
        self.n = int(n)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 2:
            raise ValueError(f"RepeatVector takes inputs of shape (batch, features), got {tuple(input_shape)}")
        return (input_shape[0], self.n, input_shape[1])

    def call(self, inputs, training=None):
        b, f = inputs.shape
        rows = ops.reshape(contiguous(inputs), (b, 1, f))
        return ops.repeat(rows, ops.constant(np.zeros((b, self.n, f), dtype=np.float32)))

    def get_config(self):
        c = super().get_config()
        c["n"] = self.n
        return c


@register_builtin
class Identity(Layer):
    """``Identity()``: its input, unchanged (a placeholder in a model's structure)."""

    supports_masking = True

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, inputs):
        return inputs
