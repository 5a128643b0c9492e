"""PyDataset (Keras's ``keras.utils.PyDataset``, formerly ``Sequence``): batches
made on demand by index.

Subclass it and define ``__len__`` (batches per epoch) and
``__getitem__(index)`` returning ``(x, y)`` or ``(x, y, sample_weight)`` (or
just ``x`` for ``predict``); ``on_epoch_end`` runs after every epoch (shuffle
there).  ``fit``, ``evaluate`` and ``predict`` take it directly, without
``steps_per_epoch``.  Batches are made in order, in this process:
``workers``, ``use_multiprocessing`` and ``max_queue_size`` are accepted for
Keras's scripts and have no effect."""

import numpy as np

from pyggml._validation import is_int

__all__ = ["PyDataset", "Sequence", "EagerArray"]


class PyDataset:
    """Base class of datasets made batch by batch: ``__len__``, ``__getitem__(index)``."""

    def __init__(self, workers=1, use_multiprocessing=False, max_queue_size=10):
        if not is_int(workers) or workers < 0:
            raise ValueError(f"workers must be a non-negative int, got {workers!r}")
        if not is_int(max_queue_size) or max_queue_size < 1:
            raise ValueError(f"max_queue_size must be a positive int, got {max_queue_size!r}")
        self._workers = int(workers)
        self._use_multiprocessing = bool(use_multiprocessing)
        self._max_queue_size = int(max_queue_size)

    # Keras's settings (kept, not used: batches are made in order, in this process)
    @property
    def workers(self):
        return self.__dict__.get("_workers", 1)

    @workers.setter
    def workers(self, value):
        self._workers = value

    @property
    def use_multiprocessing(self):
        return self.__dict__.get("_use_multiprocessing", False)

    @use_multiprocessing.setter
    def use_multiprocessing(self, value):
        self._use_multiprocessing = value

    @property
    def max_queue_size(self):
        return self.__dict__.get("_max_queue_size", 10)

    @max_queue_size.setter
    def max_queue_size(self, value):
        self._max_queue_size = value

    def __getitem__(self, index):
        """The batch at ``index``: ``(x, y)``, ``(x, y, sample_weight)`` or ``x``."""
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__(self, index)")

    def __len__(self):
        """The number of batches in an epoch."""
        raise NotImplementedError(f"{type(self).__name__} must define __len__(self)")

    @property
    def num_batches(self):
        """``len(self)``, or None when the dataset does not say."""
        try:
            return len(self)
        except NotImplementedError:
            return None

    def on_epoch_begin(self):
        """Called before every epoch."""

    def on_epoch_end(self):
        """Called after every epoch (e.g. to shuffle)."""

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


Sequence = PyDataset


class EagerArray(np.ndarray):
    """A numpy array that also answers TensorFlow's ``.numpy()`` (the arrays of a batch:
    Keras scripts call it on what their datasets yield)."""

    def numpy(self):
        return tf_numpy(np.asarray(self))

    def __getitem__(self, key):
        item = super().__getitem__(key)
        # one element stays an array (0-d), as a tensor's does: y[0].numpy()
        return np.asarray(item).view(EagerArray) if isinstance(item, np.generic) else item


def tf_numpy(a):
    """What TensorFlow's ``.numpy()`` gives of an array: a scalar as a numpy scalar, text as
    bytes (``b"..."``, which scripts ``.decode("utf-8")``; an array of text as an object array
    of bytes)."""
    if a.dtype.kind == "U":
        if a.ndim == 0:
            return str(a[()]).encode("utf-8")
        out = np.empty(a.shape, dtype=object)
        out.ravel()[:] = [str(v).encode("utf-8") for v in a.ravel()]
        return out
    return a[()] if a.ndim == 0 else a


def _eager(a):
    return np.asarray(a).view(EagerArray)
