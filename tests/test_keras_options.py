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
