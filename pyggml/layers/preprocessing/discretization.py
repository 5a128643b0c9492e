"""Discretization: numbers to the index of the range (bin) they fall in, or to
one-hot / multi-hot / count vectors of it, on the host before the graph
(Keras's layer).

``bin_boundaries=[0., 1., 2.]`` makes the bins ``(-inf, 0)``, ``[0, 1)``,
``[1, 2)``, ``[2, inf)``.  With ``num_bins``, ``adapt(data)`` finds boundaries
at the data's quantiles with Keras's approximate quantile summary (its
``epsilon`` bounds the error), giving the boundaries Keras gives.  The
boundaries are in the config, so they are saved in the model's file."""

import numpy as np

from pyggml._validation import check_int, check_number
from pyggml.layers.node import Node
from pyggml.layers.preprocessing._adapt import adapt_batches
from pyggml.layers.preprocessing._encoding import check_output_mode, encode, encoded_shape
from pyggml.layers.preprocessing.host_layer import HostLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Discretization"]


# --- the quantile summary (Keras's scheme: sorted values with weights) ----------------

def _summarize(values, epsilon):
    """Every step-th sorted value (step ~ n * epsilon), each weighing step."""
    v = np.sort(np.reshape(values, -1))
    inc = v.size / (1.0 / epsilon)
    step = max(inc, 1)
    picked = v[int(inc)::int(step)]
    return np.stack([picked, np.ones_like(picked) * step])


def _compress(summary, epsilon):
    """At most 1/epsilon points, interpolated on the cumulative weights."""
    if summary.shape[1] * epsilon < 1:
        return summary
    percents = epsilon + np.arange(0.0, 1.0, epsilon)
    cum = summary[1].cumsum()
    frac = cum / cum[-1]
    bins = np.interp(percents, frac, summary[0])
    cum_new = np.interp(percents, frac, cum)
    weights = cum_new - np.concatenate((np.array([0]), cum_new[:-1]))
    return np.stack((bins, weights)).astype("float32")


def _merge(a, b, epsilon):
    both = np.concatenate((a, b), axis=1)
    both = np.take(both, np.argsort(both[0]), axis=1)
    return _compress(both, epsilon)


def _boundaries(values, what):
    try:
        b = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"Discretization: {what} must be a list of numbers, got {values!r}") from None
    if not np.all(np.isfinite(b)):
        raise ValueError(f"Discretization: {what} must be finite numbers")
    if np.any(np.diff(b) < 0):
        raise ValueError(f"Discretization: {what} must be sorted in increasing order, got {b.tolist()}")
    return [float(x) for x in b]


@register_builtin
class Discretization(HostLayer):
    """``Discretization(bin_boundaries=None, num_bins=None, epsilon=0.01,
    output_mode="int", sparse=False)``; ``adapt(data)`` with ``num_bins``."""

    def __init__(self, bin_boundaries=None, num_bins=None, epsilon=0.01, output_mode="int", sparse=False,
                 **kwargs):
        kwargs.pop("dtype", None)
        super().__init__(**kwargs)
        self.output_mode = check_output_mode(output_mode, "Discretization")
        if sparse:
            raise ValueError("Discretization: sparse outputs are not supported (sparse=False)")
        self.sparse = False
        if num_bins is not None:
            num_bins = check_int("num_bins", num_bins, 0, 1 << 24)
        if num_bins is not None and bin_boundaries is not None:
            raise ValueError(f"Discretization: give num_bins (and call adapt) or bin_boundaries, not both; got "
                             f"num_bins={num_bins} and bin_boundaries={bin_boundaries}")
        if num_bins is None and bin_boundaries is None:
            raise ValueError("Discretization needs num_bins (then call adapt) or bin_boundaries")
        self.num_bins = num_bins
        self.epsilon = check_number("epsilon", epsilon, 0.0, 1.0, low_open=True)
        self.bin_boundaries = None if bin_boundaries is None else _boundaries(bin_boundaries, "bin_boundaries")
        self._frozen_depth = None

    @property
    def output_dtype(self):
        return "int32" if self.output_mode == "int" else "float32"

    def _depth(self):
        if self.bin_boundaries is not None:
            return len(self.bin_boundaries) + 1
        return self.num_bins

    # --- adapt -----------------------------------------------------------------------------
    def adapt(self, data, batch_size=None, steps=None):
        """Find ``num_bins`` bins of about equal counts in ``data`` (an array or a
        dataset of batches)."""
        if self.num_bins is None:
            raise ValueError("Discretization: a layer given bin_boundaries cannot adapt; use num_bins instead")
        summary = np.array([[], []], dtype="float32")
        for k, batch in enumerate(adapt_batches(data, "Discretization", steps)):
            if steps is not None and k >= steps:
                break
            if batch.dtype == object or batch.dtype.kind not in "biuf":
                raise TypeError(f"Discretization: adapt takes numbers, got dtype {batch.dtype}")
            values = batch.astype("float32")
            if values.size == 0:
                continue
            if not np.all(np.isfinite(values)):
                raise ValueError("Discretization: adapt data holds NaN or inf")
            summary = _merge(_summarize(values, self.epsilon), summary, self.epsilon)
        if summary.shape[1] == 0:
            raise ValueError("Discretization: adapt got no values")
        bounds = _compress(summary, 1.0 / self.num_bins)[0, :-1] if self.num_bins else np.zeros(0)
        new = [float(x) for x in bounds]
        if self._frozen_depth is not None and self.output_mode != "int" and len(new) + 1 != self._frozen_depth:
            raise RuntimeError(f"Discretization: the layer's output size ({self._frozen_depth}) was fixed when it "
                               f"was called on model inputs; the adapted bins would change it")
        self.bin_boundaries = new

    # --- the computation ----------------------------------------------------------------------
    def host_call(self, inputs):
        if self.bin_boundaries is None:
            raise ValueError("Discretization: pass bin_boundaries or call adapt(data) before using the layer")
        a = np.asarray(inputs)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"Discretization takes numbers, got an array of dtype {a.dtype}")
        idx = np.searchsorted(np.asarray(self.bin_boundaries, dtype=np.float64), a.astype(np.float64),
                              side="right")
        if self.output_mode == "int":
            return idx.astype(np.int32)
        return encode(idx, self.output_mode, len(self.bin_boundaries) + 1)

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], Node) and args[0].dtype == "string":
            raise TypeError("Discretization takes numbers, got a string input")
        if args and isinstance(args[0], (list, tuple)) and not any(isinstance(v, Node) for v in args[0]):
            return self.host_call(np.asarray(args[0]))      # Keras's eager call on a list
        return super().__call__(*args, **kwargs)

    def compute_output_shape(self, input_shape):
        if self.output_mode == "int":
            return tuple(input_shape)
        depth = self._depth()
        if depth is None or depth < 1:
            raise RuntimeError("Discretization: the number of bins must be known before the layer is called "
                               "on inputs")
        self._frozen_depth = depth
        return encoded_shape(tuple(input_shape), self.output_mode, depth)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(bin_boundaries=self.bin_boundaries, num_bins=self.num_bins, epsilon=self.epsilon,
                   output_mode=self.output_mode, sparse=self.sparse)
        cfg.pop("trainable", None)                # (Keras's config has none)
        return cfg

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        if config.get("bin_boundaries") is not None and config.get("num_bins") is not None:
            bounds = config.pop("bin_boundaries")           # an adapted layer: both are set
            layer = cls(**config)
            layer.bin_boundaries = _boundaries(bounds, "bin_boundaries")
            return layer
        return cls(**config)
