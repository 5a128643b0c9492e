"""Boston housing prices: 13 features of 506 districts and their median values (Keras's file;
the data holds a variable about race that makes it a poor benchmark)."""

import numpy as np

from pyggml.datasets._files import KERAS_DATASETS, check_split, fetch, shuffled, split_at

__all__ = ["load_data"]


def load_data(path="boston_housing.npz", test_split=0.2, seed=113):
    """``(x_train, y_train), (x_test, y_test)``, shuffled by ``seed``, the last ``test_split`` for testing."""
    test_split = check_split(test_split)
    path = fetch(path, KERAS_DATASETS + "boston_housing.npz",
                 "f553886a1f8d56431e820c5b82552d9d95cfcb96d1e678153f8839538947dff5")
    with np.load(path, allow_pickle=False) as f:
        x, y = f["x"], f["y"]
    return split_at(1 - test_split, *shuffled(seed, x, y))
