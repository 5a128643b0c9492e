"""MNIST: 60,000 + 10,000 handwritten digits, 28 x 28 uint8, labels 0-9 (Keras's file)."""

import numpy as np

from pyggml.datasets._files import KERAS_DATASETS, fetch

__all__ = ["load_data"]


def load_data(path="mnist.npz"):
    """``(x_train, y_train), (x_test, y_test)``: uint8 images (n, 28, 28) and labels (n,)."""
    path = fetch(path, KERAS_DATASETS + "mnist.npz",
                 "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1")
    with np.load(path, allow_pickle=False) as f:
        return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])
