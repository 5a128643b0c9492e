"""``timeseries_dataset_from_array`` (Keras's ``keras.utils`` and
``keras.preprocessing``): sliding windows over an array, in batches.

Keras returns a ``tf.data.Dataset``; pyggml returns a ``PyDataset`` that
``fit``, ``evaluate`` and ``predict`` take, made a batch at a time (the windows
are gathered when a batch is asked for, not stored).  What Keras scripts do with
the dataset works: iterating (``for x, y in ds``), ``ds.take(n)``,
``ds.skip(n)``, ``len(ds)``, ``ds.as_numpy_iterator()``, and ``.numpy()`` on the
arrays of a batch.

Window ``k`` (in the order drawn) starts at ``start_index + p_k``, the start
positions ``p`` being ``0, sequence_stride, 2 * sequence_stride, ...``, and
holds the steps ``start + p_k + j * sampling_rate`` for ``j < sequence_length``;
its target is ``targets[start + p_k]``.  With ``shuffle`` the start positions are
drawn in a random order (``seed``).
"""

import numpy as np

from pyggml._validation import is_int
from pyggml.utils.dataset_utils import Dataset
from pyggml.utils.py_dataset import EagerArray, _eager

__all__ = ["timeseries_dataset_from_array", "TimeseriesDataset", "EagerArray"]


class TimeseriesDataset(Dataset):
    """Batches of windows (and their targets) over an array; see the module's docstring.  A
    pyggml.data Dataset of those batches (tf.data's: ``map``, ``zip`` with another, ``shuffle``,
    ``prefetch``, ``unbatch``, ...)."""

    def __init__(self, data, targets, starts, sequence_length, sampling_rate, batch_size):
        self._data, self._targets = data, targets
        self._starts = starts                                  # absolute first steps, in the order drawn
        self._steps = np.arange(sequence_length) * sampling_rate
        self._batch_size = batch_size
        self._shape = (sequence_length, sampling_rate)
        super().__init__(len(self), self._batch)

    def __len__(self):
        n = len(self._starts)
        return n if self._batch_size is None else -(-n // self._batch_size)

    def __getitem__(self, index):
        if not is_int(index):
            raise TypeError(f"a batch index must be an int, got {type(index).__name__}")
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"batch {index} of a dataset of {n}")
        return self._batch(index % n)

    def _batch(self, index):
        b = 1 if self._batch_size is None else self._batch_size
        starts = self._starts[index * b:(index + 1) * b]
        x = self._data[starts[:, None] + self._steps[None, :]]
        y = None if self._targets is None else self._targets[starts]
        if self._batch_size is None:
            x, y = x[0], (None if y is None else y[0])
        return _eager(x) if y is None else (_eager(x), _eager(y))

    def _with_starts(self, starts):
        return TimeseriesDataset(self._data, self._targets, starts, self._shape[0], self._shape[1],
                                 self._batch_size)

    def _count(self, count, what):
        if not is_int(count) or count < -1:
            raise ValueError(f"{what}: count must be an int, -1 or more, got {count!r}")
        return len(self) if count == -1 else min(int(count), len(self))

    def take(self, count):
        """The first ``count`` batches (all of them for -1), as a dataset (tf.data's ``take``)."""
        b = 1 if self._batch_size is None else self._batch_size
        return self._with_starts(self._starts[:self._count(count, "take") * b])

    def skip(self, count):
        """The batches after the first ``count`` (none for -1), as a dataset."""
        b = 1 if self._batch_size is None else self._batch_size
        return self._with_starts(self._starts[self._count(count, "skip") * b:])

    def as_numpy_iterator(self):
        for item in self:
            yield tuple(np.asarray(a) for a in item) if isinstance(item, tuple) else np.asarray(item)


def _positive(name, value, below=None):
    if not is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if below is not None and value >= below:
        raise ValueError(f"{name} must be lower than the length of the data ({below}), got {value}")
    return int(value)


def timeseries_dataset_from_array(data, targets, sequence_length, sequence_stride=1, sampling_rate=1,
                                  batch_size=128, shuffle=False, seed=None, start_index=None, end_index=None):
    """Windows of ``sequence_length`` steps over ``data`` (time on axis 0), each with the
    target ``targets[i]`` of the step ``i`` it starts at (``targets=None``: inputs only), in
    batches of ``batch_size`` (None: single windows).  Returns a ``TimeseriesDataset``."""
    data = np.asarray(data)
    if data.ndim == 0 or len(data) == 0:
        raise ValueError("data must be an array with a time axis (axis 0) and at least one step")
    if data.dtype == object or data.dtype.kind not in "biuf":
        raise TypeError(f"data must be an array of numbers, got dtype {data.dtype}")
    n = len(data)
    if targets is not None:
        targets = np.asarray(targets)
        if targets.ndim == 0:
            raise ValueError("targets must be an array with one entry per step (or None)")
        if targets.dtype == object or targets.dtype.kind not in "biuf":
            raise TypeError(f"targets must be an array of numbers, got dtype {targets.dtype}")
    length = _positive("sequence_length", sequence_length)
    rate = _positive("sampling_rate", sampling_rate, n)
    stride = _positive("sequence_stride", sequence_stride, n)
    if batch_size is not None:
        batch_size = _positive("batch_size", batch_size)
    start = 0 if start_index is None else start_index
    end = n if end_index is None else end_index
    if not is_int(start) or not 0 <= start < n:
        raise ValueError(f"start_index must be an int from 0 to the data's length ({n}) less one, got {start_index!r}")
    if not is_int(end) or not start < end <= n:
        raise ValueError(f"end_index must be an int above start_index ({start}) and at most the data's length "
                         f"({n}), got {end_index!r}")
    count = end - start - (length - 1) * rate
    if targets is not None:
        count = min(count, len(targets) - start)
    starts = np.arange(0, max(count, 0), stride, dtype=np.int64)
    if shuffle:
        if seed is not None and not is_int(seed):
            raise ValueError(f"seed must be an int or None, got {seed!r}")
        np.random.default_rng(seed).shuffle(starts)
    return TimeseriesDataset(data, targets, starts + start, length, rate, batch_size)
