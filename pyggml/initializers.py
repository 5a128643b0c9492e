"""Weight initialisers, as Keras: glorot-uniform kernels, zero biases; Keras's others by
name ("he_normal", "lecun_uniform", "random_normal", "truncated_normal", ...) and as objects
(``HeNormal(seed=None)``, ``RandomNormal(mean, stddev)``, ``Constant(value)``,
``VarianceScaling(scale, mode, distribution)``, ...).  Fans follow each weight's layout."""

import numpy as np


def _fans(shape, kind):
    # shapes are in PyTorch's layout: (out, in) for dense, (out, in, *kernel) for conv
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    if kind == "in_out":          # (in, out) layouts, e.g. Embedding
        return shape[0] * receptive, shape[1] * receptive
    return shape[1] * receptive, shape[0] * receptive


def glorot_uniform(shape, rng, layout="out_in"):
    fan_in, fan_out = _fans(shape, layout)
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(np.float32)


def orthogonal(shape, rng, layout="out_in"):
    rows, cols = shape[0], int(np.prod(shape[1:]))
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return q[:rows, :cols].reshape(shape).astype(np.float32)


def uniform_embedding(shape, rng, layout="in_out"):
    return rng.uniform(-0.05, 0.05, size=shape).astype(np.float32)


def zeros(shape, rng=None, layout=None):
    return np.zeros(shape, dtype=np.float32)


def ones(shape, rng=None, layout=None):
    return np.ones(shape, dtype=np.float32)


# --- Keras's other initializers ------------------------------------------------------------------

def _truncated(rng, shape, std):
    """Normal values of ``std`` redrawn until within two standard deviations, as Keras's."""
    z = rng.standard_normal(size=shape)
    bad = np.abs(z) > 2.0
    while np.any(bad):
        z[bad] = rng.standard_normal(size=int(bad.sum()))
        bad = np.abs(z) > 2.0
    return z * std


def variance_scaling(shape, rng, layout="out_in", scale=1.0, mode="fan_in", distribution="truncated_normal"):
    fan_in, fan_out = _fans(shape, layout)
    n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[mode]
    var = scale / max(1.0, float(n))
    if distribution == "truncated_normal":
        # the truncation at two standard deviations shrinks the spread by this factor
        return _truncated(rng, shape, np.sqrt(var) / 0.87962566103423978).astype(np.float32)
    if distribution == "untruncated_normal":
        return rng.normal(0.0, np.sqrt(var), size=shape).astype(np.float32)
    limit = np.sqrt(3.0 * var)
    return rng.uniform(-limit, limit, size=shape).astype(np.float32)


def glorot_normal(shape, rng, layout="out_in"):
    return variance_scaling(shape, rng, layout, 1.0, "fan_avg", "truncated_normal")


def he_normal(shape, rng, layout="out_in"):
    return variance_scaling(shape, rng, layout, 2.0, "fan_in", "truncated_normal")


def he_uniform(shape, rng, layout="out_in"):
    return variance_scaling(shape, rng, layout, 2.0, "fan_in", "uniform")


def lecun_normal(shape, rng, layout="out_in"):
    return variance_scaling(shape, rng, layout, 1.0, "fan_in", "truncated_normal")


def lecun_uniform(shape, rng, layout="out_in"):
    return variance_scaling(shape, rng, layout, 1.0, "fan_in", "uniform")


def random_normal(shape, rng, layout=None):
    return rng.normal(0.0, 0.05, size=shape).astype(np.float32)


def random_uniform(shape, rng, layout=None):
    return rng.uniform(-0.05, 0.05, size=shape).astype(np.float32)


def truncated_normal(shape, rng, layout=None):
    return _truncated(rng, shape, 0.05).astype(np.float32)


def identity(shape, rng=None, layout=None):
    if len(shape) != 2:
        raise ValueError(f"the identity initializer needs a 2-D weight, got shape {tuple(shape)}")
    return np.eye(shape[0], shape[1], dtype=np.float32)


class Initializer:
    """Keras's initializer objects: ``init(shape)`` draws values (``seed``: the same each
    time); a layer calls ``init(shape, rng, layout)`` with the weight's layout."""

    def __init__(self, seed=None):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"{type(self).__name__}: seed must be an int or None, got {seed!r}")
        self.seed = seed

    def __call__(self, shape, rng=None, layout="out_in", dtype=None):
        if self.seed is not None or rng is None:
            from pyggml import _random
            rng = np.random.default_rng(self.seed) if self.seed is not None else _random.rng()
        return self.draw(tuple(int(d) for d in shape), rng, layout)

    def get_config(self):
        return {"seed": self.seed} if self.seed is not None else {}


def _class(name, fn, doc):
    cls = type(name, (Initializer,), {"draw": lambda self, shape, rng, layout: fn(shape, rng, layout), "__doc__": doc})
    return cls


GlorotUniform = _class("GlorotUniform", glorot_uniform, "Uniform in +-sqrt(6 / (fan_in + fan_out)).")
GlorotNormal = _class("GlorotNormal", glorot_normal, "Truncated normal, variance 1 / fan_avg.")
HeNormal = _class("HeNormal", he_normal, "Truncated normal, variance 2 / fan_in.")
HeUniform = _class("HeUniform", he_uniform, "Uniform, variance 2 / fan_in.")
LecunNormal = _class("LecunNormal", lecun_normal, "Truncated normal, variance 1 / fan_in.")
LecunUniform = _class("LecunUniform", lecun_uniform, "Uniform, variance 1 / fan_in.")
Orthogonal = _class("Orthogonal", orthogonal, "An orthogonal matrix (rows or columns).")
Zeros = _class("Zeros", zeros, "Zeros.")
Ones = _class("Ones", ones, "Ones.")
Identity = _class("Identity", identity, "The identity matrix.")


class RandomNormal(Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(seed)
        self.mean, self.stddev = float(mean), float(stddev)

    def draw(self, shape, rng, layout):
        return rng.normal(self.mean, self.stddev, size=shape).astype(np.float32)


class RandomUniform(Initializer):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        super().__init__(seed)
        if not maxval > minval:
            raise ValueError(f"RandomUniform: maxval must be above minval, got {minval!r} and {maxval!r}")
        self.minval, self.maxval = float(minval), float(maxval)

    def draw(self, shape, rng, layout):
        return rng.uniform(self.minval, self.maxval, size=shape).astype(np.float32)


class TruncatedNormal(Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(seed)
        self.mean, self.stddev = float(mean), float(stddev)

    def draw(self, shape, rng, layout):
        return (self.mean + _truncated(rng, shape, self.stddev)).astype(np.float32)


class Constant(Initializer):
    def __init__(self, value=0.0):
        super().__init__(None)
        self.value = float(value)

    def draw(self, shape, rng, layout):
        return np.full(shape, self.value, dtype=np.float32)


class VarianceScaling(Initializer):
    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None):
        super().__init__(seed)
        if not scale > 0:
            raise ValueError(f"VarianceScaling: scale must be positive, got {scale!r}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"VarianceScaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError(f"VarianceScaling: distribution must be 'truncated_normal', 'untruncated_normal' or "
                             f"'uniform', got {distribution!r}")
        self.scale, self.mode, self.distribution = float(scale), mode, distribution

    def draw(self, shape, rng, layout):
        return variance_scaling(shape, rng, layout, self.scale, self.mode, self.distribution)


_BY_NAME = {"glorot_uniform": glorot_uniform, "orthogonal": orthogonal, "zeros": zeros, "ones": ones,
            "uniform": uniform_embedding, "glorot_normal": glorot_normal, "he_normal": he_normal,
            "he_uniform": he_uniform, "lecun_normal": lecun_normal, "lecun_uniform": lecun_uniform,
            "random_normal": random_normal, "random_uniform": random_uniform, "truncated_normal": truncated_normal,
            "identity": identity, "variance_scaling": variance_scaling}
# Keras's class names as strings too ("HeNormal")
_BY_NAME.update({"GlorotUniform": glorot_uniform, "GlorotNormal": glorot_normal, "HeNormal": he_normal,
                 "HeUniform": he_uniform, "LecunNormal": lecun_normal, "LecunUniform": lecun_uniform,
                 "Orthogonal": orthogonal, "Zeros": zeros, "Ones": ones, "RandomNormal": random_normal,
                 "RandomUniform": random_uniform, "TruncatedNormal": truncated_normal, "Identity": identity})


def get(name):
    if callable(name):
        return name
    if name not in _BY_NAME:
        raise ValueError(f"unknown initializer {name!r}; known: {sorted(_BY_NAME)}")
    return _BY_NAME[name]
