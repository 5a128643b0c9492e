"""Keras behaviour found missing in the seventh round of keras-io ports (2026-12-06: guides,
vision, text, structured and generative examples), each checked against numpy or against what
Keras 3 documents."""

import importlib.util
import warnings

import numpy as np
import pytest

import pyggml as keras
from pyggml import layers, ops

RNG = np.random.default_rng(29)


class MeanActivity(layers.Layer):
    """The subclassing guide's ActivityRegularizationLayer: a loss added in call."""

    def call(self, inputs):
        self.add_loss(1e-2 * ops.mean(inputs))
        return inputs


def _dense_model():
    inp = keras.Input((3,))
    return keras.Model(inp, MeanActivity()(layers.Dense(3)(inp)))


# --- compile() without a loss, on a model whose layers add losses ----------------------------------

def test_compile_without_a_loss_trains_on_add_loss_alone_even_with_targets():
    # Keras 3: compile(optimizer) means loss=None; the model's loss is its layers' add_loss, and
    # targets passed to fit/evaluate feed only the metrics
    m = _dense_model()
    m.compile(optimizer="adam", metrics=["mae"])
    x = RNG.random((8, 3)).astype(np.float32)
    y = RNG.random((8, 3)).astype(np.float32)
    p = m.predict(x, verbose=0)
    logs = m.evaluate(x, y, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["loss"], 1e-2 * p.mean(), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(logs["mae"], np.abs(p - y).mean(), rtol=1e-5)
    # and without targets, the same loss
    np.testing.assert_allclose(m.evaluate(x, verbose=0, return_dict=True)["loss"], logs["loss"], rtol=1e-5)
    h = m.fit(x, y, epochs=2, verbose=0, validation_split=0.25)
    assert set(h.history) >= {"loss", "mae", "val_loss", "val_mae"}
    assert all(abs(v) < 0.1 for v in h.history["loss"])        # no cross-entropy of y in it


def test_compile_without_a_loss_keeps_the_default_for_a_model_that_adds_none():
    # API.md's default (categorical cross-entropy) still holds where no layer adds a loss
    inp = keras.Input((3,))
    m = keras.Model(inp, layers.Dense(3, activation="softmax")(inp))
    m.compile(optimizer="adam")
    x = RNG.random((8, 3)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[RNG.integers(0, 3, 8)]
    p = m.predict(x, verbose=0)
    np.testing.assert_allclose(m.evaluate(x, y, verbose=0), -np.mean(np.sum(y * np.log(p), 1)), rtol=1e-4)


def test_one_element_validation_data_is_x_alone():
    class AddLoss(layers.Layer):
        def call(self, y_true, y_pred):
            self.add_loss(ops.mean(ops.square(y_true - y_pred)))
            return y_pred

    x_in, y_in = keras.Input((4,), name="x"), keras.Input((1,), name="y")
    m = keras.Model([x_in, y_in], AddLoss()(y_in, layers.Dense(1)(x_in)))
    m.compile("adam")
    data = {"x": RNG.random((32, 4)), "y": RNG.random((32, 1))}
    h = m.fit(data, validation_data=(data,), epochs=1, verbose=0)
    p = m.predict(data, verbose=0)
    np.testing.assert_allclose(h.history["val_loss"][0], np.mean((data["y"] - p) ** 2), rtol=1e-4)
    with pytest.raises(ValueError, match=r"\(x,\), \(x, y\)"):
        m.fit(data, validation_data=(data, None, None, None), epochs=1, verbose=0)


# --- fit with nothing to train -----------------------------------------------------------------------

def test_fit_without_trainable_weights_warns_and_reports_the_loss():
    m = keras.Sequential([layers.Dense(4), layers.Dense(1)], input_shape=3)
    m.compile(optimizer="adam", loss="mse", metrics=["mae"])
    m.trainable = False
    x = RNG.random((16, 3)).astype(np.float32)
    y = RNG.random((16, 1)).astype(np.float32)
    before = m.get_weights()
    with pytest.warns(UserWarning, match="no trainable weights"):
        h = m.fit(x, y, epochs=2, batch_size=16, verbose=0)
    after = m.get_weights()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    p = m.predict(x, verbose=0)
    np.testing.assert_allclose(h.history["loss"], [np.mean((p - y) ** 2)] * 2, rtol=1e-5)
    np.testing.assert_allclose(h.history["mae"], [np.mean(np.abs(p - y))] * 2, rtol=1e-5)


def test_fit_of_a_weightless_model_with_add_loss_runs():
    inp = keras.Input((3,))
    m = keras.Model(inp, MeanActivity()(inp))
    m.compile(optimizer="adam", loss="mse")
    x, y = RNG.random((4, 3)), RNG.random((4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = m.fit(x, y, batch_size=4, verbose=0)
    np.testing.assert_allclose(h.history["loss"][0], np.mean((x - y) ** 2) + 1e-2 * x.mean(), rtol=1e-5)


# --- masks on eager outputs --------------------------------------------------------------------------

def test_an_eager_custom_layers_compute_mask_reaches_its_output():
    class CustomEmbedding(layers.Layer):
        def build(self, input_shape):
            self.embeddings = self.add_weight(shape=(10, 4), initializer="random_normal")

        def call(self, inputs):
            return ops.take(self.embeddings, ops.cast(inputs, "int32"))

        def compute_mask(self, inputs, mask=None):
            return ops.not_equal(inputs, 0)

    out = CustomEmbedding()(np.array([[1, 2, 0], [0, 3, 4]]))
    np.testing.assert_array_equal(out._keras_mask, [[True, True, False], [False, True, True]])


# --- data --------------------------------------------------------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_torch_dataloaders_batch_reaches_train_step_as_a_tuple_of_arrays():
    import torch
    seen = []

    class M(keras.Model):
        def train_step(self, data):
            seen.append(data)
            return {}

    inp = keras.Input((2,))
    m = M(inp, layers.Dense(1)(inp))
    m.compile(optimizer="adam")
    ds = torch.utils.data.TensorDataset(torch.arange(8.0).reshape(4, 2), torch.ones(4, 1))
    m.fit(torch.utils.data.DataLoader(ds, batch_size=2), epochs=1, verbose=0)
    assert len(seen) == 2 and all(type(d) is tuple and len(d) == 2 for d in seen)
    assert all(isinstance(a, np.ndarray) for d in seen for a in d)
    np.testing.assert_array_equal(seen[1][0], [[4.0, 5.0], [6.0, 7.0]])


def test_a_generator_builds_an_unbuilt_sequential_and_every_batch_trains():
    batches = [(RNG.random((16, 5)).astype(np.float32), RNG.random((16, 1)).astype(np.float32)) for _ in range(4)]
    m = keras.Sequential([layers.Dense(8, activation="relu"), layers.Dense(1)])
    m.compile(loss="mse", optimizer="adam")
    m.fit((b for b in batches), epochs=1, verbose=0)
    assert m.input_shape == (None, 5)
    assert m.optimizer.iterations == 4


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="needs pandas")
def test_a_dataframe_builds_an_unbuilt_sequential():
    import pandas as pd
    df = pd.DataFrame(RNG.random((64, 3)), columns=["a", "b", "c"])
    target = pd.Series(RNG.random(64))
    m = keras.Sequential([layers.Dense(4, activation="relu"), layers.Dense(1)])
    m.compile(loss="mse")
    m.fit(df, target, epochs=1, verbose=0)
    assert m.input_shape == (None, 3)
    np.testing.assert_allclose(m.predict(df, verbose=0), m.predict(df.to_numpy(), verbose=0))


# --- per-step sample weights ---------------------------------------------------------------------

def _token_model():
    inp = keras.Input((6,), dtype="int32")
    return keras.Model(inp, layers.Dense(50, activation="softmax")(layers.Embedding(50, 8)(inp)))


@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy", "categorical_crossentropy"])
def test_a_weight_per_step_weights_each_steps_cross_entropy(loss):
    x = RNG.integers(1, 50, (8, 6))
    labels = RNG.integers(0, 50, (8, 6))
    w = (RNG.random((8, 6)) < 0.3).astype(np.float32)
    m = _token_model()
    m.compile(loss=loss, optimizer="adam")
    p = m.predict(x, verbose=0).astype(np.float64)
    per_step = -np.log(np.clip(np.take_along_axis(p, labels[..., None], -1)[..., 0], 1e-7, 1))
    y = labels if loss.startswith("sparse") else np.eye(50, dtype=np.float32)[labels]
    # Keras: sum(w * loss) / number of steps
    np.testing.assert_allclose(m.evaluate(x, y, sample_weight=w, verbose=0), (w * per_step).sum() / w.size,
                               rtol=1e-4)
    m.fit(x, y, sample_weight=w, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="one per step"):
        m.evaluate(x, y, sample_weight=np.ones((8, 5)), verbose=0)


def test_a_weight_per_step_of_an_elementwise_loss_spreads_over_the_features():
    x = RNG.integers(1, 50, (8, 6))
    y = RNG.random((8, 6, 50)).astype(np.float32)
    w = RNG.random((8, 6)).astype(np.float32)
    m = _token_model()
    m.compile(loss="mse", optimizer="adam")
    p = m.predict(x, verbose=0).astype(np.float64)
    np.testing.assert_allclose(m.evaluate(x, y, sample_weight=w, verbose=0),
                               (w[..., None] * (p - y) ** 2).sum() / p.size, rtol=1e-4)


# --- callbacks' mode "auto" ----------------------------------------------------------------------

@pytest.mark.parametrize("monitor, metric", [("val_auc", lambda: keras.metrics.AUC()),
                                             ("val_precision", lambda: keras.metrics.Precision()),
                                             ("val_recall", lambda: keras.metrics.Recall())])
def test_mode_auto_maximises_auc_precision_and_recall(monitor, metric):
    m = keras.Sequential([keras.Input((2,)), layers.Dense(1, activation="sigmoid")])
    m.compile(loss="binary_crossentropy", metrics=[metric()])
    es = keras.callbacks.EarlyStopping(monitor=monitor, patience=1)
    rl = keras.callbacks.ReduceLROnPlateau(monitor=monitor, patience=1, factor=0.5)
    for cb in (es, rl):
        cb.set_model(m)
        cb.on_train_begin()
    for e, v in enumerate([0.6, 0.7, 0.8, 0.9]):
        for cb in (es, rl):
            cb.on_epoch_end(e, {monitor: v})
    assert not m.stop_training
    assert float(np.asarray(m.optimizer.learning_rate)) == pytest.approx(1e-3)
    # a loss, and an error metric, still go down
    es = keras.callbacks.EarlyStopping(monitor="val_mae", patience=1)
    es.set_model(m)
    es.on_train_begin()
    for e, v in enumerate([0.6, 0.7, 0.8]):
        es.on_epoch_end(e, {"val_mae": v})
    assert m.stop_training


def test_model_checkpoint_keeps_the_highest_auc(tmp_path):
    m = keras.Sequential([keras.Input((2,)), layers.Dense(1, activation="sigmoid")])
    m.compile(loss="binary_crossentropy", metrics=[keras.metrics.AUC()])
    ck = keras.callbacks.ModelCheckpoint(str(tmp_path / "best-{epoch}.keras"), monitor="val_auc",
                                         save_best_only=True)
    ck.set_model(m)
    ck.on_train_begin()
    for e, v in enumerate([0.6, 0.9, 0.7]):
        ck.on_epoch_end(e, {"val_auc": v})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-1.keras", "best-2.keras"]


# --- summary -------------------------------------------------------------------------------------

def test_summary_shows_trainable_and_a_layer_range():
    m = keras.Sequential([keras.Input((3,)), layers.Dense(2), layers.Dropout(0.1), layers.Dense(1)])
    m.layers[0].trainable = False
    lines = []
    m.summary(show_trainable=True, print_fn=lines.append)
    rows = lines[0].splitlines()
    assert "Trainable" in rows[2]
    marks = {r.split()[0]: r.split()[-1] for r in rows if r.startswith(("dense", "dropout"))}
    assert marks == {"dense": "N", "dropout": "-", "dense_1": "Y"}
    lines = []
    m.summary(layer_range=["dense", "dropout"], print_fn=lines.append)
    shown = [r.split()[0] for r in lines[0].splitlines() if r.startswith(("dense", "dropout"))]
    assert shown == ["dense", "dropout"]
    with pytest.raises(ValueError, match="layer_range"):
        m.summary(layer_range=["nothing", "dense"])


# --- cross-entropy's clipping ------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["fused", "composed"])
def test_cross_entropy_clips_at_keras_epsilon(path, monkeypatch):
    from pyggml import _scope
    monkeypatch.setattr(_scope, "FORCE_COMPOSED", path == "composed")
    want = -np.log(np.float32(1e-7))                    # 16.118, not -log(float32 eps) = 15.942
    cce = keras.losses.CategoricalCrossentropy()(np.array([[0.0, 1.0]]), np.array([[1.0, 0.0]]))
    bce = keras.losses.BinaryCrossentropy()(np.array([[1.0]]), np.array([[0.0]]))
    np.testing.assert_allclose([float(cce), float(bce)], [want, want], rtol=1e-6)
    # probabilities that need no clipping are untouched; unnormalised ones are scaled first
    p = np.array([[0.5, -0.2, 1.0]])
    q = np.clip(p / p.sum(), 1e-7, 1 - 1e-7)
    np.testing.assert_allclose(float(keras.losses.CategoricalCrossentropy()(np.array([[0.2, 0.3, 0.5]]), p)),
                               -np.sum([0.2, 0.3, 0.5] * np.log(q)), rtol=1e-5)
    # and a model still trains through the clip (its gradient inside the range)
    m = keras.Sequential([layers.Dense(1, activation="sigmoid")], input_shape=3)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.05), loss="binary_crossentropy", seed=0)
    x = RNG.random((64, 3)).astype(np.float32)
    y = (x.sum(1, keepdims=True) > 1.5).astype(np.float32)
    h = m.fit(x, y, epochs=30, batch_size=64, verbose=0)
    assert h.history["loss"][-1] < 0.8 * h.history["loss"][0]


# --- Keras's own weight lists of the recurrent layers -------------------------------------------

def _sig(a):
    return 1 / (1 + np.exp(-a))


def _keras_lstm(x, k, rk, b):
    u = rk.shape[0]
    h = c = np.zeros((x.shape[0], u))
    for t in range(x.shape[1]):
        z = x[:, t] @ k + h @ rk + b
        i, f, g, o = _sig(z[:, :u]), _sig(z[:, u:2 * u]), np.tanh(z[:, 2 * u:3 * u]), _sig(z[:, 3 * u:])
        c = f * c + i * g
        h = o * np.tanh(c)
    return h


def _keras_gru(x, k, rk, b):
    # Keras 3's GRU, reset_after=True: gates z, r, h along the columns, bias (2, 3 units)
    u = rk.shape[0]
    h = np.zeros((x.shape[0], u))
    for t in range(x.shape[1]):
        xz = x[:, t] @ k + b[0]
        inner = h @ rk + b[1]
        z = _sig(xz[:, :u] + inner[:, :u])
        r = _sig(xz[:, u:2 * u] + inner[:, u:2 * u])
        hh = np.tanh(xz[:, 2 * u:] + r * inner[:, 2 * u:])
        h = z * h + (1 - z) * hh
    return h


def keras_rnn(kind, x, k, rk, b):
    """The last state of Keras's LSTM, GRU or SimpleRNN with its own three arrays, in numpy."""
    if kind == "lstm":
        return _keras_lstm(x, k, rk, b)
    if kind == "gru":
        return _keras_gru(x, k, rk, b)
    h = np.zeros((x.shape[0], rk.shape[0]))
    for t in range(x.shape[1]):
        h = np.tanh(x[:, t] @ k + h @ rk + b)
    return h


@pytest.mark.parametrize("kind", ["lstm", "gru", "simple_rnn"])
def test_a_recurrent_layer_takes_keras_s_three_arrays(kind):
    units, feats = 4, 3
    x = RNG.normal(size=(2, 5, feats)).astype(np.float32)
    g = {"lstm": 4, "gru": 3, "simple_rnn": 1}[kind]
    k = RNG.normal(size=(feats, g * units)) * 0.5
    rk = RNG.normal(size=(units, g * units)) * 0.5
    b = RNG.normal(size=(2, g * units) if kind == "gru" else (g * units,)) * 0.5
    layer = {"lstm": layers.LSTM, "gru": layers.GRU, "simple_rnn": layers.SimpleRNN}[kind](units)
    layer(x)
    layer.set_weights([k, rk, b])
    np.testing.assert_allclose(layer(x), keras_rnn(kind, x, k, rk, b), rtol=1e-5, atol=1e-5)
    if kind == "gru":
        with pytest.raises(ValueError, match="reset_after"):
            layer.set_weights([k, rk, b[0]])


# --- symbolic masks, summary's class names, a schedule without get_config -----------------------

def test_a_symbolic_tensor_carries_keras_s_mask():
    # the masking guide: an Embedding(mask_zero=True), a layer that supports masking after it
    class MyActivation(layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.supports_masking = True

        def call(self, inputs):
            return ops.relu(inputs)

    inputs = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(input_dim=50, output_dim=4, mask_zero=True)(inputs)
    y = MyActivation()(x)
    assert inputs._keras_mask is None
    assert layers.Embedding(50, 4)(inputs)._keras_mask is None                  # mask_zero=False
    assert layers.Flatten()(keras.Input((4, 3)))._keras_mask is None
    assert y._keras_mask is y._keras_mask and y._keras_mask.shape == (None, None)
    # the mask is a tensor of the model: 1 for real steps
    m = keras.Model(inputs, [layers.LSTM(3)(y), y._keras_mask])
    ids = np.array([[3, 4, 0, 0], [5, 0, 0, 0]])
    np.testing.assert_array_equal(m.predict(ids, verbose=0)[1], (ids != 0).astype(np.float32))


def test_summary_names_a_nested_functional_model_functional():
    i = keras.Input((3,))
    inner = keras.Model(i, layers.Dense(2)(i))
    j = keras.Input((3,))
    m = keras.Model(j, layers.Dense(1)(inner(j)))
    lines = []
    m.summary(print_fn=lines.append)
    assert any(r.startswith("functional (Functional)") for r in lines[0].splitlines())


def test_a_schedule_without_get_config_says_what_to_override(tmp_path):
    class Sched(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return 1e-3

    m = keras.Sequential([keras.Input((2,)), layers.Dense(1)])
    m.compile(optimizer=keras.optimizers.Adam(Sched()), loss="mse")
    with pytest.raises(NotImplementedError, match="'Sched' must override `get_config"):
        m.save(str(tmp_path / "s.keras"))
    assert not (tmp_path / "s.keras").exists()


def test_targets_of_an_output_without_a_loss_that_are_not_numbers_are_left_alone():
    # they fed nothing before the metrics read such targets, and still train nothing
    i = keras.Input((3,))
    m = keras.Model(i, {"a": layers.Dense(2, name="a")(i), "b": layers.Dense(1, name="b")(i)})
    m.compile(optimizer="adam", loss={"a": "mse", "b": None})
    x = RNG.random((8, 3)).astype(np.float32)
    ya = RNG.random((8, 2)).astype(np.float32)
    h = m.fit(x, {"a": ya, "b": np.array(["text"] * 8)}, epochs=1, verbose=0)
    p = m.predict(x, verbose=0)
    assert np.isfinite(h.history["loss"][0])
    np.testing.assert_allclose(m.evaluate(x, {"a": ya, "b": np.array(["t"] * 8)}, verbose=0),
                               np.mean((p["a"] - ya) ** 2), rtol=1e-5)
