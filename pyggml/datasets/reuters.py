"""Reuters newswires: 11,228 wires as word-index sequences, labels among 46 topics."""

import json

import numpy as np

from pyggml.datasets._files import KERAS_DATASETS, check_split, fetch, sequences, shuffled

__all__ = ["load_data", "get_word_index", "get_label_names"]

_LABELS = ("cocoa", "grain", "veg-oil", "earn", "acq", "wheat", "copper", "housing", "money-supply", "coffee",
           "sugar", "trade", "reserves", "ship", "cotton", "carcass", "crude", "nat-gas", "cpi", "money-fx",
           "interest", "gnp", "meal-feed", "alum", "oilseed", "gold", "tin", "strategic-metal", "livestock",
           "retail", "ipi", "iron-steel", "rubber", "heat", "jobs", "lei", "bop", "zinc", "orange", "pet-chem",
           "dlr", "gas", "silver", "wpi", "hog", "lead")


def load_data(path="reuters.npz", num_words=None, skip_top=0, maxlen=None, test_split=0.2, seed=113, start_char=1,
              oov_char=2, index_from=3):
    """``(x_train, y_train), (x_test, y_test)``: object arrays of int lists and topic labels,
    shuffled by ``seed``, the last ``test_split`` for testing."""
    test_split = check_split(test_split)
    path = fetch(path, KERAS_DATASETS + "reuters.npz",
                 "d6586e694ee56d7a4e65172e12b3e987c03096cb01eab99753921ef915959916")
    with np.load(path, allow_pickle=True) as f:       # (the file's hash is checked: object arrays of lists)
        xs, labels = f["x"], f["y"]
    xs, labels = sequences(*shuffled(seed, xs, labels), start_char, oov_char, index_from, num_words, skip_top,
                           maxlen)
    k = int(len(xs) * (1 - test_split))
    return (xs[:k], labels[:k]), (xs[k:], labels[k:])


def get_word_index(path="reuters_word_index.json"):
    """{word: index} of the words (the sequences add ``index_from``)."""
    path = fetch(path, KERAS_DATASETS + "reuters_word_index.json", "4d44cc38712099c9e383dc6e5f11a921")
    with open(path) as f:
        return json.load(f)


def get_label_names():
    """The 46 topics, in label order."""
    return _LABELS
