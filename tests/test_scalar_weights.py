"""Keras's scalar and integer weights: ``add_weight(shape=())`` (a learnable temperature
or gate) and ``add_weight(shape=(), dtype="int32", trainable=False)`` (a counter), as
custom layers write them, and Normalization's third weight (``count``) that makes
its weight list and the applications' parameter counts Keras's."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops


class Scaled(layers.Layer):
    """y = t * x with a learnable scalar t, and a counter of the batches it saw in training."""

    def build(self, input_shape):
        self.t = self.add_weight(shape=(), initializer="ones", name="temperature")
        self.seen = self.add_weight(shape=(), initializer="zeros", name="seen", dtype="int32", trainable=False)

    def call(self, x, training=None):
        if training:
            self.seen.assign_add(1)
        return x * self.t


def _model():
    inp = pg.Input((3,))
    out = Scaled(name="scaled")(inp)
    return pg.Model(inp, out)


def test_a_scalar_weight_has_keras_s_shape_and_trains_as_its_gradient_says():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    m = _model()
    m.compile(optimizer=pg.optimizers.SGD(learning_rate=0.1), loss="mse")
    layer = m.get_layer("scaled")
    assert layer.t.shape == () and layer.t.numpy().shape == ()
    assert layer.seen.shape == () and layer.seen.dtype == "int32"
    assert m.count_params() == 2
    assert [v.name for v in layer.trainable_variables] == ["temperature"]
    m.fit(x, 2 * x, batch_size=8, epochs=1, shuffle=False, verbose=0)
    # d/dt mean((t x - 2x)^2) = mean(2 (t - 2) x^2) at t = 1
    want = 1.0 - 0.1 * np.mean(2 * (1.0 - 2.0) * x.astype(np.float64) ** 2)
    np.testing.assert_allclose(float(layer.t.numpy()), want, rtol=1e-5)
    m.fit(x, 2 * x, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert layer.seen.numpy() == 5 and layer.seen.numpy().dtype == np.int32
    np.testing.assert_allclose(m.predict(x, verbose=0), x * layer.t.numpy(), rtol=1e-6)


def test_scalar_and_integer_weights_survive_save_load_and_weight_lists(tmp_path):
    x = np.ones((4, 3), np.float32)
    m = _model()
    m.compile(optimizer="adam", loss="mse")
    m.fit(x, 3 * x, epochs=2, verbose=0)
    before = m.get_weights()
    path = str(tmp_path / "m.keras")
    m.save(path)
    back = pg.models.load_model(path, custom_objects={"Scaled": Scaled})
    got = back.get_weights()
    assert set(got) == set(before)
    for k in before:
        assert got[k].shape == () and got[k].dtype == before[k].dtype
        np.testing.assert_array_equal(got[k], before[k])
    m.save_weights(str(tmp_path / "m.weights.h5"))
    fresh = _model()
    fresh.compile(optimizer="adam", loss="mse")
    fresh.load_weights(str(tmp_path / "m.weights.h5"))
    np.testing.assert_array_equal(fresh.get_layer("scaled").t.numpy(), m.get_layer("scaled").t.numpy())
    # Keras's lists: one 0-d array per weight, and set_weights takes them back
    layer = back.get_layer("scaled")
    layer.set_weights([np.float32(2.5), np.array(7)])
    assert float(layer.t.numpy()) == 2.5 and int(layer.seen.numpy()) == 7
    np.testing.assert_allclose(back.predict(x, verbose=0), 2.5 * x)
    with pytest.raises(ValueError, match="shape"):
        layer.set_weights([np.ones(2, np.float32), np.array(7)])


def test_a_scalar_weight_on_a_gradient_tape_and_called_eagerly():
    layer = Scaled()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(layer(x), x)
    with pg.GradientTape() as tape:
        loss = ops.sum(layer(x) ** 2)
    (g,) = tape.gradient(loss, layer.trainable_variables)
    assert g.shape == ()
    np.testing.assert_allclose(g, 2 * np.sum(x.astype(np.float64) ** 2), rtol=1e-6)


def test_integer_weights_are_refused_where_keras_refuses_them():
    layer = layers.Layer()
    with pytest.raises(ValueError, match="trainable weight must be a float"):
        layer.add_weight(shape=(), dtype="int32", trainable=True)
    with pytest.raises(ValueError, match="float or an integer"):
        layer.add_weight(shape=(2,), dtype="string")
    assert layer.add_weight(shape=(2,), dtype="float64").dtype == "float32"


def test_normalization_keeps_keras_s_three_weights():
    n = layers.Normalization()
    n.adapt(np.arange(12, dtype=np.float32).reshape(4, 3))
    w = n.get_weights()
    assert list(w.keys()) == ["mean", "variance", "count"]
    assert w[2].shape == () and w[2].dtype == np.int64 and w[2] == 0
    assert n.count_params() == 7
    np.testing.assert_allclose(w[0], [4.5, 5.5, 6.5])
    n.set_weights([np.ones(3), np.full(3, 4.0), np.array(0)])
    np.testing.assert_allclose(n(np.full((1, 3), 3.0, np.float32)), [[1.0, 1.0, 1.0]])
