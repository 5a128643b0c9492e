"""Gaps found by this round's ports and the list left open by the last one: targets broadcast
to the output by Keras's regression losses, LoRA on Dense, Embedding and EinsumDense."""

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers

RNG = np.random.default_rng(9)


@pytest.mark.parametrize("loss", ["mse", "mae", "huber", "msle", "log_cosh", "poisson"])
def test_regression_loss_broadcasts_one_target_per_row(loss):
    # Keras: y (n,) against an output (n, k) is each row's value against all k (rank first
    # brought to the output's, then broadcast); the same as the target repeated k times
    x = RNG.random((16, 4)).astype("f4")
    y = RNG.random(16).astype("f4")
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3, kernel_initializer="ones")])
    m.compile("sgd", loss)
    got = m.evaluate(x, y, verbose=0)
    want = m.evaluate(x, np.repeat(y[:, None], 3, axis=1), verbose=0)
    assert got == pytest.approx(want, rel=1e-6)
    assert m.evaluate(x, y[:, None], verbose=0) == pytest.approx(want, rel=1e-6)
    before = m.get_weights()
    m.fit(x, y, epochs=2, verbose=0)
    assert not np.allclose(before[0], m.get_weights()[0])


def test_targets_that_do_not_broadcast_and_cross_entropy_are_refused():
    x = np.ones((8, 4), "f4")
    m = keras.Sequential([keras.Input((4,)), layers.Dense(3)])
    m.compile("sgd", "mse")
    with pytest.raises(ValueError, match="does not broadcast"):
        m.evaluate(x, np.ones((8, 2)), verbose=0)
    c = keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="softmax")])
    c.compile("sgd", "categorical_crossentropy")
    with pytest.raises(ValueError, match=r"must have shape \(n, 3\)"):
        c.evaluate(x, np.ones(8), verbose=0)
