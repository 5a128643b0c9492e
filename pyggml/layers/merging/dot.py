"""Dot: the dot product of two inputs' samples along one axis of each (Keras's batch_dot),
and Keras's functional ``dot``."""

from pyggml import ops
from pyggml._validation import check_bool, is_int
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.layers.normalization.unit_normalization import l2_normalize
from pyggml.saving.object_registration import register_builtin

__all__ = ["Dot", "dot"]

_EPSILON = 1e-7       # normalize=True floors each norm here (Keras's backend epsilon)
_MAX_FEATURE_DIMS = 3


@register_builtin
class Dot(Layer):
    """``Dot(axes, normalize=False)``: for inputs ``[x, y]`` of the same batch, the sum of
    ``x * y`` over axis ``axes[0]`` of x and ``axes[1]`` of y, sample by sample.  ``axes``
    is an int (the same axis of both; negative counts from each input's end) or a pair.
    The output holds x's remaining axes, then y's (a (batch, 1) column when none remain).
    ``normalize=True`` L2-normalizes both along their axes first: the cosine similarity."""

    def compute_mask(self, inputs, mask=None):
        """None, as Keras's: a product over the features leaves no steps to mask."""
        return None

    def __init__(self, axes, normalize=False, **kwargs):
        super().__init__(**kwargs)
        if is_int(axes):
            self.axes = int(axes)
        elif isinstance(axes, (list, tuple)) and len(axes) == 2 and all(is_int(a) for a in axes):
            self.axes = tuple(int(a) for a in axes)
        else:
            raise TypeError(f"Dot: axes must be an int or a tuple of two ints, got {axes!r}")
        self.normalize = check_bool("Dot: normalize", normalize)

    def _axes(self, shapes):
        if not isinstance(shapes, list) or len(shapes) != 2:
            raise ValueError(f"Dot must be called on a list of exactly 2 inputs, got "
                             f"{len(shapes) if isinstance(shapes, list) else 1}")
        s1, s2 = tuple(shapes[0]), tuple(shapes[1])
        given = (self.axes, self.axes) if isinstance(self.axes, int) else self.axes
        out = []
        for a, s in zip(given, (s1, s2)):
            ax = a + len(s) if a < 0 else a
            if not 0 <= ax < len(s):
                raise ValueError(f"Dot: axes {self.axes!r} out of range for inputs of shapes {s1} and {s2} "
                                 f"(batch included)")
            if ax == 0:
                raise ValueError(f"Dot: axes {self.axes!r} names the batch axis; the dot product is taken "
                                 f"within each sample")
            out.append(ax)
        if len(s1) < 2 or len(s2) < 2:
            raise ValueError(f"Dot: inputs need at least one axis besides the batch, got {s1} and {s2}")
        d1, d2 = s1[out[0]], s2[out[1]]
        if d1 is not None and d2 is not None and d1 != d2:
            raise ValueError(f"Dot: incompatible input shapes {s1} and {s2}: axis {out[0]} of the first has "
                             f"size {d1}, axis {out[1]} of the second {d2}")
        return out

    def compute_output_shape(self, input_shape):
        a1, a2 = self._axes(input_shape)
        s1, s2 = list(input_shape[0]), list(input_shape[1])
        rest = [d for i, d in enumerate(s1) if i not in (0, a1)] + [d for i, d in enumerate(s2) if i not in (0, a2)]
        if len(rest) > _MAX_FEATURE_DIMS:
            raise ValueError(f"Dot: the output of inputs {tuple(s1)} and {tuple(s2)} would have {len(rest)} "
                             f"dimensions besides the batch; at most {_MAX_FEATURE_DIMS} are supported")
        return (s1[0],) + tuple(rest or [1])

    def build(self, input_shape):
        self.compute_output_shape(input_shape)           # wrong inputs fail here, naming the shapes

    def call(self, inputs):
        if not isinstance(inputs, list) or len(inputs) != 2:
            raise ValueError("Dot must be called on a list of exactly 2 inputs")
        x, y = (contiguous(ops.as_tensor(t)) for t in inputs)
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"Dot: the inputs have different batch sizes, {x.shape[0]} and {y.shape[0]}")
        a1, a2 = self._axes([tuple(x.shape), tuple(y.shape)])
        out_shape = self.compute_output_shape([tuple(x.shape), tuple(y.shape)])
        if self.normalize:
            x, y = l2_normalize(x, [a1], _EPSILON ** 2), l2_normalize(y, [a2], _EPSILON ** 2)
        batch = x.shape[0]

        def rows(t, ax):
            """(batch, everything else, the summed axis)."""
            r = len(t.shape)
            t = ops.permute_axes(t, [0] + [i for i in range(1, r) if i != ax] + [ax])
            k = t.shape[-1]
            return ops.reshape(contiguous(t), (batch, t.nelements // (batch * k), k))
        # mul_mat(a, b) of (B, Q, k) and (B, P, k) is (B, P, Q): x's rows against y's
        z = ops.mul_mat(rows(y, a2), rows(x, a1))
        return ops.reshape(contiguous(z), (batch,) + tuple(out_shape[1:]))

    def get_config(self):
        c = super().get_config()
        c["axes"] = self.axes if isinstance(self.axes, int) else list(self.axes)
        c["normalize"] = self.normalize
        return c


def dot(inputs, axes=-1, **kwargs):
    """Keras's functional form: ``dot([x, y], axes=-1, normalize=False)`` is
    ``Dot(axes, normalize)([x, y])``."""
    return Dot(axes=axes, **kwargs)(inputs)
