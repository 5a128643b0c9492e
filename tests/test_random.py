"""pg.random (Keras's keras.random): draws on the host and inside a model's
graph (new values on every call, training or predicting), seeds, a VAE's
sampling layer training through its noise, and bad arguments."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops


def test_host_draws_have_their_distributions_and_seeds_repeat():
    n = 200_000
    z = pg.random.normal((n,), mean=2.0, stddev=3.0, seed=1)
    assert abs(z.mean() - 2.0) < 5 * 3.0 / np.sqrt(n) and abs(z.std() - 3.0) < 0.05
    u = pg.random.uniform((n,), minval=-1.0, maxval=3.0, seed=2)
    assert u.min() >= -1.0 and u.max() < 3.0 and abs(u.mean() - 1.0) < 0.02
    t = pg.random.truncated_normal((n,), stddev=2.0, seed=3)
    assert np.abs(t).max() <= 4.0 and 1.6 < t.std() < 1.8
    r = pg.random.randint((n,), 3, 7, seed=4)
    assert r.dtype == np.int32 and set(np.unique(r)) == {3, 4, 5, 6}
    np.testing.assert_array_equal(pg.random.normal((5,), seed=9), pg.random.normal((5,), seed=9))
    g1, g2 = pg.random.SeedGenerator(5), pg.random.SeedGenerator(5)
    first = [pg.random.uniform((3,), seed=g1) for _ in range(2)]
    assert not np.array_equal(first[0], first[1])                      # a generator moves on
    np.testing.assert_array_equal(first[1], [pg.random.uniform((3,), seed=g2) for _ in range(2)][1])
    kept = pg.random.dropout(np.ones((1000, 10)), 0.25, seed=0)
    assert set(np.unique(kept)) == {0.0, np.float32(1 / 0.75)} and abs((kept == 0).mean() - 0.25) < 0.02
    x = np.arange(10)
    assert sorted(pg.random.shuffle(x, seed=0).tolist()) == list(range(10))
    c = pg.random.categorical(np.log([[0.0001, 0.9998, 0.0001]]), 50, seed=0)
    assert c.shape == (1, 50) and (c == 1).mean() > 0.9


class Sampling(layers.Layer):
    """keras-io's VAE sampling layer, as written there (with pyggml's imports)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = pg.random.SeedGenerator(1337)

    def call(self, inputs):
        z_mean, z_log_var = inputs
        batch = ops.shape(z_mean)[0]
        dim = ops.shape(z_mean)[1]
        epsilon = pg.random.normal(shape=(batch, dim), seed=self.seed_generator)
        return z_mean + ops.exp(0.5 * z_log_var) * epsilon


def _sampler():
    inp = pg.Input((3,))
    z = Sampling()([layers.Dense(2, name="mean")(inp), layers.Dense(2, name="log_var")(inp)])
    return pg.Model(inp, z)


def test_graph_draws_are_new_on_every_call_and_normal():
    pg.set_seed(0)
    m = _sampler()
    m.set_weights({k: np.zeros_like(v) for k, v in m.get_weights().items()})    # z = epsilon
    x = np.ones((4000, 3), np.float32)
    a, b = m.predict(x, batch_size=4000, verbose=0), m.predict(x, batch_size=4000, verbose=0)
    assert not np.allclose(a, b)
    for z in (a, b):
        assert abs(z.mean()) < 5 / np.sqrt(z.size) and abs(z.std() - 1.0) < 0.03
    assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 0.05


def test_training_reaches_through_the_noise():
    """z = mean + exp(log_var / 2) * eps fit to a constant: the mean goes to it and the
    noise's scale shrinks, which needs gradients through the product with eps."""
    pg.set_seed(1)
    m = _sampler()
    m.compile(optimizer=pg.optimizers.Adam(0.05), loss="mse")
    x = np.ones((64, 3), np.float32)
    y = np.full((64, 2), 3.0, np.float32)
    before = m.predict(x, verbose=0)
    m.fit(x, y, epochs=150, batch_size=64, verbose=0)
    after = m.predict(x, verbose=0)
    assert abs(after.mean() - 3.0) < 0.1
    assert after.std() < 0.3 * before.std()


def test_bad_arguments():
    with pytest.raises(ValueError, match="shape"):
        pg.random.normal((0, 2))
    with pytest.raises(ValueError, match="stddev"):
        pg.random.normal((2,), stddev=-1.0)
    with pytest.raises(ValueError, match="maxval"):
        pg.random.uniform((2,), minval=1.0, maxval=1.0)
    with pytest.raises(ValueError, match="seed"):
        pg.random.normal((2,), seed="x")
    with pytest.raises(ValueError, match="rate"):
        pg.random.dropout(np.ones(3), 1.5)
    with pytest.raises(ValueError, match="dtype"):
        pg.random.normal((2,), dtype="int32")
    with pytest.raises(ValueError, match="at most 4"):
        pg.random.normal((1, 1, 1, 1, 1))
