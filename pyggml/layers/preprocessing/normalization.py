"""Normalization: shift and scale inputs by a mean and variance per feature,
learnt from data with ``adapt`` or given (Keras's layer).

``(x - mean) / max(sqrt(variance), 1e-7)`` (Keras's epsilon: a feature of zero
variance is only shifted), or the inverse with ``invert=True``.  Adapted
statistics are non-trainable weights named ``mean`` and ``variance`` (saved
with the model's weights; beside them Keras's ``count``, a scalar it no longer
uses); given ones are constants in the config."""

import numpy as np

from pyggml import ops
from pyggml._tensor_arrays import as_ops_result
from pyggml._validation import is_int
from pyggml.layers._helpers import contiguous
from pyggml.layers._keras_weights import BUILDERS, build_through_owner
from pyggml.layers.layer import Layer
from pyggml.layers.preprocessing._adapt import adapt_batches
from pyggml.saving.object_registration import register_builtin

__all__ = ["Normalization"]

_EPSILON = 1e-7                  # Keras's backend.epsilon()
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _axes(axis):
    if axis is None:
        return ()
    if is_int(axis):
        return (int(axis),)
    try:
        t = tuple(axis)
    except TypeError:
        raise TypeError(f"Normalization: axis must be an int, a tuple of ints or None, got {axis!r}") from None
    if not all(is_int(a) for a in t):
        raise TypeError(f"Normalization: axis must be an int, a tuple of ints or None, got {axis!r}")
    return tuple(int(a) for a in t)


def _stat_values(v, what):
    a = np.asarray(v, dtype=np.float64) if not isinstance(v, np.ndarray) else v.astype(np.float64)
    if a.dtype.kind not in "biuf" or not np.all(np.isfinite(a)):
        raise ValueError(f"Normalization: {what} must hold finite numbers")
    return a


def _batched_if_single(data):
    """A pg.data.Dataset of single 1-D elements batched by 128, as Keras's adapt batches an
    unbatched tf.data dataset (keras-io's dlrm adapts on ``ds.map(lambda x: expand_dims(x, -1))``)."""
    from pyggml.utils.dataset_utils import Dataset as DataPipeline
    if not isinstance(data, DataPipeline):
        return data
    try:
        first = next(iter(data))
    except StopIteration:
        return data
    x = first[0] if isinstance(first, tuple) else first
    return data.batch(128) if not isinstance(x, dict) and np.ndim(x) == 1 else data


def _to_broadcast(v, broadcast):
    """A given statistic in the inputs' broadcast shape: one value per kept index (shaped as the
    kept axes, Keras's mean of shape (10, 13) for axis=(1, 2)) put in place, else numpy's
    broadcasting."""
    v = np.asarray(v)
    kept = tuple(d for d in broadcast[1:] if d != 1)
    if v.ndim and v.shape != tuple(broadcast) and v.size == int(np.prod(broadcast)) and v.shape == kept:
        return v.reshape(broadcast)
    return np.broadcast_to(v, broadcast)


@register_builtin
class Normalization(Layer):
    """``Normalization(axis=-1, mean=None, variance=None, invert=False)``.

    ``axis``: the axes (of the input with its batch) that keep a mean and a
    variance per index; the others are averaged over.  -1: one per feature of
    the last axis; None: one for all.  Call ``adapt(data)`` (an array or a
    dataset of batches) to learn them, or pass ``mean`` and ``variance``."""

    supports_masking = True             # element-wise: a padding mask passes through (Keras's)

    host_capable = True          # runs in the graph, or on the host before host layers (see host_apply)

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        super().__init__(**kwargs)
        self.axis = _axes(axis)
        self._axis_arg = axis if axis is None or is_int(axis) else list(self.axis)
        if (mean is None) != (variance is None):
            raise ValueError("Normalization: give both mean and variance, or neither (then call adapt)")
        self.input_mean = None if mean is None else _stat_values(mean, "mean")
        self.input_variance = None if variance is None else _stat_values(variance, "variance")
        if self.input_variance is not None and np.any(self.input_variance < 0):
            raise ValueError("Normalization: variance must not be negative")
        self.invert = bool(invert)
        self._keep = self._broadcast = None
        self.adapt_mean = self.adapt_variance = self.adapt_count = None

    # --- shapes ------------------------------------------------------------------------
    def _plan(self, input_shape):
        """(kept axes, broadcast shape, statistics shape) for a Keras input shape."""
        ndim = len(input_shape)
        for a in self.axis:
            if not -ndim <= a < ndim:
                raise ValueError(f"Normalization: axis {a} is out of range for inputs of shape {tuple(input_shape)}")
        keep = tuple(sorted({a % ndim for a in self.axis}))
        for a in keep:
            if input_shape[a] is None:
                raise ValueError(f"Normalization: axis {a} of the inputs {tuple(input_shape)} has no fixed size "
                                 f"(the batch axis or a variable length) and cannot keep statistics per index")
        broadcast = tuple(input_shape[a] if a in keep else 1 for a in range(ndim))
        return keep, broadcast, tuple(input_shape[a] for a in keep)

    def compute_output_shape(self, input_shape):
        return input_shape

    def build(self, input_shape):
        keep, broadcast, stat_shape = self._plan(tuple(input_shape))
        if self.adapt_mean is not None and self.adapt_mean.shape != (stat_shape or (1,)):
            raise ValueError(f"Normalization: adapted statistics of shape {self.adapt_mean.shape} do not fit inputs "
                             f"of shape {tuple(input_shape)} (axis={self._axis_arg} needs {stat_shape or (1,)})")
        self._keep, self._broadcast = keep, broadcast
        if self.input_mean is None:
            self._ensure_stats(stat_shape or (1,))
        else:
            for v, what in ((self.input_mean, "mean"), (self.input_variance, "variance")):
                try:
                    _to_broadcast(v, broadcast)
                except ValueError:
                    raise ValueError(f"Normalization: {what} of shape {v.shape} does not broadcast to "
                                     f"{broadcast}, the statistics' shape for inputs of shape "
                                     f"{tuple(input_shape)} with axis={self._axis_arg}") from None

    def _ensure_stats(self, shape):
        """The mean and variance weights (made once: by adapt or by build, whichever comes first)."""
        if self.adapt_mean is None:
            self.adapt_mean = self.add_weight("mean", shape, "zeros", trainable=False)
            self.adapt_variance = self.add_weight("variance", shape, "ones", trainable=False)
            # Keras keeps a third weight, a count of its own (0: Keras 3 no longer adapts it);
            # kept so that weight lists and parameter counts are Keras's
            self.adapt_count = self.add_weight("count", (), "zeros", trainable=False, dtype="int64")

    def _stat_shape_in_graph(self):
        """The statistics' shape without the batch axis, as the inputs broadcast them."""
        return tuple(self._broadcast[1:]) or (1,)

    def _given(self, v):
        """A given statistic as an array of the broadcast shape without the batch axis."""
        return np.ascontiguousarray(_to_broadcast(v, self._broadcast)).reshape(self._stat_shape_in_graph())

    # --- Keras's mean and variance -----------------------------------------------------------
    @property
    def mean(self):
        """The mean as the inputs broadcast it (Keras's ``layer.mean``): a float32 array of the
        inputs' rank, 1 on the batch axis and the axes averaged over, e.g. (1, 1, 1, 3) for
        images with ``axis=-1``.  Known once the layer is built or adapted; read-only (the
        config's ``mean`` is the value given to the constructor)."""
        return self._broadcast_stat("mean")

    @property
    def variance(self):
        """The variance, shaped like ``mean`` (Keras's ``layer.variance``)."""
        return self._broadcast_stat("variance")

    def _broadcast_stat(self, what):
        if self._broadcast is None and BUILDERS:
            build_through_owner(self)          # a Sequential's layer: built as Keras builds it
        given = self.input_mean if what == "mean" else self.input_variance
        adapted = self.adapt_mean if what == "mean" else self.adapt_variance
        if self._broadcast is None or (given is None and adapted is None):
            raise AttributeError(f"Normalization: {what} is known once the layer is built (called on inputs, "
                                 f"or in a model with an input shape) or adapted")
        if given is not None:
            values = _to_broadcast(given, self._broadcast)
        else:
            values = adapted.numpy().reshape(self._broadcast)
        return np.array(values, dtype=np.float32)

    # --- adapt -------------------------------------------------------------------------
    def adapt(self, data, batch_size=None, steps=None):
        """Learn the mean and variance per kept index from ``data``: a numpy array (or a
        list), or a dataset / iterable / PyDataset of batches (of their x).  The
        variance is the population variance, merged exactly across batches."""
        if self.input_mean is not None:
            raise ValueError("Normalization: this layer was given mean and variance; it cannot adapt")
        data = _batched_if_single(data)
        count, mean, m2 = 0, None, None
        for k, batch in enumerate(adapt_batches(data, "Normalization", steps)):
            if steps is not None and k >= steps:
                break
            if batch.dtype == object or batch.dtype.kind not in "biuf":
                raise TypeError(f"Normalization: adapt takes numbers, got dtype {batch.dtype}")
            if batch.ndim < 2 and self.axis:
                raise ValueError(f"Normalization: adapt data of shape {batch.shape} has only the batch axis: "
                                 f"give one feature as data.reshape(-1, 1), or use axis=None")
            keep, broadcast, stat_shape = self._plan((None,) + tuple(batch.shape[1:]))
            if self._keep is not None and self.axis and (len(broadcast) != len(self._broadcast) or any(
                    broadcast[a] != self._broadcast[a] for a in keep)):
                raise ValueError(f"Normalization: adapt data of shape {batch.shape} does not fit the layer, made "
                                 f"for inputs of shape {self.input_shape or (None,) + self._broadcast[1:]}")
            if not self.built:
                self._keep, self._broadcast = keep, broadcast
            self._ensure_stats(stat_shape or (1,))
            x = batch.astype(np.float64)
            if not np.all(np.isfinite(x)):
                raise ValueError("Normalization: adapt data holds NaN or inf")
            reduce = tuple(a for a in range(x.ndim) if a not in self._keep)
            n = int(np.prod([x.shape[a] for a in reduce])) if reduce else 1
            if n == 0:
                continue
            bmean = x.mean(axis=reduce) if reduce else x
            bm2 = ((x - x.mean(axis=reduce, keepdims=True)) ** 2).sum(axis=reduce) if reduce else np.zeros_like(x)
            if mean is None:
                count, mean, m2 = n, bmean, bm2
            else:                                   # Chan et al.'s exact merge of two partial results
                total = count + n
                delta = bmean - mean
                mean = mean + delta * (n / total)
                m2 = m2 + bm2 + delta ** 2 * (count * n / total)
                count = total
        if mean is None:
            raise ValueError("Normalization: adapt got no rows")
        variance = m2 / count
        shape = self.adapt_mean.shape
        for v, values in ((self.adapt_mean, mean), (self.adapt_variance, variance)):
            values = np.asarray(values).reshape(shape)
            if np.any(np.abs(values) > _FLOAT32_MAX):
                raise ValueError("Normalization: the data's statistics are too large for float32")
            v.assign(values)

    # --- the computation ---------------------------------------------------------------------
    def call(self, inputs, training=None):
        x = contiguous(inputs)
        if x.dtype != "f32":
            x = ops.cast(x, "f32")
        bshape = self._stat_shape_in_graph()
        if self.input_mean is not None:
            std = np.maximum(np.sqrt(self._given(self.input_variance)), _EPSILON)
            mean = ops.constant(self._given(self.input_mean))
            std_t, inv_t = ops.constant(std), ops.constant(1.0 / std)
        else:
            mean = ops.reshape(self.adapt_mean, bshape)
            std_t = ops.reshape(ops.clamp(ops.sqrt(self.adapt_variance), _EPSILON, _FLOAT32_MAX), bshape)
            inv_t = ops.div(ops.constant(np.ones(bshape, dtype=np.float32)), std_t)
        if self.invert:
            return x * std_t + mean
        return (x - mean) * inv_t

    def __call__(self, *args, **kwargs):
        x = args[0] if args else None
        if isinstance(x, np.ndarray) and x.dtype.kind in "biuf" and self._broadcast is not None and \
                x.ndim == len(self._broadcast) - 1 and x.ndim >= 1 and \
                all(d == 1 or d == x.shape[a - 1] for a, d in enumerate(self._broadcast) if a):
            # one example without its batch axis (keras-io's ``ds.map(lambda x: norm(x))`` on unbatched
            # elements): Keras broadcasts it against the (1, ...) statistics, a batch of one
            return as_ops_result(self.host_apply(x[None]))
        return super().__call__(*args, **kwargs)

    def host_apply(self, inputs, training=None):
        """The same in numpy, for the host stage: where it lies between the inputs and host layers
        (keras-io's ``Sequential([Normalization(), Resizing(...), RandomFlip(...)])``)."""
        x = np.asarray(inputs)
        if x.dtype == object or x.dtype.kind not in "biuf":
            raise TypeError(f"Normalization takes numbers, got an array of dtype {x.dtype}")
        if self._broadcast is None:
            self.build((None,) + x.shape[1:])
        if x.ndim != len(self._broadcast) or any(d != 1 and d != x.shape[a] for a, d in
                                                 enumerate(self._broadcast) if a):
            raise ValueError(f"Normalization: inputs of shape {x.shape} do not fit the layer, made for inputs of "
                             f"shape {(None,) + tuple(self._broadcast[1:])} (axis={self._axis_arg})")
        bshape = (1,) + tuple(self._broadcast[1:])
        if self.input_mean is not None:
            mean, variance = self._given(self.input_mean), self._given(self.input_variance)
        else:
            mean, variance = self.adapt_mean.numpy(), self.adapt_variance.numpy()
        mean = np.asarray(mean, np.float32).reshape(bshape)
        std = np.clip(np.sqrt(np.asarray(variance, np.float32).reshape(bshape)), _EPSILON, _FLOAT32_MAX)
        x = x.astype(np.float32)
        y = x * std + mean if self.invert else (x - mean) * (np.float32(1.0) / std)
        return np.ascontiguousarray(y, dtype=np.float32)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(axis=self._axis_arg, invert=self.invert,
                   mean=None if self.input_mean is None else self.input_mean.tolist(),
                   variance=None if self.input_variance is None else self.input_variance.tolist())
        return cfg
