"""Weight initialisers, as Keras: glorot-uniform kernels, zero biases."""

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


_BY_NAME = {"glorot_uniform": glorot_uniform, "orthogonal": orthogonal, "zeros": zeros, "ones": ones,
            "uniform": uniform_embedding}


def get(name):
    if callable(name):
        return name
    if name not in _BY_NAME:
        raise ValueError(f"unknown initializer {name!r}; known: {sorted(_BY_NAME)}")
    return _BY_NAME[name]
