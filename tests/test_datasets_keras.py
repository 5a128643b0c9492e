"""keras.datasets's loaders (pyggml.datasets) on small files laid out as the real ones (the
download and its hash check are get_file's, tested in test_utils_extra.py): what they return,
the seeded shuffles and splits, the word-index sequences, and a pickle naming another class
refused."""

import gzip
import os
import pickle

import numpy as np
import pytest

import pyggml as keras
from pyggml.datasets import _files

RNG = np.random.default_rng(5)


@pytest.fixture
def files(tmp_path, monkeypatch):
    """fetch gives the file made here under the name asked for (extracted archives: a folder)."""
    made = {}

    def fake(fname, origin, file_hash, **kwargs):
        assert origin.startswith("https://") and fname in made, (fname, origin)
        return made[fname]
    monkeypatch.setattr(_files, "fetch", fake)
    for mod in ("mnist", "fashion_mnist", "cifar10", "cifar100", "boston_housing", "california_housing", "imdb",
                "reuters"):
        monkeypatch.setattr(getattr(keras.datasets, mod), "fetch", fake)
    return tmp_path, made


def test_mnist_and_fashion_mnist(files):
    tmp, made = files
    a = {k: RNG.integers(0, 255, s).astype(np.uint8) for k, s in
         (("x_train", (6, 28, 28)), ("x_test", (4, 28, 28)))}
    a.update(y_train=np.arange(6, dtype=np.uint8), y_test=np.arange(4, dtype=np.uint8))
    np.savez(tmp / "mnist.npz", **a)
    made["mnist.npz"] = str(tmp / "mnist.npz")
    (xt, yt), (xs, ys) = keras.datasets.mnist.load_data()
    np.testing.assert_array_equal(xt, a["x_train"])
    np.testing.assert_array_equal(ys, a["y_test"])
    for name, arr, head in (("train-labels-idx1-ubyte.gz", a["y_train"], 8),
                            ("train-images-idx3-ubyte.gz", a["x_train"], 16),
                            ("t10k-labels-idx1-ubyte.gz", a["y_test"], 8),
                            ("t10k-images-idx3-ubyte.gz", a["x_test"], 16)):
        with gzip.open(tmp / name, "wb") as f:
            f.write(b"\0" * head + arr.tobytes())
        made[name] = str(tmp / name)
    (xt, yt), (xs, ys) = keras.datasets.fashion_mnist.load_data()
    assert xt.shape == (6, 28, 28) and xt.dtype == np.uint8
    np.testing.assert_array_equal(xs, a["x_test"])
    np.testing.assert_array_equal(yt, a["y_train"])


def _pickle_batch(path, data, labels):
    with open(path, "wb") as f:
        pickle.dump({k.encode(): v for k, v in dict(data=data, **labels).items()}, f, protocol=2)


def test_cifar10_and_cifar100_give_channels_last_images_and_label_columns(files):
    tmp, made = files
    root = tmp / "c10"
    os.makedirs(root / "cifar-10-batches-py")
    batches = [RNG.integers(0, 255, (2, 3072)).astype(np.uint8) for _ in range(6)]
    for i, b in enumerate(batches[:5], start=1):
        _pickle_batch(root / "cifar-10-batches-py" / f"data_batch_{i}", b, {"labels": [i, i + 1]})
    _pickle_batch(root / "cifar-10-batches-py" / "test_batch", batches[5], {"labels": [0, 9]})
    made["cifar-10-batches-py-target"] = str(root)
    (xt, yt), (xs, ys) = keras.datasets.cifar10.load_data()
    assert xt.shape == (10, 32, 32, 3) and yt.shape == (10, 1) and xt.dtype == np.uint8
    np.testing.assert_array_equal(xt[0], batches[0][0].reshape(3, 32, 32).transpose(1, 2, 0))
    np.testing.assert_array_equal(yt[:, 0], [1, 2, 2, 3, 3, 4, 4, 5, 5, 6])
    np.testing.assert_array_equal(ys[:, 0], [0, 9])
    root = tmp / "c100"
    os.makedirs(root / "cifar-100-python")
    for part, b in (("train", batches[0]), ("test", batches[1])):
        _pickle_batch(root / "cifar-100-python" / part, b, {"fine_labels": [57, 3], "coarse_labels": [12, 1]})
    made["cifar-100-python-target"] = str(root)
    (xt, yt), _ = keras.datasets.cifar100.load_data(label_mode="coarse")
    np.testing.assert_array_equal(yt[:, 0], [12, 1])
    assert keras.datasets.cifar100.load_data()[0][1][0, 0] == 57
    with pytest.raises(ValueError, match="label_mode"):
        keras.datasets.cifar100.load_data("medium")


def test_a_pickle_naming_another_class_is_refused(files):
    tmp, made = files
    root = tmp / "bad"
    os.makedirs(root / "cifar-10-batches-py")
    with open(root / "cifar-10-batches-py" / "data_batch_1", "wb") as f:
        pickle.dump({b"data": os.system, b"labels": []}, f, protocol=2)
    made["cifar-10-batches-py-target"] = str(root)
    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system|nt.system"):
        keras.datasets.cifar10.load_data()


@pytest.mark.parametrize("mod, n", [("boston_housing", 50), ("california_housing", 700)])
def test_housing_shuffles_by_the_seed_and_splits(files, mod, n):
    tmp, made = files
    x, y = RNG.random((n, 3)), np.arange(n, dtype=float)
    np.savez(tmp / f"{mod}.npz", x=x, y=y)
    made[f"{mod}.npz"] = str(tmp / f"{mod}.npz")
    (xt, yt), (xs, ys) = getattr(keras.datasets, mod).load_data(test_split=0.2, seed=7)
    order = np.arange(n)
    np.random.RandomState(7).shuffle(order)
    k = int(n * 0.8)
    np.testing.assert_array_equal(yt, y[order[:k]])
    np.testing.assert_array_equal(xs, x[order[k:]])
    with pytest.raises(ValueError, match="test_split"):
        getattr(keras.datasets, mod).load_data(test_split=1.0)
    if mod == "california_housing":
        (xt, yt), (xs, ys) = keras.datasets.california_housing.load_data(version="small")
        assert len(xt) + len(xs) == 600


def _objects(lists):
    out = np.empty(len(lists), dtype=object)
    out[:] = lists
    return out


def _sequence_ref(xs, start_char=1, index_from=3, oov_char=2, num_words=None, skip_top=0):
    xs = [[start_char] + [w + index_from for w in x] for x in xs]
    top = num_words or max(max(x) for x in xs)
    return [[w if skip_top <= w < top else oov_char for w in x] for x in xs]


def test_imdb_and_reuters_sequences(files):
    tmp, made = files
    train = [list(RNG.integers(1, 30, RNG.integers(2, 9))) for _ in range(12)]
    test = [list(RNG.integers(1, 30, RNG.integers(2, 9))) for _ in range(8)]
    np.savez(tmp / "imdb.npz", x_train=_objects(train), y_train=np.arange(12) % 2, x_test=_objects(test),
             y_test=np.arange(8) % 2)
    made["imdb.npz"] = str(tmp / "imdb.npz")
    (xt, yt), (xs, ys) = keras.datasets.imdb.load_data(num_words=20)
    rng = np.random.RandomState(113)
    o1, o2 = np.arange(12), np.arange(8)
    rng.shuffle(o1)
    rng.shuffle(o2)
    want = _sequence_ref([train[i] for i in o1] + [test[i] for i in o2], num_words=20)
    assert xt.dtype == object and len(xt) == 12 and len(xs) == 8
    assert [list(x) for x in xt] == want[:12] and [list(x) for x in xs] == want[12:]
    np.testing.assert_array_equal(yt, (np.arange(12) % 2)[o1])
    (xt, _), (xs, _) = keras.datasets.imdb.load_data(maxlen=8)
    assert all(len(x) < 8 for x in list(xt) + list(xs))
    assert len(xt) == sum(len(train[i]) + 1 < 8 for i in o1)
    wires = [list(RNG.integers(1, 50, RNG.integers(2, 9))) for _ in range(20)]
    np.savez(tmp / "reuters.npz", x=_objects(wires), y=np.arange(20) % 46)
    made["reuters.npz"] = str(tmp / "reuters.npz")
    (xt, yt), (xs, ys) = keras.datasets.reuters.load_data(test_split=0.25, skip_top=5, oov_char=None)
    o = np.arange(20)
    np.random.RandomState(113).shuffle(o)
    shifted = [[1] + [w + 3 for w in wires[i]] for i in o]
    top = max(max(x) for x in shifted)               # (Keras's: without num_words the largest id is left out too)
    ref = [[w for w in x if 5 <= w < top] for x in shifted]
    assert [list(x) for x in xt] == ref[:15] and [list(x) for x in xs] == ref[15:]
    assert len(keras.datasets.reuters.get_label_names()) == 46
