"""Dice, Tversky and Circle (classes and functions): values against float64 numpy
references of Keras's definitions (and the numbers Keras documents), reductions
and sample weights, gradients through a model against central differences of
the numpy reference, training by name in compile, config and save/load."""

import numpy as np
import pytest

import pyggml as pg

L = pg.losses
EPS = 1e-7
rng = np.random.default_rng(31)

# Keras's documented example
KY = np.array([[[[1.0], [1.0]], [[0.0], [0.0]]], [[[1.0], [1.0]], [[0.0], [0.0]]]])
KP = np.array([[[[0.0], [1.0]], [[0.0], [1.0]]], [[[0.4], [0.0]], [[0.0], [0.9]]]])


def _dice(y, p, axis=None):
    return 1 - 2 * (y * p).sum(axis) / (y.sum(axis) + p.sum(axis) + EPS)


def _tversky(y, p, alpha=0.5, beta=0.5, axis=None):
    tp = (y * p).sum(axis)
    fp = ((1 - y) * p).sum(axis)
    fn = (y * (1 - p)).sum(axis)
    return 1 - tp / (tp + alpha * fp + beta * fn + EPS)


def _lse_masked(x, mask):
    out = np.full(x.shape[0], -np.inf)
    for i in range(x.shape[0]):
        v = x[i][mask[i]]
        if v.size:
            m = v.max()
            out[i] = m + np.log(np.exp(v - m).sum())
    return out


def _circle(labels, e, ref_labels=None, ref=None, remove_diagonal=True, gamma=80.0, margin=0.4):
    """Keras's circle loss per sample, float64."""
    ref = e if ref is None else ref
    ref_labels = labels if ref_labels is None else ref_labels
    d = np.maximum(1 - e @ ref.T, 0)
    pos = labels[:, None] == ref_labels[None, :]
    neg = ~pos
    if remove_diagonal:
        pos = pos & ~np.eye(*pos.shape, dtype=bool)
    pw = np.maximum((margin + d) * pos, 0)
    nw = np.maximum((1 + margin - d) * neg, 0)
    lp = _lse_masked(-gamma * pw * (margin - d), pos)
    ln = _lse_masked(gamma * nw * (1 - margin - d), neg)
    return np.logaddexp(0, lp + ln)


def _circle_mean(labels, e, w=None, **kw):
    v = _circle(labels, e, **kw)
    w = np.ones_like(v) if w is None else w
    valid = (v > 0).sum()
    return (v * w).sum() / valid if valid else 0.0


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# --- values ----------------------------------------------------------------------------------------

def test_keras_documented_dice_numbers():
    np.testing.assert_allclose(L.Dice(axis=(1, 2, 3), reduction=None)(KY, KP), [0.5, 0.75757575], rtol=1e-6)
    assert L.Dice()(KY, KP) == pytest.approx(0.6164384, rel=1e-6)
    np.testing.assert_allclose(L.dice(KY, KP, axis=(1, 2, 3)), [0.5, 0.75757575], rtol=1e-6)
    assert L.dice(KY, KP).shape == ()
    assert float(L.dice(KY, KP)) == pytest.approx(0.6164384, rel=1e-6)
    # alpha = beta = 0.5 is the Dice loss
    assert L.Tversky()(KY, KP) == pytest.approx(0.6164384, rel=1e-6)


Y4 = (rng.random((5, 3, 4, 2)) < 0.4).astype(float)
P4 = rng.uniform(0.01, 0.99, (5, 3, 4, 2))
Y2 = (rng.random((6, 5)) < 0.5).astype(float)
P2 = rng.uniform(0.01, 0.99, (6, 5))


@pytest.mark.parametrize("axis,y,p", [(None, Y4, P4), ((1, 2, 3), Y4, P4), ((1, 2), Y4, P4), (-1, Y2, P2),
                                      (1, Y2, P2), (None, Y2, P2), ([-1], Y2, P2)])
@pytest.mark.parametrize("kind", ["dice", "tversky"])
def test_overlap_values_and_reductions(axis, y, p, kind):
    ax = tuple(axis) if isinstance(axis, list) else axis
    if kind == "dice":
        make, ref = (lambda **kw: L.Dice(axis=axis, **kw)), (lambda: _dice(y, p, ax))
        fn = lambda: L.dice(y, p, axis=axis)                         # noqa: E731
    else:
        make, ref = (lambda **kw: L.Tversky(alpha=0.3, beta=0.8, axis=axis, **kw)), \
            (lambda: _tversky(y, p, 0.3, 0.8, ax))
        fn = lambda: L.tversky(y, p, alpha=0.3, beta=0.8, axis=axis)  # noqa: E731
    want = np.asarray(ref())
    np.testing.assert_allclose(fn(), want, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(make(reduction="none")(y, p), want, rtol=2e-5, atol=1e-6)
    assert make()(y, p) == pytest.approx(want.mean(), rel=2e-5)
    assert make(reduction="sum")(y, p) == pytest.approx(want.sum(), rel=2e-5)
    sw = rng.uniform(0, 2, len(y))
    if want.ndim == 0:
        # one loss for the batch: Keras broadcasts it against the weights
        assert make()(y, p, sample_weight=sw) == pytest.approx(float(want) * sw.mean(), rel=2e-5)
        assert make(reduction="sum")(y, p, sample_weight=sw) == pytest.approx(float(want) * sw.sum(), rel=2e-5)
    elif want.ndim == 1:
        assert make()(y, p, sample_weight=sw) == pytest.approx((want * sw).sum() / len(y), rel=2e-5)


def test_overlap_config_round_trip_and_names():
    for loss in (L.Dice(axis=(1, 2)), L.Tversky(alpha=0.2, beta=0.9, axis=-1, reduction="sum", name="tv"),
                 L.Dice(), L.Tversky()):
        c = loss.get_config()
        again = type(loss).from_config(c)
        assert again.get_config() == c and again.axis == loss.axis
        back = L.deserialize(L.serialize(loss))
        assert type(back) is type(loss) and back.get_config() == c
    assert L.Tversky(alpha=0.2, beta=0.9).get_config() == {"name": "tversky", "reduction": "sum_over_batch_size",
                                                           "axis": None, "alpha": 0.2, "beta": 0.9}
    assert L.serialize(L.Dice()) == "dice" and L.serialize(L.Circle()) == "circle"
    # Keras's get: the function for its name, an instance for its class name
    for name, fn in [("dice", L.dice), ("tversky", L.tversky), ("circle", L.circle)]:
        assert L.get(name) is fn and L.get(fn) is fn
    assert type(L.get("Dice")) is L.Dice
    # what compile trains with: the class, for a name or a function
    for name, fn, cls in [("dice", L.dice, L.Dice), ("tversky", L.tversky, L.Tversky), ("circle", L.circle, L.Circle)]:
        assert type(L._as_loss(name)) is cls and type(L._as_loss(fn)) is cls


def test_overlap_bad_arguments():
    with pytest.raises(TypeError, match="axis"):
        L.Dice(axis="last")
    with pytest.raises(TypeError, match="axis"):
        L.Tversky(axis=1.5)
    with pytest.raises(ValueError, match="axis"):
        L.Dice(axis=3)(Y2, P2)
    with pytest.raises(ValueError, match="axis"):
        L.dice(Y2, P2, axis=(1, -1))
    with pytest.raises(TypeError, match="alpha"):
        L.Tversky(alpha="a")
    with pytest.raises(ValueError):
        L.Dice(reduction="median")
    with pytest.raises(ValueError, match="does not fit"):
        L.dice(np.ones((3, 2)), np.ones((3, 3)))
    with pytest.raises(TypeError):
        L.tversky(np.array(["a", "b"]), np.ones(2))


LABELS = np.array([0, 1, 0, 2, 1, 3, 2, 0])          # class 3 has a single sample: no positive pair
EMB = _unit(rng.normal(size=(8, 5)))


@pytest.mark.parametrize("kw", [dict(), dict(gamma=4.0, margin=0.25), dict(remove_diagonal=False, gamma=10.0),
                                dict(gamma=256.0, margin=0.1)])
def test_circle_values(kw):
    want = _circle(LABELS, EMB, **kw)
    np.testing.assert_allclose(L.circle(LABELS, EMB, **kw), want, rtol=2e-5, atol=1e-5)
    np.testing.assert_allclose(L.Circle(reduction="none", **kw)(LABELS, EMB), want, rtol=2e-5, atol=1e-5)
    if kw.get("remove_diagonal", True):
        assert want[5] == 0                              # the lone sample
    assert L.Circle(**kw)(LABELS, EMB) == pytest.approx(_circle_mean(LABELS, EMB, **kw), rel=2e-5)
    sw = rng.uniform(0, 2, len(LABELS))
    assert L.Circle(**kw)(LABELS, EMB, sample_weight=sw) == pytest.approx(
        _circle_mean(LABELS, EMB, sw, **kw), rel=2e-5)
    assert L.Circle(reduction="sum", **kw)(LABELS, EMB) == pytest.approx(want.sum(), rel=2e-5)


def test_circle_with_references_and_edge_cases():
    ref = _unit(rng.normal(size=(6, 5)))
    ref_labels = np.array([0, 1, 2, 3, 0, 1])
    want = _circle(LABELS, EMB, ref_labels=ref_labels, ref=ref)
    np.testing.assert_allclose(L.circle(LABELS, EMB, ref_labels=ref_labels, ref_embeddings=ref), want,
                               rtol=2e-5, atol=1e-5)
    # every label different: no positive pair anywhere, a loss of 0 (and a mean of 0, not NaN)
    lone = np.arange(8)
    assert np.all(L.circle(lone, EMB) == 0)
    assert L.Circle()(lone, EMB) == 0.0
    c = L.Circle(gamma=32, margin=0.3, remove_diagonal=False).get_config()
    assert c == {"name": "circle", "reduction": "sum_over_batch_size", "gamma": 32.0, "margin": 0.3,
                 "remove_diagonal": False}
    assert L.Circle.from_config(c).get_config() == c
    with pytest.raises(ValueError, match="embeddings"):
        L.circle(LABELS, EMB.reshape(8, 5, 1))
    with pytest.raises(ValueError, match="labels"):
        L.circle(LABELS[:5], EMB)
    with pytest.raises(ValueError, match="ref_labels"):
        L.circle(LABELS, EMB, ref_labels=ref_labels[:3], ref_embeddings=ref)
    with pytest.raises(ValueError, match="ref_embeddings"):
        L.circle(LABELS, EMB, ref_embeddings=ref)
    with pytest.raises(ValueError, match="whole numbers"):
        L.circle(LABELS + 0.5, EMB)
    with pytest.raises(TypeError, match="gamma"):
        L.Circle(gamma="big")
    with pytest.raises(TypeError, match="remove_diagonal"):
        L.Circle(remove_diagonal="yes")


# --- gradients through a model: central differences of the float64 reference ------------------------------

X = rng.normal(size=(8, 3))


def _model(loss, units, activation, seed=2):
    m = pg.Sequential([pg.layers.Dense(units, activation=activation)], input_shape=3)
    m.compile(optimizer=pg.optimizers.SGD(0.1), loss=loss, seed=seed)
    w = {"dense.weight": np.random.default_rng(seed).normal(size=(units, 3)).astype(np.float32) * 0.7,
         "dense.bias": np.linspace(-0.3, 0.3, units).astype(np.float32)}
    m.set_weights(w)
    return m, {k: v.astype(np.float64) for k, v in w.items()}


def _numeric(total, w, h=1e-6):
    out = {}
    for k, v in w.items():
        g = np.zeros_like(v)
        for i in np.ndindex(*v.shape):
            d = {kk: vv.copy() for kk, vv in w.items()}
            d[k][i] += h
            up = total(d)
            d[k][i] -= 2 * h
            g[i] = (up - total(d)) / (2 * h)
        out[k] = g
    return out


def _forward(w, act):
    z = X @ w["dense.weight"].T + w["dense.bias"]      # weights are (out, in)
    return {"sigmoid": lambda t: 1 / (1 + np.exp(-t)), None: lambda t: t}[act](z)


YB = (rng.random((8, 4)) < 0.5).astype(np.float64)


@pytest.mark.parametrize("case", ["dice_all", "dice_rows", "tversky_all", "tversky_rows"])
@pytest.mark.parametrize("weighted", [False, True])
def test_overlap_gradients_match_central_differences(case, weighted):
    kind, where = case.split("_")
    axis = None if where == "all" else 1
    loss = L.Dice(axis=axis) if kind == "dice" else L.Tversky(alpha=0.7, beta=0.2, axis=axis)
    sw = rng.uniform(0.2, 2, 8).astype(np.float32) if weighted else None

    sw64 = None if sw is None else sw.astype(np.float64)

    def total(w):
        p = _forward(w, "sigmoid")
        v = _dice(YB, p, axis) if kind == "dice" else _tversky(YB, p, 0.7, 0.2, axis)
        if sw is None:
            return np.mean(v)
        return float(v) * sw64.mean() if np.ndim(v) == 0 else (v * sw64).sum() / len(v)

    m, w = _model(loss, 4, "sigmoid")
    got = m.gradients(X.astype(np.float32), YB, sample_weight=sw)
    assert m.evaluate(X.astype(np.float32), YB, sample_weight=sw, batch_size=8, verbose=0) == \
        pytest.approx(total(w), rel=1e-5)
    num = _numeric(total, w)
    for k in w:
        np.testing.assert_allclose(got[k], num[k], rtol=2e-3, atol=2e-5, err_msg=k)
        assert np.abs(num[k]).max() > 1e-3
    m.free()


CL = np.array([0, 1, 0, 1, 2, 2, 0, 3])


@pytest.mark.parametrize("kw", [dict(gamma=4.0), dict(gamma=8.0, margin=0.25, remove_diagonal=False)])
@pytest.mark.parametrize("weighted", [False, True])
def test_circle_gradients_match_central_differences(kw, weighted):
    sw = rng.uniform(0.2, 2, 8).astype(np.float32) if weighted else None
    loss = L.Circle(**kw)

    def total(w):
        return _circle_mean(CL, _unit(_forward(w, None)), None if sw is None else sw.astype(np.float64), **kw)

    m = pg.Sequential([pg.layers.Dense(5), pg.layers.UnitNormalization()], input_shape=3)
    m.compile(optimizer=pg.optimizers.SGD(0.1), loss=loss, seed=1)
    w = {"dense.weight": np.random.default_rng(4).normal(size=(5, 3)).astype(np.float32),
         "dense.bias": np.linspace(-0.3, 0.3, 5).astype(np.float32)}
    m.set_weights(w)
    w = {k: v.astype(np.float64) for k, v in w.items()}
    got = m.gradients(X.astype(np.float32), CL, sample_weight=sw)
    assert m.evaluate(X.astype(np.float32), CL, sample_weight=sw, batch_size=8, verbose=0) == \
        pytest.approx(total(w), rel=1e-5)
    num = _numeric(total, w)
    for k in w:
        np.testing.assert_allclose(got[k], num[k], rtol=3e-3, atol=5e-5, err_msg=k)
        assert np.abs(num[k]).max() > 1e-3
    m.free()


# --- training by name, saving ------------------------------------------------------------------------------

@pytest.mark.parametrize("loss", ["dice", "tversky", L.Dice(axis=-1), L.tversky])
def test_overlap_losses_train(loss):
    r = np.random.default_rng(8)
    x = r.normal(size=(64, 3)).astype(np.float32)
    y = (x @ np.array([[1.0, -1.0], [0.5, 1.0], [-1.0, 0.2]]) > 0).astype(np.float32)
    m = pg.Sequential([pg.layers.Dense(2, activation="sigmoid")], input_shape=3).compile(
        optimizer=pg.optimizers.Adam(0.05), loss=loss, seed=0)
    h = m.fit(x, y, epochs=15, batch_size=16, verbose=0)
    # (rows whose targets are all 0 keep a per-row Dice of 1 whatever the output: a floor)
    assert h.history["loss"][-1] < 0.8 * h.history["loss"][0]
    m.free()


def test_circle_trains_and_saves(tmp_path):
    # its own generator: the module's is shared, so its draws here depended on which tests ran
    # before on the same pytest worker; over draws of this data 10 epochs take the loss to 0.25-0.70
    # of its start (this one: 0.47), so the test could fail on an unlucky order
    r = np.random.default_rng(4)
    centers = _unit(r.normal(size=(3, 4)))
    labels = r.integers(0, 3, 48)
    x = (centers[labels] + 0.4 * r.normal(size=(48, 4))).astype(np.float32)
    m = pg.Sequential([pg.layers.Dense(6), pg.layers.UnitNormalization()], input_shape=4).compile(
        optimizer=pg.optimizers.Adam(0.02), loss=L.Circle(gamma=16.0), seed=3)
    before = m.evaluate(x, labels, batch_size=16, verbose=0)
    m.fit(x, labels, epochs=10, batch_size=16, verbose=0, shuffle=False)
    after = m.evaluate(x, labels, batch_size=16, verbose=0)
    assert after < 0.7 * before
    m.save(tmp_path / "c.gguf")
    back = pg.load_model(tmp_path / "c.gguf")
    # the same loss after loading: its gamma (16, not the default 80) came back with it
    assert back.evaluate(x, labels, batch_size=16, verbose=0) == pytest.approx(after, rel=1e-6)
    m.free()
    back.free()
    # by the function, as Keras's compile(loss=keras.losses.circle)
    m = pg.Sequential([pg.layers.Dense(6), pg.layers.UnitNormalization()], input_shape=4).compile(
        optimizer="adam", loss=L.circle, seed=3)
    e = m.predict(x[:16], verbose=0).astype(np.float64)
    assert m.evaluate(x[:16], labels[:16], batch_size=16, verbose=0) == pytest.approx(
        _circle_mean(labels[:16], e), rel=1e-4)
    m.free()


def test_dice_save_load_keeps_settings(tmp_path):
    x = rng.normal(size=(16, 3)).astype(np.float32)
    y = (rng.random((16, 2)) < 0.5).astype(np.float32)
    m = pg.Sequential([pg.layers.Dense(2, activation="sigmoid")], input_shape=3).compile(
        loss=L.Tversky(alpha=0.8, beta=0.1, axis=1), seed=1)
    m.save(tmp_path / "t.gguf")
    back = pg.load_model(tmp_path / "t.gguf")
    assert back.evaluate(x, y, verbose=0) == pytest.approx(m.evaluate(x, y, verbose=0), rel=1e-6)
    p = m.predict(x, verbose=0).astype(np.float64)
    assert m.evaluate(x, y, batch_size=16, verbose=0) == pytest.approx(_tversky(y, p, 0.8, 0.1, 1).mean(), rel=1e-5)
    m.free()
    back.free()


def test_in_a_functional_model_with_two_heads():
    # a segmentation-like head trained with Dice over its pixels and an embedding head with Circle
    x = rng.normal(size=(16, 3)).astype(np.float32)
    y_mask = (rng.random((16, 4)) < 0.5).astype(np.float32)
    labels = rng.integers(0, 3, 16)
    inp = pg.Input(shape=3)
    h = pg.layers.Dense(8, activation="tanh")(inp)
    seg = pg.layers.Dense(4, activation="sigmoid", name="seg")(h)
    emb = pg.layers.UnitNormalization(name="emb")(pg.layers.Dense(5)(h))
    m = pg.Model(inp, [seg, emb]).compile(optimizer=pg.optimizers.Adam(0.02),
                                          loss=[L.Dice(axis=-1), L.Circle(gamma=8.0)], seed=2)
    logs = m.evaluate(x, [y_mask, labels], batch_size=16, return_dict=True, verbose=0)
    p_seg, p_emb = (a.astype(np.float64) for a in m.predict(x, verbose=0))
    assert logs["seg_loss"] == pytest.approx(_dice(y_mask, p_seg, -1).mean(), rel=1e-5)
    assert logs["emb_loss"] == pytest.approx(_circle_mean(labels, p_emb, gamma=8.0), rel=1e-4)
    h = m.fit(x, [y_mask, labels], epochs=15, batch_size=16, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    m.free()


# --- CTC, against PyTorch's ----------------------------------------------------------------------------

CB, CT, CF, CK = 6, 9, 4, 5
CX = rng.normal(size=(CB, CT, CF)).astype(np.float32)
# repeats (a blank is needed between them), an empty label, a label as long as the steps allow
CLAB = np.array([[1, 2, 2, 0, 0], [3, 0, 0, 0, 0], [0, 0, 0, 0, 0], [4, 1, 4, 3, 1], [2, 2, 2, 2, 0],
                 [1, 3, 0, 0, 0]])


def _torch_ctc(labels, logits):
    torch = pytest.importorskip("torch")
    z = logits if isinstance(logits, torch.Tensor) else torch.tensor(logits, dtype=torch.float64)
    lp = torch.log_softmax(z, -1).transpose(0, 1)
    lens = torch.tensor((labels != 0).sum(1))
    return torch.nn.functional.ctc_loss(lp, torch.tensor(labels), torch.full((len(labels),), z.shape[1]), lens,
                                        blank=0, reduction="none")


def test_ctc_values_against_torch():
    logits = rng.normal(size=(CB, CT, CK)) * 2
    want = _torch_ctc(CLAB, logits).numpy()
    np.testing.assert_allclose(L.ctc(CLAB, logits), want, rtol=2e-5)
    np.testing.assert_allclose(L.CTC(reduction="none")(CLAB, logits), want, rtol=2e-5)
    assert L.CTC()(CLAB, logits) == pytest.approx(want.mean(), rel=2e-5)
    assert L.CTC(reduction="sum")(CLAB, logits) == pytest.approx(want.sum(), rel=2e-5)
    sw = rng.uniform(0, 2, CB)
    assert L.CTC()(CLAB, logits, sample_weight=sw) == pytest.approx((want * sw).mean(), rel=2e-5)
    # labels narrower or wider (with padding) than the steps give the same losses
    np.testing.assert_allclose(L.ctc(CLAB[:, :4][[0, 1, 2, 4, 5]], logits[[0, 1, 2, 4, 5]]), want[[0, 1, 2, 4, 5]],
                               rtol=2e-5)
    wide = np.pad(CLAB, ((0, 0), (0, 7)))
    assert L.CTC()(wide, logits) == pytest.approx(want.mean(), rel=2e-5)
    assert L.get("ctc") is L.ctc and L.get("CTC").get_config() == {"name": "ctc", "reduction": "sum_over_batch_size"}
    assert type(L._as_loss(L.ctc)) is L.CTC and L.serialize(L.CTC()) == "ctc"


def test_ctc_bad_inputs():
    logits = rng.normal(size=(2, 3, 4))
    with pytest.raises(ValueError, match="steps, classes"):
        L.ctc(np.ones((2, 2), int), logits[:, 0])
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        L.ctc(np.array([[1, 4], [1, 0]]), logits)
    with pytest.raises(ValueError, match="does not fit"):
        L.CTC()(np.array([[1, 2, 3, 1], [1, 0, 0, 0]]), logits)
    with pytest.raises(ValueError, match="max_label_length"):
        L.ctc(np.ones((2, 2, 1), int), logits)
    with pytest.raises(ValueError, match="label rows"):
        L.ctc(np.ones((3, 2), int), logits)
    with pytest.raises(ValueError, match="padding"):
        L.CTC()(np.array([[1, 0, 0, 2], [1, 0, 0, 0]]), logits)
    with pytest.raises(TypeError):
        L.ctc(np.array([["a", "b"], ["c", "d"]]), logits)


@pytest.mark.parametrize("weighted", [False, True])
def test_ctc_gradient_against_torch_and_training(weighted, tmp_path):
    torch = pytest.importorskip("torch")
    sw = rng.uniform(0.2, 2, CB).astype(np.float32) if weighted else None
    m = pg.Sequential([pg.layers.Dense(CK)], input_shape=(CT, CF)).compile(
        optimizer=pg.optimizers.Adam(0.05), loss="ctc", seed=1)
    w = m.get_weights()
    got = m.gradients(CX, CLAB, sample_weight=sw)
    W = torch.tensor(w["dense.weight"], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(w["dense.bias"], dtype=torch.float64, requires_grad=True)
    per = _torch_ctc(CLAB, torch.tensor(CX, dtype=torch.float64) @ W.T + b)
    total = (per * (1 if sw is None else torch.tensor(sw, dtype=torch.float64))).mean()
    total.backward()
    assert m.evaluate(CX, CLAB, sample_weight=sw, batch_size=CB, verbose=0) == pytest.approx(total.item(), rel=1e-5)
    np.testing.assert_allclose(got["dense.weight"], W.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["dense.bias"], b.grad.numpy(), rtol=1e-4, atol=1e-6)
    h = m.fit(CX, CLAB, sample_weight=sw, epochs=20, batch_size=3, verbose=0)
    assert h.history["loss"][-1] < 0.6 * h.history["loss"][0]
    m.save(tmp_path / "ctc.gguf")
    back = pg.load_model(tmp_path / "ctc.gguf")
    assert back.evaluate(CX, CLAB, batch_size=CB, verbose=0) == pytest.approx(
        m.evaluate(CX, CLAB, batch_size=CB, verbose=0), rel=1e-6)
    with pytest.raises(ValueError, match="labels"):
        m.fit(CX, np.pad(CLAB, ((0, 0), (0, 6)), constant_values=1), epochs=1, verbose=0)
    with pytest.raises(ValueError):
        m.fit(CX, CLAB + CK, epochs=1, verbose=0)
    m.free()
    back.free()


@pytest.mark.parametrize("composed", [False, True])
def test_ctc_long_sequences_against_torch(composed):
    # 80 steps: path scores far below 0 (about -200) next to the -1e30 that stands for log 0
    torch = pytest.importorskip("torch")
    from pyggml import _scope
    old = _scope.FORCE_COMPOSED
    _scope.FORCE_COMPOSED = composed
    try:
        r = np.random.default_rng(5)
        logits = r.normal(size=(3, 80, 12)) * 2
        labels = r.integers(1, 12, (3, 20))
        labels[1, 12:] = 0
        labels[2, 5:9] = labels[2, 4]                     # a run of repeats
        want = _torch_ctc(labels, logits).numpy()
        assert want.min() > 150
        np.testing.assert_allclose(L.ctc(labels, logits), want, rtol=2e-5)
        m = pg.Sequential([pg.layers.Dense(12)], input_shape=(80, 4)).compile(optimizer="sgd", loss="ctc", seed=2)
        x = r.normal(size=(3, 80, 4)).astype(np.float32)
        w = m.get_weights()
        got = m.gradients(x, labels)
        W = torch.tensor(w["dense.weight"], dtype=torch.float64, requires_grad=True)
        b = torch.tensor(w["dense.bias"], dtype=torch.float64, requires_grad=True)
        _torch_ctc(labels, torch.tensor(x, dtype=torch.float64) @ W.T + b).mean().backward()
        np.testing.assert_allclose(got["dense.weight"], W.grad.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got["dense.bias"], b.grad.numpy(), rtol=1e-4, atol=1e-5)
        m.free()
    finally:
        _scope.FORCE_COMPOSED = old


def test_per_sample_losses_with_a_padding_mask():
    # a Masking layer's step mask reaches the loss: CTC and a Dice over the steps take each sequence
    # whole (one loss per sample), so the mask leaves them as they are
    r = np.random.default_rng(9)
    x = r.normal(size=(4, 6, 3)).astype(np.float32)
    x[:, 4:] = 0
    labels = np.array([[1, 2, 0], [2, 0, 0], [1, 1, 0], [3, 2, 1]])
    y = (r.random((4, 6, 4)) < 0.5).astype(np.float32)
    for loss, target in (("ctc", labels), (L.Dice(axis=(1, 2)), y)):
        m = pg.Sequential([pg.layers.Masking(0.0), pg.layers.Dense(4)], input_shape=(6, 3)).compile(loss=loss, seed=1)
        p = m.predict(x, verbose=0).astype(np.float64)
        want = L.ctc(labels, p).mean() if loss == "ctc" else _dice(y, p, (1, 2)).mean()
        assert m.evaluate(x, target, batch_size=4, verbose=0) == pytest.approx(float(want), rel=1e-5)
        m.fit(x, target, epochs=1, verbose=0)
        m.free()
