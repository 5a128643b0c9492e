"""The data ``adapt`` takes, as numpy batches.

Keras's preprocessing layers adapt on an array (or a list: one batch), on a
dataset of batches (any iterable or generator; a ``PyDataset`` is read by
index), and, where a dataset yields ``(x, y)`` pairs, on their ``x``."""

import numpy as np

from pyggml._validation import check_int

__all__ = ["adapt_batches"]


def ragged_rows(data):
    """The rows of a ragged batch (a list, or a 1-D object array, of lists of different lengths:
    what ``tf.ragged.constant`` holds), each a 1-D array; None for any other data."""
    if isinstance(data, np.ndarray) and data.dtype == object and data.ndim == 1:
        items = list(data)
    elif isinstance(data, (list, tuple)):
        items = list(data)
    else:
        return None
    if not items or not all(isinstance(r, (list, tuple, np.ndarray)) for r in items):
        return None
    if not isinstance(data, np.ndarray) and len({len(r) for r in items}) == 1:
        return None                               # rectangular: an ordinary array
    try:
        rows = [np.asarray(r) for r in items]
    except ValueError:
        return None
    return rows if all(r.ndim == 1 for r in rows) else None


def _as_array(item, what):
    if isinstance(item, dict):
        raise TypeError(f"{what}: adapt takes the data of one feature, got a dict; pick the feature "
                        f"(e.g. data[name]) first")
    rows = ragged_rows(item)
    if rows is not None:                          # a ragged batch: its values, for the vocabulary
        return np.concatenate(rows) if any(len(r) for r in rows) else np.asarray([], dtype=object)
    try:
        return np.asarray(item)
    except Exception as e:
        raise TypeError(f"{what}: adapt could not read the data as an array: {e}") from None


def _x_of(item):
    """A dataset's element: its x when it is an (x, y) or (x, y, w) pair of arrays."""
    if isinstance(item, tuple) and len(item) in (2, 3) and isinstance(item[0], (np.ndarray, list, dict)):
        return item[0]
    return item


def _sized(data):
    """len(data), or None where it has none (a pg.data.Dataset that repeats forever)."""
    try:
        return len(data)
    except TypeError:
        return None


def adapt_batches(data, what, steps=None):
    """Yield the batches of ``data`` as numpy arrays (at least one, else ValueError);
    at most ``steps`` of them when given."""
    if data is None:
        raise ValueError(f"{what}: adapt needs data, got None")
    if steps is not None:
        steps = check_int(f"{what}: adapt's steps", steps, 1)
    if isinstance(data, (np.ndarray, list, tuple, str, bytes)) or np.isscalar(data):
        yield _as_array(data, what)
        return
    if isinstance(data, dict):
        _as_array(data, what)
    count = 0
    n = _sized(data) if hasattr(data, "__getitem__") and hasattr(data, "__len__") else None
    if n is not None:
        items = (data[i] for i in range(n))
    elif hasattr(data, "__iter__"):
        if steps is None and hasattr(data, "cardinality") and hasattr(data, "__len__") and \
                _sized(data) is None:
            raise ValueError(f"{what}: the dataset repeats forever (repeat() with no count), so adapt "
                             f"would never end: pass steps (the number of batches to read)")
        items = iter(data)
    else:
        items = iter([data])
    for item in items:
        if steps is not None and count >= steps:
            break
        count += 1
        yield _as_array(_x_of(item), what)
    if count == 0:
        raise ValueError(f"{what}: adapt got no data (an empty dataset or an exhausted generator?)")
