"""Fashion-MNIST: 60,000 + 10,000 clothing images, 28 x 28 uint8, labels 0-9."""

import gzip
import os

import numpy as np

from pyggml.datasets._files import KERAS_DATASETS, fetch

__all__ = ["load_data"]

# (Keras's loader names no hashes for these four: a cached file is taken as it is)
_FILES = ("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
          "t10k-images-idx3-ubyte.gz")


def _read(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def load_data():
    """``(x_train, y_train), (x_test, y_test)``: uint8 images (n, 28, 28) and labels (n,)."""
    paths = [fetch(name, KERAS_DATASETS + name, None, cache_subdir=os.path.join("datasets", "fashion-mnist"))
             for name in _FILES]
    y_train, y_test = _read(paths[0], 8), _read(paths[2], 8)
    x_train = _read(paths[1], 16).reshape(len(y_train), 28, 28)
    x_test = _read(paths[3], 16).reshape(len(y_test), 28, 28)
    return (x_train, y_train), (x_test, y_test)
