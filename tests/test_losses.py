"""Every loss against a numpy reference (Keras' definitions and reduction),
with and without sample weights, through evaluate()."""

import numpy as np
import pytest

import pyggml as pg

EPS = 1e-7


def _ref(name, y, p, z=None):
    if name in ("mse", "mean_squared_error"):
        return ((p - y) ** 2)
    if name in ("mae", "mean_absolute_error"):
        return np.abs(p - y)
    if name in ("huber", "huber_loss"):
        e = np.abs(p - y)
        return np.where(e <= 1, 0.5 * e ** 2, e - 0.5)
    if name == "binary_crossentropy":
        # from logits when the output layer is a sigmoid
        return np.logaddexp(0, z) - y * z
    if name == "categorical_crossentropy":
        zs = z - z.max(1, keepdims=True)
        return -(y * (zs - np.log(np.exp(zs).sum(1, keepdims=True)))).sum(1, keepdims=True)
    raise KeyError(name)


@pytest.mark.parametrize("name", ["mse", "mean_squared_error", "mae", "mean_absolute_error", "huber",
                                  "binary_crossentropy", "categorical_crossentropy",
                                  "sparse_categorical_crossentropy"])
@pytest.mark.parametrize("weighted", [False, True])
def test_loss_matches_numpy(name, weighted):
    rng = np.random.default_rng(0)
    n, k = 24, 3
    x = rng.normal(size=(n, 4))
    act = {"binary_crossentropy": "sigmoid", "categorical_crossentropy": "softmax",
           "sparse_categorical_crossentropy": "softmax"}.get(name)
    m = pg.Sequential([pg.layers.Dense(k, activation=act)], input_shape=4).compile(loss=name, seed=2)
    w = m.get_weights()
    z = x @ w["dense.weight"].T.astype(np.float64) + w["dense.bias"]
    if name == "sparse_categorical_crossentropy":
        labels = rng.integers(0, k, n)
        y_fit, y_ref, ref_name = labels, np.eye(k)[labels], "categorical_crossentropy"
    elif act == "softmax":
        y_fit = y_ref = np.eye(k)[rng.integers(0, k, n)]
        ref_name = name
    elif act == "sigmoid":
        y_fit = y_ref = rng.integers(0, 2, (n, k)).astype(float)
        ref_name = name
    else:
        y_fit = y_ref = rng.normal(size=(n, k))
        ref_name = name
    cells = _ref(ref_name, y_ref, z, z)
    sw = rng.random(n) if weighted else np.ones(n)
    # Keras: sum(w * elementwise loss) / number of elements
    expected = (cells * sw[:, None]).sum() / cells.size
    got = m.evaluate(x, y_fit, batch_size=10, sample_weight=sw if weighted else None, return_dict=True)["loss"]
    assert got == pytest.approx(expected, rel=2e-5, abs=1e-6)
    m.free()


def test_per_cell_weights_for_elementwise_losses_and_refusal_for_crossentropy():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(16, 4)), rng.normal(size=(16, 3))
    m = pg.Sequential([pg.layers.Dense(3)], input_shape=4).compile(loss="mse", seed=0)
    w = m.get_weights()
    p = x @ w["dense.weight"].T + w["dense.bias"]
    cw = rng.integers(0, 2, (16, 3)).astype(float)
    got = m.evaluate(x, y, sample_weight=cw, return_dict=True)["loss"]
    assert got == pytest.approx((cw * (p - y) ** 2).sum() / (16 * 3), rel=2e-5)
    c = pg.Sequential([pg.layers.Dense(3, activation="softmax")], input_shape=4).compile(
        loss="categorical_crossentropy")
    with pytest.raises(ValueError, match="element-wise"):
        c.fit(x, np.eye(3)[[0, 1] * 8], sample_weight=cw, verbose=0)
    m.free()
    c.free()


def test_class_weight_multiplies_sample_weight():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(20, 4))
    labels = np.array([0, 1] * 10)
    y = np.eye(2)[labels]
    base = pg.Sequential([pg.layers.Dense(2, activation="softmax")], input_shape=4)
    base.compile(loss="categorical_crossentropy", optimizer=pg.optimizers.SGD(0.1), seed=3)
    twin = pg.Sequential([pg.layers.Dense(2, activation="softmax")], input_shape=4)
    twin.compile(loss="categorical_crossentropy", optimizer=pg.optimizers.SGD(0.1), seed=3)
    base.fit(x, y, epochs=1, batch_size=20, verbose=0, shuffle=False, class_weight={0: 2.0, 1: 0.5})
    twin.fit(x, y, epochs=1, batch_size=20, verbose=0, shuffle=False,
             sample_weight=np.where(labels == 0, 2.0, 0.5))
    for k, v in base.get_weights().items():
        np.testing.assert_allclose(v, twin.get_weights()[k], rtol=1e-6)
    base.free()
    twin.free()


def test_loss_objects_on_arrays_reduce_per_sample_as_keras():
    """reduction='none' gives one value per sample (an element-wise loss averaged over the
    last axis), 'sum' their sum, the default their weighted mean over the batch."""
    yt = np.array([[0., 1], [1, 0], [1, 1]])
    yp = np.array([[0.2, 0.9], [0.6, 0.1], [0.3, 0.3]])
    w = np.array([1.0, 0.0, 2.0])
    per = {"MeanSquaredError": ((yt - yp) ** 2).mean(-1),
           "MeanAbsoluteError": np.abs(yt - yp).mean(-1),
           "BinaryCrossentropy": -(yt * np.log(yp) + (1 - yt) * np.log(1 - yp)).mean(-1),
           "CategoricalCrossentropy": -(yt * np.log(yp / yp.sum(-1, keepdims=True))).sum(-1)}
    for name, want in per.items():
        cls = getattr(pg.losses, name)
        np.testing.assert_allclose(cls(reduction="none")(yt, yp), want, rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(cls(reduction="sum")(yt, yp), want.sum(), rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(cls()(yt, yp), want.mean(), rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(cls(reduction="none")(yt, yp, sample_weight=w), want * w, rtol=1e-5,
                                   err_msg=name)
        np.testing.assert_allclose(cls()(yt, yp, sample_weight=w), (want * w).sum() / 3, rtol=1e-5, err_msg=name)
