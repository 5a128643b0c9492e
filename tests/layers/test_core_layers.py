"""Dense, the activation layers, Dropout, Flatten, Reshape, Permute and the merging layers
through the layer harness, and Dropout's training behaviour."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

L = pg.layers


def dense_ref(activation=None, use_bias=True):
    def ref(hs, w, training):
        z = hs[0] @ w["weight"].T
        if use_bias:
            z = z + w["bias"]
        return ACTIVATIONS[activation](z)
    return ref


def activation_ref(name):
    return lambda hs, w, training: ACTIVATIONS[name](hs[0])


def dropout_gradient_check(case, kind, rate=0.3, units=3000):
    """With a = W x + b = 1 for every unit, y = -1 and a batch of one row, the
    gradient of b_j is 2 m_j (m_j + 1) / units for the mask value m_j, which is
    0 (dropped) or 1 / (1 - rate) (kept): every gradient must be one of the
    two, about ``rate`` of them 0, and W's gradient must be b's times x."""
    pg.set_seed(11)
    layers = [L.Dense(units, name="pre0"), L.Dropout(rate)]
    if kind == "sequential":
        m = pg.Sequential(layers, input_shape=1)
    else:
        inp = pg.Input((1,))
        m = pg.Model(inp, layers[1](layers[0](inp)))
    m.compile(optimizer=pg.optimizers.SGD(learning_rate=1.0), loss="mse", seed=0)
    try:
        w0 = {"pre0.weight": np.zeros((units, 1), np.float32), "pre0.bias": np.ones(units, np.float32)}
        m.set_weights(w0)
        x = np.array([[0.5]], dtype=np.float32)
        m.fit(x, -np.ones((1, units)), epochs=1, batch_size=1, shuffle=False, verbose=0)
        w1 = m.get_weights()
        gb = (w0["pre0.bias"] - w1["pre0.bias"]).astype(np.float64)
        gw = (w0["pre0.weight"] - w1["pre0.weight"]).astype(np.float64)
        keep = 1.0 / (1.0 - rate)
        kept = 2.0 * keep * (keep + 1.0) / units
        dropped = np.abs(gb) < 0.01 * kept
        assert np.all(dropped | (np.abs(gb - kept) < 1e-3 * kept)), "a gradient is neither dropped nor kept"
        n_dropped = int(dropped.sum())
        sd = np.sqrt(units * rate * (1 - rate))
        assert abs(n_dropped - rate * units) < 5 * sd, f"{n_dropped} of {units} dropped at rate {rate}"
        np.testing.assert_allclose(gw[:, 0], gb * 0.5, rtol=1e-4, atol=1e-6 * kept)
    finally:
        m.free()


CASES = [
    LayerCase("dense", lambda: L.Dense(3), [(4,)], dense_ref()),
    LayerCase("dense_relu_nobias", lambda: L.Dense(4, activation="relu", use_bias=False), [(3,)],
              dense_ref("relu", use_bias=False)),
    LayerCase("dense_softmax", lambda: L.Dense(3, activation="softmax"), [(2,)], dense_ref("softmax")),
    LayerCase("dense_on_sequences", lambda: L.Dense(2, activation="tanh"), [(3, 4)], dense_ref("tanh")),
    LayerCase("dense_on_images", lambda: L.Dense(2), [(2, 3, 2)], dense_ref()),
] + [
    LayerCase(f"activation_{a}", (lambda a=a: L.Activation(a)), [(5,)], activation_ref(a))
    for a in ["relu", "sigmoid", "tanh", "softmax", "gelu", "silu", "leaky_relu", "elu", "linear"]
] + [
    LayerCase("dropout", lambda: L.Dropout(0.3), [(4,)], lambda hs, w, training: hs[0], stochastic=True,
              grad_check=dropout_gradient_check),
    LayerCase("dropout_zero", lambda: L.Dropout(0.0), [(4,)], lambda hs, w, training: hs[0]),
    LayerCase("flatten", lambda: L.Flatten(), [(2, 3, 2)], lambda hs, w, t: hs[0].reshape(len(hs[0]), -1)),
    LayerCase("reshape", lambda: L.Reshape((3, -1)), [(2, 6)], lambda hs, w, t: hs[0].reshape(len(hs[0]), 3, 4)),
    LayerCase("permute_2d", lambda: L.Permute((2, 1)), [(3, 4)], lambda hs, w, t: hs[0].transpose(0, 2, 1)),
    LayerCase("permute_3d", lambda: L.Permute((3, 1, 2)), [(2, 3, 4)],
              lambda hs, w, t: hs[0].transpose(0, 3, 1, 2)),
    LayerCase("repeat_vector", lambda: L.RepeatVector(3), [(4,)], lambda hs, w, t: np.repeat(hs[0][:, None], 3, 1)),
    LayerCase("repeat_vector_once", lambda: L.RepeatVector(1), [(2,)], lambda hs, w, t: hs[0][:, None]),
    LayerCase("add", lambda: L.Add(), [(3,), (3,)], lambda hs, w, t: hs[0] + hs[1]),
    LayerCase("add_three_sequences", lambda: L.Add(), [(2, 3)] * 3, lambda hs, w, t: hs[0] + hs[1] + hs[2]),
    LayerCase("concatenate", lambda: L.Concatenate(), [(2,), (3,)],
              lambda hs, w, t: np.concatenate(hs, axis=-1)),
    LayerCase("concatenate_axis1", lambda: L.Concatenate(axis=1), [(2, 3), (4, 3)],
              lambda hs, w, t: np.concatenate(hs, axis=1)),
    LayerCase("concatenate_three_images", lambda: L.Concatenate(axis=-1), [(2, 2, 1), (2, 2, 2), (2, 2, 1)],
              lambda hs, w, t: np.concatenate(hs, axis=-1)),
    LayerCase("subtract", lambda: L.Subtract(), [(3,), (3,)], lambda hs, w, t: hs[0] - hs[1]),
    LayerCase("multiply", lambda: L.Multiply(), [(2, 3)] * 2, lambda hs, w, t: hs[0] * hs[1]),
    LayerCase("average", lambda: L.Average(), [(3,)] * 3, lambda hs, w, t: (hs[0] + hs[1] + hs[2]) / 3),
    LayerCase("relu_layer", lambda: L.ReLU(), [(5,)], activation_ref("relu")),
    LayerCase("relu_capped_leaky_threshold", lambda: L.ReLU(max_value=0.8, negative_slope=0.1, threshold=0.2),
              [(6,)], lambda hs, w, t: np.where(hs[0] >= 0.8, 0.8,
                                                np.where(hs[0] >= 0.2, hs[0], 0.1 * (hs[0] - 0.2)))),
    LayerCase("leaky_relu_layer", lambda: L.LeakyReLU(0.1), [(5,)],
              lambda hs, w, t: np.where(hs[0] > 0, hs[0], 0.1 * hs[0])),
    LayerCase("elu_layer", lambda: L.ELU(0.7), [(5,)],
              lambda hs, w, t: np.where(hs[0] > 0, hs[0], 0.7 * np.expm1(np.minimum(hs[0], 0)))),
    LayerCase("softmax_layer", lambda: L.Softmax(), [(2, 4)], lambda hs, w, t: ACTIVATIONS["softmax"](hs[0])),
    LayerCase("identity", lambda: L.Identity(), [(2, 3)], lambda hs, w, t: hs[0]),
    LayerCase("spatial_dropout1d_zero", lambda: L.SpatialDropout1D(0.0), [(3, 4)], lambda hs, w, t: hs[0]),
    LayerCase("spatial_dropout2d_zero", lambda: L.SpatialDropout2D(0.0), [(2, 3, 2)], lambda hs, w, t: hs[0]),
    LayerCase("zero_padding1d", lambda: L.ZeroPadding1D((1, 2)), [(3, 2)],
              lambda hs, w, t: np.pad(hs[0], ((0, 0), (1, 2), (0, 0)))),
    LayerCase("zero_padding2d", lambda: L.ZeroPadding2D(((1, 0), (2, 1))), [(2, 3, 2)],
              lambda hs, w, t: np.pad(hs[0], ((0, 0), (1, 0), (2, 1), (0, 0)))),
    LayerCase("zero_padding2d_channels_first", lambda: L.ZeroPadding2D(1, data_format="channels_first"), [(2, 2, 3)],
              lambda hs, w, t: np.pad(hs[0], ((0, 0), (0, 0), (1, 1), (1, 1)))),
    LayerCase("cropping1d", lambda: L.Cropping1D((1, 2)), [(5, 2)], lambda hs, w, t: hs[0][:, 1:3]),
    LayerCase("cropping2d", lambda: L.Cropping2D(((1, 0), (0, 2))), [(3, 4, 2)],
              lambda hs, w, t: hs[0][:, 1:, :2]),
    LayerCase("cropping2d_channels_first", lambda: L.Cropping2D((1, 1), data_format="channels_first"), [(2, 4, 4)],
              lambda hs, w, t: hs[0][:, :, 1:3, 1:3]),
]


# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_repeat_vector_refuses_bad_arguments_and_shapes():
    for bad in (0, -2):
        with pytest.raises(ValueError, match="positive int"):
            L.RepeatVector(bad)
    for bad in (1.5, "3", None, [3]):                    # Keras's TypeError
        with pytest.raises(TypeError, match="must be an int"):
            L.RepeatVector(bad)
    with pytest.raises(ValueError, match=r"\(batch, features\)"):
        L.RepeatVector(2)(pg.Input(shape=(3, 4)))
    assert L.RepeatVector(5).compute_output_shape((None, 7)) == (None, 5, 7)
    assert L.RepeatVector.from_config(L.RepeatVector(4).get_config()).n == 4


def test_concatenate_promotes_integer_inputs_to_floats():
    """As Keras does: an integer input (e.g. Input(dtype="int64") of one-hot codes) joins a
    float one as floats."""
    a = pg.Input(shape=(3,), dtype="int64", name="codes")
    b = pg.Input(shape=(2,), name="values")
    m = pg.Model([a, b], L.concatenate([a, b])).compile(loss="mse")
    ia = np.array([[0, 1, 7], [3, 0, 1]], dtype=np.int64)
    fb = np.array([[0.5, -1.0], [2.0, 0.25]], dtype=np.float32)
    got = m.predict([ia, fb])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.concatenate([ia.astype(np.float32), fb], axis=1))
    m.free()


def test_dropout_noise_shape_drops_whole_broadcast_axes():
    pg.set_seed(3)
    x = np.ones((3, 4, 500), np.float32)
    layer = L.Dropout(0.4, noise_shape=(None, 1, 500))
    y = layer(x, training=True)
    keep = 1.0 / 0.6
    kept = y != 0
    np.testing.assert_allclose(y[kept], keep, rtol=1e-6)
    np.testing.assert_array_equal(y, np.broadcast_to(y[:, :1], y.shape))      # the same at every step
    dropped = (y[:, 0] == 0).mean()
    assert abs(dropped - 0.4) < 5 * np.sqrt(0.4 * 0.6 / 1500), dropped
    assert not np.array_equal(y[0], y[1])                                      # each sample its own mask
    np.testing.assert_array_equal(layer(x), x)                                 # inference: the identity
    # a noise_shape of all ones drops everything or nothing
    z = L.Dropout(0.5, noise_shape=(1, 1, 1))(x, training=True)
    assert len(np.unique(z)) == 1
    assert L.Dropout(0.2, noise_shape=[None, 1, 5]).get_config()["noise_shape"] == [None, 1, 5]


def test_dropout_noise_shape_in_a_training_graph():
    """A bias before the dropout gets the gradient of all 4 steps or of none: the
    mask (None, 1, units) is shared by the steps (a per-value mask would give
    partial sums)."""
    pg.set_seed(5)
    steps, units, rate = 4, 1500, 0.3
    m = pg.Sequential([L.Dense(units, name="pre"), L.Dropout(rate, noise_shape=(None, 1, units))],
                      input_shape=(steps, 1))
    m.compile(optimizer=pg.optimizers.SGD(1.0), loss="mse")
    m.set_weights({"pre.weight": np.zeros((units, 1), np.float32), "pre.bias": np.ones(units, np.float32)})
    m.fit(np.ones((1, steps, 1), np.float32), -np.ones((1, steps, units), np.float32), batch_size=1, verbose=0)
    g = 1.0 - m.get_weights()["pre.bias"].astype(np.float64)
    keep = 1.0 / (1.0 - rate)
    full = steps * 2.0 * keep * (keep + 1.0) / (steps * units)
    dropped = np.abs(g) < 0.01 * full
    assert np.all(dropped | (np.abs(g - full) < 1e-3 * full))
    assert abs(dropped.mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / units)
    m.free()


@pytest.mark.parametrize("kwargs, shape, err", [
    ({"noise_shape": (None, 2, 3)}, (4, 3), ValueError), ({"noise_shape": (None, 3)}, (4, 3), ValueError),
    ({"noise_shape": (None, 0, 3)}, None, ValueError), ({"noise_shape": 3}, None, TypeError),
    ({"noise_shape": (None, 1.5)}, None, ValueError)])
def test_dropout_refuses_a_noise_shape_that_cannot_fit(kwargs, shape, err):
    with pytest.raises(err, match="noise_shape"):
        layer = L.Dropout(0.5, **kwargs)
        pg.Sequential([layer], input_shape=shape).compile(loss="mse")


@pytest.mark.parametrize("cls, shape, axes", [("SpatialDropout1D", (4, 50, 64), (1,)),
                                              ("SpatialDropout2D", (4, 6, 7, 64), (1, 2))])
def test_spatial_dropout_drops_whole_channels(cls, shape, axes):
    """A channel is dropped at every step (pixel) or kept at every one, about rate of them
    dropped, the kept ones scaled by 1/(1-rate); nothing changes at inference."""
    x = np.ones(shape, np.float32)
    layer = getattr(L, cls)(0.5)
    y = layer(x, training=True)
    per_channel = y.max(axis=axes)
    assert np.all((y == 0) | np.isclose(y, 2.0))
    np.testing.assert_array_equal(y.min(axis=axes), per_channel)        # the same at every step / pixel
    assert 0.25 < float((per_channel == 0).mean()) < 0.75
    np.testing.assert_array_equal(layer(x), x)
    assert "noise_shape" not in layer.get_config()
    assert getattr(L, cls).from_config(layer.get_config()).rate == 0.5


def test_padding_and_cropping_refuse_bad_arguments():
    with pytest.raises(ValueError, match="negative"):
        L.ZeroPadding1D(-1)
    with pytest.raises(ValueError, match="pair"):
        L.Cropping2D((1, 2, 3))
    with pytest.raises(ValueError, match="leaves nothing"):
        L.Cropping1D((2, 2))(pg.Input((4, 3)))
    with pytest.raises(ValueError, match="data_format"):
        L.ZeroPadding2D(1, data_format="nhwc")
    with pytest.raises(ValueError, match="height, width, channels"):
        L.Cropping2D(1)(pg.Input((4, 3)))
    x = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    np.testing.assert_array_equal(L.Cropping2D(((0, 1), (1, 0)))(L.ZeroPadding2D(((0, 1), (1, 0)))(x)), x)
