"""California housing prices: 8 features of 20,640 districts and their median values."""

import numpy as np

from pyggml.datasets._files import KERAS_DATASETS, check_split, fetch, shuffled, split_at

__all__ = ["load_data"]


def load_data(version="large", path="california_housing.npz", test_split=0.2, seed=113):
    """``(x_train, y_train), (x_test, y_test)``; ``version="small"`` keeps the first 600 rows."""
    if not isinstance(version, str) or version not in ("large", "small"):
        raise ValueError(f"version must be 'large' or 'small', got {version!r}")
    test_split = check_split(test_split)
    path = fetch(path, KERAS_DATASETS + "california_housing.npz",
                 "1a2e3a52e0398de6463aebe6f4a8da34fb21fbb6b934cf88c3425e766f2a1a6f")
    with np.load(path, allow_pickle=False) as f:
        x, y = f["x"], f["y"]
    if version == "small":
        x, y = x[:600], y[:600]
    return split_at(1 - test_split, *shuffled(seed, x, y))
