"""The same models and Trainer on every GPU device this build can use
(Vulkan, CUDA, Metal), against the CPU.  Skips cleanly when the build or the
machine has no such device.  For Mesa's lavapipe (Vulkan on the CPU) set
GGML_VK_VISIBLE_DEVICES=0 (and GGML_VK_DISABLE_F16=1 for f32-exact tiles)."""

import numpy as np
import pytest

import pyggml as pg

GPUS = [d for d in pg.backends() if d != "cpu"]
MARKS = {"vulkan": pytest.mark.vulkan, "cuda": pytest.mark.cuda, "metal": pytest.mark.metal}


def _params():
    out = []
    for d in GPUS:
        mark = next((m for k, m in MARKS.items() if d.startswith(k)), None)
        out.append(pytest.param(d, marks=[mark] if mark else []))
    return out or [pytest.param(None, marks=pytest.mark.skip(reason="this build has no GPU device"))]


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 4)).astype(np.float32)
    y = np.stack([x.sum(1), x[:, 0] - x[:, 1], x[:, 2]], axis=1).astype(np.float32)
    return x, y


def _model(backend, optimizer="adamw"):
    pg.set_seed(3)
    inp = pg.Input(4)
    h = pg.layers.Dense(16, activation="relu")(inp)
    return pg.Model(inp, pg.layers.Dense(3)(h)).compile(optimizer=optimizer, loss="mse", backend=backend)


@pytest.mark.parametrize("device", _params())
def test_fit_matches_the_cpu(device):
    x, y = _data()
    cpu, gpu = _model("cpu"), _model(device)
    assert gpu.backend_name == device
    hc = cpu.fit(x, y, epochs=5, batch_size=16, shuffle=False, verbose=0)
    hg = gpu.fit(x, y, epochs=5, batch_size=16, shuffle=False, verbose=0)
    np.testing.assert_allclose(hg.history["loss"], hc.history["loss"], rtol=1e-4)
    np.testing.assert_allclose(gpu.predict(x), cpu.predict(x), rtol=1e-4, atol=1e-5)
    cpu.free()
    gpu.free()


@pytest.mark.parametrize("device", _params())
def test_trainer_matches_the_cpu_and_its_moments_live_on_the_device(device):
    x, y = _data()
    runs = {}
    for backend in ("cpu", device):
        m = _model(backend)
        tr = pg.Trainer(m, batch_size=16, loss_mask=3)
        losses, preds = [], []
        for k in range(12):
            s = slice((k % 4) * 16, (k % 4 + 1) * 16)
            losses.append(tr.step(x[s], y[s]))
            preds.append(tr.predict(x[:8]))          # predictions never go stale between steps
        target = tr.snapshot()
        tr.update_target(target, tau=0.5)
        runs[backend] = (losses, preds, target.get_weights())
        # the Adam moments are updated on the device: later steps differ from a fresh start
        assert losses[4] != losses[0]
        target.free()
        tr.free()
        m.free()
    lc, pc, wc = runs["cpu"]
    lg, pgpu, wg = runs[device]
    np.testing.assert_allclose(lg, lc, rtol=1e-4)
    for a, b in zip(pgpu, pc):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for i in range(1, len(pgpu)):
        assert not np.array_equal(pgpu[i], pgpu[i - 1])
    for k in wc:
        np.testing.assert_allclose(wg[k], wc[k], rtol=1e-4, atol=1e-5)


def _two_heads(backend):
    pg.set_seed(5)
    inp = pg.Input(4)
    h = pg.layers.Dense(16, activation="relu")(inp)
    h = pg.layers.BatchNormalization()(h)
    outs = [pg.layers.Dense(2, activation="sigmoid")(h), pg.layers.Dense(1)(h)]
    # SGD: Adam's first steps scale float noise in near-zero gradients up to the learning rate
    return pg.Model(inp, outs).compile(optimizer=pg.optimizers.SGD(0.1), loss=["binary_crossentropy", "mse"],
                                       metrics=["mae"], backend=backend)


@pytest.mark.parametrize("device", _params())
def test_what_a_training_step_reads_back_matches_the_cpu(device):
    # After a step, fit reads each head's loss, the outputs (for metrics) and
    # BatchNormalization's batch statistics from ggml-opt's copy of the graph.
    # Vulkan reorders that copy's nodes when the scheduler lays it out; pairing
    # nodes with their copies by position read other tensors, past the end of
    # the numpy arrays (heap corruption in a two-output model's fit).
    x, _ = _data()
    ys = [x[:, :2], x[:, 2:3] - x[:, 3:4]]
    runs = {}
    for backend in ("cpu", device):
        m = _two_heads(backend)
        hist = m.fit(x, ys, epochs=3, batch_size=16, shuffle=False, verbose=0).history
        runs[backend] = (hist, m.get_weights())
        heads = [k for k in hist if k.endswith("_loss")]
        assert len(heads) == 2
        np.testing.assert_allclose(hist["loss"], np.add(*[hist[k] for k in heads]), rtol=1e-5)
        m.free()
    (hc, wc), (hg, wg) = runs["cpu"], runs[device]
    assert hg.keys() == hc.keys()
    for k in hc:
        np.testing.assert_allclose(hg[k], hc[k], rtol=1e-4, atol=1e-6, err_msg=k)
    for k in wc:
        np.testing.assert_allclose(wg[k], wc[k], rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("device", _params())
def test_save_on_the_device_and_load_anywhere(device, tmp_path):
    x, y = _data()
    m = _model(device)
    m.fit(x, y, epochs=2, batch_size=16, verbose=0)
    m.save(tmp_path / "m.gguf")
    on_cpu = pg.load_model(tmp_path / "m.gguf", backend="cpu")
    on_gpu = pg.load_model(tmp_path / "m.gguf", backend=device)
    np.testing.assert_allclose(on_gpu.predict(x), on_cpu.predict(x), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(on_gpu.predict(x), m.predict(x), rtol=1e-5, atol=1e-6)
    for mm in (m, on_cpu, on_gpu):
        mm.free()


def test_auto_picks_the_best_device():
    m = pg.Sequential([pg.layers.Dense(2)], input_shape=3).compile(loss="mse", backend="auto")
    assert m.backend_name == pg.backends()[0]
    m.free()


def test_a_device_the_build_lacks_names_the_build_option():
    for family, opt in (("cuda", "-Dcuda=enabled"), ("vulkan", "-Dvulkan=enabled"), ("metal", "-Dmetal=enabled")):
        if any(d.startswith(family) for d in pg.backends()):
            continue
        with pytest.raises(pg.GGMLError, match=opt):
            pg.Sequential([pg.layers.Dense(2)], input_shape=3).compile(loss="mse", backend=f"{family}0")
