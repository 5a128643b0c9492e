"""CIFAR-100: 50,000 + 10,000 colour images, 32 x 32 x 3 uint8, labels of 100 fine classes or
20 coarse ones, of shape (n, 1)."""

import os

import numpy as np

from pyggml.datasets._files import fetch
from pyggml.datasets.cifar10 import channels, load_batch

__all__ = ["load_data"]


def load_data(label_mode="fine"):
    """``(x_train, y_train), (x_test, y_test)``; ``label_mode``: "fine" or "coarse"."""
    if not isinstance(label_mode, str) or label_mode not in ("fine", "coarse"):
        raise ValueError(f"label_mode must be 'fine' or 'coarse', got {label_mode!r}")
    folder = fetch("cifar-100-python-target", "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
                   "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7", extract=True)
    folder = os.path.join(folder, "cifar-100-python")
    x_train, y_train = load_batch(os.path.join(folder, "train"), label_key=f"{label_mode}_labels")
    x_test, y_test = load_batch(os.path.join(folder, "test"), label_key=f"{label_mode}_labels")
    return ((channels(x_train), np.asarray(y_train).reshape(-1, 1)),
            (channels(x_test), np.asarray(y_test).reshape(-1, 1)))
