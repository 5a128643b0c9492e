"""SpectralNormalization (and its Wrapper base): forward, gradients (u and v pass no
gradient, as Keras's stop_gradient), configs and training through the harness
against a float64 numpy power iteration; vector_u updates on fit, not on
predict or evaluate; sigma converges to numpy's largest singular value; Conv
kernels seen as Keras's matrix; bad arguments."""

import numpy as np
import pytest

import pyggml as pg
from harness import ACTIVATIONS, LayerCase, harness_tests

SN = pg.layers.SpectralNormalization


def _normalize(x):
    return x / np.sqrt(np.sum(x * x) + 1e-12)


def power_iteration(m, u, iterations):
    """u (1, n) and v (1, rest) after ``iterations`` steps on m (n, rest): Keras's matrix transposed."""
    for _ in range(iterations):
        v = _normalize(u @ m)
        u = _normalize(v @ m.T)
    return u, v


def sn_ref(inner, iterations=1):
    """The wrapped layer's reference ``inner(hs, w)`` with its weight divided by sigma.  u and v
    are constants of the gradient: they are computed from the weights a step starts from
    (the first weights seen with this vector_u), as stop_gradient makes them."""
    frozen = {}

    def ref(hs, w, training):
        kernel, u0 = w["layer.weight"], w["vector_u"]
        m = kernel.reshape(kernel.shape[0], -1)
        hit = frozen.get(u0.tobytes())
        if hit is None or hit[0].shape != kernel.shape or np.abs(hit[0] - kernel).max() > 1e-4:
            hit = frozen[u0.tobytes()] = (kernel.copy(),) + power_iteration(m, u0, iterations)
        _, u, v = hit
        sigma = (u @ m @ v.T).item()
        inner_w = {k.split(".", 1)[1]: a for k, a in w.items() if k.startswith("layer.")}
        inner_w["weight"] = kernel / sigma
        return inner(hs, inner_w)
    return ref


def dense_ref(activation=None):
    def ref(hs, w):
        return ACTIVATIONS[activation](hs[0] @ w["weight"].T + w.get("bias", 0.0))
    return ref


def conv1d_ref(hs, w):
    x, k = hs[0], w["weight"]                    # (n, steps, c), (f, c, k)
    out = x.shape[1] - k.shape[2] + 1
    y = np.stack([np.einsum("nkc,fck->nf", x[:, j:j + k.shape[2]], k) for j in range(out)], axis=1)
    return np.tanh(y + w["bias"])


def _u_init(name, shape, rng):
    # a u far from the top singular vector, so that one iteration does not converge
    return rng.normal(size=shape) if name.endswith("vector_u") else None


_COVERS = {"covers": ("Wrapper",)}

CASES = [
    LayerCase("spectral_norm_dense", lambda: SN(pg.layers.Dense(3)), [(4,)], sn_ref(dense_ref()),
              weight_init=_u_init, extra=_COVERS),
    LayerCase("spectral_norm_dense_tanh_3_iterations", lambda: SN(pg.layers.Dense(4, activation="tanh",
                                                                                   use_bias=False),
                                                                  power_iterations=3),
              [(3,)], sn_ref(dense_ref("tanh"), 3), weight_init=_u_init),
    LayerCase("spectral_norm_conv1d_tanh", lambda: SN(pg.layers.Conv1D(2, 2, activation="tanh")), [(4, 3)],
              sn_ref(conv1d_ref), weight_init=_u_init),
]

test_forward, test_gradient, test_config, test_training_step = harness_tests(CASES)


def test_vector_u_updates_on_fit_and_not_on_predict_or_evaluate():
    rng = np.random.default_rng(0)
    model = pg.Sequential([pg.Input((5,)), SN(pg.layers.Dense(4), power_iterations=2)])
    model.compile(optimizer=pg.optimizers.SGD(learning_rate=0.1), loss="mse")
    w0 = model.get_weights()
    u0 = rng.normal(size=(1, 4)).astype(np.float32)
    model.set_weights({"spectral_normalization.vector_u": u0})
    x, y = rng.normal(size=(6, 5)), rng.normal(size=(6, 4))
    model.predict(x, verbose=0)
    model.evaluate(x, y, verbose=0)
    np.testing.assert_array_equal(model.get_weights()["spectral_normalization.vector_u"], u0)
    model.fit(x, y, batch_size=6, epochs=1, verbose=0)
    want, _ = power_iteration(w0["spectral_normalization.layer.weight"].astype(np.float64), u0.astype(np.float64), 2)
    got = model.get_weights()["spectral_normalization.vector_u"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert np.abs(got - u0).max() > 0.1
    model.free()


def test_sigma_converges_to_the_largest_singular_value_while_training():
    model = pg.Sequential([pg.Input((6,)), SN(pg.layers.Dense(5, use_bias=False))])
    model.compile(optimizer=pg.optimizers.SGD(learning_rate=0.0), loss="mse", seed=1)     # u moves, the kernel not
    x = np.eye(6, dtype=np.float32)
    for _ in range(40):
        model.fit(x, np.zeros((6, 5)), batch_size=6, epochs=1, verbose=0)
    kernel = model.get_weights()["spectral_normalization.layer.weight"].astype(np.float64)
    used = model.predict(x, verbose=0)                   # rows of the normalized kernel's transpose
    top = np.linalg.svd(kernel, compute_uv=False)[0]
    np.testing.assert_allclose(used, kernel.T / top, rtol=1e-3, atol=1e-5)
    assert abs(np.linalg.norm(used, 2) - 1.0) < 1e-3
    u = model.get_weights()["spectral_normalization.vector_u"][0]
    left = np.linalg.svd(kernel)[0][:, 0]
    assert abs(abs(float(u @ left)) - 1.0) < 1e-3
    model.free()


def test_conv2d_kernel_is_seen_as_keras_matrix():
    rng = np.random.default_rng(2)
    sn = SN(pg.layers.Conv2D(3, 2), power_iterations=200)
    x = rng.normal(size=(2, 5, 5, 2)).astype(np.float32)
    sn(x)
    kernel = sn.layer.get_weights()["weight"]             # (3, 2, 2, 2)
    keras_matrix = np.asarray(sn.layer.get_weights()[0]).reshape(-1, 3)
    top = np.linalg.svd(keras_matrix, compute_uv=False)[0]
    plain = pg.layers.Conv2D(3, 2)
    plain(x)
    plain.set_weights({"weight": kernel / top, "bias": sn.layer.get_weights()["bias"]})
    np.testing.assert_allclose(sn(x), plain(x), rtol=1e-4, atol=1e-5)


def test_weights_config_and_wrapper_base():
    sn = SN(pg.layers.Dense(3), power_iterations=2, name="sn")
    sn(np.zeros((1, 4), np.float32))
    assert sn.weight_names() == ["vector_u", "layer.weight", "layer.bias"]
    assert not sn.vector_u.trainable and sn.vector_u.shape == (1, 3)
    cfg = sn.get_config()
    assert cfg["power_iterations"] == 2 and cfg["layer"]["class_name"] == "Dense"
    again = SN.from_config(cfg)
    assert type(again.layer) is pg.layers.Dense and again.power_iterations == 2
    assert isinstance(sn, pg.layers.Wrapper) and SN.kind() == "spectral_normalization"


def test_bad_arguments():
    with pytest.raises(ValueError, match="greater than zero"):
        SN(pg.layers.Dense(2), power_iterations=0)
    with pytest.raises(TypeError, match="power_iterations"):
        SN(pg.layers.Dense(2), power_iterations=1.5)
    with pytest.raises(TypeError, match="Layer"):
        SN("dense")
    with pytest.raises(ValueError, match="kernel"):
        SN(pg.layers.Flatten())(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="layer"):
        SN.from_config({"name": "x"})


def test_a_zero_kernel_is_used_as_it_is_and_keeps_u():
    model = pg.Sequential([pg.Input((3,)), SN(pg.layers.Dense(2, kernel_initializer="zeros"))]).compile(loss="mse")
    u0 = model.get_weights()["spectral_normalization.vector_u"]
    x = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(model.predict(x, verbose=0), np.zeros((4, 2)))
    model.fit(x, np.ones((4, 2)), epochs=1, verbose=0)
    w = model.get_weights()
    assert np.all(np.isfinite(w["spectral_normalization.vector_u"]))
    assert np.abs(w["spectral_normalization.layer.weight"]).max() > 0          # it trained from zero
    np.testing.assert_allclose(w["spectral_normalization.vector_u"], u0, rtol=1e-6)
    model.free()


def test_integer_inputs_reach_a_wrapped_embedding_as_integers():
    # a table whose top singular value stands well clear of the next (a random one's may not,
    # and 30 power iterations then stop short of it)
    rng = np.random.default_rng(4)
    q1, _ = np.linalg.qr(rng.normal(size=(5, 4)))
    q2, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    init = (q1 * [3.0, 1.0, 0.5, 0.2]) @ q2.T
    emb = pg.layers.Embedding(5, 4, embeddings_initializer=pg.initializers.Constant(init.astype(np.float32)))
    model = pg.Sequential([pg.Input((3,), dtype="int32"), SN(emb, power_iterations=30)])
    model.compile(loss="mse")
    table = model.get_weights()["spectral_normalization.layer.weight"].astype(np.float64)      # (5, 4)
    top = np.linalg.svd(table, compute_uv=False)[0]
    x = np.array([[0, 4, 2]])
    np.testing.assert_allclose(model.predict(x, verbose=0)[0], table[[0, 4, 2]] / top, rtol=1e-3, atol=1e-6)
    model.free()


@pytest.mark.parametrize("make, shape", [
    (lambda: pg.layers.Conv2DTranspose(3, 2), (4, 4, 2)),
    (lambda: pg.layers.DepthwiseConv2D(2, depth_multiplier=2), (4, 4, 3)),
    (lambda: pg.layers.EinsumDense("ab,bc->ac", output_shape=3), (5,)),
    (lambda: pg.layers.Conv1DTranspose(2, 3), (4, 3)),
], ids=["conv2d_transpose", "depthwise_conv2d", "einsum_dense", "conv1d_transpose"])
def test_other_kernels_divided_by_their_keras_matrix_norm(make, shape):
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2,) + shape).astype(np.float32)
    inner = make()
    sn = SN(inner, power_iterations=300)
    sn(x)                                        # builds; then a seeded kernel, not the unseeded initializer's
    seeded = dict(inner.get_weights())           # (whose top singular value once fell at 1.002)
    kname = next(n for n in seeded if n in ("weight", "kernel"))
    seeded[kname] = (rng.normal(size=seeded[kname].shape) * 2.0).astype(np.float32)
    inner.set_weights(seeded)
    got = sn(x)
    keras_kernel = np.asarray(inner.get_weights()[0])
    top = np.linalg.svd(keras_kernel.reshape(-1, keras_kernel.shape[-1]), compute_uv=False)[0]
    plain = type(inner).from_config(inner.get_config())
    plain(x)
    weights = dict(inner.get_weights())
    name = next(n for n in weights if n in ("weight", "kernel"))
    plain.set_weights(weights)
    raw = plain(x)
    weights[name] = weights[name] / top
    plain.set_weights(weights)
    np.testing.assert_allclose(got, plain(x), rtol=1e-4, atol=1e-5)
    assert abs(top - 1.0) > 0.05 and np.abs(raw - got).max() > 1e-3         # it did normalize
