"""predict's repeated one-batch call (the last call's graph reused without the checks it
passed): every change that must reach it does."""

import numpy as np
import pytest

import pyggml as pg
from pyggml.errors import FreedError

L = pg.layers


def _model(shared=None):
    d = shared or L.Dense(3)
    return pg.Sequential([L.Dense(8, activation="relu"), d], input_shape=4), d


def test_repeated_calls_follow_weights_compile_and_free():
    rng = np.random.default_rng(0)
    x = rng.random((5, 4), dtype=np.float32)
    m, _ = _model()
    m.compile(optimizer="sgd", loss="mse")
    a = m.predict(x)
    assert np.array_equal(m.predict(x), a)                       # the repeated path, same answer
    w = m.get_weights()
    w2 = {k: v * 2 for k, v in w.items()}
    m.set_weights(w2)
    b = m.predict(x)
    assert not np.allclose(a, b)
    m.set_weights(w)
    assert np.array_equal(m.predict(x), a)
    m.fit(x, rng.random((5, 3), dtype=np.float32), epochs=3, verbose=0)
    assert not np.allclose(m.predict(x), a)                      # training moved the weights
    m.compile(optimizer="sgd", loss="mse")                        # a new device side
    m.set_weights(w)
    assert np.array_equal(m.predict(x), a)
    # other shapes, dtypes, layouts and batch sizes take the checked path
    assert np.array_equal(m.predict(x[:3]), a[:3])
    np.testing.assert_allclose(m.predict(x.astype(np.float64)), a, rtol=1e-6)
    np.testing.assert_allclose(m.predict(np.asfortranarray(x)), a, rtol=1e-6)
    assert np.array_equal(m.predict(x, batch_size=5), a)
    with pytest.raises(ValueError):
        m.predict(x, batch_size=0)
    with pytest.raises(ValueError):
        m.predict(x, batch_size=-1)
    with pytest.raises(ValueError):
        m.predict(x[:, :3])
    m.free()
    with pytest.raises(FreedError):
        m.predict(x)


def test_a_layer_shared_with_another_model_is_brought_back():
    rng = np.random.default_rng(1)
    x = rng.random((5, 4), dtype=np.float32)
    m1, shared = _model()
    m1.compile(optimizer="sgd", loss="mse")
    m2, _ = _model(shared)
    m2.compile(optimizer="sgd", loss="mse")
    p1 = m1.predict(x)
    assert np.array_equal(m1.predict(x), p1)
    before = shared.get_weights()
    m2.fit(x, rng.random((5, 3), dtype=np.float32), epochs=5, verbose=0)   # moves the shared weights
    after = shared.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before.keys())
    got = m1.predict(x)
    # m1's own first layer is unchanged; the shared last layer has m2's trained values
    w1 = m1.get_weights()
    h = np.maximum(x @ w1["dense.weight"].T + w1["dense.bias"], 0)
    sw = shared.get_weights()
    np.testing.assert_allclose(got, h @ sw["weight"].T + sw["bias"], rtol=1e-5, atol=1e-6)
    m1.free()
    m2.free()
