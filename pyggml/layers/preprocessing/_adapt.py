"""The data ``adapt`` takes, as numpy batches.

Keras's preprocessing layers adapt on an array (or a list: one batch), on a
dataset of batches (any iterable or generator; a ``PyDataset`` is read by
index), and, where a dataset yields ``(x, y)`` pairs, on their ``x``."""

import numpy as np

__all__ = ["adapt_batches"]


def _as_array(item, what):
    if isinstance(item, dict):
        raise TypeError(f"{what}: adapt takes the data of one feature, got a dict; pick the feature "
                        f"(e.g. data[name]) first")
    try:
        return np.asarray(item)
    except Exception as e:
        raise TypeError(f"{what}: adapt could not read the data as an array: {e}") from None


def _x_of(item):
    """A dataset's element: its x when it is an (x, y) or (x, y, w) pair of arrays."""
    if isinstance(item, tuple) and len(item) in (2, 3) and isinstance(item[0], (np.ndarray, list, dict)):
        return item[0]
    return item


def adapt_batches(data, what):
    """Yield the batches of ``data`` as numpy arrays (at least one, else ValueError)."""
    if data is None:
        raise ValueError(f"{what}: adapt needs data, got None")
    if isinstance(data, (np.ndarray, list, tuple, str, bytes)) or np.isscalar(data):
        yield _as_array(data, what)
        return
    if isinstance(data, dict):
        _as_array(data, what)
    count = 0
    if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
        items = (data[i] for i in range(len(data)))
    elif hasattr(data, "__iter__"):
        items = iter(data)
    else:
        items = iter([data])
    for item in items:
        count += 1
        yield _as_array(_x_of(item), what)
    if count == 0:
        raise ValueError(f"{what}: adapt got no data (an empty dataset or an exhausted generator?)")
