"""A metric updated in a layer's call (keras-io's "endpoint layer" recipe): the layer takes the
targets as an input, adds its loss with add_loss and calls ``metric.update_state`` on graph
tensors.  The graph reads those tensors back after each step and the metric is updated on the
host with their values; fit and evaluate report it under its name, reset each epoch, as
Keras's do.  Values checked against numpy."""

import numpy as np
import pytest

import pyggml as pg
from pyggml import layers, ops

RNG = np.random.default_rng(21)


class _Endpoint(layers.Layer):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.loss_fn = pg.losses.BinaryCrossentropy(from_logits=True)
        self.accuracy_metric = pg.metrics.BinaryAccuracy(name="accuracy")

    def call(self, logits, targets=None, sample_weight=None):
        if targets is not None:
            self.add_loss(self.loss_fn(targets, logits, sample_weight))
            self.accuracy_metric.update_state(targets, logits, sample_weight)
        return ops.sigmoid(logits)


def _data(n=96, d=12):
    x = RNG.normal(size=(n, d)).astype(np.float32)
    t = (x[:, :1] + 0.3 * RNG.normal(size=(n, 1)) > 0).astype(np.float32)
    return {"inputs": x, "targets": t, "sample_weight": RNG.random((n, 1)).astype(np.float32)}


def _functional(d=12):
    pg.set_seed(3)
    inputs = pg.Input((d,), name="inputs")
    dense = layers.Dense(1)
    targets = pg.Input((1,), name="targets")
    sample_weight = pg.Input((1,), name="sample_weight")
    end = _Endpoint()
    model = pg.Model([inputs, targets, sample_weight], end(dense(inputs), targets, sample_weight))
    return model, dense, end


def _expected(dense, data):
    logits = data["inputs"] @ dense.kernel.numpy() + dense.bias.numpy()
    t, w = data["targets"], data["sample_weight"]
    bce = np.maximum(logits, 0) - logits * t + np.log1p(np.exp(-np.abs(logits)))
    loss = float(np.sum(w * bce) / len(t))                       # Keras: sum over the batch's rows
    acc = float(np.sum(w * ((logits > 0.5) == t)) / np.sum(w))   # the recipe thresholds the logits
    return loss, acc


def test_the_endpoint_layer_s_metric_is_reported_and_holds_numpy_s_value():
    model, dense, end = _functional()
    data = _data()
    model.compile(pg.optimizers.Adam(1e-2))
    hist = model.fit(data, epochs=3, batch_size=32, verbose=0)
    assert set(hist.history) >= {"loss", "accuracy"} and hist.history["loss"][-1] < hist.history["loss"][0]
    loss, acc = _expected(dense, data)
    logs = model.evaluate(data, batch_size=96, verbose=0, return_dict=True)
    assert logs["loss"] == pytest.approx(loss, rel=1e-4)
    assert logs["accuracy"] == pytest.approx(acc, rel=1e-5)
    assert float(end.accuracy_metric.result()) == pytest.approx(acc, rel=1e-5)
    # reset for each evaluation, as Keras's: the same value again, not an accumulation
    assert model.evaluate(data, batch_size=32, verbose=0, return_dict=True)["accuracy"] == pytest.approx(acc, rel=1e-5)


def test_the_inference_model_without_targets_takes_the_trained_weights():
    model, dense, _ = _functional()
    data = _data()
    model.compile(pg.optimizers.Adam(1e-2))
    model.fit(data, epochs=1, verbose=0)
    inputs = pg.Input((12,), name="inputs")
    inference = pg.Model(inputs, _Endpoint()(layers.Dense(1)(inputs), targets=None, sample_weight=None))
    inference.set_weights(model.get_weights())
    logits = data["inputs"] @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(inference.predict(data["inputs"], verbose=0), 1 / (1 + np.exp(-logits)),
                               rtol=1e-5, atol=1e-6)


def test_a_subclassed_model_with_the_endpoint_layer_trains_and_reports_it():
    class LogReg(pg.Model):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(1)
            self.endpoint = _Endpoint()

        def call(self, inputs):
            return self.endpoint(self.dense(inputs["inputs"]), targets=inputs["targets"],
                                 sample_weight=inputs["sample_weight"])

    pg.set_seed(4)
    model = LogReg()
    data = _data()
    model.compile(pg.optimizers.Adam(1e-2))
    hist = model.fit(data, epochs=2, batch_size=32, verbose=0)
    assert "accuracy" in hist.history
    _, acc = _expected(model.dense, data)
    assert model.evaluate(data, batch_size=96, verbose=0, return_dict=True)["accuracy"] == pytest.approx(acc, rel=1e-5)


def test_binary_accuracy_compares_labels_as_keras_does():
    # the thresholded prediction must equal the label: a soft label matches neither 0 nor 1
    m = pg.metrics.BinaryAccuracy()
    m.update_state(np.array([[0.3], [0.7], [1.0], [0.0]], np.float32), np.array([[0.9], [0.9], [0.9], [0.1]], np.float32))
    assert float(m.result()) == pytest.approx(0.5)
