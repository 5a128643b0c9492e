"""Every loss's gradient against PyTorch's: one SGD step of the same model from
the same weights, for the targets users give (one-hot, soft, unnormalised,
zero and negative rows: policy-gradient targets are advantage x one_hot), with
and without sample and per-cell weights.  The updated weights must agree to
1e-5; a loss whose value is right but whose gradient assumes targets summing
to one (ggml's fused cross-entropy did) fails here."""

import numpy as np
import pytest

import pyggml as pg

torch = pytest.importorskip("torch")
F = torch.nn.functional

LR = 0.5
X = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)

TARGETS = {
    "one_hot": np.eye(3, dtype=np.float32)[[0, 2, 1, 0]],
    "soft": np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3], [0.6, 0.4, 0.0]], np.float32),
    # the case: a zero row, a row summing to 2, one to 0.5
    "unnormalised": np.array([[0, 0, 0], [2, 0, 0], [0, 0.5, 0], [0, 1, 0]], np.float32),
    "negative": np.array([[0, -1.5, 0], [0.7, 0, 0], [0, 0, -0.3], [0, 2.0, 0]], np.float32),
}
SAMPLE_W = np.array([1.0, 0.0, 2.5, 0.5], np.float32)
CELL_W = np.array([[1, 0, 1], [0.5, 2, 0], [1, 1, 1], [0, 0, 3]], np.float32)


def _model(activation, loss):
    pg.set_seed(1)
    m = pg.Sequential([pg.layers.Dense(3, activation=activation)], input_shape=3)
    m.compile(optimizer=pg.optimizers.SGD(LR), loss=loss)
    w = {"dense.weight": np.random.default_rng(2).normal(size=(3, 3)).astype(np.float32),
         "dense.bias": np.array([0.1, -0.2, 0.3], np.float32)}
    m.set_weights(w)
    return m, w


def _torch_step(w, loss_fn):
    W = torch.tensor(w["dense.weight"], requires_grad=True)
    b = torch.tensor(w["dense.bias"], requires_grad=True)
    z = torch.from_numpy(X) @ W.T + b
    loss = loss_fn(z)
    loss.backward()
    with torch.no_grad():
        return {"dense.weight": (W - LR * W.grad).numpy(), "dense.bias": (b - LR * b.grad).numpy()}, float(loss)


def _ours(activation, loss, y, sample_weight=None):
    m, w = _model(activation, loss)
    before = m.evaluate(X, y, batch_size=4, sample_weight=sample_weight)
    m.fit(X, y, batch_size=4, epochs=1, shuffle=False, verbose=0, sample_weight=sample_weight)
    out = m.get_weights()
    m.free()
    return w, out, before


def _check(got, want, loss_ours, loss_torch):
    assert loss_ours == pytest.approx(loss_torch, rel=1e-5, abs=1e-6)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)


def _xent(z, y, w=None, from_logits=True, probs=None):
    lp = F.log_softmax(z, dim=1)
    per = -(torch.from_numpy(y) * lp).sum(1)
    if w is not None:
        per = per * torch.from_numpy(w)
    return per.sum() / len(per)


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("weighted", [False, True])
def test_categorical_crossentropy_after_softmax(kind, weighted):
    y = TARGETS[kind]
    sw = SAMPLE_W if weighted else None
    w, got, loss = _ours("softmax", "categorical_crossentropy", y, sw)
    want, tloss = _torch_step(w, lambda z: _xent(z, y, sw))
    _check(got, want, loss, tloss)


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_categorical_crossentropy_from_logits(kind):
    y = TARGETS[kind]
    w, got, loss = _ours(None, pg.losses.CategoricalCrossentropy(from_logits=True), y)
    want, tloss = _torch_step(w, lambda z: _xent(z, y))
    _check(got, want, loss, tloss)


@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_categorical_crossentropy(weighted):
    labels = np.array([2, 0, 1, 2])
    sw = SAMPLE_W if weighted else None
    w, got, loss = _ours("softmax", "sparse_categorical_crossentropy", labels, sw)

    def tl(z):
        per = F.cross_entropy(z, torch.from_numpy(labels), reduction="none")
        if sw is not None:
            per = per * torch.from_numpy(sw)
        return per.sum() / len(per)
    want, tloss = _torch_step(w, tl)
    _check(got, want, loss, tloss)


BCE_TARGETS = {"binary": (TARGETS["one_hot"]), "soft": TARGETS["soft"],
               "outside_0_1": np.array([[2, -1, 0.5], [0, 1, 1.5], [-0.5, 0, 1], [1, 1, 0]], np.float32)}


@pytest.mark.parametrize("kind", sorted(BCE_TARGETS))
@pytest.mark.parametrize("weights", [None, "sample", "cell"])
def test_binary_crossentropy_after_sigmoid(kind, weights):
    y = BCE_TARGETS[kind]
    sw = {None: None, "sample": SAMPLE_W, "cell": CELL_W}[weights]
    w, got, loss = _ours("sigmoid", "binary_crossentropy", y, sw)

    def tl(z):
        per = F.binary_cross_entropy_with_logits(z, torch.from_numpy(y), reduction="none")
        if sw is not None:
            per = per * torch.from_numpy(sw if sw.ndim == 2 else sw[:, None])
        return per.sum() / per.numel()
    want, tloss = _torch_step(w, tl)
    _check(got, want, loss, tloss)


@pytest.mark.parametrize("name,torch_loss", [
    ("mse", lambda z, y: (z - y) ** 2),
    ("mae", lambda z, y: (z - y).abs()),
    ("huber", lambda z, y: F.huber_loss(z, y, reduction="none", delta=1.0)),
])
@pytest.mark.parametrize("weights", [None, "sample", "cell"])
def test_elementwise_losses(name, torch_loss, weights):
    y = TARGETS["negative"] * 3.0
    sw = {None: None, "sample": SAMPLE_W, "cell": CELL_W}[weights]
    w, got, loss = _ours(None, name, y, sw)

    def tl(z):
        per = torch_loss(z, torch.from_numpy(y))
        if sw is not None:
            per = per * torch.from_numpy(sw if sw.ndim == 2 else sw[:, None])
        return per.sum() / per.numel()
    want, tloss = _torch_step(w, tl)
    _check(got, want, loss, tloss)


def test_a_zero_target_row_gives_no_gradient():
    """The issue's symptom: a zero row had loss 0 and still moved the weights."""
    y = np.zeros((4, 3), np.float32)
    m, w = _model("softmax", "categorical_crossentropy")
    m.fit(X, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for k, v in m.get_weights().items():
        np.testing.assert_array_equal(v, w[k])
    m.free()
