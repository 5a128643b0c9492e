"""Behaviour of Sequential and functional models: compile, fit, evaluate,
predict, weights, layers, callbacks, save/load."""

import numpy as np
import pytest

import pyggml as pg


def blobs(n=120, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centers = np.array([[2, 0], [-2, 1], [0, -2]], dtype=np.float64)
    x = centers[y] + rng.normal(scale=0.5, size=(n, 2))
    return x, np.eye(3)[y], y


def test_sequential_learns_a_classification_task():
    x, y, _ = blobs()
    pg.set_seed(0)
    m = pg.Sequential([pg.layers.Dense(16, activation="relu"), pg.layers.Dense(3, activation="softmax")],
                      input_shape=2)
    m.compile(optimizer=pg.optimizers.Adam(learning_rate=0.05), loss="categorical_crossentropy",
              metrics=["accuracy"])
    h = m.fit(x, y, epochs=30, batch_size=16, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert m.evaluate(x, y, return_dict=True)["accuracy"] > 0.9
    p = m.predict(x)
    assert p.shape == (120, 3) and p.dtype == np.float32
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)       # softmax applied once, at predict
    m.free()


def test_layer_names_and_weight_names_follow_keras_and_pytorch():
    m = pg.Sequential([pg.layers.Dense(4), pg.layers.Dense(2)], input_shape=3)
    m.compile(loss="mse")
    w = m.get_weights()
    assert list(w) == ["dense.weight", "dense.bias", "dense_1.weight", "dense_1.bias"]
    assert w["dense.weight"].shape == (4, 3) and w["dense.bias"].shape == (4,)
    assert m.count_params() == 4 * 3 + 4 + 2 * 4 + 2
    assert m.get_layer(index=1).name == "dense_1"
    m.free()


def test_predict_matches_numpy_for_a_dense_model():
    m = pg.Sequential([pg.layers.Dense(5, activation="tanh"), pg.layers.Dense(2, activation="sigmoid")],
                      input_shape=3).compile(loss="mse", seed=3)
    w = m.get_weights()
    x = np.random.default_rng(1).normal(size=(37, 3))
    h = np.tanh(x @ w["dense.weight"].T + w["dense.bias"])
    ref = 1 / (1 + np.exp(-(h @ w["dense_1.weight"].T + w["dense_1.bias"])))
    np.testing.assert_allclose(m.predict(x, batch_size=8), ref, rtol=2e-5, atol=2e-6)
    m.free()


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "gelu", "silu", "leaky_relu", "elu", "softmax", None])
def test_activations_train_and_match_numpy(act):
    from math import erf
    m = pg.Sequential([pg.layers.Dense(4, activation=act)], input_shape=3).compile(loss="mse", seed=1)
    w = m.get_weights()
    x = np.random.default_rng(2).normal(size=(8, 3))
    z = x @ w["dense.weight"].T + w["dense.bias"]
    ref = {"relu": np.maximum(z, 0), "sigmoid": 1 / (1 + np.exp(-z)), "tanh": np.tanh(z),
           "gelu": 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2))), "silu": z / (1 + np.exp(-z)),
           "leaky_relu": np.where(z > 0, z, 0.2 * z), "elu": np.where(z > 0, z, np.exp(z) - 1),
           "softmax": np.exp(z) / np.exp(z).sum(1, keepdims=True), None: z}[act]
    np.testing.assert_allclose(m.predict(x), ref, rtol=1e-5, atol=1e-6)
    y = np.zeros((8, 4))
    before = m.evaluate(x, y, batch_size=8, return_dict=True)["loss"]
    m.fit(x, y, epochs=5, batch_size=8, verbose=0)
    assert m.evaluate(x, y, batch_size=8, return_dict=True)["loss"] < before
    m.free()


def test_functional_model_with_two_inputs_and_two_outputs():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(64, 3)), rng.normal(size=(64, 2))
    y1 = np.eye(2)[(a.sum(1) > 0).astype(int)]
    y2 = (b[:, :1] - a[:, :1])
    ia, ib = pg.Input(3, name="a"), pg.Input(2, name="b")
    h = pg.layers.Concatenate()([pg.layers.Dense(8, activation="relu")(ia), pg.layers.Dense(8, activation="relu")(ib)])
    o1 = pg.layers.Dense(2, activation="softmax", name="cls")(h)
    o2 = pg.layers.Dense(1, name="reg")(h)
    m = pg.Model([ia, ib], [o1, o2]).compile(optimizer="adam", loss=["categorical_crossentropy", "mse"],
                                              loss_weights=[1.0, 0.5], metrics=["accuracy"])
    assert [l.name for l in m.layers][:2] == ["a", "b"]
    h = m.fit([a, b], [y1, y2], epochs=20, batch_size=16, verbose=0)
    assert "cls_loss" in h.history and "reg_loss" in h.history
    assert h.history["loss"][-1] < h.history["loss"][0]
    p1, p2 = m.predict([a, b])
    assert p1.shape == (64, 2) and p2.shape == (64, 1)
    m.free()


def test_cnn_trains_on_digits():
    sk = pytest.importorskip("sklearn.datasets")
    d = sk.load_digits()
    # 1200 rows to train, 597 held out: on 500 / 100 even PyTorch's same network
    # overfits to 0.85-0.88, too close to the bar for a test
    x = (d.images / 16.0).reshape(-1, 8, 8, 1)
    y = np.eye(10)[d.target]
    pg.set_seed(0)
    m = pg.Sequential([pg.layers.Conv2D(8, 3, activation="relu", padding="same"),
                       pg.layers.MaxPooling2D(),
                       pg.layers.Flatten(),
                       pg.layers.Dense(10, activation="softmax")], input_shape=(8, 8, 1))
    m.compile(optimizer=pg.optimizers.Adam(0.01), loss="categorical_crossentropy", metrics=["accuracy"])
    m.fit(x[:1200], y[:1200], epochs=10, batch_size=32, verbose=0)
    assert m.evaluate(x[1200:], y[1200:], return_dict=True)["accuracy"] > 0.85
    m.free()


def test_batchnorm_dropout_and_layernorm_train():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 6))
    y = x[:, :2] * 2.0
    m = pg.Sequential([pg.layers.Dense(16), pg.layers.BatchNormalization(), pg.layers.Activation("relu"),
                       pg.layers.Dropout(0.1), pg.layers.LayerNormalization(), pg.layers.Dense(2)],
                      input_shape=6).compile(optimizer="adam", loss="mse")
    h = m.fit(x, y, epochs=15, batch_size=32, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    w = m.get_weights()
    assert not np.allclose(w["batch_normalization.running_mean"], 0)     # running statistics moved
    p1, p2 = m.predict(x), m.predict(x)
    np.testing.assert_array_equal(p1, p2)                                 # no dropout at predict
    m.free()


def test_callbacks_early_stopping_and_lr_schedule():
    x, y, _ = blobs()
    m = pg.Sequential([pg.layers.Dense(3, activation="softmax")], input_shape=2).compile(loss="categorical_crossentropy")
    seen = []
    h = m.fit(x, y, epochs=5, batch_size=32, verbose=0, validation_split=0.25,
              callbacks=[pg.callbacks.LearningRateScheduler(lambda e, lr: 0.01 / (e + 1)),
                         pg.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(e))])
    assert seen == list(range(5))
    np.testing.assert_allclose(h.history["learning_rate"], [0.01 / (e + 1) for e in range(5)], rtol=1e-6)
    assert "val_loss" in h.history
    m2 = pg.Sequential([pg.layers.Dense(3, activation="softmax")], input_shape=2).compile(
        optimizer=pg.optimizers.SGD(1e-9), loss="categorical_crossentropy")
    h2 = m2.fit(x, y, epochs=50, batch_size=32, verbose=0, validation_split=0.25,
                callbacks=[pg.callbacks.EarlyStopping(patience=2, min_delta=1e-3)])
    assert len(h2.epoch) < 50
    m.free()
    m2.free()


def test_partial_batches_are_used_and_sample_weights_apply():
    x, y, _ = blobs(n=50)
    m = pg.Sequential([pg.layers.Dense(3, activation="softmax")], input_shape=2).compile(loss="categorical_crossentropy")
    w0 = m.get_weights()
    m.fit(x, y, epochs=1, batch_size=16, verbose=0, shuffle=False, sample_weight=np.r_[np.zeros(48), np.ones(2)])
    w1 = m.get_weights()
    # only the last, short batch had weight: the weights moved
    assert any(not np.array_equal(w0[k], w1[k]) for k in w0)
    np.testing.assert_allclose(m.evaluate(x, y, batch_size=16, return_dict=True)["loss"],
                               m.evaluate(x, y, batch_size=50, return_dict=True)["loss"], rtol=1e-5)
    m.free()


def test_save_load_round_trip_and_resume(tmp_path):
    x, y, _ = blobs()
    pg.set_n_threads(1)

    def make():
        pg.set_seed(5)
        return pg.Sequential([pg.layers.Dense(8, activation="relu"), pg.layers.Dense(3, activation="softmax")],
                             input_shape=2).compile(loss="categorical_crossentropy")

    a, b = make(), make()
    for mm in (a, b):
        mm.fit(x, y, epochs=2, batch_size=20, verbose=0, shuffle=False)
    path = tmp_path / "a.gguf"
    a.save(path)
    c = pg.load_model(path)
    np.testing.assert_array_equal(c.predict(x), a.predict(x))
    b.fit(x, y, epochs=2, batch_size=20, verbose=0, shuffle=False)
    c.fit(x, y, epochs=2, batch_size=20, verbose=0, shuffle=False)
    for k, v in b.get_weights().items():
        np.testing.assert_array_equal(c.get_weights()[k], v)      # training resumed exactly
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(str(path))
    names = {t.name: t for t in r.tensors}
    for k, v in a.get_weights().items():
        np.testing.assert_array_equal(np.asarray(names[k].data).reshape(v.shape), v)
    for mm in (a, b, c):
        mm.free()
    pg.set_n_threads(None)


def test_wrong_inputs_raise_clear_errors():
    m = pg.Sequential([pg.layers.Dense(2)], input_shape=3).compile(loss="mse")
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        m.predict(np.zeros((4, 5)))
    with pytest.raises(TypeError):
        m.predict(np.array([["a", "b", "c"]]))
    with pytest.raises(ValueError):
        pg.layers.Dense(0)
    with pytest.raises(ValueError, match="unknown loss"):
        m.compile(loss="nope")
    with pytest.raises(ValueError, match="unknown optimizer"):
        m.compile(optimizer="nope", loss="mse")
    with pytest.raises(ValueError, match="unknown activation"):
        pg.layers.Dense(2, activation="nope")
    m.free()
    with pytest.raises(pg.GGMLError, match="has been freed"):
        m.predict(np.zeros((1, 3)))


def test_accuracy_with_sparse_labels_matches_the_predictions():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 5)).astype(np.float32)
    labels = rng.integers(0, 3, 60)
    pg.set_seed(0)
    m = pg.Sequential([pg.layers.Dense(3, activation="softmax")], input_shape=5)
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    h = m.fit(x, labels, epochs=2, batch_size=60, shuffle=False, verbose=0)
    want = float((m.predict(x).argmax(axis=1) == labels).mean())
    assert m.evaluate(x, labels, return_dict=True)["accuracy"] == pytest.approx(want)
    # the one-hot model, trained alike, reports the same accuracy per epoch
    pg.set_seed(0)
    m2 = pg.Sequential([pg.layers.Dense(3, activation="softmax")], input_shape=5)
    m2.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    h2 = m2.fit(x, np.eye(3)[labels], epochs=2, batch_size=60, shuffle=False, verbose=0)
    assert h.history["accuracy"] == pytest.approx(h2.history["accuracy"])
    m.free()
    m2.free()


def test_head_losses_are_unweighted_and_the_total_weighs_them():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y1, y2 = rng.normal(size=(40, 2)).astype(np.float32), rng.normal(size=(40, 1)).astype(np.float32)
    inp = pg.Input(shape=3)
    h = pg.layers.Dense(4, activation="relu")(inp)
    a = pg.layers.Dense(2, name="a")(h)
    b = pg.layers.Dense(1, name="b")(h)
    m = pg.Model(inp, [a, b]).compile(optimizer="sgd", loss=["mse", "mae"], loss_weights=[2.0, 0.25])
    pa, pb = m.predict(x)
    r = m.evaluate(x, [y1, y2], batch_size=40, return_dict=True)
    assert r["a_loss"] == pytest.approx(float(np.mean((pa - y1) ** 2)), rel=1e-5)
    assert r["b_loss"] == pytest.approx(float(np.mean(np.abs(pb - y2))), rel=1e-5)
    assert r["loss"] == pytest.approx(2.0 * r["a_loss"] + 0.25 * r["b_loss"], rel=1e-5)
    hist = m.fit(x, [y1, y2], epochs=1, batch_size=40, shuffle=False, verbose=0).history
    assert hist["loss"][0] == pytest.approx(2.0 * hist["a_loss"][0] + 0.25 * hist["b_loss"][0], rel=1e-5)
    assert hist["a_loss"][0] == pytest.approx(r["a_loss"], rel=1e-5)
    m.free()


def test_an_input_of_shape_ending_in_1_takes_arrays_without_that_axis():
    """As Keras: Input(shape=(1,)) takes a column of shape (n,), Input(shape=(4, 1)) takes (n, 4)."""
    a, b = pg.Input(shape=(1,), name="a"), pg.Input(shape=(4, 1), name="b")
    out = pg.layers.Concatenate()([a, pg.layers.Flatten()(b)])
    m = pg.Model([a, b], out).compile(loss="mse")
    xa = np.array([1.0, 2.0, 3.0])
    xb = np.arange(12.0).reshape(3, 4)
    want = np.concatenate([xa[:, None], xb], axis=1)
    np.testing.assert_array_equal(m.predict([xa, xb]), want)
    np.testing.assert_array_equal(m.predict([xa[:, None], xb[..., None]]), want)
    with pytest.raises(ValueError, match="must have shape"):
        m.predict([xa, xb[:, :3]])
    m.free()


def test_a_model_on_intermediate_nodes_puts_new_inputs_in_their_place_as_keras_does(tmp_path):
    """keras.Model(inputs, outputs) with inputs that are layers' outputs: Keras makes new
    Inputs there (the layers before them are left out); the keras-io structured-data
    example builds its model this way (its inputs dict holds Normalization outputs)."""
    raw = pg.Input(shape=(2,), name="raw")
    scaled = pg.layers.Dense(2, kernel_initializer="ones", name="scale")(raw)       # left out of the model
    side = pg.Input(shape=(1,), name="side")
    out = pg.layers.Dense(1, kernel_initializer="ones", name="head")(pg.layers.concatenate([scaled, side]))
    with pytest.warns(UserWarning, match="'scale'.*not part of the model"):
        m = pg.Model({"feature": scaled, "side": side}, out)
    assert m.input_names == ["feature", "side"]
    assert [l.name for l in m.layers if l.name == "scale"] == []
    m.compile(loss="mse")
    xf = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    xs = np.array([[0.5], [2.0]], np.float32)
    np.testing.assert_allclose(m.predict({"feature": xf, "side": xs})[:, 0], xf.sum(1) + xs[:, 0])
    m.fit({"feature": xf, "side": xs}, np.zeros((2, 1), np.float32), epochs=1, verbose=0)
    path = str(tmp_path / "cut.gguf")
    m.save(path)
    back = pg.saving.load_model(path)
    assert back.input_names == ["feature", "side"]
    np.testing.assert_array_equal(back.predict({"feature": xf, "side": xs}), m.predict({"feature": xf, "side": xs}))
    back.free()
    assert sorted(m.get_weights()) == ["head.bias", "head.weight"]
    # the original graph is untouched: a model from the first Input still has the layer
    full = pg.Model([raw, side], out)
    assert "scale" in [l.name for l in full.layers]
    m.free(), full.free()


def test_a_model_on_a_single_intermediate_node_and_its_errors():
    x = pg.Input(shape=(3,))
    h = pg.layers.Dense(4, name="encoder")(x)
    y = pg.layers.Dense(2, name="decoder")(h)
    with pytest.warns(UserWarning, match="encoder"):
        dec = pg.Model(h, y)
    assert dec.inputs[0].shape == (None, 4)
    assert dec.compile(loss="mse").predict(np.ones((5, 4), np.float32)).shape == (5, 2)
    dec.free()
    with pytest.raises(TypeError, match="Model inputs must be"):
        pg.Model([np.ones(3)], y)
    # an output that needs an Input which is not among the model's inputs is still refused
    other = pg.Input(shape=(2,))
    z = pg.layers.concatenate([y, pg.layers.Dense(2)(other)])
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="not among the model's inputs"):
        pg.Model(h, z)


def test_a_string_input_of_shape_1_takes_a_flat_array_of_strings():
    inp = pg.Input(shape=(1,), dtype="string", name="thal")
    m = pg.Model(inp, pg.layers.StringLookup(vocabulary=["fixed", "normal"], output_mode="one_hot")(inp))
    m.compile(loss="mse")
    flat = np.array(["normal", "fixed", "other"])
    np.testing.assert_array_equal(m.predict(flat), m.predict(flat[:, None]))
    np.testing.assert_array_equal(m.predict(flat), [[0, 0, 1], [0, 1, 0], [1, 0, 0]])
    m.free()
