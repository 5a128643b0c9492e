"""BatchNormalization and LayerNormalization through the layer harness, and
BatchNormalization's running statistics."""

import numpy as np
import pytest

import pyggml as pg
from harness import LayerCase, build_model, harness_tests, params

L = pg.layers


def batchnorm_ref(eps=1e-3):
    def ref(hs, w, training):
        x = hs[0]
        axes = tuple(range(x.ndim - 1))
        if training:
            mean, var = x.mean(axis=axes), x.var(axis=axes)          # the batch's, biased
        else:
            mean, var = w["running_mean"], w["running_var"]
        # center=False / scale=False: no beta ("bias") / gamma ("weight")
        return (x - mean) / np.sqrt(var + eps) * w.get("weight", 1.0) + w.get("bias", 0.0)
    return ref


def layernorm_ref(eps=1e-3):
    def ref(hs, w, training):
        x = hs[0]
        mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * w.get("weight", 1.0) + w.get("bias", 0.0)
    return ref


def _bn_weights(name, shape, rng):
    if name.endswith("running_var"):
        return rng.uniform(0.5, 2.0, size=shape)
    if name.endswith(".weight") and not name.startswith("pre"):
        return rng.uniform(0.5, 1.5, size=shape)
    return None


CASES = [
    LayerCase("batchnorm", lambda: L.BatchNormalization(), [(3,)], batchnorm_ref(), batch=6,
              weight_init=_bn_weights),
    LayerCase("batchnorm_images", lambda: L.BatchNormalization(epsilon=0.01, momentum=0.9), [(2, 2, 3)],
              batchnorm_ref(0.01), batch=4, weight_init=_bn_weights),
    LayerCase("batchnorm_sequences", lambda: L.BatchNormalization(), [(3, 2)], batchnorm_ref(), batch=4,
              weight_init=_bn_weights),
    LayerCase("layernorm", lambda: L.LayerNormalization(), [(4,)], layernorm_ref(), weight_init=_bn_weights),
    LayerCase("layernorm_sequences", lambda: L.LayerNormalization(epsilon=1e-5), [(3, 5)], layernorm_ref(1e-5),
              weight_init=_bn_weights),
    LayerCase("batchnorm_no_center", lambda: L.BatchNormalization(center=False), [(3,)], batchnorm_ref(), batch=6,
              weight_init=_bn_weights),
    LayerCase("batchnorm_no_scale", lambda: L.BatchNormalization(scale=False), [(2, 3)], batchnorm_ref(), batch=4,
              weight_init=_bn_weights),
    LayerCase("batchnorm_neither", lambda: L.BatchNormalization(center=False, scale=False), [(3,)], batchnorm_ref(),
              batch=5, weight_init=_bn_weights),
    LayerCase("layernorm_no_center", lambda: L.LayerNormalization(center=False), [(4,)], layernorm_ref(),
              weight_init=_bn_weights),
    LayerCase("layernorm_no_scale", lambda: L.LayerNormalization(scale=False), [(3, 4)], layernorm_ref(),
              weight_init=_bn_weights),
    LayerCase("layernorm_neither", lambda: L.LayerNormalization(center=False, scale=False), [(4,)],
              layernorm_ref()),
]


# the harness's four checks over every case (forward, gradient, config, a training step)
test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


@pytest.mark.parametrize("case, kind", params(CASES[:3]))
def test_batchnorm_running_statistics_follow_keras(case, kind):
    rng = np.random.default_rng(4)
    m, layer = build_model(case, kind, lr=0.1)
    try:
        w0 = {k: rng.normal(size=v.shape).astype(np.float32) for k, v in m.get_weights().items()}
        w0[f"{layer.name}.running_var"] = np.abs(w0[f"{layer.name}.running_var"]) + 0.5
        m.set_weights(w0)
        x = rng.normal(size=(case.batch,) + case.shapes[0]).astype(np.float32)
        y = rng.normal(size=(case.batch,) + case.shapes[0])
        assert f"{layer.name}.running_mean" not in m.trainable_weights
        m.fit(x, y, epochs=1, batch_size=case.batch, shuffle=False, verbose=0)
        w1 = m.get_weights()
        h = x.astype(np.float64) @ w0["pre0.weight"].T.astype(np.float64) + w0["pre0.bias"]
        axes = tuple(range(h.ndim - 1))
        mom = layer.momentum
        np.testing.assert_allclose(w1[f"{layer.name}.running_mean"],
                                   mom * w0[f"{layer.name}.running_mean"] + (1 - mom) * h.mean(axis=axes),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w1[f"{layer.name}.running_var"],
                                   mom * w0[f"{layer.name}.running_var"] + (1 - mom) * h.var(axis=axes),
                                   rtol=1e-5, atol=1e-6)
    finally:
        m.free()


@pytest.mark.parametrize("cls", ["BatchNormalization", "LayerNormalization"])
def test_center_and_scale_false_make_no_beta_or_gamma(cls):
    extra = ["running_mean", "running_var"] if cls == "BatchNormalization" else []
    for center, scale, own in [(True, True, ["weight", "bias"]), (False, True, ["weight"]),
                               (True, False, ["bias"]), (False, False, [])]:
        layer = getattr(L, cls)(center=center, scale=scale)
        m = pg.Sequential([layer], input_shape=(3,))
        m.compile(loss="mse")
        assert m.weights == [f"{layer.name}.{n}" for n in own + extra], (center, scale)
        assert m.trainable_weights == [f"{layer.name}.{n}" for n in own]
        cfg = layer.get_config()
        assert (cfg["center"], cfg["scale"]) == (center, scale)
        assert type(layer).from_config(cfg).get_config() == cfg
        m.free()
    with pytest.raises(TypeError, match="center"):
        getattr(L, cls)(center="no")


def test_batchnorm_takes_keras_initializers():
    layer = L.BatchNormalization(gamma_initializer="zeros", beta_initializer="ones", moving_mean_initializer="ones",
                                 moving_variance_initializer="zeros")
    m = pg.Sequential([layer], input_shape=(2,))
    m.compile(loss="mse")
    w = m.get_weights()
    for name, value in [("weight", 0.0), ("bias", 1.0), ("running_mean", 1.0), ("running_var", 0.0)]:
        np.testing.assert_array_equal(w[f"{layer.name}.{name}"], value)
    m.free()
    with pytest.raises(ValueError, match="initializer"):
        L.LayerNormalization(gamma_initializer="nope")
