"""IMDB movie reviews: 25,000 + 25,000 reviews as word-index sequences, labels 0/1."""

import json

import numpy as np

from pyggml.datasets._files import KERAS_DATASETS, fetch, sequences

__all__ = ["load_data", "get_word_index"]


def load_data(path="imdb.npz", num_words=None, skip_top=0, maxlen=None, seed=113, start_char=1, oov_char=2,
              index_from=3, **kwargs):
    """``(x_train, y_train), (x_test, y_test)``: object arrays of int lists and labels (see
    ``_files.sequences`` for the arguments; the train and test parts are shuffled apart)."""
    if kwargs:
        raise TypeError(f"imdb.load_data got unexpected arguments {sorted(kwargs)}")
    path = fetch(path, KERAS_DATASETS + "imdb.npz",
                 "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f")
    with np.load(path, allow_pickle=True) as f:       # (the file's hash is checked: object arrays of lists)
        x_train, y_train, x_test, y_test = f["x_train"], f["y_train"], f["x_test"], f["y_test"]
    rng = np.random.RandomState(seed)                  # one generator: the training order, then the test's
    order_train, order_test = np.arange(len(x_train)), np.arange(len(x_test))
    rng.shuffle(order_train)
    rng.shuffle(order_test)
    # both parts go through the same filtering, then split back at the training part's length
    xs = np.concatenate([x_train[order_train], x_test[order_test]])
    labels = np.concatenate([y_train[order_train], y_test[order_test]])
    n_train = len(x_train)
    if maxlen:
        n_train = sum(1 for x in x_train[order_train] if len(x) + (start_char is not None) < maxlen)
    xs, labels = sequences(xs, labels, start_char, oov_char, index_from, num_words, skip_top, maxlen)
    if maxlen and not (0 < n_train < len(xs)):
        raise ValueError(f"no {'training' if n_train == 0 else 'test'} sequence is shorter than maxlen={maxlen}: "
                         f"increase maxlen")
    return (xs[:n_train], labels[:n_train]), (xs[n_train:], labels[n_train:])


def get_word_index(path="imdb_word_index.json"):
    """{word: index} of the words (index 1 the most frequent; the sequences add ``index_from``)."""
    path = fetch(path, KERAS_DATASETS + "imdb_word_index.json", "bfafd718b763782e994055a2d397834f")
    with open(path) as f:
        return json.load(f)
