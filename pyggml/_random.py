"""The library's random generator: weight initialisation, dropout, shuffling."""

import numpy as np

from pyggml._validation import is_int

_seed = None
_rng = None          # made on first use: numpy.random costs import time


def set_seed(seed):
    """Seed the generator used when no explicit seed is given."""
    global _rng, _seed
    if seed is not None and (not is_int(seed) or seed < 0):
        raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    _seed = None if seed is None else int(seed)
    _rng = np.random.default_rng(_seed)


def rng(seed=None):
    """A generator: a fresh one for an explicit seed, else the library's."""
    if seed is not None:
        if not is_int(seed) or seed < 0:
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
        return np.random.default_rng(int(seed))
    global _rng
    if _rng is None:
        _rng = np.random.default_rng(_seed)
    return _rng


def draw_values(generator, shape, spec):
    """The values of a random tensor of a graph, redrawn before each step: ``spec`` is a
    dropout rate (a keep mask of 0 and 1/(1-rate)) or a function draw(rng, shape) -> array
    (float32, or int32 where it gives integers: a gather's rows)."""
    if callable(spec):
        a = np.asarray(spec(generator, tuple(shape)))
        return np.ascontiguousarray(a, dtype=np.int32 if a.dtype.kind in "biu" else np.float32).reshape(shape)
    if spec >= 1.0:
        return np.zeros(shape, np.float32)       # Keras's Dropout(1.0): everything dropped
    return (generator.random(shape) >= spec).astype(np.float32) / (1.0 - spec)
