"""CIFAR-10: 50,000 + 10,000 colour images, 32 x 32 x 3 uint8, labels 0-9 of shape (n, 1)."""

import os

import numpy as np

from pyggml.datasets._files import fetch, load_pickle

__all__ = ["load_data"]


def load_batch(path, label_key="labels"):
    """(images (n, 3, 32, 32) uint8, labels) of one of the archive's pickled batches."""
    d = {k.decode("utf8") if isinstance(k, bytes) else k: v for k, v in load_pickle(path).items()}
    data = np.asarray(d["data"], np.uint8)
    return data.reshape(data.shape[0], 3, 32, 32), d[label_key]


def channels(x):
    """Images as ``keras.backend.image_data_format()`` lays them out (channels last by default)."""
    from pyggml import backend
    return x.transpose(0, 2, 3, 1) if backend.image_data_format() == "channels_last" else x


def load_data():
    """``(x_train, y_train), (x_test, y_test)``: uint8 images (n, 32, 32, 3) and labels (n, 1)."""
    folder = fetch("cifar-10-batches-py-target", "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
                   "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce", extract=True)
    folder = os.path.join(folder, "cifar-10-batches-py")
    parts = [load_batch(os.path.join(folder, f"data_batch_{i}")) for i in range(1, 6)]
    x_train = np.concatenate([p[0] for p in parts])
    y_train = np.concatenate([np.asarray(p[1], np.uint8) for p in parts])
    x_test, y_test = load_batch(os.path.join(folder, "test_batch"))
    return ((channels(x_train), y_train.reshape(-1, 1)),
            (channels(x_test), np.asarray(y_test, np.uint8).reshape(-1, 1)))
