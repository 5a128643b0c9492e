"""Keras 3 behaviours that keras-io ports ran into: ReLU's cap, threshold and slope exact in
float32 (MobileNetV2's ReLU6 zeroed small features), Normalization's ``mean`` and
``variance`` after adapt, ``InputLayer`` as a Sequential's first element, and
ModelCheckpoint making the folder of its file."""

import os

import numpy as np
import pytest

import pyggml as pg
from pyggml import activations, layers, ops


# --- ReLU: exact in float32 ----------------------------------------------------------------

SMALL = np.array([1e-7, 3e-7, 1.2345e-3, -1e-7, 0.5, 7.0, 5.9999995, 6.0000005, -3.0, 1e-30, 123.0, 2.5e-6],
                 np.float32)


def keras_relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """Keras's relu in float32: x above the threshold (0 otherwise), clipped to [0, max_value],
    less negative_slope * relu(threshold - x)."""
    x = np.asarray(x, np.float32)
    pos = np.where(x > np.float32(threshold), x, np.float32(0))
    if max_value is not None:
        pos = np.clip(pos, np.float32(0), np.float32(max_value))
    if negative_slope:
        pos = pos - np.float32(negative_slope) * np.maximum(np.float32(threshold) - x, np.float32(0))
    return pos.astype(np.float32)


def keras_relu_grad(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """d relu / dx away from the kinks."""
    x = np.asarray(x, np.float64)
    g = (x > threshold).astype(np.float64)
    if max_value is not None:
        g = g * (x < max_value) * (x > 0)
    return g + negative_slope * (x < threshold)


RELU_ARGS = [dict(max_value=6.0), dict(max_value=6.0, negative_slope=0.1), dict(max_value=6.0, threshold=0.5),
             dict(max_value=0.8, negative_slope=0.1, threshold=0.2), dict(negative_slope=0.2),
             dict(threshold=1e-3), dict(threshold=0.5, negative_slope=0.3), dict(max_value=1e-6),
             dict(max_value=6.0, threshold=2.0)]   # (a negative threshold: Keras's ValueError)


def _predict(layer, x):
    m = pg.Sequential([pg.Input(shape=x.shape[1:]), layer])
    return m.predict(x, verbose=0)


def test_relu6_layer_keeps_small_values_exactly(graph_path):
    x = SMALL[None]
    for layer in (layers.ReLU(max_value=6.0), layers.Activation("relu6"), layers.ReLU(6.0)):
        np.testing.assert_array_equal(_predict(layer, x), np.clip(x, 0, 6))


@pytest.mark.parametrize("kwargs", RELU_ARGS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_relu_layer_argument_combinations_match_keras(graph_path, kwargs):
    rng = np.random.default_rng(0)
    x = np.concatenate([SMALL, rng.normal(0, 4, 40).astype(np.float32),
                        (rng.normal(0, 1, 20) * 1e-6).astype(np.float32)])[None]
    got = _predict(layers.ReLU(**kwargs), x)
    want = keras_relu(x, **kwargs)
    # the part above the threshold is x itself or the cap: exact
    above = x > kwargs.get("threshold", 0.0)
    np.testing.assert_array_equal(got[above], want[above])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-37)


@pytest.mark.parametrize("kwargs", RELU_ARGS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_relu_layer_gradient_matches_numpy(graph_path, kwargs):
    rng = np.random.default_rng(1)
    x = rng.normal(0, 4, (3, 16)).astype(np.float32)
    x[0, :4] = [2e-7, 4e-7, 1.5e-3, 5.5]           # small values and just under the usual cap
    weights = rng.normal(size=x.shape).astype(np.float32)
    m = pg.Sequential([pg.Input(shape=(16,)), layers.ReLU(**kwargs)])
    with pg.GradientTape() as tape:
        tape.watch(x)
        target = ops.sum(m(x) * weights)
    got = tape.gradient(target, x)
    np.testing.assert_allclose(got, weights * keras_relu_grad(x, **kwargs), rtol=1e-6, atol=1e-7)


def test_relu_layer_trains_through_the_cap(graph_path):
    # a Dense behind ReLU(6): only the rows below the cap move the kernel
    pg.set_seed(0)
    m = pg.Sequential([pg.Input(shape=(2,)), layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros"),
                       layers.ReLU(max_value=6.0)])
    m.compile(optimizer=pg.optimizers.SGD(0.1), loss="mse")
    x = np.array([[1.0, 1.0], [5.0, 5.0]], np.float32)         # 2 (inside) and 10 (capped)
    y = np.array([[3.0], [3.0]], np.float32)
    m.fit(x, y, epochs=1, batch_size=2, verbose=0)
    kernel = m.layers[0].get_weights()[0]
    # mse's gradient from the first row only: d/dw = 2 * (2 - 3) * x / 2 = -1 per input
    np.testing.assert_allclose(kernel.ravel(), [1.1, 1.1], rtol=1e-5)


def test_relu_activation_function_takes_keras_arguments(graph_path):
    x = SMALL.reshape(3, 4)
    np.testing.assert_array_equal(activations.relu(x), np.maximum(x, 0))
    np.testing.assert_array_equal(activations.relu(x, max_value=6.0), np.clip(x, 0, 6))
    np.testing.assert_array_equal(activations.relu6(x), np.clip(x, 0, 6))
    for kwargs in RELU_ARGS:
        np.testing.assert_allclose(activations.relu(x, **kwargs), keras_relu(x, **kwargs), rtol=1e-6, atol=1e-37)
    # in a graph (a Lambda) as well
    m = pg.Sequential([pg.Input(shape=(4,)),
                       layers.Lambda(lambda t: activations.relu(t, negative_slope=0.1, max_value=6.0,
                                                                threshold=2e-7))])
    np.testing.assert_allclose(m.predict(x, verbose=0), keras_relu(x, 0.1, 6.0, 2e-7), rtol=1e-6, atol=1e-37)


def test_relu_function_refuses_bad_arguments():
    with pytest.raises(ValueError, match="max_value"):
        activations.relu(np.ones(3), max_value=-1.0)
    with pytest.raises(TypeError, match="negative_slope"):
        activations.relu(np.ones(3), negative_slope="x")
    with pytest.raises(ValueError, match="max_value"):
        layers.ReLU(max_value=-1.0)


def test_relu6_small_features_survive_a_deep_stack(graph_path):
    # MobileNetV2's failure: activations of 1e-7 went to 0 after a few ReLU6 layers
    stack = [pg.Input(shape=(4,))] + [layers.ReLU(6.0) for _ in range(12)]
    x = np.array([[1e-7, 2e-7, 3e-5, 4.0]], np.float32)
    np.testing.assert_array_equal(pg.Sequential(stack).predict(x, verbose=0), x)


def test_relu_config_round_trip():
    layer = layers.ReLU(max_value=6.0, negative_slope=0.1, threshold=0.2)
    cfg = layer.get_config()
    assert (cfg["max_value"], cfg["negative_slope"], cfg["threshold"]) == (6.0, 0.1, 0.2)
    back = layers.ReLU.from_config(cfg)
    x = SMALL[None]
    np.testing.assert_array_equal(_predict(back, x), _predict(layer, x))


# --- Normalization: mean and variance ----------------------------------------------------------

def test_normalization_mean_and_variance_after_adapt_have_keras_broadcast_shape():
    rng = np.random.default_rng(0)
    data = rng.random((10, 4, 4, 3)).astype(np.float32)
    n = layers.Normalization()
    n.adapt(data)
    assert n.mean.shape == (1, 1, 1, 3) and n.variance.shape == (1, 1, 1, 3)
    assert n.mean.dtype == np.float32
    np.testing.assert_allclose(n.mean.ravel(), data.mean(axis=(0, 1, 2)), rtol=1e-5)
    np.testing.assert_allclose(n.variance.ravel(), data.var(axis=(0, 1, 2)), rtol=1e-4)
    # keras-io ddim's denormalize: mean + images * variance ** 0.5 undoes the layer
    normed = np.asarray(n(data))
    np.testing.assert_allclose(n.mean + normed * n.variance ** 0.5, data, rtol=1e-4, atol=1e-5)
    # the weights are still Keras's three, and the config still holds no statistics
    assert [w.name for w in n.weights] == ["mean", "variance", "count"]
    cfg = n.get_config()
    assert cfg["mean"] is None and cfg["variance"] is None
    assert layers.Normalization.from_config(cfg).get_config() == cfg


def test_normalization_mean_for_other_axes():
    rng = np.random.default_rng(1)
    data = rng.normal(size=(6, 2, 3)).astype(np.float32)
    n = layers.Normalization(axis=None)
    n.adapt(data)
    assert n.mean.shape == (1, 1, 1)
    np.testing.assert_allclose(n.mean.ravel(), [data.mean()], rtol=1e-5)
    n = layers.Normalization(axis=(1, 2))
    n.adapt(data)
    assert n.mean.shape == (1, 2, 3)
    np.testing.assert_allclose(n.variance[0], data.var(axis=0), rtol=1e-4)


def test_normalization_given_mean_and_variance_broadcast_once_built():
    n = layers.Normalization(mean=[1.0, 2.0], variance=[4.0, 9.0])
    assert not hasattr(n, "mean")                       # Keras: known once built
    y = pg.Sequential([pg.Input(shape=(2,)), n]).predict(np.array([[3.0, 8.0]], np.float32), verbose=0)
    np.testing.assert_allclose(y, [[1.0, 2.0]], rtol=1e-6)
    np.testing.assert_array_equal(n.mean, [[1.0, 2.0]])
    np.testing.assert_array_equal(n.variance, [[4.0, 9.0]])
    cfg = n.get_config()
    assert cfg["mean"] == [1.0, 2.0] and cfg["variance"] == [4.0, 9.0]
    scalar = layers.Normalization(mean=3.0, variance=1.0)
    scalar.build((None, 4))
    np.testing.assert_array_equal(scalar.mean, np.full((1, 4), 3.0, np.float32))


def test_normalization_mean_follows_its_weights_and_is_read_only():
    m = pg.Sequential([pg.Input(shape=(3,)), layers.Normalization()])
    n = m.layers[0]
    np.testing.assert_array_equal(n.mean, np.zeros((1, 3), np.float32))     # built in the Sequential
    np.testing.assert_array_equal(n.variance, np.ones((1, 3), np.float32))
    n.set_weights([np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, 4.0, 9.0], np.float32),
                   np.array(0, np.int64)])
    np.testing.assert_array_equal(n.mean, [[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(n.variance, [[1.0, 4.0, 9.0]])
    with pytest.raises(AttributeError):
        n.mean = np.zeros(3)
    with pytest.raises(AttributeError, match="built"):
        layers.Normalization().variance


# --- InputLayer in a Sequential ------------------------------------------------------------------

def test_input_layer_first_in_sequential_sets_the_input_shape():
    il = layers.InputLayer((28, 28, 11))
    m = pg.Sequential([il, layers.Conv2D(4, 3), layers.GlobalMaxPooling2D(), layers.Dense(1)])
    assert m.input_shape == (None, 28, 28, 11)
    assert m.output_shape == (None, 1)
    assert [type(l).__name__ for l in m.layers] == ["Conv2D", "GlobalMaxPooling2D", "Dense"]   # Keras 3's list
    assert m.count_params() == 3 * 3 * 11 * 4 + 4 + 4 + 1
    assert m.predict(np.zeros((2, 28, 28, 11), np.float32), verbose=0).shape == (2, 1)


@pytest.mark.parametrize("make", [lambda: layers.InputLayer(shape=(5,)), lambda: layers.InputLayer(input_shape=(5,)),
                                  lambda: layers.InputLayer(batch_shape=(None, 5)),
                                  lambda: layers.InputLayer(batch_input_shape=(None, 5))],
                         ids=["shape", "input_shape", "batch_shape", "batch_input_shape"])
def test_input_layer_keyword_forms_and_add(make):
    m = pg.Sequential()
    m.add(make())
    m.add(layers.Dense(2))
    assert m.input_shape == (None, 5) and m.output_shape == (None, 2)
    m.compile(optimizer="sgd", loss="mse")
    m.fit(np.ones((4, 5), np.float32), np.ones((4, 2), np.float32), verbose=0)
    assert pg.Sequential.from_config(m.get_config()).input_shape == (None, 5)


def test_input_layer_batch_size_fixes_the_batch():
    for il in (layers.InputLayer((5,), 4), layers.InputLayer(shape=(5,), batch_size=4),
               layers.InputLayer(batch_shape=(4, 5))):
        m = pg.Sequential([il, layers.Dense(2)])
        assert m.input_shape == (4, 5)
        assert m.predict(np.ones((4, 5), np.float32), verbose=0).shape == (4, 2)


def test_input_layer_dtype_and_output():
    il = layers.InputLayer(shape=(3,), dtype="int32")
    m = pg.Sequential([il, layers.Embedding(10, 2)])
    assert m.predict(np.array([[1, 2, 3]]), verbose=0).shape == (1, 3, 2)
    # its output is the symbolic input (Keras's InputLayer(...).output)
    il = layers.InputLayer((3,), name="features")
    out = layers.Dense(2)(il.output)
    f = pg.Model(il.output, out)
    assert f.input_shape == (None, 3) and f.predict(np.ones((1, 3), np.float32), verbose=0).shape == (1, 2)


def test_input_layer_errors():
    with pytest.raises(ValueError, match="first"):
        pg.Sequential([layers.Dense(2), layers.InputLayer((3,))])
    with pytest.raises(ValueError, match="disagree"):
        layers.InputLayer(shape=(3,), input_shape=(4,))
    with pytest.raises(ValueError, match="sparse"):
        layers.InputLayer((3,), sparse=True)
    with pytest.raises(ValueError, match="shape"):
        layers.InputLayer()


# --- ModelCheckpoint and BackupAndRestore make their folders -----------------------------------

def _small_model():
    m = pg.Sequential([pg.Input(shape=(2,)), layers.Dense(1)])
    m.compile(optimizer="adam", loss="mse")
    return m


def _fit(m, callbacks, epochs=1):
    m.fit(np.zeros((4, 2), np.float32), np.zeros((4, 1), np.float32), epochs=epochs, verbose=0,
          callbacks=callbacks)


def test_model_checkpoint_makes_a_missing_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    m = _small_model()
    _fit(m, [pg.callbacks.ModelCheckpoint("ckpt_missing_dir/m.weights.h5", save_weights_only=True)])
    assert os.listdir("ckpt_missing_dir") == ["m.weights.h5"]
    fresh = _small_model()
    fresh.load_weights("ckpt_missing_dir/m.weights.h5")
    for a, b in zip(fresh.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_model_checkpoint_makes_folders_of_formatted_paths(tmp_path):
    m = _small_model()
    pattern = str(tmp_path / "a" / "b" / "{epoch:02d}.weights.h5")
    _fit(m, [pg.callbacks.ModelCheckpoint(pattern, save_weights_only=True)], epochs=2)
    assert sorted(os.listdir(tmp_path / "a" / "b")) == ["01.weights.h5", "02.weights.h5"]
    # a folder named after the epoch, and the whole model rather than its weights
    _fit(m, [pg.callbacks.ModelCheckpoint(str(tmp_path / "run_{epoch}" / "model.keras"))], epochs=2)
    assert os.path.isfile(tmp_path / "run_1" / "model.keras") and os.path.isfile(tmp_path / "run_2" / "model.keras")


def test_backup_and_restore_makes_a_missing_folder(tmp_path):
    backup = tmp_path / "deep" / "backup"
    m = _small_model()
    _fit(m, [pg.callbacks.BackupAndRestore(str(backup), delete_checkpoint=False)])
    assert os.path.isdir(backup) and os.listdir(backup)
