"""Ops on symbolic tensors (``a + b``, ``ops.mean(x)``, ``x * 2.0``) are steps of a functional
model's graph, not layers: as in Keras 3, ``model.layers`` leaves them out (so indexes such as
``model.layers[-2]`` and freezing loops read as in Keras's scripts), while the summary shows
them under the op's name.  The expected lists are real Keras 3.15.1's for the same model."""

import io
import contextlib

import numpy as np
import pytest

import pyggml as pg


def _model():
    i = pg.Input((4,))
    a = pg.layers.Dense(4, name="first")(i)
    b = a + i                                                   # an op (Keras: not a layer)
    c = pg.ops.mean(b, axis=-1, keepdims=True) * 2.0
    merged = pg.layers.Add()([b, b])                            # a layer the user made: listed
    o = pg.layers.Dense(2, name="last")(pg.ops.concatenate([merged, c], axis=-1))
    return pg.Model(i, o)


KERAS_TYPES = ["InputLayer", "Dense", "Add", "Dense"]
X = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)


def test_layers_leave_the_ops_out():
    m = _model()
    assert [type(l).__name__ for l in m.layers] == KERAS_TYPES
    assert m.layers[-1].name == "last" and m.get_layer(index=1).name == "first"
    assert len(m.weights) == 4 and m.count_params() == 20 + 12


def test_summary_shows_the_ops_by_their_names():
    m = _model()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        m.summary()
    text = buf.getvalue()
    for row in ("add (Add)", "mean (Mean)", "multiply (Multiply)", "concatenate (Concatenate)",
                "add_1 (Add)", "last (Dense)"):
        assert row in text, row


def test_the_ops_stay_out_after_save_and_load(tmp_path):
    m = _model()
    want = m.predict(X, verbose=0)
    path = str(tmp_path / "m.gguf")
    m.save(path)
    back = pg.models.load_model(path)
    assert [type(l).__name__ for l in back.layers] == KERAS_TYPES
    np.testing.assert_allclose(back.predict(X, verbose=0), want, rtol=1e-6)
    again = pg.Model.from_config(m.get_config())
    assert [type(l).__name__ for l in again.layers] == KERAS_TYPES


def test_clone_function_sees_the_ops_too_and_they_stay_ops():
    m = _model()
    seen = []

    def clone(layer):
        seen.append(type(layer).__name__)
        return layer.__class__.from_config(layer.get_config())
    twin = pg.models.clone_model(m, clone_function=clone)
    # Keras 3.15 calls clone_function on the ops as well: Dense, Add, Mean, Add, Multiply,
    # Concatenate, Dense (pyggml's classes for the ops are SymbolicOp)
    assert len(seen) == 7 and seen[0] == "Dense" and seen[-1] == "Dense"
    assert [type(l).__name__ for l in twin.layers] == KERAS_TYPES
    twin.set_weights(m.get_weights())
    np.testing.assert_allclose(twin.predict(X, verbose=0), m.predict(X, verbose=0), rtol=1e-6)


def test_freezing_by_index_as_keras_scripts_do():
    m = _model()
    for layer in m.layers[:-1]:
        layer.trainable = False
    m.compile("sgd", "mse")
    first, last = m.get_layer("first"), m.get_layer("last")
    before = [w.copy() for w in first.get_weights() + last.get_weights()]
    m.fit(X, np.ones((3, 2), np.float32), epochs=1, verbose=0)
    after = first.get_weights() + last.get_weights()
    np.testing.assert_array_equal(after[0], before[0])          # "first" frozen
    assert not np.array_equal(after[2], before[2])              # "last" trains


@pytest.mark.parametrize("make", [lambda i: i + i, lambda i: 1.0 - i, lambda i: pg.ops.exp(i)])
def test_a_model_of_ops_alone_lists_its_input(make):
    i = pg.Input((3,))
    m = pg.Model(i, make(i))
    assert [type(l).__name__ for l in m.layers] == ["InputLayer"]
    assert m.predict(X[:, :3], verbose=0).shape == (3, 3)


def test_layer_weights_join_as_keras_lists():
    # Keras's get_weights() is a list: a.get_weights() + b.get_weights() is one list of arrays
    d = pg.layers.Dense(2)
    d.build((None, 3))
    g = pg.layers.GRU(2)
    g(np.ones((1, 4, 3), np.float32))
    joined = d.get_weights() + g.get_weights()
    assert isinstance(joined, list)
    assert [a.shape for a in joined] == [(3, 2), (2,), (3, 6), (2, 6), (2, 6)]   # Keras's layouts
    assert [a.shape for a in [np.zeros(1)] + d.get_weights()] == [(1,), (3, 2), (2,)]
    np.testing.assert_array_equal(joined[0], d.kernel.numpy())
