"""Offline stand-ins for the data sets the keras-io examples download.

This machine (and CI) reaches no data host, so every port in this folder loads
its data from here instead: data that ships with a Python package (scikit-learn's
8x8 handwritten digits), or synthetic data with the original's shapes, types and
a learnable signal.  The PyTorch twins in ``tools/keras_io_twins/`` load the very
same arrays from here, so a port and its twin always train on identical data.

Each loader returns what the original's loader returns (the same nesting,
dtypes and value ranges), so the port's code after the loading line is the
original's.

The ports also take two flags, read here so that the examples keep their own
code: ``--quick`` (a small run for CI: fewer rows, fewer epochs) and
``--seed N``.
"""

import argparse
import math
import os

import numpy as np

__all__ = ["parse_flags", "mnist_from_digits", "forda_like", "imdb_like", "IMDB_QUICK_TRANSFORMER", "IMDB_QUICK_LSTM",
           "heart_like", "CartPoleEnv", "pyplot"]


def parse_flags(description="", argv=None):
    """(quick, seed) from the command line: ``--quick`` (or the environment's
    ``KERAS_IO_QUICK=1``), ``--seed N`` (default 1337) and
    ``--threads N`` (CPU threads of pyggml, or of PyTorch in a twin; default: the library's
    choice)."""
    import sys
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", default=os.environ.get("KERAS_IO_QUICK", "") not in ("", "0"),
                   help="a small run (CI): fewer rows and epochs (also KERAS_IO_QUICK=1)")
    p.add_argument("--full", dest="quick", action="store_false", help="the original's sizes and epochs (default)")
    p.add_argument("--seed", type=int, default=1337, help="seed of every generator (default 1337)")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (default: the library's choice)")
    a = p.parse_args(argv)
    if a.threads > 0:
        if "pyggml" in sys.modules:
            sys.modules["pyggml"].set_n_threads(a.threads)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(a.threads)
    return a.quick, a.seed


# --- MNIST: scikit-learn's digits, drawn as 28x28 uint8 images --------------------------------------


def mnist_from_digits(seed=0, test_fraction=0.2):
    """``((x_train, y_train), (x_test, y_test))`` as ``keras.datasets.mnist.load_data()``
    gives them: uint8 images ``(n, 28, 28)`` in 0..255, uint8 labels 0..9.

    The 1,797 8x8 digits of scikit-learn (values 0..16) are scaled to 0..255,
    each pixel drawn as a 3x3 block (24x24) and centred in a 28x28 frame with a
    2-pixel margin, as MNIST centres its 20x20 digits in 28x28.  A fifth of every
    digit is held out for the test set (1,437 / 360 images)."""
    from sklearn.datasets import load_digits
    d = load_digits()
    img = np.kron(d.images, np.ones((3, 3)))
    img = np.pad(img, ((0, 0), (2, 2), (2, 2)))
    img = np.round(img * (255.0 / 16.0)).astype(np.uint8)
    y = d.target.astype(np.uint8)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), bool)
    for c in range(10):
        idx = np.flatnonzero(y == c)
        test[rng.choice(idx, int(round(len(idx) * test_fraction)), replace=False)] = True
    tr, te = np.flatnonzero(~test), np.flatnonzero(test)
    tr, te = rng.permutation(tr), rng.permutation(te)
    return (img[tr], y[tr]), (img[te], y[te])


# --- FordA: synthetic engine-noise-like series -------------------------------------------------------


def forda_like(n_train=3601, n_test=1320, length=500, seed=0):
    """``(x_train, y_train), (x_test, y_test)`` as the example's ``readucr`` returns them:
    float64 series ``(n, length)``, each z-normalised, and int labels in {-1, 1}.

    FordA's rows are 500 readings of an engine's noise; the label says whether a
    fault is present.  Here every series is a random low-frequency background
    (three sines of random frequency, amplitude and phase) plus AR(1) noise; a
    fault (label 1) adds short bursts of a fast oscillation (period 4-6
    samples), a healthy engine (label -1) bursts of a slower one (period 9-13),
    each at random places and with random strength, so the class is seen only
    in local shape (what a small convolution and a global average detect)."""
    from scipy.signal import lfilter
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    t = np.arange(length, dtype=np.float64)
    y = rng.integers(0, 2, size=n)
    f = rng.uniform(0.002, 0.03, size=(n, 3, 1))
    s = (rng.uniform(0.5, 1.5, size=(n, 3, 1)) *
         np.sin(2 * math.pi * f * t + rng.uniform(0, 2 * math.pi, size=(n, 3, 1)))).sum(1)
    s += lfilter([1.0], [1.0, -0.6], rng.normal(0, 0.3, size=(n, length)), axis=1)
    period = np.where(y == 1, rng.uniform(4, 6, size=n), rng.uniform(9, 13, size=n))[:, None, None]
    c = rng.uniform(0, length, size=(n, 4, 1))
    w = rng.uniform(8, 20, size=(n, 4, 1))
    used = (np.arange(4)[None, :] < rng.integers(2, 5, size=n)[:, None])[:, :, None]
    env = np.exp(-0.5 * ((t - c) / w) ** 2) * used
    s += (rng.uniform(0.8, 1.6, size=(n, 4, 1)) * env *
          np.sin(2 * math.pi * t / period + rng.uniform(0, 2 * math.pi, size=(n, 4, 1)))).sum(1)
    x = (s - s.mean(1, keepdims=True)) / s.std(1, keepdims=True)
    labels = np.where(y == 1, 1, -1)
    return (x[:n_train], labels[:n_train]), (x[n_train:], labels[n_train:])


# --- IMDB: synthetic reviews as word indices ---------------------------------------------------------


def imdb_like(num_words=20000, n_train=25000, n_test=25000, mean_length=230, sentiment_words=300,
              sentiment_rate=1.0 / 12, own_rate=0.75, seed=0):
    """``((x_train, y_train), (x_test, y_test))`` as ``keras.datasets.imdb.load_data(
    num_words=...)`` gives them: lists of word indices (1 starts a review, 2 is an
    out-of-vocabulary word, 3 + rank for the word of that frequency rank) of
    varying length, labels 0/1 (int64), half of each.

    Words follow Zipf's law over 20,000 ranks.  A review is positive or negative;
    a share ``sentiment_rate`` of its words (one in twelve) are sentiment words
    drawn from ``sentiment_words`` positive or as many negative ones (ranks
    30-3000), from its own class's list with probability ``own_rate`` (0.75)
    and from the other's otherwise.  Lengths are log-normal (median
    ``mean_length`` * 0.8, from 10 to 4 * mean_length)."""
    rng = np.random.default_rng(seed)
    vocab = 20000
    ranks = np.arange(1, vocab + 1)
    zipf = 1.0 / ranks
    zipf /= zipf.sum()
    senti = rng.choice(np.arange(30, 3000), size=2 * sentiment_words, replace=False)
    pos, neg = senti[:sentiment_words], senti[sentiment_words:]
    n = n_train + n_test
    labels = np.repeat([0, 1], (n + 1) // 2)[:n]
    labels = rng.permutation(labels)
    lengths = np.clip(rng.lognormal(math.log(mean_length * 0.8), 0.6, size=n), 10, 4 * mean_length).astype(int)
    xs = []
    for lab, L in zip(labels, lengths):
        words = rng.choice(vocab, size=L, p=zipf)
        is_senti = rng.random(L) < sentiment_rate
        own = rng.random(L) < own_rate
        k = int(is_senti.sum())
        lists = (pos, neg) if lab == 1 else (neg, pos)
        words[is_senti] = np.where(own[is_senti], rng.choice(lists[0], size=k), rng.choice(lists[1], size=k))
        idx = words + 3                                   # rank r (0-based) -> index r + 3
        idx = np.where(idx < num_words, idx, 2)           # the words past num_words are out of vocabulary
        xs.append([1] + idx.tolist())
    x = np.empty(n, dtype=object)
    x[:] = xs
    y = labels.astype(np.int64)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


# the --quick runs' reviews: shorter, and a stronger signal, so that the two epochs of the
# examples bring a model near the best accuracy this data allows
IMDB_QUICK_TRANSFORMER = dict(n_train=3000, n_test=2000, mean_length=80, sentiment_words=10, sentiment_rate=1.0 / 4,
                              own_rate=0.9)
IMDB_QUICK_LSTM = dict(n_train=3000, n_test=1200, mean_length=40, sentiment_words=10, sentiment_rate=1.0 / 4,
                       own_rate=0.9)


# --- the heart disease CSV: a synthetic table with its columns ---------------------------------------


def heart_like(n=303, sharpness=1.0, seed=0):
    """A dict of columns, ready for ``pandas.DataFrame``, shaped like the
    Cleveland heart disease CSV of the example (303 rows, 13 features and
    ``target``): int64 columns age, sex, cp, trestbps, chol, fbs, restecg,
    thalach, exang, slope, ca, target; float64 oldpeak; str thal ("fixed",
    "normal", "reversible").  Marginals follow the real file's ranges; the
    target comes from a logistic model of cp, thalach, oldpeak, ca, thal, exang,
    sex and age (about 30% positive); ``sharpness`` scales its logit (a larger
    one makes the target less noisy)."""
    rng = np.random.default_rng(seed)
    age = rng.normal(54, 9, n).clip(29, 77).round().astype(np.int64)
    sex = (rng.random(n) < 0.68).astype(np.int64)
    cp = rng.choice([0, 1, 2, 3, 4], size=n, p=[0.02, 0.08, 0.16, 0.28, 0.46]).astype(np.int64)
    trestbps = rng.normal(131, 17, n).clip(94, 200).round().astype(np.int64)
    chol = rng.normal(246, 51, n).clip(126, 564).round().astype(np.int64)
    fbs = (rng.random(n) < 0.15).astype(np.int64)
    restecg = rng.choice([0, 1, 2], size=n, p=[0.5, 0.02, 0.48]).astype(np.int64)
    thalach = (rng.normal(150, 22, n) - 0.6 * (age - 54)).clip(71, 202).round().astype(np.int64)
    exang = (rng.random(n) < 0.33).astype(np.int64)
    oldpeak = rng.gamma(1.0, 1.05, n).clip(0, 6.2).round(1)
    slope = rng.choice([1, 2, 3], size=n, p=[0.47, 0.46, 0.07]).astype(np.int64)
    ca = rng.choice([0, 1, 2, 3], size=n, p=[0.59, 0.21, 0.13, 0.07]).astype(np.int64)
    thal = rng.choice(["normal", "fixed", "reversible"], size=n, p=[0.55, 0.06, 0.39])
    z = (-2.2 + 1.3 * (cp == 4) - 0.035 * (thalach - 150) + 0.7 * oldpeak + 0.9 * ca
         + 1.4 * (thal == "reversible") + 0.8 * (thal == "fixed") + 0.8 * exang + 0.6 * sex
         + 0.03 * (age - 54))
    target = (rng.random(n) < 1 / (1 + np.exp(-sharpness * z))).astype(np.int64)
    return {"age": age, "sex": sex, "cp": cp, "trestbps": trestbps, "chol": chol, "fbs": fbs,
            "restecg": restecg, "thalach": thalach, "exang": exang, "oldpeak": oldpeak, "slope": slope,
            "ca": ca, "thal": thal.astype(str), "target": target}


# --- CartPole-v0, as gym's old API gives it --------------------------------------------------------


class CartPoleEnv:
    """gym's ``CartPole-v0`` (the classic cart-pole of Barto, Sutton and Anderson,
    1983) with gym's pre-0.26 interface: ``seed(s)``, ``reset() -> state``,
    ``step(action) -> (state, reward, done, info)``.  Force +-10 N, cart 1 kg, pole
    0.1 kg with its centre of mass 0.5 m from the pivot, Euler steps of 0.02 s;
    ``done`` once |x| > 2.4 m, the pole tilts past 12 degrees, or after 200
    steps; every step earns 1."""

    def __init__(self):
        self.rng = np.random.default_rng()
        self.state = None
        self.t = 0

    def seed(self, seed=None):
        self.rng = np.random.default_rng(seed)
        return [seed]

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        self.t = 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if int(action) == 1 else -10.0
        total, pole, half = 1.1, 0.1, 0.5
        sin, cos = math.sin(theta), math.cos(theta)
        push = (force + pole * half * theta_dot * theta_dot * sin) / total
        theta_acc = (9.8 * sin - cos * push) / (half * (4.0 / 3.0 - pole * cos * cos / total))
        x_acc = push - pole * half * theta_acc * cos / total
        x, theta = x + 0.02 * x_dot, theta + 0.02 * theta_dot
        x_dot, theta_dot = x_dot + 0.02 * x_acc, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.t += 1
        done = bool(abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360 or self.t >= 200)
        return self.state.astype(np.float32), 1.0, done, {}


# --- plots: matplotlib when installed, else nothing -------------------------------------------------


class _NoPlots:
    """Stands in for ``matplotlib.pyplot`` where it is not installed: every call does nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: self


def pyplot():
    """``matplotlib.pyplot`` on its file backend (``show()`` draws nothing on screen),
    or a stand-in whose calls do nothing when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return _NoPlots()
