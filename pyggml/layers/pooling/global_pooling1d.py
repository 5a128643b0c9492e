"""GlobalAveragePooling1D and GlobalMaxPooling1D: one value per channel over the steps.

Channels-last (N, steps, C) is ggml's [C, steps, N]: one pool_2d whose window
is all the steps (and 1 along C) reduces them, without a permutation (on the
CPU, pyggml's pool_cl over (N, 1, steps, C)).

``call(inputs, mask=...)`` takes an optional padding mask, an f32 tensor
(N, steps) of 1 for real steps and 0 for padding: the average is then over
the real steps only (Keras's behaviour) and the maximum over the real steps
only; a row without any real step gives zeros.
"""

from pyggml import ops
from pyggml._validation import check_bool
from pyggml.layers._helpers import contiguous, fused
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import register_builtin

__all__ = ["GlobalAveragePooling1D", "GlobalMaxPooling1D"]

_MASKED = 1e30          # far below any activation: padded steps never win the maximum


class _Global1D(Layer):
    op = "avg"

    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last", "channels_first"):
            raise ValueError(f"{type(self).__name__}: data_format must be 'channels_last' (Keras's default) or "
                             f"'channels_first', got {data_format!r}")
        self.data_format = data_format or "channels_last"
        self.keepdims = check_bool("keepdims", keepdims)

    def compute_output_shape(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{type(self).__name__} expects inputs of shape (steps, channels), "
                             f"got {tuple(input_shape[1:])}")
        if self.data_format == "channels_first":          # (batch, channels, steps): over the last axis
            return (input_shape[0], input_shape[1], 1) if self.keepdims else (input_shape[0], input_shape[1])
        return (input_shape[0], 1, input_shape[2]) if self.keepdims else (input_shape[0], input_shape[2])

    @staticmethod
    def _mask_columns(mask, n, steps):
        """The mask as (N, steps, 1) (it broadcasts over the channels), and the
        count of real steps per row, at least 1, as (N, 1, 1)."""
        m = ops.as_tensor(mask)
        if tuple(m.shape) not in ((n, steps), (n, steps, 1)):
            raise ValueError(f"mask must have shape (batch, steps) = {(n, steps)}, got {tuple(m.shape)}")
        m = ops.reshape(contiguous(m), (n, steps, 1))
        count = ops.pool_2d(m, "avg", 1, steps, 1, steps, 0, 0)               # (N, 1, 1): mean of the mask
        return m, count

    def _reduce(self, x, n, steps, c):
        if fused():
            y = ops.pool_cl(ops.reshape(contiguous(x), (n, 1, steps, c)), self.op, (1, steps))
            return ops.reshape(y, (n, 1, c))
        return ops.pool_2d(contiguous(x), self.op, 1, steps, 1, steps, 0, 0)   # (N, 1, C)

    def call(self, inputs, training=None, mask=None):
        first = self.data_format == "channels_first"
        x = ops.permute_axes(inputs, (0, 2, 1)) if first else inputs    # channels last, as ggml pools them
        n, steps, c = x.shape
        if mask is None:
            y = self._reduce(x, n, steps, c)
        else:
            y = self._masked(x, mask, n, steps, c)
        if not self.keepdims:
            return ops.reshape(y, (n, c))
        return ops.reshape(contiguous(y), (n, c, 1)) if first else y

    def get_config(self):
        cfg = super().get_config()
        cfg["keepdims"] = self.keepdims
        cfg["data_format"] = self.data_format
        return cfg


@register_builtin
class GlobalAveragePooling1D(_Global1D):
    op = "avg"

    def _masked(self, x, mask, n, steps, c):
        m, frac = self._mask_columns(mask, n, steps)
        mean_all = self._reduce(ops.mul(contiguous(x), m), n, steps, c)       # sum over real steps / steps
        # divided by the fraction of real steps (at least one step's worth: an empty row gives 0)
        frac = ops.scale_bias(ops.relu(ops.scale_bias(frac, 1.0, -1.0 / steps)), 1.0, 1.0 / steps)
        return ops.div(mean_all, frac)


@register_builtin
class GlobalMaxPooling1D(_Global1D):
    op = "max"

    def _masked(self, x, mask, n, steps, c):
        m, frac = self._mask_columns(mask, n, steps)
        # padded steps pushed far down: x + (m - 1) * big
        shifted = ops.add(contiguous(x), ops.scale_bias(m, _MASKED, -_MASKED))
        y = self._reduce(shifted, n, steps, c)
        # a row without a real step: 0, not -big (min(steps * frac, 1) is 0 or 1)
        has_any = ops.scale_bias(ops.relu(ops.scale_bias(frac, -float(steps), 1.0)), -1.0, 1.0)
        return ops.mul(y, has_any)
