"""Trainer behaviours found by porting Keras's trainer and model tests: a callback's
stop_evaluating / stop_predicting, Model(..., trainable=False), a one-element list as an
output's loss, the "crossentropy"/"ce" loss and the "bce" metric, fit before compile."""

import numpy as np
import pytest

import pyggml as pg

# the weights of a Dense(3) on 2 features, in Keras's layout (get_weights/set_weights lists)
W = [np.array([[0.3, -0.2, 0.5], [0.1, 0.4, -0.6]], np.float32), np.array([0.05, -0.1, 0.2], np.float32)]
X = np.array([[1., 2.], [0.5, -1.], [-1., 0.3], [2., 1.]], np.float32)
LABELS = np.array([0, 2, 1, 2])


def _dense_model(units=3, activation="softmax", **kwargs):
    i = pg.Input((2,))
    m = pg.Model(i, pg.layers.Dense(units, activation=activation)(i), **kwargs)
    m.set_weights(W if units == 3 else [W[0][:, :1], W[1][:1]])
    return m


def _counting_stopper(hook, flag, at, counter):
    class Stopper(pg.callbacks.Callback):
        pass

    def end(self, batch, logs=None):
        counter.append(batch)
        if len(counter) == at:
            setattr(self.model, flag, True)
    setattr(Stopper, hook, end)
    return Stopper()


# --- stop_evaluating / stop_predicting ---------------------------------------------------------
@pytest.mark.parametrize("method,flag,hook", [("evaluate", "stop_evaluating", "on_test_batch_end"),
                                              ("predict", "stop_predicting", "on_predict_batch_end")])
def test_callback_stops_evaluate_and_predict_after_its_batch(method, flag, hook):
    m = _dense_model()
    m.compile(optimizer="sgd", loss="mse")
    seen = []
    args = (np.ones((40, 2)), np.ones((40, 3))) if method == "evaluate" else (np.ones((40, 2)),)
    getattr(m, method)(*args, batch_size=2, callbacks=[_counting_stopper(hook, flag, 5, seen)], verbose=0)
    assert seen == [0, 1, 2, 3, 4]                 # Keras 3.15.1: 5 batches, then it stops
    # the flag is reset at the start of the next call (Keras's): all 20 batches run
    seen.clear()
    getattr(m, method)(*args, batch_size=2, callbacks=[_counting_stopper(hook, flag, 100, seen)], verbose=0)
    assert len(seen) == 20


def test_stop_evaluating_ends_an_endless_generator_and_averages_the_batches_run():
    m = _dense_model(activation=None)
    m.compile(optimizer="sgd", loss="mse")

    def endless():
        k = 0
        while True:
            yield np.full((2, 2), float(k % 3), np.float32), np.zeros((2, 3), np.float32)
            k += 1
    seen = []
    loss = m.evaluate(endless(), callbacks=[_counting_stopper("on_test_batch_end", "stop_evaluating", 3, seen)],
                      verbose=0)
    # the mean over the three batches run (numpy reference of the same Dense)
    xs = np.concatenate([np.full((2, 2), float(k), np.float32) for k in range(3)])
    expected = np.mean((xs @ W[0] + W[1] - 0) ** 2)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    preds = m.predict((np.ones((2, 2), np.float32) for _ in iter(int, 1)), verbose=0,
                      callbacks=[_counting_stopper("on_predict_batch_end", "stop_predicting", 4, [])])
    assert preds.shape == (8, 3)


def test_fit_validation_honours_stop_evaluating():
    m = _dense_model()
    m.compile(optimizer="sgd", loss="mse")
    seen = []
    m.fit(np.ones((8, 2)), np.zeros((8, 3)), batch_size=4, epochs=2, verbose=0,
          validation_data=(np.ones((20, 2)), np.zeros((20, 3))), validation_batch_size=2,
          callbacks=[_counting_stopper("on_test_batch_end", "stop_evaluating", 2, seen)])
    # epoch 1's validation stops after 2 batches; epoch 2's starts afresh (flag reset) and runs all 10
    assert seen == [0, 1] + list(range(10))


# --- Model(..., trainable=False) -------------------------------------------------------------------
def test_model_made_untrainable_freezes_its_weights():
    m = _dense_model(trainable=False)
    assert m.trainable is False
    assert m.trainable_weights == [] and len(m.non_trainable_weights) == 2
    m.compile(optimizer="sgd", loss="mse")
    before = [w.copy() for w in m.layers[-1].get_weights()]
    with pytest.warns(UserWarning, match="no trainable weights"):
        m.fit(X, np.zeros((4, 3)), epochs=2, verbose=0)
    for a, b in zip(before, m.layers[-1].get_weights()):
        np.testing.assert_array_equal(a, b)
    m.trainable = True                              # thawed: it trains again
    assert len(m.trainable_weights) == 2


def test_model_trainable_false_set_later_and_sequential_flag():
    m = _dense_model()
    m.trainable = False
    m.compile(optimizer="sgd", loss="mse")
    assert m.trainable_weights == []
    s = pg.Sequential([pg.Input((2,)), pg.layers.Dense(3)], trainable=False)
    assert s.trainable is False and s.trainable_weights == []


# --- a one-element list as an output's loss ----------------------------------------------------------
def _two_heads(as_dict):
    x = pg.Input(shape=(2,), name="input_a")
    a = pg.layers.Dense(1, name="output_a")(x)
    b = pg.layers.Dense(1, name="output_b", activation="sigmoid")(x)
    m = pg.Model(x, {"output_a": a, "output_b": b} if as_dict else [a, b])
    m.set_weights([W[0][:, :1], W[1][:1], W[0][:, 1:2], W[1][1:2]])
    return m


@pytest.mark.parametrize("loss,plain", [
    ({"output_a": ["mean_squared_error"], "output_b": "binary_crossentropy"},
     {"output_a": "mean_squared_error", "output_b": "binary_crossentropy"}),
    (["mean_squared_error", ["binary_crossentropy"]], ["mean_squared_error", "binary_crossentropy"]),
])
def test_one_element_loss_list_per_output(loss, plain):
    as_dict = isinstance(loss, dict)
    ya, yb = np.array([[0.2], [0.7], [0.1], [0.9]], np.float32), np.array([[1.], [0.], [1.], [1.]], np.float32)
    y = {"output_a": ya, "output_b": yb} if as_dict else [ya, yb]
    hists = []
    for l in (loss, plain):
        m = _two_heads(as_dict)
        m.compile(optimizer="sgd", loss=l)
        hists.append(m.fit(X, y, epochs=3, batch_size=4, shuffle=False, verbose=0).history)
    assert sorted(k for k in hists[0] if k != "learning_rate") == ["loss", "output_a_loss", "output_b_loss"]
    for k in ("loss", "output_a_loss", "output_b_loss"):       # the same as the loss given alone
        np.testing.assert_allclose(hists[0][k], hists[1][k], rtol=1e-6)
    assert hists[0]["loss"][-1] < hists[0]["loss"][0]


def test_loss_list_of_several_for_one_output_is_refused():
    m = _two_heads(True)
    with pytest.raises(ValueError, match="one loss"):
        m.compile(optimizer="sgd", loss={"output_a": ["mse", "mae"], "output_b": "mse"})


# --- "crossentropy" / "ce" and the "bce" metric ----------------------------------------------------------
@pytest.mark.parametrize("loss", ["crossentropy", "ce"])
@pytest.mark.parametrize("targets", ["sparse1d", "sparse2d", "onehot"])
def test_crossentropy_resolved_by_targets(loss, targets):
    y = {"sparse1d": LABELS, "sparse2d": LABELS[:, None], "onehot": np.eye(3, dtype=np.float32)[LABELS]}[targets]
    m = _dense_model()
    m.compile(optimizer="sgd", loss=loss, metrics=["acc"])
    logs = m.evaluate(X, y, verbose=0, return_dict=True)
    # Keras 3.15.1 (torch), the same weights: loss 0.7572259902954102, acc 0.75
    np.testing.assert_allclose(logs["loss"], 0.7572259902954102, rtol=1e-5)
    assert logs["acc"] == pytest.approx(0.75)
    hist = m.fit(X, y, epochs=2, batch_size=4, verbose=0).history
    np.testing.assert_allclose(hist["loss"], [0.7572259902954102, 0.7534533143043518], rtol=1e-5)
    assert m.get_compile_config()["loss"] == [loss]          # kept as given (Keras's compile config)


def test_crossentropy_on_one_unit_is_binary_and_bce_metric():
    m = _dense_model(1, "sigmoid")
    m.compile(optimizer="sgd", loss="crossentropy", metrics=["bce", "accuracy", "BCE"])
    logs = m.evaluate(X, np.array([[1.], [0.], [1.], [1.]], np.float32), verbose=0, return_dict=True)
    # Keras 3.15.1: {'accuracy': 0.5, 'bce': 0.5989862680435181, 'loss': 0.5989862680435181}
    assert sorted(logs) == ["BCE", "accuracy", "bce", "loss"]
    for k in ("loss", "bce", "BCE"):
        np.testing.assert_allclose(logs[k], 0.5989862680435181, rtol=1e-5)
    assert logs["accuracy"] == pytest.approx(0.5)


def test_metric_aliases_upper_case():
    m = _dense_model()
    m.compile(optimizer="sgd", loss="mse", metrics=["accuracy", "BCE", "MSE", "MAE"])
    logs = m.evaluate(X, np.eye(3, dtype=np.float32)[LABELS], verbose=0, return_dict=True)
    # Keras 3.15.1, the same weights
    expected = {"BCE": 0.4617565870285034, "MAE": 0.34812071919441223, "MSE": 0.14718733727931976,
                "accuracy": 0.75, "loss": 0.14718733727931976}
    assert sorted(logs) == sorted(expected)
    for k, v in expected.items():
        np.testing.assert_allclose(logs[k], v, rtol=1e-5)


def test_accuracy_of_several_sigmoid_units_is_categorical_as_keras():
    m = _dense_model(3, "sigmoid")
    m.compile(optimizer="sgd", loss="binary_crossentropy", metrics=["accuracy"])
    y = np.array([[1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 1, 1]], np.float32)
    logs = m.evaluate(X, y, verbose=0, return_dict=True)
    # Keras 3.15.1: {'accuracy': 0.25, 'loss': 0.7595325708389282} (Keras 3 reads "accuracy" as
    # binary only for an output of one unit)
    np.testing.assert_allclose(logs["loss"], 0.7595325708389282, rtol=1e-5)
    assert logs["accuracy"] == pytest.approx(0.25)


def test_crossentropy_survives_save_and_load(tmp_path):
    m = _dense_model()
    m.compile(optimizer="sgd", loss="crossentropy")
    path = str(tmp_path / "ce.gguf")
    m.save(path)
    back = pg.models.load_model(path)
    logs = back.evaluate(X, LABELS, verbose=0, return_dict=True)        # sparse targets after loading
    np.testing.assert_allclose(logs["loss"], 0.7572259902954102, rtol=1e-5)


# --- fit before compile, built ----------------------------------------------------------------------------
@pytest.mark.parametrize("call", ["fit", "evaluate", "train_on_batch"])
def test_fit_before_compile_raises_value_error(call):
    m = _dense_model()
    with pytest.raises(ValueError, match="compile"):
        getattr(m, call)(X, np.zeros((4, 3)))


def test_functional_model_is_built():
    assert _dense_model().built is True


def test_untrainable_model_config_round_trip_and_save_load(tmp_path):
    # (needs functional.GraphShapes.get_config/from_config to keep "trainable", see the report)
    m = _dense_model(trainable=False)
    cfg = m.get_config()
    assert cfg["trainable"] is False                       # Keras 3.15.1's config has "trainable": False
    twin = pg.Model.from_config(cfg)
    assert twin.trainable is False and twin.trainable_weights == []
    m.compile(optimizer="sgd", loss="mse")
    path = str(tmp_path / "frozen.gguf")
    m.save(path)
    back = pg.models.load_model(path)
    assert back.trainable is False and back.trainable_weights == []
    np.testing.assert_array_equal(back.predict(X, verbose=0), m.predict(X, verbose=0))


def test_untrainable_model_nested_in_another_stays_frozen():
    inner = _dense_model(activation=None, trainable=False)
    x = pg.Input((2,))
    outer = pg.Model(x, pg.layers.Dense(1)(inner(x)))
    assert [w.shape for w in outer.trainable_weights] == [(1, 3), (1,)]     # the outer Dense's alone
    outer.compile(optimizer="sgd", loss="mse")
    outer.fit(X, np.ones((4, 1)), epochs=2, verbose=0)
    for a, b in zip(W, inner.layers[-1].get_weights()):
        np.testing.assert_array_equal(a, b)


def test_one_loss_among_several_outputs_logs_the_loss_alone():
    m = _two_heads(True)
    m.compile(optimizer="sgd", loss={"output_a": ["mse"], "output_b": None})
    h = m.fit(X, {"output_a": np.ones((4, 1)), "output_b": np.ones((4, 1))}, verbose=0).history
    assert sorted(h) == ["learning_rate", "loss"]          # Keras 3.15.1: no per-output key for one loss
    assert m.metrics_names == ["loss"]


def test_a_model_with_its_own_test_step_stops_evaluating_when_told():
    class Own(pg.Model):
        def test_step(self, data):
            x, y = data
            return {"loss": float(np.mean((np.asarray(self(x)) - y) ** 2))}

    inp = pg.Input((3,))
    m = Own(inp, pg.layers.Dense(1)(inp))
    m.compile("sgd", "mse")
    seen = []

    class Stop(pg.callbacks.Callback):
        def on_test_batch_end(self, batch, logs=None):
            seen.append(batch)
            if batch == 2:
                self.model.stop_evaluating = True

    x, y = np.ones((40, 3), np.float32), np.ones((40, 1), np.float32)
    m.evaluate(x, y, batch_size=4, verbose=0, callbacks=[Stop()])
    assert seen == [0, 1, 2]
    seen.clear()
    m.evaluate(x, y, batch_size=4, verbose=0, callbacks=[Stop()])     # the flag starts False again
    assert seen == [0, 1, 2]
