"""Keras options that pyggml used to refuse: Adam/AdamW(amsgrad=True) against
PyTorch's AMSGrad, compile(weighted_metrics=...) against numpy's weighted means
and Keras's log names."""

import numpy as np
import pytest

import pyggml as pg

L = pg.layers


# --- AMSGrad ----------------------------------------------------------------------------------

def _amsgrad_batches(rng):
    """Large inputs first, then small ones: v shrinks, so v_max (not v) sets the steps."""
    xs = [rng.normal(size=(6, 4)).astype(np.float32) * s for s in (4.0, 3.0, 0.2, 0.1, 0.1)]
    ys = [rng.normal(size=(6, 2)).astype(np.float32) for _ in xs]
    return xs, ys


@pytest.mark.parametrize("cls, kwargs", [("Adam", {}), ("AdamW", {"weight_decay": 0.1})])
def test_amsgrad_matches_pytorch(cls, kwargs):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xs, ys = _amsgrad_batches(rng)
    # beta_2 = 0.6: v follows the gradients down quickly, v_max stays up
    opt = getattr(pg.optimizers, cls)(learning_rate=0.05, beta_2=0.6, amsgrad=True, **kwargs)
    m = pg.Sequential([L.Dense(2)], input_shape=4)
    m.compile(optimizer=opt, loss="mse")
    w0 = m.get_weights()
    W = torch.tensor(w0["dense.weight"], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(w0["dense.bias"], dtype=torch.float64, requires_grad=True)
    topt = getattr(torch.optim, cls)([W, b], lr=0.05, betas=(0.9, 0.6), amsgrad=True, eps=1e-8,
                                     weight_decay=kwargs.get("weight_decay", 0.0))
    plain = pg.Sequential([L.Dense(2)], input_shape=4)
    plain.compile(optimizer=getattr(pg.optimizers, cls)(learning_rate=0.05, beta_2=0.6, **kwargs), loss="mse")
    plain.set_weights(w0)
    for x, y in zip(xs, ys):
        m.fit(x, y, batch_size=6, verbose=0)
        plain.fit(x, y, batch_size=6, verbose=0)
        topt.zero_grad()
        loss = ((torch.tensor(x, dtype=torch.float64) @ W.T + b - torch.tensor(y, dtype=torch.float64)) ** 2).mean()
        loss.backward()
        topt.step()
    got = m.get_weights()
    np.testing.assert_allclose(got["dense.weight"], W.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["dense.bias"], b.detach().numpy(), rtol=1e-5, atol=1e-6)
    # without AMSGrad the same steps end elsewhere: the check can tell them apart
    assert np.abs(plain.get_weights()["dense.weight"] - got["dense.weight"]).max() > 1e-2
    state = m.get_optimizer_state()
    assert sorted(state["slots"]) == ["m", "v", "v_max"] and state["iterations"] == len(xs)
    assert np.all(state["slots"]["v_max"]["dense.weight"] >= state["slots"]["v"]["dense.weight"])
    assert opt.get_config()["amsgrad"] is True
    m.free()
    plain.free()


def test_amsgrad_state_saves_and_resumes(tmp_path):
    rng = np.random.default_rng(1)
    xs, ys = _amsgrad_batches(rng)
    m = pg.Sequential([L.Dense(2)], input_shape=4)
    m.compile(optimizer=pg.optimizers.Adam(0.05, amsgrad=True), loss="mse")
    for x, y in zip(xs[:3], ys[:3]):
        m.fit(x, y, batch_size=6, verbose=0)
    path = str(tmp_path / "a.gguf")
    m.save(path)
    back = pg.load_model(path)
    assert back.optimizer.amsgrad
    for x, y in zip(xs[3:], ys[3:]):
        m.fit(x, y, batch_size=6, verbose=0)
        back.fit(x, y, batch_size=6, verbose=0)
    for k, v in m.get_weights().items():
        np.testing.assert_allclose(back.get_weights()[k], v, rtol=1e-6, atol=1e-7)
    m.free()
    back.free()
    with pytest.raises(TypeError, match="amsgrad"):
        pg.optimizers.Adam(amsgrad="yes")


# --- weighted metrics -------------------------------------------------------------------------

def _regression(rng, n=10):
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = rng.normal(size=(n, 2)).astype(np.float32)
    w = rng.uniform(0.0, 3.0, size=n).astype(np.float32)
    return x, y, w


def test_weighted_metrics_are_weighted_and_named_as_keras():
    rng = np.random.default_rng(2)
    x, y, w = _regression(rng)
    m = pg.Sequential([L.Dense(2)], input_shape=3)
    m.compile(optimizer=pg.optimizers.SGD(0.0), loss="mse", metrics=["mae", "mae"],
              weighted_metrics=["mae", "mse"])
    assert m.metrics_names == ["loss", "mae", "mae_1", "weighted_mae", "mse"]
    p = m.predict(x).astype(np.float64)
    mae, mse = np.abs(p - y).mean(axis=1), ((p - y) ** 2).mean(axis=1)
    got = m.evaluate(x, y, sample_weight=w, return_dict=True, batch_size=4)
    assert list(got) == ["loss", "mae", "mae_1", "weighted_mae", "mse"]
    np.testing.assert_allclose(got["mae"], mae.mean(), rtol=1e-5)
    np.testing.assert_allclose(got["mae_1"], mae.mean(), rtol=1e-5)
    np.testing.assert_allclose(got["weighted_mae"], (w * mae).sum() / w.sum(), rtol=1e-5)
    np.testing.assert_allclose(got["mse"], (w * mse).sum() / w.sum(), rtol=1e-5)
    assert abs(got["weighted_mae"] - got["mae"]) > 1e-3
    # without sample weights the weighted metrics are the plain ones
    plain = m.evaluate(x, y, return_dict=True)
    np.testing.assert_allclose(plain["weighted_mae"], plain["mae"], rtol=1e-6)
    # fit logs them, validation too (with the validation set's weights)
    h = m.fit(x, y, sample_weight=w, validation_data=(x, y, w), batch_size=3, verbose=0)
    assert {"mae", "mae_1", "weighted_mae", "mse", "val_weighted_mae", "val_mse"} <= set(h.history)
    np.testing.assert_allclose(h.history["weighted_mae"][0], (w * mae).sum() / w.sum(), rtol=1e-5)
    np.testing.assert_allclose(h.history["val_weighted_mae"][0], (w * mae).sum() / w.sum(), rtol=1e-5)
    m.free()


def test_weighted_metrics_take_class_weight_per_output_names_and_survive_saving(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(12, 4)).astype(np.float32)
    labels = rng.integers(0, 3, size=12)
    reg = rng.normal(size=(12, 1)).astype(np.float32)
    inp = pg.Input((4,))
    cls_out = L.Dense(3, activation="softmax", name="cls")(inp)
    reg_out = L.Dense(1, name="reg")(inp)
    m = pg.Model(inp, [cls_out, reg_out])
    m.compile(optimizer=pg.optimizers.SGD(0.0), loss=["sparse_categorical_crossentropy", "mse"],
              metrics={"cls": ["accuracy"]}, weighted_metrics={"cls": ["accuracy"], "reg": ["mae"]})
    assert m.metrics_names == ["loss", "cls_loss", "reg_loss", "cls_accuracy", "cls_weighted_accuracy", "reg_mae"]
    cw = {0: 1.0, 1: 5.0, 2: 0.0}
    probs, r = m.predict(x)
    hit = (probs.argmax(axis=1) == labels).astype(np.float64)
    wc = np.array([cw[int(c)] for c in labels])
    h = m.fit(x, [labels, reg], class_weight=cw, batch_size=5, verbose=0)
    np.testing.assert_allclose(h.history["cls_accuracy"][0], hit.mean(), rtol=1e-6)
    # class_weight weights the weighted metrics (both outputs' rows, by the class of the row)
    np.testing.assert_allclose(h.history["cls_weighted_accuracy"][0], (wc * hit).sum() / wc.sum(), rtol=1e-6)
    path = str(tmp_path / "w.gguf")
    m.save(path)
    back = pg.load_model(path)
    assert back.metrics_names == m.metrics_names
    a = m.evaluate(x, [labels, reg], sample_weight=wc, return_dict=True)
    b = back.evaluate(x, [labels, reg], sample_weight=wc, return_dict=True)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-6)
    m.free()
    back.free()


def test_weighted_metrics_with_per_cell_weights_and_bad_arguments():
    rng = np.random.default_rng(4)
    x, y, _ = _regression(rng)
    cells = rng.uniform(0.0, 2.0, size=y.shape).astype(np.float32)
    m = pg.Sequential([L.Dense(2)], input_shape=3)
    m.compile(optimizer=pg.optimizers.SGD(0.0), loss="mse", weighted_metrics=["mae"])
    p = m.predict(x).astype(np.float64)
    # a value per sample takes the mean of its cells' weights
    sw = cells.mean(axis=1)
    got = m.evaluate(x, y, sample_weight=cells, return_dict=True)
    np.testing.assert_allclose(got["mae"], (sw * np.abs(p - y).mean(axis=1)).sum() / sw.sum(), rtol=1e-5)
    with pytest.raises(ValueError, match="unknown metric"):
        m.compile(loss="mse", weighted_metrics=["nope"])
    with pytest.raises(ValueError, match="weighted_metrics"):
        m.compile(loss="mse", weighted_metrics={"nope": ["mae"]})
    m.free()


# --- Keras's options of every optimizer ---------------------------------------------------------

def _linear_model(opt, w0=None):
    m = pg.Sequential([L.Dense(2)], input_shape=3)
    m.compile(optimizer=opt, loss="mse")
    if w0 is not None:
        m.set_weights(w0)
    return m


def _torch_grads(w, x, y):
    """Gradients of mse for a Dense layer at weights w (float64)."""
    torch = pytest.importorskip("torch")
    W = torch.tensor(w["dense.weight"], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(w["dense.bias"], dtype=torch.float64, requires_grad=True)
    loss = ((torch.tensor(x, dtype=torch.float64) @ W.T + b - torch.tensor(y, dtype=torch.float64)) ** 2).mean()
    loss.backward()
    return {"dense.weight": W.grad.numpy(), "dense.bias": b.grad.numpy()}, float(loss.detach())


def _close_weights(got, want, rtol=1e-5):
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=rtol, atol=rtol * max(1e-3, float(np.abs(v).max())), err_msg=k)


def test_loss_scale_factor_scales_the_backward_pass_only():
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(8, 3)).astype(np.float32), rng.normal(size=(8, 2)).astype(np.float32)
    plain = _linear_model(pg.optimizers.SGD(0.1))
    w0 = plain.get_weights()
    scaled = _linear_model(pg.optimizers.SGD(0.1, loss_scale_factor=256.0), w0)
    hp = plain.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    hs = scaled.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(hs.history["loss"], hp.history["loss"], rtol=1e-6)      # reported unscaled
    _close_weights(scaled.get_weights(), plain.get_weights(), rtol=1e-6)
    assert scaled.optimizer.scale_loss(2.0) == 512.0 and plain.optimizer.scale_loss(2.0) == 2.0
    # apply_gradients unscales what it is given, as Keras's apply: a gradient of the scaled loss
    g, _ = _torch_grads(scaled.get_weights(), x, y)
    before = scaled.get_weights()
    scaled.optimizer.apply_gradients([(256.0 * g[n], v) for n, v in zip(scaled.trainable_weights,
                                                                         scaled.trainable_variables)])
    _close_weights(scaled.get_weights(), {k: before[k] - 0.1 * g[k] for k in g})
    plain.free()
    scaled.free()


@pytest.mark.parametrize("freq", [None, 2])
def test_use_ema_follows_keras(freq):
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(12, 3)).astype(np.float32), rng.normal(size=(12, 2)).astype(np.float32)
    m = _linear_model(pg.optimizers.SGD(0.3, use_ema=True, ema_momentum=0.8, ema_overwrite_frequency=freq))
    w = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    ema = None
    for it in range(3):                                        # one epoch: batches of 4
        g, _ = _torch_grads(w, x[4 * it:4 * it + 4], y[4 * it:4 * it + 4])
        w = {k: w[k] - 0.3 * g[k] for k in w}
        mom = 0.8 if it > 0 else 0.0
        ema = {k: w[k] if ema is None else mom * ema[k] + (1 - mom) * w[k] for k in w}
        if freq and (it + 1) % freq == 0:
            w = dict(ema)
    m.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    # fit ends with the averages in the weights (Keras's finalize_variable_values)
    _close_weights(m.get_weights(), ema)
    assert sorted(m.get_optimizer_state()["slots"]) == ["ema"]
    cfg = m.optimizer.get_config()
    assert (cfg["use_ema"], cfg["ema_momentum"], cfg.get("ema_overwrite_frequency")) == (True, 0.8, freq)
    m.free()


def test_gradient_accumulation_updates_with_the_mean_every_n_batches():
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(7, 3)).astype(np.float32), rng.normal(size=(7, 2)).astype(np.float32)
    # batches of 4 and 3 (two graphs) share the sums: one update per epoch, with their mean
    m = _linear_model(pg.optimizers.SGD(0.2, gradient_accumulation_steps=2))
    w = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    for _ in range(2):
        g1, _ = _torch_grads(w, x[:4], y[:4])
        g2, _ = _torch_grads(w, x[4:], y[4:])
        w = {k: w[k] - 0.2 * (g1[k] + g2[k]) / 2 for k in w}
    h = m.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False)
    _close_weights(m.get_weights(), w)
    assert m.optimizer.iterations == 2
    assert np.isfinite(h.history["loss"]).all()
    # a schedule is read at the batch count (Keras's): the first update is at batch 1
    seen = []
    m2 = _linear_model(pg.optimizers.SGD(lambda step: seen.append(step) or 0.1, gradient_accumulation_steps=3))
    m2.fit(x[:6], y[:6], batch_size=1, verbose=0, shuffle=False)
    assert m2.optimizer.iterations == 2 and {2, 5} <= set(seen) and not {0, 1, 3, 4} & set(seen)
    m.free()
    m2.free()


def test_gradient_accumulation_with_a_trainer_and_apply_gradients():
    rng = np.random.default_rng(8)
    x, y = rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)
    m = _linear_model(pg.optimizers.SGD(0.5, gradient_accumulation_steps=2))
    w0 = m.get_weights()
    g1, _ = _torch_grads(w0, x[:2], y[:2])
    g2, _ = _torch_grads(w0, x[2:], y[2:])
    want = {k: w0[k] - 0.5 * (g1[k] + g2[k]) / 2 for k in w0}
    with pg.Trainer(m, batch_size=2) as tr:
        tr.step(x[:2], y[:2])
        _close_weights(m.get_weights(), w0, rtol=0)
        tr.step(x[2:], y[2:])
    _close_weights(m.get_weights(), want)
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        pg.Trainer(m, batch_size=2, nbatch_logical=6)
    m.set_weights(w0)
    variables = m.trainable_variables
    m.optimizer.apply_gradients([(g1[n], v) for n, v in zip(m.trainable_weights, variables)])
    _close_weights(m.get_weights(), w0, rtol=0)
    m.optimizer.apply_gradients([(g2[n], v) for n, v in zip(m.trainable_weights, variables)])
    _close_weights(m.get_weights(), want)
    m.free()


@pytest.mark.parametrize("kwargs, err", [
    ({"ema_momentum": 1.5}, ValueError), ({"use_ema": "yes"}, TypeError), ({"ema_overwrite_frequency": 0}, ValueError),
    ({"loss_scale_factor": 0}, ValueError), ({"loss_scale_factor": "big"}, TypeError),
    ({"gradient_accumulation_steps": 1}, ValueError), ({"gradient_accumulation_steps": 2.5}, ValueError)])
def test_optimizer_options_are_checked(kwargs, err):
    with pytest.raises(err):
        pg.optimizers.Adam(**kwargs)


def test_optimizer_options_survive_saving(tmp_path):
    opt = pg.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9, ema_overwrite_frequency=3, loss_scale_factor=8.0,
                             gradient_accumulation_steps=2, amsgrad=True)
    m = _linear_model(opt)
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    m.fit(x, y, batch_size=2, verbose=0)
    path = str(tmp_path / "o.gguf")
    m.save(path)
    back = pg.load_model(path)
    assert back.optimizer.get_config() == m.optimizer.get_config()
    assert sorted(back.get_optimizer_state()["slots"]) == ["ema", "m", "v", "v_max"]
    m.free()
    back.free()
