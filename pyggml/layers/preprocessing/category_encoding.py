"""CategoryEncoding: integer category indices to one-hot, multi-hot or count
vectors, in the graph (Keras's layer).

- ``"one_hot"``: each index becomes a row of ``num_tokens`` (an input whose last
  axis has size 1 is encoded along it: ``(n, 1) -> (n, num_tokens)``; otherwise
  an axis is added: ``(n, k) -> (n, k, num_tokens)``);
- ``"multi_hot"``: the last axis is the sample's set of indices:
  ``(n, k) -> (n, num_tokens)``, 1 where an index occurs;
- ``"count"``: as multi_hot, the number of times each index occurs.

Indices must be in ``[0, num_tokens)``: a layer called on arrays checks them and
raises, as Keras does; in a model the data checks do (``index_limit``).  The
graph itself never reads outside a table (an index out of range would give a
row of zeros), so no input can crash it."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_choice, check_positive_int
from pyggml.core import Tensor
from pyggml.layers._helpers import contiguous
from pyggml.layers.layer import Layer
from pyggml.layers.node import Node
from pyggml.saving.object_registration import register_builtin

__all__ = ["CategoryEncoding"]

_MODES = ("one_hot", "multi_hot", "count")
_MAX_TOKENS = 1 << 24                  # float32 holds every index below this exactly


def check_indices(a, num_tokens, who):
    """Raise unless the array holds whole numbers in [0, num_tokens)."""
    a = np.asarray(a)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{who} takes integer indices, got dtype {a.dtype}")
    if a.size == 0:
        return
    if a.dtype.kind == "f" and (not np.all(np.isfinite(a)) or np.any(a != np.floor(a))):
        raise ValueError(f"{who} takes integer indices, got values that are not whole numbers")
    lo, hi = a.min(), a.max()
    if lo < 0 or hi >= num_tokens:
        raise ValueError(f"{who}: input values must be in the range 0 <= values < num_tokens with "
                         f"num_tokens={num_tokens}; got values from {lo} to {hi}")


@register_builtin
class CategoryEncoding(Layer):
    """``CategoryEncoding(num_tokens, output_mode="multi_hot", sparse=False)``."""

    input_dtype = "int32"

    def __init__(self, num_tokens=None, output_mode="multi_hot", sparse=False, **kwargs):
        super().__init__(**kwargs)
        if num_tokens is None:
            raise ValueError("CategoryEncoding needs num_tokens (the number of categories)")
        self.num_tokens = check_positive_int("num_tokens", num_tokens, _MAX_TOKENS)
        if output_mode == "binary":             # Keras's old name
            output_mode = "multi_hot"
        self.output_mode = check_choice("output_mode", output_mode, _MODES)
        if sparse:
            raise ValueError("CategoryEncoding: sparse outputs are not supported (sparse=False)")
        self.sparse = False

    @property
    def index_limit(self):
        """Inputs are indices in [0, index_limit): the data checks hold them to it."""
        return self.num_tokens

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], Node) and args[0].dtype not in ("int32",):
            raise TypeError(f"CategoryEncoding takes integer inputs (category indices), got a "
                            f"{args[0].dtype} input; give the Input an integer dtype")
        if args and not isinstance(args[0], Node) and not hasattr(args[0], "graph_tensor") and \
                type(args[0]).__module__.split(".")[0] != "pyggml":
            check_indices(args[0], self.num_tokens, "CategoryEncoding")   # eager call on arrays
            args = (np.asarray(args[0]),) + args[1:]
        return super().__call__(*args, **kwargs)

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        if self.output_mode == "one_hot":
            if len(shape) > 1 and shape[-1] == 1:
                return shape[:-1] + (self.num_tokens,)
            return shape + (self.num_tokens,)
        return shape[:-1] + (self.num_tokens,)

    def call(self, inputs, count_weights=None, training=None):
        """``count_weights`` (``output_mode="count"`` only): a weight for each input value, of the
        inputs' shape, summed in place of 1 (Keras's)."""
        x = contiguous(inputs)
        shape = tuple(x.shape)
        if count_weights is not None and self.output_mode != "count":
            raise ValueError(f"CategoryEncoding: count_weights is for output_mode='count', not {self.output_mode!r}")
        if x.dtype != "f32":
            x = ops.cast(x, "f32")
        n = int(np.prod(shape))
        col = ops.reshape(x, (n, 1))
        # one-hot rows as relu(1 - |index - k|): exactly 1 at k == index, 0 elsewhere (indices are whole
        # numbers below 2**24, exact in float32); no table is read, so no index can read out of bounds
        codes = ops.constant(np.arange(self.num_tokens, dtype=np.float32))
        diff = col - codes                                              # (n, num_tokens)
        onehot = ops.relu(ops.scale_bias(ops.abs(diff), -1.0, 1.0))
        if self.output_mode == "one_hot":
            if len(shape) > 1 and shape[-1] == 1:
                return ops.reshape(onehot, shape[:-1] + (self.num_tokens,))
            if len(shape) >= 4:
                raise ValueError(f"CategoryEncoding: one_hot of inputs of shape {shape} would need 5 dimensions")
            return ops.reshape(onehot, shape + (self.num_tokens,))
        k = shape[-1]
        if count_weights is not None:
            w = count_weights if isinstance(count_weights, Tensor) else \
                ops.constant(np.asarray(count_weights, dtype=np.float32))
            if w.nelements != n:
                raise ValueError(f"CategoryEncoding: count_weights of shape {tuple(w.shape)} for inputs of shape "
                                 f"{shape}")
            onehot = ops.mul(onehot, ops.reshape(contiguous(w), (n, 1)))
        counts = ops.reduce_sum(ops.reshape(onehot, (n // k, k, self.num_tokens)), axis=1)     # (rows, tokens)
        counts = ops.reshape(counts, shape[:-1] + (self.num_tokens,))
        if self.output_mode == "multi_hot":
            counts = ops.clamp(counts, 0.0, 1.0)
        return counts

    def get_config(self):
        cfg = super().get_config()
        cfg.update(num_tokens=self.num_tokens, output_mode=self.output_mode)
        if self.sparse:                           # (Keras's config names it only when set)
            cfg["sparse"] = True
        return cfg
