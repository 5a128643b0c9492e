"""``pg.random``: Keras's ``keras.random``.

Inside a layer's ``call`` (a model's graph) the draws are a tensor the graph
fills before every step, training or predicting, so a VAE's sampling layer gets
new noise each time (``normal(shape=(ops.shape(z)[0], d))``).  Called outside
a graph they return numpy arrays with ``.numpy()``, as pyggml.ops's results.
``seed`` is an int or a ``SeedGenerator``: a layer that owns a generator draws a
reproducible sequence of its own; without a seed the draws come from pyggml's
generator (``pg.set_seed`` / ``pg.utils.set_random_seed``).  (With an int seed
Keras repeats the same values on every call; here an int seed starts a
reproducible sequence, as a ``SeedGenerator`` does.)
"""

import numpy as np

from pyggml import _random, _scope
from pyggml._tensor_arrays import as_ops_result
from pyggml._validation import is_int, is_number
from pyggml.saving.object_registration import register_builtin
from pyggml.variables import Variable

__all__ = ["SeedGenerator", "normal", "uniform", "truncated_normal", "randint", "dropout", "shuffle",
           "categorical", "gamma", "beta", "binomial"]


@register_builtin
class SeedGenerator:
    """A generator of its own, for reproducible draws (``seed=None``: from pyggml's)."""

    def __init__(self, seed=None, name=None, **kwargs):
        if seed is not None and (not is_int(seed) or seed < 0):
            raise ValueError(f"SeedGenerator: seed must be a non-negative int or None, got {seed!r}")
        self.seed = None if seed is None else int(seed)
        self.name = name
        self._rng = np.random.default_rng(self.seed if self.seed is not None else _random.rng().integers(2 ** 63))

    def next(self):
        """A fresh numpy generator drawn from this one (one per call)."""
        return np.random.default_rng(self._rng.integers(2 ** 63))

    def get_config(self):
        return {"seed": self.seed, "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _generator(seed):
    """The numpy generator a call draws from."""
    if seed is None:
        return _random.rng()
    if isinstance(seed, SeedGenerator):
        return seed._rng
    if is_int(seed) and seed >= 0:
        return np.random.default_rng(int(seed))
    raise ValueError(f"seed must be None, a non-negative int or a SeedGenerator, got {seed!r}")


def _shape(shape, what):
    """A draw's shape: positive ints (0-d integer arrays too: ops.shape arithmetic), or () for one
    number (Keras's scalar draw)."""
    def dim(d):
        return int(d) if isinstance(d, (np.ndarray, np.generic)) and np.ndim(d) == 0 and \
            np.asarray(d).dtype.kind in "iu" else d
    shape = (dim(shape),) if is_int(dim(shape)) else tuple(dim(d) for d in shape)
    if not all(is_int(d) and d > 0 for d in shape):
        raise ValueError(f"{what}: shape must be positive ints, got {shape!r}")
    if len(shape) > 4:
        raise ValueError(f"{what}: at most 4 dimensions, got {shape!r}")
    return tuple(int(d) for d in shape)


def _dtype(dtype, what):
    if dtype not in (None, "float32", "float64", "float16", "bfloat16"):
        raise ValueError(f"{what}: dtype must be a float type ('float32'), got {dtype!r}")


def _draw(what, shape, seed, fn):
    """fn(rng, shape) drawn now (no graph) or by the graph before each step (a graph)."""
    shape = _shape(shape, what)
    gen = _generator(seed)
    b = _scope.current()
    if b is None:
        return as_ops_result(np.asarray(fn(gen, shape), dtype=np.float32))
    if not hasattr(b, "random_values"):
        raise RuntimeError(f"{what}: this graph cannot hold random values")
    shape = shape or (1,)                 # one number (ggml has no 0-d tensors)
    if seed is None:
        return b.random_values(shape, fn)
    return b.random_values(shape, lambda _library_rng, s: fn(gen, s))


def _value(v):
    """A one-value array (an op's 0-d result, nnclr's ``ops.log(3 / 4)``) or Variable as its
    number; anything else as given (then refused by the caller's check)."""
    if isinstance(v, (np.ndarray, Variable)) and not isinstance(v, np.generic):
        a = v.numpy() if isinstance(v, Variable) else v
        if a.size == 1 and a.dtype.kind in "iuf":
            return a.reshape(()).item()
    return v


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Draws from a normal distribution."""
    _dtype(dtype, "normal")
    mean, stddev = _value(mean), _value(stddev)
    if not is_number(mean) or not is_number(stddev) or stddev < 0:
        raise ValueError(f"normal: mean and stddev must be numbers, stddev >= 0; got {mean!r}, {stddev!r}")
    return _draw("normal", shape, seed, lambda g, s: g.normal(float(mean), float(stddev), s))


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    """Draws from [minval, maxval)."""
    _dtype(dtype, "uniform")
    minval, maxval = _value(minval), _value(maxval)
    if not is_number(minval) or not is_number(maxval) or not minval < maxval:
        raise ValueError(f"uniform: minval must be a number below maxval, got {minval!r}, {maxval!r}")
    return _draw("uniform", shape, seed, lambda g, s: g.uniform(float(minval), float(maxval), s))


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Normal draws, those more than two standard deviations from the mean drawn again."""
    _dtype(dtype, "truncated_normal")
    mean, stddev = _value(mean), _value(stddev)
    if not is_number(mean) or not is_number(stddev) or stddev < 0:
        raise ValueError(f"truncated_normal: mean and stddev must be numbers, stddev >= 0; got {mean!r}, {stddev!r}")

    def fn(g, s):
        z = g.standard_normal(s)
        bad = np.abs(z) > 2
        while bad.any():
            z[bad] = g.standard_normal(int(bad.sum()))
            bad = np.abs(z) > 2
        return float(mean) + float(stddev) * z
    return _draw("truncated_normal", shape, seed, fn)


def randint(shape, minval, maxval, dtype="int32", seed=None):
    """Integers in [minval, maxval) (as float32 values inside a graph, int32 outside)."""
    minval, maxval = _value(minval), _value(maxval)
    if not is_int(minval) or not is_int(maxval) or not minval < maxval:
        raise ValueError(f"randint: minval must be an int below maxval, got {minval!r}, {maxval!r}")
    out = _draw("randint", shape, seed, lambda g, s: g.integers(int(minval), int(maxval), s))
    return out.astype(np.int32) if isinstance(out, np.ndarray) and dtype in ("int32", "int64", None) else out


def dropout(inputs, rate, noise_shape=None, seed=None):
    """``inputs`` with a fraction ``rate`` of entries zeroed and the rest scaled by 1/(1-rate),
    on every call (not only in training: Keras's random.dropout)."""
    if not is_number(rate) or not 0 <= rate <= 1:
        raise ValueError(f"dropout: rate must be in [0, 1], got {rate!r}")
    if _scope.current() is None:
        x = np.asarray(inputs, dtype=np.float32)
        shape = x.shape if noise_shape is None else tuple(noise_shape)
        keep = _random.draw_values(_generator(seed), shape, float(rate))
        return as_ops_result((x * keep).astype(np.float32))
    from pyggml import ops
    x = ops.as_tensor(inputs)
    shape = tuple(x.shape) if noise_shape is None else tuple(int(d) if d is not None else x.shape[i]
                                                              for i, d in enumerate(noise_shape))
    keep = _draw("dropout", shape, seed, lambda g, s: _random.draw_values(g, s, float(rate)))
    return x * keep


def shuffle(x, axis=0, seed=None):
    """x's entries shuffled along ``axis`` (arrays: on the host)."""
    a = np.array(x, copy=True)
    if a.ndim == 0:
        raise ValueError("shuffle: x needs at least one axis")
    if not is_int(axis) or not -a.ndim <= axis < a.ndim:
        raise ValueError(f"shuffle: axis {axis!r} out of range for {a.ndim} dims")
    perm = _generator(seed).permutation(a.shape[axis])
    return as_ops_result(np.take(a, perm, axis=axis))


def categorical(logits, num_samples, dtype="int32", seed=None):
    """Class indices drawn from the softmax of each row of ``logits`` (batch, classes) ->
    (batch, num_samples): on arrays, at once; in a graph (a layer's call, a Lambda), each step
    draws afresh, as the argmax of the logits plus Gumbel noise (the Gumbel-max trick)."""
    if not is_int(num_samples) or isinstance(num_samples, bool) or num_samples < 1:
        raise ValueError(f"categorical: num_samples must be a positive int, got {num_samples!r}")
    if _scope.current() is not None:
        from pyggml import ops
        z = ops.as_tensor(logits)
        if len(z.shape) != 2:
            raise ValueError(f"categorical: logits must be (batch, classes), got shape {tuple(z.shape)}")
        b, c = (int(d) for d in z.shape)
        tiny = np.finfo(np.float32).tiny
        gumbel = _draw("categorical", (b, int(num_samples), c), seed,
                       lambda g, s: -np.log(-np.log(g.uniform(tiny, 1.0, s))))
        return ops.argmax(ops.reshape(z, (b, 1, c)) + gumbel, axis=-1)
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"categorical: logits must be (batch, classes), got shape {z.shape}")
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    g = _generator(seed)
    return as_ops_result(np.stack([g.choice(z.shape[1], size=int(num_samples), p=row) for row in p]).astype(np.int32))


def gamma(shape, alpha, dtype=None, seed=None):
    return _draw("gamma", shape, seed, lambda g, s: g.gamma(float(alpha), 1.0, s))


def beta(shape, alpha, beta, dtype=None, seed=None):
    return _draw("beta", shape, seed, lambda g, s: g.beta(float(alpha), float(beta), s))


def binomial(shape, counts, probabilities, dtype=None, seed=None):
    return _draw("binomial", shape, seed, lambda g, s: g.binomial(int(counts), float(probabilities), s))
