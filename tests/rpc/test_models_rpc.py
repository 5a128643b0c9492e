"""Keras-style models on a remote device: fit, evaluate, predict, save and
load_model with the weights and the optimizer state on the server, against
the same model on the CPU."""

import numpy as np

import pyggml as pg
from pyggml import _scope


def _digits(n=96, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 8, 8, 1)).astype(np.float32)
    y = (x[:, :4].mean(axis=(1, 2, 3)) > x[:, 4:].mean(axis=(1, 2, 3))).astype(np.int64)
    return x, y


def _cnn(backend):
    L = pg.layers
    pg.set_seed(7)
    m = pg.Sequential([
        L.Conv2D(4, 3, padding="same", activation="relu"),
        L.MaxPooling2D(),
        L.Conv2D(8, 3, activation="relu"),
        L.Flatten(),
        L.Dense(16, activation="relu"),
        L.Dense(2, activation="softmax"),
    ], input_shape=(8, 8, 1))
    return m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"], backend=backend)


def test_a_cnn_fits_saves_and_loads_on_the_remote_device(rpc_device, tmp_path, monkeypatch):
    # the remote device builds the layers' composed forms (the fused ops are the CPU's):
    # the CPU model builds them too, so that both compute the same graph, exactly
    monkeypatch.setattr(_scope, "FORCE_COMPOSED", True)
    x, y = _digits()
    pg.set_n_threads(1)
    try:
        runs = {}
        for backend in ("cpu", rpc_device):
            m = _cnn(backend)
            h = m.fit(x, y, epochs=3, batch_size=16, shuffle=False, verbose=0)
            ev = m.evaluate(x, y, return_dict=True)
            p = m.predict(x)
            path = tmp_path / f"cnn_{backend}.gguf"
            m.save(path)
            # loaded onto the remote device: it predicts exactly as the saved one,
            # and training goes on from the saved optimizer state
            again = pg.load_model(path, backend=rpc_device)
            assert again.backend_name == rpc_device
            np.testing.assert_array_equal(again.predict(x), p)
            h2 = again.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0)
            m.fit(x, y, epochs=1, batch_size=16, shuffle=False, verbose=0)
            np.testing.assert_allclose(again.predict(x), m.predict(x), rtol=1e-5, atol=1e-6)
            runs[backend] = (h.history["loss"], ev, p, h2.history["loss"], m.get_weights())
            again.free()
            m.free()
    finally:
        pg.set_n_threads(None)
    lc, evc, pc, l2c, wc = runs["cpu"]
    lr, evr, pr, l2r, wr = runs[rpc_device]
    assert lr[-1] < lr[0]
    np.testing.assert_allclose(lr, lc, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(l2r, l2c, rtol=1e-5, atol=1e-6)
    assert evr["accuracy"] == evc["accuracy"]
    np.testing.assert_allclose(evr["loss"], evc["loss"], rtol=1e-5)
    np.testing.assert_allclose(pr, pc, rtol=1e-5, atol=1e-6)
    for k in wc:
        np.testing.assert_allclose(wr[k], wc[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_a_model_moves_between_the_cpu_and_the_remote_device(rpc_device, tmp_path):
    x, y = _digits(32)
    m = _cnn("cpu")
    m.fit(x, y, epochs=1, batch_size=16, verbose=0, shuffle=False)
    p_cpu = m.predict(x)
    w = m.get_weights()
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", backend=rpc_device)
    assert m.backend_name == rpc_device
    np.testing.assert_allclose(m.predict(x), p_cpu, rtol=1e-6, atol=1e-7)
    for k, v in m.get_weights().items():
        np.testing.assert_array_equal(v, w[k])
    m.save_weights(tmp_path / "w.gguf")
    m2 = _cnn("cpu")
    m2.load_weights(tmp_path / "w.gguf")
    np.testing.assert_allclose(m2.predict(x), p_cpu, rtol=1e-6, atol=1e-7)
    m.free()
    m2.free()


def test_large_transfers_arrive_whole_and_in_order(rpc_device):
    """Inputs over 1 MiB are sent while the caller waits, smaller ones queued
    (up to 64 MiB of them): 70 weights of 1 MB each, set at compile and read
    back, and a batch of 2 MB, give what the CPU gives."""
    L = pg.layers
    x = np.random.default_rng(3).random((1024, 500)).astype(np.float32)
    out = {}
    for backend in ("cpu", rpc_device):
        pg.set_seed(11)
        m = pg.Sequential([L.Dense(500) for _ in range(70)] + [L.Dense(3)], input_shape=500)
        m.compile(optimizer="sgd", loss="mse", backend=backend)
        out[backend] = (m.get_weights(), m.predict(x, batch_size=1024))
        m.free()
    wc, pc = out["cpu"]
    wr, pr = out[rpc_device]
    assert np.abs(pc).max() > 1e-2            # the signal went through all 71 layers
    for k in wc:
        np.testing.assert_array_equal(wr[k], wc[k], err_msg=k)
    np.testing.assert_allclose(pr, pc, rtol=1e-5, atol=1e-6)
