"""What the loaders share: Keras's download folder and files (``~/.keras/datasets``, or
``$KERAS_HOME``: a file Keras downloaded is found there, and the reverse), each checked against
its sha256 (or md5) before it is read; a seeded shuffle and split; pickles read with only the
classes a numpy array needs."""

import io
import pickle

import numpy as np

from pyggml.utils.file_utils import get_file

__all__ = ["fetch", "KERAS_DATASETS", "shuffled", "split_at", "load_pickle", "check_split", "sequences"]

# the folder Keras's own loaders download from
KERAS_DATASETS = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"


def fetch(fname, origin, file_hash, **kwargs):
    """The cached file's path (downloaded once, its hash checked)."""
    return get_file(fname, origin=origin, file_hash=file_hash, **kwargs)


def check_split(test_split):
    if isinstance(test_split, bool) or not isinstance(test_split, (int, float)) or not 0 <= test_split < 1:
        raise ValueError(f"test_split must be a number in [0, 1), got {test_split!r}")
    return float(test_split)


def shuffled(seed, *arrays):
    """The arrays in one order drawn from ``seed`` (numpy's RandomState, as Keras's loaders)."""
    order = np.arange(len(arrays[0]))
    np.random.RandomState(seed).shuffle(order)
    return [a[order] for a in arrays]


def split_at(fraction, *arrays):
    """((first part of each), (the rest)): the first ``fraction`` of the rows, and the others."""
    k = int(len(arrays[0]) * fraction)
    return tuple(np.array(a[:k]) for a in arrays), tuple(np.array(a[k:]) for a in arrays)


_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"), ("numpy", "dtype"), ("copy_reg", "_reconstructor"),
            ("copyreg", "_reconstructor"), ("__builtin__", "object"), ("builtins", "object"),
            ("_codecs", "encode")}                     # (bytes in a protocol-2 pickle)


class _ArraysOnly(pickle.Unpickler):
    """Reads dicts, lists and numpy arrays; any other class in the file is refused."""

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"the dataset file names {module}.{name}, which a dataset does not hold")
        return super().find_class(module, name)


def load_pickle(path):
    with open(path, "rb") as f:
        return _ArraysOnly(io.BufferedReader(f), encoding="bytes").load()


def sequences(xs, labels, start_char, oov_char, index_from, num_words, skip_top, maxlen):
    """Keras's word-index sequences (imdb, reuters), already shuffled: each starts with
    ``start_char``, its ids moved up by ``index_from``; those of ``maxlen`` or more dropped; ids
    outside [skip_top, num_words) become ``oov_char`` (or are dropped without one)."""
    labels = np.asarray(labels)
    if start_char is not None:
        xs = [[start_char] + [w + index_from for w in x] for x in xs]
    elif index_from:
        xs = [[w + index_from for w in x] for x in xs]
    else:
        xs = [list(x) for x in xs]
    if maxlen:
        kept = [i for i, x in enumerate(xs) if len(x) < maxlen]
        xs, labels = [xs[i] for i in kept], labels[kept]
    if not xs:
        raise ValueError(f"no sequence is shorter than maxlen={maxlen}: increase maxlen")
    if not num_words:
        num_words = max(max(x) for x in xs if x)
    if oov_char is not None:
        xs = [[w if skip_top <= w < num_words else oov_char for w in x] for x in xs]
    else:
        xs = [[w for w in x if skip_top <= w < num_words] for x in xs]
    out = np.empty(len(xs), dtype=object)
    out[:] = xs
    return out, np.asarray(labels)
