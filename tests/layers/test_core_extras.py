"""Lambda, Masking, GaussianNoise, GaussianDropout, AlphaDropout, ActivityRegularization,
UnitNormalization and Dot: through the layer harness, and their behaviour (noise
statistics, padding masks reaching recurrent layers, the activity penalty in the loss,
saving Lambda functions by name, PyTorch parity, bad arguments)."""

import math

import numpy as np
import pytest

import pyggml as pg
import harness
from harness import LayerCase, harness_tests

L = pg.layers
ops = pg.ops

_ALPHA_P = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946


# --- functions for Lambda (module level: a saved model names them) -------------------------

def double(x):
    return x * 2


def mean_over_steps(x):
    return ops.mean(x, axis=1)


def abs_difference(xs):
    return ops.abs(xs[0] - xs[1])


def scaled(x, factor):
    return x * factor


def sum_keepdims(x):
    return ops.sum(ops.square(x), axis=-1, keepdims=True)


def euclidean_distance(vects):
    """keras-io's siamese-network distance, as written there."""
    x, y = vects
    sum_square = ops.sum(ops.square(x - y), axis=1, keepdims=True)
    return ops.sqrt(ops.maximum(sum_square, 1e-7))


def clipped_column(x):
    return ops.expand_dims(ops.minimum(ops.maximum(x, -0.5), 0.75), 1)


@pg.saving.register_serializable(package="core_extras")
def registered_triple(x):
    return x * 3


# --- float64 references ---------------------------------------------------------------------

def unit_ref(axes):
    def ref(hs, w, training):
        h = hs[0]
        s = np.sum(h * h, axis=tuple(axes), keepdims=True)
        return h / np.sqrt(np.maximum(s, 1e-12))
    return ref


def rms_ref(axes, eps):
    def ref(hs, w, training):
        h = hs[0]
        ms = np.mean(h * h, axis=tuple(axes), keepdims=True)
        return h / np.sqrt(ms + eps) * w["scale"].reshape((1,) + tuple(h.shape[a] if a in axes else 1
                                                                 for a in range(1, h.ndim)))
    return ref


def batch_dot(x, y, a1, a2, normalize=False):
    """Keras's Dot in float64: the sum over x's axis a1 and y's axis a2, per sample."""
    if normalize:
        x = x / np.maximum(np.sqrt(np.sum(x * x, axis=a1, keepdims=True)), 1e-7)
        y = y / np.maximum(np.sqrt(np.sum(y * y, axis=a2, keepdims=True)), 1e-7)
    out = np.stack([np.tensordot(x[i], y[i], axes=([a1 - 1], [a2 - 1])) for i in range(len(x))])
    return out.reshape(len(x), -1) if out.ndim == 1 else out


def dot_ref(a1, a2, normalize=False):
    def ref(hs, w, training):
        out = batch_dot(hs[0], hs[1], a1, a2, normalize)
        return out if out.ndim > 1 else out[:, None]
    return ref


def activity_ref(hs, w, training):
    return hs[0]


# --- gradients of the random layers: the noise of a seeded layer is reproducible ------------

def _normal(mean, sd):
    return lambda g, s: g.normal(mean, sd, s)


NOISE = {  # layer class -> (draw(g, shape) as the layer draws, output(h, noise))
    "GaussianNoise": lambda layer: (_normal(0.0, layer.stddev), lambda h, n: h + n),
    "GaussianDropout": lambda layer: (_normal(1.0, math.sqrt(layer.rate / (1 - layer.rate))), lambda h, n: h * n),
    "AlphaDropout": lambda layer: (lambda g, s: (g.random(s) >= layer.rate).astype(np.float64),
                                   lambda h, k: alpha_dropout_ref(h, k, layer.rate)),
}


def alpha_dropout_ref(h, keep, rate):
    a = ((1 - rate) * (1 + rate * _ALPHA_P ** 2)) ** -0.5
    b = -a * _ALPHA_P * rate
    return a * (h * keep + _ALPHA_P * (1 - keep)) + b


def seeded_noise_gradient(case, kind):
    """One SGD step of a model holding a seeded noise layer moves every weight by -grad,
    where grad is the finite-difference gradient of the float64 model with one of the
    first draws of the layer's own generator (the step's noise; which draw depends on
    when the executor refreshes its random tensors): the forward noise, the training
    loss and the gradient through the noise all checked together."""
    rng = np.random.default_rng(1)
    m, layer = harness.build_model(case, kind, lr=1.0)
    try:
        w0 = harness.random_weights(case, m, rng)
        xs = harness.make_data(case, rng)
        y = rng.normal(size=(case.batch,) + tuple(layer.output_shape[1:]))
        hist = m.fit(xs[0], y, epochs=1, batch_size=case.batch, shuffle=False, verbose=0)
        w1 = m.get_weights()
        draw, out = NOISE[type(layer).__name__](layer)
        gen = np.random.default_rng(layer.seed)
        shape = (case.batch,) + tuple(case.shapes[0])
        tried = []
        for _ in range(4):
            noise = draw(gen, shape)

            def loss(w, noise=noise):
                h = harness.model_ref(case, layer.name, xs, w, training=False)
                return harness.mse(out(h, noise), y)
            tried.append(loss(w0))
            if not np.isclose(hist.history["loss"][0], loss(w0), rtol=1e-4):
                continue
            num = harness.numeric_grads(loss, w0, m.trainable_weights)
            for k in m.trainable_weights:
                got = w0[k].astype(np.float64) - w1[k].astype(np.float64)
                harness._close(got, num[k], case.grad_tol, f"{case.id} ({kind}) gradient of {k}")
            return
        raise AssertionError(f"{case.id} ({kind}): the training loss {hist.history['loss'][0]} matches none "
                             f"of the seeded draws' losses {tried}")
    finally:
        m.free()


def activity_gradient(case, kind):
    """The loss fit minimises is mse + (l1 * sum|h| + l2 * sum h**2) / batch (Keras 3's
    activity penalty): the reported loss and one SGD step against that, in float64."""
    rng = np.random.default_rng(1)
    m, layer = harness.build_model(case, kind, lr=1.0)
    try:
        w0 = harness.random_weights(case, m, rng)
        xs = harness.make_data(case, rng)
        y = rng.normal(size=(case.batch,) + tuple(case.shapes[0]))
        hist = m.fit(xs[0], y, epochs=1, batch_size=case.batch, shuffle=False, verbose=0)
        w1 = m.get_weights()

        def loss(w):
            h = harness.model_ref(case, layer.name, xs, w, training=True)
            return harness.mse(h, y) + (layer.l1 * np.abs(h).sum() + layer.l2 * (h * h).sum()) / case.batch
        np.testing.assert_allclose(hist.history["loss"][0], loss(w0), rtol=1e-4)
        assert abs(loss(w0) - harness.mse(harness.model_ref(case, layer.name, xs, w0, True), y)) > 1e-2
        num = harness.numeric_grads(loss, w0, m.trainable_weights)
        for k in m.trainable_weights:
            harness._close(w0[k].astype(np.float64) - w1[k].astype(np.float64), num[k], case.grad_tol,
                           f"{case.id} ({kind}) gradient of {k}")
    finally:
        m.free()


def _pair(layer, hs):
    return layer(hs)


CASES = [
    LayerCase("lambda_double", lambda: L.Lambda(double), [(4,)], lambda hs, w, t: 2 * hs[0]),
    LayerCase("lambda_mean_axis", lambda: L.Lambda(mean_over_steps), [(3, 4)], lambda hs, w, t: hs[0].mean(1)),
    LayerCase("lambda_arguments", lambda: L.Lambda(scaled, arguments={"factor": -1.5}, output_shape=(2, 3)),
              [(2, 3)], lambda hs, w, t: -1.5 * hs[0]),
    LayerCase("lambda_sum_keepdims", lambda: L.Lambda(sum_keepdims), [(2, 3)],
              lambda hs, w, t: (hs[0] ** 2).sum(-1, keepdims=True)),
    LayerCase("lambda_registered", lambda: L.Lambda(registered_triple), [(3,)], lambda hs, w, t: 3 * hs[0]),
    LayerCase("lambda_two_inputs", lambda: L.Lambda(abs_difference), [(4,), (4,)],
              lambda hs, w, t: np.abs(hs[0] - hs[1])),
    LayerCase("lambda_euclidean_distance", lambda: L.Lambda(euclidean_distance), [(4,), (4,)],
              lambda hs, w, t: np.sqrt(np.maximum(((hs[0] - hs[1]) ** 2).sum(1, keepdims=True), 1e-7))),
    LayerCase("lambda_clip_expand", lambda: L.Lambda(clipped_column), [(5,)],
              lambda hs, w, t: np.clip(hs[0], -0.5, 0.75)[:, None, :]),
    LayerCase("masking", lambda: L.Masking(), [(3, 4)], lambda hs, w, t: hs[0]),
    LayerCase("masking_value", lambda: L.Masking(mask_value=0.5), [(4,)], lambda hs, w, t: hs[0]),
    LayerCase("gaussian_noise", lambda: L.GaussianNoise(0.3, seed=7), [(4,)], lambda hs, w, t: hs[0],
              stochastic=True, grad_check=seeded_noise_gradient),
    LayerCase("gaussian_dropout", lambda: L.GaussianDropout(0.3, seed=8), [(2, 3)], lambda hs, w, t: hs[0],
              stochastic=True, grad_check=seeded_noise_gradient),
    LayerCase("alpha_dropout", lambda: L.AlphaDropout(0.4, seed=9), [(5,)], lambda hs, w, t: hs[0],
              stochastic=True, grad_check=seeded_noise_gradient),
    LayerCase("alpha_dropout_noise_shape", lambda: L.AlphaDropout(0.0, noise_shape=(None, 1, 3)), [(2, 3)],
              lambda hs, w, t: hs[0]),
    LayerCase("gaussian_noise_zero", lambda: L.GaussianNoise(0.0), [(3,)], lambda hs, w, t: hs[0]),
    LayerCase("activity_regularization", lambda: L.ActivityRegularization(l1=0.05, l2=0.1), [(4,)], activity_ref,
              grad_check=activity_gradient),
    LayerCase("unit_normalization", lambda: L.UnitNormalization(), [(4,)], unit_ref([1])),
    LayerCase("unit_normalization_axes", lambda: L.UnitNormalization(axis=[1, 2]), [(2, 3)], unit_ref([1, 2])),
    LayerCase("unit_normalization_axis1", lambda: L.UnitNormalization(axis=1), [(3, 2)], unit_ref([1])),
    LayerCase("rms_normalization", lambda: L.RMSNormalization(), [(4,)], rms_ref([1], 1e-6)),
    LayerCase("rms_normalization_axes", lambda: L.RMSNormalization(axis=[1, 2], epsilon=1e-3), [(2, 3)],
              rms_ref([1, 2], 1e-3)),
    LayerCase("dot_vectors", lambda: L.Dot(axes=-1), [(4,), (4,)], dot_ref(1, 1)),
    LayerCase("dot_sequences", lambda: L.Dot(axes=2), [(2, 4), (3, 4)], dot_ref(2, 2)),
    LayerCase("dot_axes_pair", lambda: L.Dot(axes=(1, 1)), [(3, 2), (3, 4)], dot_ref(1, 1)),
    LayerCase("dot_matrix_vector", lambda: L.Dot(axes=(2, 1)), [(2, 3), (3,)], dot_ref(2, 1)),
    LayerCase("dot_normalize", lambda: L.Dot(axes=1, normalize=True), [(4,), (4,)], dot_ref(1, 1, True)),
    LayerCase("dot_functional", lambda: L.Dot(axes=-1), [(2, 3), (2, 3)], dot_ref(2, 2),
              call=lambda layer, hs: layer(hs)),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_functional_dot_builds_a_dot_layer():
    a, b = pg.Input((3,)), pg.Input((3,))
    out = L.dot([a, b], axes=1, normalize=True)
    m = pg.Model([a, b], out)
    layer = m.layers[-1]
    assert isinstance(layer, L.Dot) and layer.normalize and layer.axes == 1
    assert layer.get_config()["axes"] == 1
    x, y = np.ones((2, 3), np.float32), np.array([[1, 0, 0], [-1, -1, -1]], np.float32)
    np.testing.assert_allclose(m.predict([x, y]), [[1 / math.sqrt(3)], [-1.0]], rtol=1e-5)
    m.free()


# --- Lambda ---------------------------------------------------------------------------------

def test_lambda_keras_io_forms_eagerly_and_in_models():
    x = np.random.default_rng(0).normal(size=(4, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(L.Lambda(lambda t: t * 2)(x), 2 * x, rtol=1e-6)
    np.testing.assert_allclose(L.Lambda(lambda t: ops.mean(t, axis=1))(x), x.mean(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(L.Lambda(lambda t: ops.sum(t, axis=(1, 2)))(x), x.sum((1, 2)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(L.Lambda(lambda t: ops.mean(t, axis=(1, 2), keepdims=True))(x),
                               x.mean((1, 2), keepdims=True), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="keep the batch"):            # one output row per sample
        pg.Sequential([L.Lambda(lambda t: ops.mean(t, axis=0))], input_shape=(2, 5)).compile(loss="mse")
    # inferred output shapes, in a Sequential and in a functional model
    s = pg.Sequential([L.Lambda(lambda t: ops.mean(t, axis=1)), L.Dense(2)], input_shape=(3, 5)).compile(loss="mse")
    assert s.layers[0].output_shape == (None, 5)
    inp = pg.Input((3, 5))
    out = L.Lambda(lambda t: t / 255.0)(inp)
    assert out.shape == (None, 3, 5)
    m = pg.Model(inp, out).compile(loss="mse")
    np.testing.assert_allclose(m.predict(x), x / 255.0, rtol=1e-6)
    m.free()
    s.free()


def test_keras_ops_forms_for_lambda_functions():
    x = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
    y = np.array([[2.0, 0.0, 2.0]], np.float32)
    np.testing.assert_array_equal(L.Lambda(lambda t: ops.maximum(t, 0.0))(x), np.maximum(x, 0))
    np.testing.assert_array_equal(L.Lambda(lambda t: ops.minimum(1.0, t))(x), np.minimum(x, 1))
    pair = L.Lambda(lambda ts: [ops.maximum(ts[0], ts[1]), ops.minimum(ts[0], ts[1])])
    got = pair([x, np.broadcast_to(y, x.shape)])
    np.testing.assert_array_equal(got[0], np.maximum(x, y))
    np.testing.assert_array_equal(got[1], np.minimum(x, y))
    z = np.ones((2, 1, 3), np.float32)
    assert L.Lambda(lambda t: ops.squeeze(t, 1))(z).shape == (2, 3)
    assert L.Lambda(lambda t: ops.expand_dims(t, -1))(z).shape == (2, 1, 3, 1)
    with pytest.raises(ValueError, match="squeeze"):
        L.Lambda(lambda t: ops.squeeze(t, 2))(z)
    # a fifth axis makes a volume (pyggml._wide), as Keras's result of five dimensions
    assert np.asarray(L.Lambda(lambda t: ops.expand_dims(t, 4))(np.ones((2, 1, 3, 1)))).shape == (2, 1, 3, 1, 1)
    with pytest.raises(ValueError, match="expand_dims"):
        L.Lambda(lambda t: ops.expand_dims(t, 5))(np.ones((2, 1, 3, 1)))


def test_lambda_passes_training_and_mask_and_returns_lists():
    seen = {}

    def fn(x, training=None):
        seen["training"] = training
        return x
    layer = L.Lambda(fn)
    layer(np.ones((2, 3)), training=True)
    assert seen["training"] is True
    two = L.Lambda(lambda x: [x * 2, x * 3])(np.ones((2, 3), np.float32))
    assert isinstance(two, list) and np.allclose(two[1], 3)
    # a mask function sets the output's padding mask: the LSTM after it skips those steps
    inp = pg.Input((4, 2))
    keep_first_two = L.Lambda(lambda x: x, mask=lambda x, m: ops.constant(np.array([[1, 1, 0, 0]] * 2, np.float32)))
    lstm = L.LSTM(3)
    m = pg.Model(inp, lstm(keep_first_two(inp)))
    x = np.random.default_rng(1).normal(size=(2, 4, 2)).astype(np.float32)
    prefix = pg.Sequential([L.LSTM(3, name=lstm.name)], input_shape=(2, 2))
    prefix.set_weights(m.get_weights())
    np.testing.assert_allclose(m.predict(x), prefix.predict(x[:, :2]), rtol=1e-5, atol=1e-6)
    m.free()
    prefix.free()


def test_lambda_output_shape_is_checked_against_the_function():
    inp = pg.Input((3,))
    with pytest.raises(ValueError, match="output_shape"):
        L.Lambda(double, output_shape=(4,))(inp)
    assert L.Lambda(double, output_shape=(None,))(inp).shape == (None, 3)
    assert L.Lambda(double, output_shape=lambda s: s)(inp).shape == (None, 3)
    with pytest.raises(ValueError, match="output_shape"):
        L.Lambda(double, output_shape=lambda s: (None, 7))(inp)


@pytest.mark.parametrize("make, err, match", [
    (lambda: L.Lambda(3), TypeError, "callable"),
    (lambda: L.Lambda(double, mask=5), TypeError, "mask"),
    (lambda: L.Lambda(double, arguments=[1]), TypeError, "arguments"),
    (lambda: L.Lambda(double, output_shape="x"), ValueError, "output_shape"),
    (lambda: L.Lambda(double, output_shape=(0,)), ValueError, "output_shape"),
])
def test_lambda_refuses_bad_arguments(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_lambda_refuses_functions_that_do_not_return_tensors():
    with pytest.raises(TypeError, match="tensors"):
        L.Lambda(lambda x: np.ones(3))(np.ones((2, 3)))
    with pytest.raises(TypeError, match="tensors"):
        pg.Sequential([L.Lambda(lambda x: 3.0)], input_shape=(3,)).compile(loss="mse")
    with pytest.raises(TypeError, match="arguments"):
        L.Lambda(scaled, arguments={"factor": object()}).get_config()


def test_lambda_saves_functions_by_name_never_as_code(tmp_path):
    x = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    m = pg.Sequential([L.Dense(4), L.Lambda(lambda t: t * 5, name="times5")], input_shape=(4,))
    m.compile(loss="mse")
    want = m.predict(x)
    cfg = m.get_layer("times5").get_config()
    assert cfg["function"]["class_name"] == "__lambda__" and "t * 5" in cfg["function"]["source"]
    path = str(tmp_path / "lam.gguf")
    m.save(path)
    with pytest.raises(ValueError, match="custom_objects=.*'times5'"):
        pg.load_model(path)
    back = pg.load_model(path, custom_objects={"times5": lambda t: t * 5})
    np.testing.assert_allclose(back.predict(x), want, rtol=1e-6)
    back.free()
    m.free()
    # module-level and registered functions are saved by name and found again
    assert L.Lambda(double).get_config()["function"] == {"class_name": "function", "module": __name__,
                                                         "function_name": "double"}
    assert L.Lambda(registered_triple).get_config()["function"]["registered_name"] == "core_extras>registered_triple"
    assert L.Lambda.from_config(L.Lambda(double).get_config()).function is double
    gone = {"class_name": "function", "module": "no_such_module_here", "function_name": "f"}
    with pytest.raises(ValueError, match="import 'no_such_module_here'"):
        L.Lambda.from_config({"name": "l", "function": gone})
    with pg.saving.custom_object_scope({"f": double}):
        assert L.Lambda.from_config({"name": "l", "function": gone}).function is double


# --- Masking ----------------------------------------------------------------------------------

def test_masking_zeroes_padding_steps_and_lstm_skips_them():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 5, 2)).astype(np.float32)
    lengths = [5, 3, 1]
    for i, n in enumerate(lengths):
        x[i, n:] = -1.0
    y = L.Masking(mask_value=-1.0)(x)
    np.testing.assert_array_equal(y[1, 3:], 0.0)
    np.testing.assert_array_equal(y[1, :3], x[1, :3])
    inp = pg.Input((5, 2))
    lstm = L.LSTM(4)
    m = pg.Model(inp, lstm(L.Masking(mask_value=-1.0)(inp)))
    got = m.predict(x)
    for i, n in enumerate(lengths):
        alone = pg.Sequential([L.LSTM(4, name=lstm.name)], input_shape=(n, 2))
        alone.set_weights(m.get_weights())
        np.testing.assert_allclose(got[i:i + 1], alone.predict(x[i:i + 1, :n]), rtol=1e-5, atol=1e-6)
        alone.free()
    m.free()


def test_masking_mask_reaches_pooling_and_only_all_equal_steps_are_masked():
    x = np.array([[[0, 0], [1, 0], [2, 4], [0, 0]]], np.float32)    # [1, 0] is real: only one feature is 0
    m = pg.Sequential([L.Masking(), L.GlobalAveragePooling1D()], input_shape=(4, 2))
    np.testing.assert_allclose(m.predict(x), [[1.5, 2.0]], rtol=1e-6)
    m.free()


def test_masking_blocks_gradients_of_padding_steps():
    """A Dense before Masking gets no gradient from masked steps: with every step masked
    but the first, the step's Dense weights train as on that step alone."""
    m = pg.Sequential([L.Masking(mask_value=9.0), L.Dense(1, name="d")], input_shape=(3, 2))
    m.compile(optimizer=pg.optimizers.SGD(1.0), loss="mse")
    w = {"d.weight": np.array([[0.5, -0.25]], np.float32), "d.bias": np.array([0.1], np.float32)}
    m.set_weights(w)
    x = np.array([[[1.0, 2.0], [9.0, 9.0], [9.0, 9.0]]], np.float32)
    y = np.array([[[1.0], [5.0], [7.0]]], np.float32)
    m.fit(x, y, batch_size=1, verbose=0)
    # the loss is averaged over the real step only (Keras's masked loss); its gradient:
    err = 2 * (0.5 * 1 - 0.25 * 2 + 0.1 - 1.0)
    got = m.get_weights()
    np.testing.assert_allclose(w["d.weight"] - got["d.weight"], [[err * 1, err * 2]], rtol=1e-5)
    np.testing.assert_allclose(w["d.bias"] - got["d.bias"], [err], rtol=1e-5)
    m.free()


def test_masking_refuses_bad_arguments():
    with pytest.raises(TypeError, match="mask_value"):
        L.Masking("0")
    with pytest.raises(ValueError, match="mask_value"):
        L.Masking(float("nan"))
    assert L.Masking(2).get_config()["mask_value"] == 2.0


# --- the noise layers ---------------------------------------------------------------------------

def test_gaussian_noise_statistics_and_inference_identity():
    pg.set_seed(4)
    x = np.random.default_rng(5).normal(size=(200, 300)).astype(np.float32)
    layer = L.GaussianNoise(0.3)
    n = (layer(x, training=True) - x).astype(np.float64)
    k = n.size
    assert abs(n.mean()) < 5 * 0.3 / math.sqrt(k)
    assert abs(n.std() - 0.3) < 5 * 0.3 / math.sqrt(2 * k)
    np.testing.assert_array_equal(layer(x), x)
    assert not np.array_equal(layer(x, training=True), layer(x, training=True))


def test_gaussian_dropout_statistics():
    pg.set_seed(6)
    rate = 0.3
    x = np.full((300, 300), 2.0, np.float32)
    r = L.GaussianDropout(rate)(x, training=True).astype(np.float64) / 2.0
    sd = math.sqrt(rate / (1 - rate))
    assert abs(r.mean() - 1.0) < 5 * sd / math.sqrt(r.size)
    assert abs(r.std() - sd) < 5 * sd / math.sqrt(2 * r.size)
    np.testing.assert_array_equal(L.GaussianDropout(rate)(x), x)


def test_alpha_dropout_keeps_zero_mean_unit_variance_and_drops_to_saturation():
    pg.set_seed(7)
    rate = 0.2
    x = np.random.default_rng(8).normal(size=(400, 250)).astype(np.float32)
    y = L.AlphaDropout(rate)(x, training=True).astype(np.float64)
    a = ((1 - rate) * (1 + rate * _ALPHA_P ** 2)) ** -0.5
    dropped_value = a * _ALPHA_P - a * _ALPHA_P * rate
    dropped = np.isclose(y, dropped_value, atol=1e-6)
    assert abs(dropped.mean() - rate) < 5 * math.sqrt(rate * (1 - rate) / y.size)
    np.testing.assert_allclose(y[~dropped], a * x[~dropped] - a * _ALPHA_P * rate, rtol=1e-5, atol=1e-5)
    assert abs(y.mean()) < 0.02 and abs(y.var() - 1.0) < 0.03
    np.testing.assert_array_equal(L.AlphaDropout(rate)(x), x)
    # noise_shape shares the draw along axes of size 1
    z = L.AlphaDropout(0.5, noise_shape=(None, 1, 6))(np.ones((50, 4, 6), np.float32), training=True)
    np.testing.assert_array_equal(z, np.broadcast_to(z[:, :1], z.shape))
    assert L.AlphaDropout(0.5, noise_shape=[None, 1, 6]).get_config()["noise_shape"] == [None, 1, 6]


def test_seeded_noise_repeats_and_unseeded_noise_is_redrawn_each_step():
    x = np.ones((4, 5), np.float32)
    a, b = L.GaussianNoise(0.5, seed=3), L.GaussianNoise(0.5, seed=3)
    np.testing.assert_array_equal(a(x, training=True), b(x, training=True))
    assert L.GaussianNoise.from_config(a.get_config()).seed == 3
    # in fit: with a learning rate of 0 the loss still changes from epoch to epoch
    m = pg.Sequential([L.Dense(5, name="d"), L.GaussianDropout(0.4)], input_shape=(5,))
    m.compile(optimizer=pg.optimizers.SGD(0.0), loss="mse")
    h = m.fit(x, np.zeros((4, 5)), epochs=3, batch_size=4, verbose=0)
    assert len(set(h.history["loss"])) == 3
    w = m.get_weights()
    np.testing.assert_allclose(m.predict(x), x @ w["d.weight"].T + w["d.bias"], rtol=1e-6)   # inference: identity
    m.free()


@pytest.mark.parametrize("make, err, match", [
    (lambda: L.GaussianNoise(-0.1), ValueError, "stddev"), (lambda: L.GaussianNoise(1.5), ValueError, "stddev"),
    (lambda: L.GaussianNoise("a"), TypeError, "stddev"), (lambda: L.GaussianDropout(1.0), ValueError, "rate"),
    (lambda: L.GaussianDropout(-0.5), ValueError, "rate"), (lambda: L.AlphaDropout(1.0), ValueError, "rate"),
    (lambda: L.AlphaDropout(0.5, noise_shape=3), TypeError, "noise_shape"),
    (lambda: L.GaussianNoise(0.1, seed=-1), ValueError, "seed"), (lambda: L.AlphaDropout(0.1, seed=1.5),
                                                                  ValueError, "seed"),
])
def test_noise_layers_refuse_bad_arguments(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_alpha_dropout_refuses_a_noise_shape_that_cannot_fit():
    with pytest.raises(ValueError, match="noise_shape"):
        pg.Sequential([L.AlphaDropout(0.5, noise_shape=(None, 2, 3))], input_shape=(4, 3)).compile(loss="mse")


# --- ActivityRegularization ----------------------------------------------------------------------

def test_activity_regularization_is_the_identity_with_a_penalty():
    x = np.random.default_rng(9).normal(size=(4, 3)).astype(np.float32)
    layer = L.ActivityRegularization(l1=0.01, l2=0.5)
    np.testing.assert_array_equal(layer(x), x)
    want = (0.01 * np.abs(x.astype(np.float64)).sum() + 0.5 * (x.astype(np.float64) ** 2).sum()) / 4
    np.testing.assert_allclose(layer.losses, [want], rtol=1e-5)
    cfg = layer.get_config()
    assert cfg["l1"] == 0.01 and cfg["l2"] == 0.5 and "activity_regularizer" not in cfg
    with pytest.raises(ValueError, match="l1"):
        L.ActivityRegularization(l1=-1.0)
    with pytest.raises(TypeError, match="l2"):
        L.ActivityRegularization(l2="big")
    with pytest.raises(TypeError, match="activity_regularizer"):
        L.ActivityRegularization(activity_regularizer="l2")


# --- UnitNormalization and Dot ------------------------------------------------------------------

def test_unit_normalization_and_dot_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    y = rng.normal(size=(3, 6, 5)).astype(np.float32)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    np.testing.assert_allclose(L.UnitNormalization(axis=1)(x), torch.nn.functional.normalize(tx, dim=1).numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(L.Dot(axes=2)([x, y]), torch.bmm(tx, ty.transpose(1, 2)).numpy(), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(L.Dot(axes=1, normalize=True)([x[:, 0], y[:, 0]])[:, 0],
                               torch.nn.functional.cosine_similarity(tx[:, 0], ty[:, 0], dim=1).numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(L.UnitNormalization()(np.zeros((2, 3))), 0.0)     # the floor: no NaN


@pytest.mark.parametrize("make, shapes, err, match", [
    (lambda: L.UnitNormalization(axis="x"), None, TypeError, "axis"),
    (lambda: L.UnitNormalization(axis=[]), None, TypeError, "axis"),
    (lambda: L.UnitNormalization(axis=3), [(4,)], ValueError, "axis"),
    (lambda: L.Dot(axes="last"), None, TypeError, "axes"),
    (lambda: L.Dot(axes=(1, 2, 3)), None, TypeError, "axes"),
    (lambda: L.Dot(axes=1, normalize="yes"), None, TypeError, "normalize"),
    (lambda: L.Dot(axes=1), [(4,), (5,)], ValueError, "incompatible"),
    (lambda: L.Dot(axes=0), [(4,), (4,)], ValueError, "batch"),
    (lambda: L.Dot(axes=(1, 3)), [(4,), (4,)], ValueError, "out of range"),
    (lambda: L.Dot(axes=-1), [(2, 2, 2), (2, 2, 2)], ValueError, "at most 3"),
])
def test_unit_normalization_and_dot_refuse_bad_arguments(make, shapes, err, match):
    with pytest.raises(err, match=match):
        layer = make()
        if shapes is not None:
            inputs = [pg.Input(s) for s in shapes]
            layer(inputs if len(inputs) > 1 else inputs[0])


def test_dot_refuses_a_single_input():
    with pytest.raises(ValueError, match="2 inputs"):
        L.Dot(axes=1)(pg.Input((3,)))
    with pytest.raises(ValueError, match="2 inputs"):
        L.Dot(axes=1)([pg.Input((3,))] * 3)
