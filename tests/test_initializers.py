"""Keras's initializers: names and class names, the classes with their arguments, the
statistics each draws (against the formula for its fans), seeds, serialization in
layer configs through save/load, and bad arguments."""

import math

import numpy as np
import pytest

import pyggml as pg
from pyggml import initializers, layers

SHAPE = (400, 300)          # Keras's (in, out) when called directly: fan_in 400, fan_out 300


@pytest.mark.parametrize("name, std", [
    ("he_normal", math.sqrt(2 / 400)), ("he_uniform", math.sqrt(2 / 400)), ("lecun_normal", math.sqrt(1 / 400)),
    ("lecun_uniform", math.sqrt(1 / 400)), ("glorot_normal", math.sqrt(2 / 700)),
    ("glorot_uniform", math.sqrt(2 / 700)), ("random_normal", 0.05), ("random_uniform", 0.05 / math.sqrt(3)),
    ("truncated_normal", 0.05 * 0.87962566103423978)])
def test_named_initializers_draw_keras_statistics(name, std):
    cls = {"he_normal": "HeNormal", "he_uniform": "HeUniform", "lecun_normal": "LecunNormal",
           "lecun_uniform": "LecunUniform", "glorot_normal": "GlorotNormal", "glorot_uniform": "GlorotUniform",
           "random_normal": "RandomNormal", "random_uniform": "RandomUniform",
           "truncated_normal": "TruncatedNormal"}[name]
    v = getattr(initializers, cls)(seed=3)(SHAPE)
    assert v.shape == SHAPE and v.dtype == np.float32
    assert abs(v.std() - std) < 0.03 * std and abs(v.mean()) < 0.03 * std
    if "uniform" in name:
        limit = std * math.sqrt(3)
        assert v.max() <= limit and v.min() >= -limit and v.max() > 0.99 * limit
    if "normal" in name and name != "random_normal":
        # truncated at two standard deviations of the untruncated normal
        assert np.abs(v).max() <= 2 * std / 0.87962566103423978 + 1e-6
    # the name (snake case or Keras's class name) draws from the same distribution
    w = initializers.get(name)(SHAPE[::-1], np.random.default_rng(0), "out_in")     # pyggml's (out, in) layout
    assert abs(w.std() - std) < 0.03 * std
    assert initializers.get(cls) is initializers.get(name)


def test_seeded_instances_repeat_and_classes_take_their_arguments():
    a = initializers.HeNormal(seed=5)((20, 10))
    np.testing.assert_array_equal(a, initializers.HeNormal(seed=5)((20, 10)))
    assert not np.array_equal(a, initializers.HeNormal(seed=6)((20, 10)))
    v = initializers.RandomNormal(mean=1.0, stddev=0.02, seed=1)((5000,))
    assert abs(v.mean() - 1.0) < 0.002 and abs(v.std() - 0.02) < 0.002
    u = initializers.RandomUniform(minval=2.0, maxval=3.0, seed=1)((1000,))
    assert u.min() >= 2.0 and u.max() <= 3.0
    np.testing.assert_array_equal(initializers.Constant(0.25)((2, 3)), np.full((2, 3), 0.25))
    np.testing.assert_array_equal(initializers.Ones()((2,)), [1, 1])
    np.testing.assert_array_equal(initializers.Zeros()((2,)), [0, 0])
    np.testing.assert_array_equal(initializers.Identity(gain=2.0)((2, 3)), 2 * np.eye(2, 3))
    q = initializers.Orthogonal(gain=1.0, seed=2)((6, 6))
    np.testing.assert_allclose(q @ q.T, np.eye(6), atol=1e-5)
    vs = initializers.VarianceScaling(scale=3.0, mode="fan_out", distribution="untruncated_normal", seed=0)
    assert abs(vs((300, 500)).std() - math.sqrt(3 / 500)) < 0.03 * math.sqrt(3 / 500)
    # Keras's conv kernel (kh, kw, in, out): fan_in = kh * kw * in
    k = initializers.HeUniform(seed=0)((3, 3, 16, 32))
    assert abs(k.std() - math.sqrt(2 / 144)) < 0.05 * math.sqrt(2 / 144)


def test_serialize_round_trip():
    for init in (initializers.HeNormal(seed=4), initializers.RandomNormal(stddev=0.02),
                 initializers.Constant(0.5), initializers.VarianceScaling(2.0, "fan_avg", "uniform"),
                 initializers.Orthogonal(gain=0.5), initializers.Identity()):
        cfg = initializers.serialize(init)
        assert cfg["class_name"] == type(init).__name__ and cfg["module"] == "keras.initializers"
        back = initializers.deserialize(cfg)
        assert type(back) is type(init) and back.get_config() == init.get_config()
    assert initializers.serialize("he_normal") == "he_normal"
    assert isinstance(initializers.get({"class_name": "Constant", "config": {"value": 2.0}}), initializers.Constant)


def test_layers_keep_initializers_through_configs_and_save_load(tmp_path):
    pg.set_seed(0)
    m = pg.Sequential([pg.Input((6,)),
                       layers.Dense(5, kernel_initializer=initializers.HeNormal(seed=1), bias_initializer="Ones"),
                       layers.Dense(3, kernel_initializer="he_uniform", bias_initializer=initializers.Constant(0.5)),
                       layers.LayerNormalization(gamma_initializer=initializers.Constant(2.0))])
    m.compile(optimizer="adam", loss="mse")
    w = m.get_weights()
    np.testing.assert_array_equal(w["dense.bias"], np.ones(5))
    np.testing.assert_array_equal(w["dense_1.bias"], np.full(3, 0.5))
    np.testing.assert_array_equal(w["layer_normalization.weight"], np.full(3, 2.0))
    # HeNormal(seed=1) draws Keras's (in, out) kernel; pyggml keeps (out, in)
    np.testing.assert_allclose(w["dense.weight"], initializers.HeNormal(seed=1)((6, 5)).T, rtol=1e-6)
    cfg = m.layers[0].get_config()
    assert cfg["kernel_initializer"]["class_name"] == "HeNormal" and cfg["bias_initializer"] == "Ones"
    x = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)
    for path in (tmp_path / "m.gguf", tmp_path / "m.keras"):
        m.save(str(path))
        back = pg.load_model(str(path))
        np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
        assert back.layers[1].get_config()["bias_initializer"]["config"] == {"value": 0.5}
        assert back.layers[0].get_config()["kernel_initializer"]["config"] == {"seed": 1, "input_axes": None, "output_axes": None}
    # a rebuilt model draws the same seeded kernel again
    twin = pg.Sequential.from_config(m.get_config())
    twin.compile(optimizer="adam", loss="mse")
    np.testing.assert_array_equal(twin.get_weights()["dense.weight"], w["dense.weight"])
    m.free()


@pytest.mark.parametrize("call, err, match", [
    (lambda: initializers.get("he_normall"), ValueError, "unknown initializer"),
    (lambda: initializers.get(3), TypeError, "name"),
    (lambda: initializers.deserialize({"class_name": "Nope"}), ValueError, "unknown initializer class"),
    (lambda: initializers.RandomNormal(stddev=0), ValueError, "positive"),
    (lambda: initializers.RandomNormal(stddev="big"), TypeError, "number"),
    (lambda: initializers.RandomUniform(minval=1, maxval=0), ValueError, "maxval"),
    (lambda: initializers.VarianceScaling(mode="fan_mid"), ValueError, "mode"),
    (lambda: initializers.VarianceScaling(distribution="cauchy"), ValueError, "distribution"),
    (lambda: initializers.HeNormal(seed=-1), TypeError, "seed"),
    (lambda: initializers.Identity()((2, 2, 2)), ValueError, "2-D"),
    (lambda: initializers.HeNormal()((2, 2), dtype="float64"), ValueError, "float32"),
    (lambda: pg.Sequential([pg.Input((3,)), layers.Dense(2, kernel_initializer="nope")]).compile(loss="mse"),
     ValueError, "unknown initializer"),
])
def test_bad_arguments(call, err, match):
    with pytest.raises(err, match=match):
        call()
