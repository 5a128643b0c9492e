"""The Keras losses beyond the cross-entropies and mse/mae/huber: each against a
numpy reference of Keras's definition (called on arrays, with sample weights,
by string in compile), and its gradient against PyTorch's (one SGD step of the
same model, as tests/test_loss_gradients_torch.py does)."""

import numpy as np
import pytest

import pyggml as pg

EPS = 1e-7
RNG = np.random.default_rng(5)
N, K = 6, 4
P01 = RNG.uniform(0.05, 0.95, (N, K))                     # probabilities
PROBS = P01 / P01.sum(1, keepdims=True)                   # rows summing to one
REAL = RNG.normal(size=(N, K)) * 1.5
Y01 = RNG.integers(0, 2, (N, K)).astype(np.float64)
YPM = 2 * Y01 - 1
ONEHOT = np.eye(K)[RNG.integers(0, K, N)]
SOFT = RNG.dirichlet(np.ones(K), N)
COUNTS = RNG.integers(0, 5, (N, K)).astype(np.float64)
POS = RNG.uniform(0.2, 3.0, (N, K))


def _mean_last(v):
    return v.mean(-1)


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _bfce(y, p, gamma=2.0, alpha=0.25, balance=False, ls=0.0, logits=False):
    if ls:
        y = y * (1 - ls) + 0.5 * ls
    if logits:
        p = _sigmoid(p)
    pc = np.clip(p, EPS, 1 - EPS)
    bce = -(y * np.log(pc) + (1 - y) * np.log(1 - pc))
    pt = y * p + (1 - y) * (1 - p)
    out = (1 - pt) ** gamma * bce
    if balance:
        out = (y * alpha + (1 - y) * (1 - alpha)) * out
    return out.mean(-1)


def _cfce(y, p, gamma=2.0, alpha=0.25, ls=0.0, logits=False):
    if ls:
        y = y * (1 - ls) + ls / y.shape[-1]
    if logits:
        p = _softmax(p)
    p = np.clip(p / p.sum(-1, keepdims=True), EPS, 1 - EPS)
    return (alpha * (1 - p) ** gamma * -y * np.log(p)).sum(-1)


def _unit(x):
    return x / np.maximum(np.sqrt((x * x).sum(-1, keepdims=True)), EPS)


def _hinge_y(y):
    return 2 * y - 1 if np.all((y == 0) | (y == 1)) else y


# name -> (numpy per-sample loss, y_true, y_pred, constructor)
CASES = {
    "kl_divergence": (lambda y, p: (np.clip(y, EPS, 1) * np.log(np.clip(y, EPS, 1) / np.clip(p, EPS, 1))).sum(-1),
                      SOFT, PROBS, pg.losses.KLDivergence),
    "poisson": (lambda y, p: _mean_last(p - y * np.log(p + EPS)), COUNTS, POS, pg.losses.Poisson),
    "log_cosh": (lambda y, p: _mean_last(np.log(np.cosh(p - y))), REAL, REAL[::-1].copy(), pg.losses.LogCosh),
    "cosine_similarity": (lambda y, p: -(_unit(y) * _unit(p)).sum(-1), REAL, REAL[::-1].copy(),
                          pg.losses.CosineSimilarity),
    "msle": (lambda y, p: _mean_last((np.log(np.maximum(p, EPS) + 1) - np.log(np.maximum(y, EPS) + 1)) ** 2),
             POS, REAL, pg.losses.MeanSquaredLogarithmicError),
    "mape": (lambda y, p: 100 * _mean_last(np.abs((y - p) / np.maximum(np.abs(y), EPS))), REAL, REAL[::-1].copy(),
             pg.losses.MeanAbsolutePercentageError),
    "hinge": (lambda y, p: _mean_last(np.maximum(1 - _hinge_y(y) * p, 0)), Y01, REAL, pg.losses.Hinge),
    "hinge_pm1": (lambda y, p: _mean_last(np.maximum(1 - y * p, 0)), YPM, REAL, pg.losses.Hinge),
    "squared_hinge": (lambda y, p: _mean_last(np.maximum(1 - _hinge_y(y) * p, 0) ** 2), Y01, REAL,
                      pg.losses.SquaredHinge),
    "categorical_hinge": (lambda y, p: np.maximum(((1 - y) * p).max(-1) - (y * p).sum(-1) + 1, 0), ONEHOT, REAL,
                          pg.losses.CategoricalHinge),
    "binary_focal_crossentropy": (_bfce, Y01, P01, pg.losses.BinaryFocalCrossentropy),
    "categorical_focal_crossentropy": (_cfce, ONEHOT, PROBS, pg.losses.CategoricalFocalCrossentropy),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("weighted", [False, True])
def test_called_on_arrays_matches_numpy(case, weighted):
    ref, y, p, cls = CASES[case]
    sw = RNG.uniform(0, 2, N) if weighted else None
    per = ref(y, p)
    want = (per * (1 if sw is None else sw)).sum() / N
    got = cls()(y, p, sample_weight=sw)
    assert got == pytest.approx(want, rel=2e-5, abs=1e-6)
    if not weighted:
        # Keras's get gives the per-sample function for the name
        assert np.mean(pg.losses.get(cls().name)(y, p)) == pytest.approx(want, rel=2e-5, abs=1e-6)


@pytest.mark.parametrize("kwargs", [dict(gamma=0.0), dict(gamma=3.0, alpha=0.4, apply_class_balancing=True),
                                    dict(gamma=1.5, label_smoothing=0.2), dict(from_logits=True)])
def test_binary_focal_options(kwargs):
    y, p = Y01, (REAL if kwargs.get("from_logits") else P01)
    want = _bfce(y, p, kwargs.get("gamma", 2.0), kwargs.get("alpha", 0.25),
                 kwargs.get("apply_class_balancing", False), kwargs.get("label_smoothing", 0.0),
                 kwargs.get("from_logits", False)).mean()
    loss = pg.losses.BinaryFocalCrossentropy(**kwargs)
    assert loss(y, p) == pytest.approx(want, rel=2e-5, abs=1e-6)
    again = pg.losses.deserialize(pg.losses.serialize(loss))
    assert type(again) is type(loss) and again.get_config() == loss.get_config()


@pytest.mark.parametrize("kwargs", [dict(gamma=0.0, alpha=1.0), dict(gamma=2.5, alpha=0.5, label_smoothing=0.1),
                                    dict(from_logits=True)])
def test_categorical_focal_options(kwargs):
    y, p = SOFT, (REAL if kwargs.get("from_logits") else PROBS)
    want = _cfce(y, p, kwargs.get("gamma", 2.0), kwargs.get("alpha", 0.25), kwargs.get("label_smoothing", 0.0),
                 kwargs.get("from_logits", False)).mean()
    loss = pg.losses.CategoricalFocalCrossentropy(**kwargs)
    assert loss(y, p) == pytest.approx(want, rel=2e-5, abs=1e-6)


def test_categorical_focal_with_gamma_0_alpha_1_is_the_crossentropy():
    assert pg.losses.CategoricalFocalCrossentropy(gamma=0, alpha=1)(SOFT, PROBS) == pytest.approx(
        pg.losses.CategoricalCrossentropy()(SOFT, PROBS), rel=1e-5)


@pytest.mark.parametrize("from_logits", [False, True])
def test_label_smoothing_on_the_crossentropies(from_logits):
    ls = 0.3
    p = REAL if from_logits else P01
    ys = Y01 * (1 - ls) + 0.5 * ls
    if from_logits:
        want = (np.logaddexp(0, p) - ys * p).mean()
    else:
        want = -(ys * np.log(p) + (1 - ys) * np.log(1 - p)).mean()
    got = pg.losses.BinaryCrossentropy(from_logits=from_logits, label_smoothing=ls)(Y01, p)
    assert got == pytest.approx(want, rel=2e-5)
    q = REAL if from_logits else PROBS
    yc = ONEHOT * (1 - ls) + ls / K
    lp = (q - q.max(1, keepdims=True)) - np.log(np.exp(q - q.max(1, keepdims=True)).sum(1, keepdims=True)) \
        if from_logits else np.log(q)
    got = pg.losses.CategoricalCrossentropy(from_logits=from_logits, label_smoothing=ls)(ONEHOT, q)
    assert got == pytest.approx(-(yc * lp).sum(1).mean(), rel=2e-5)
    with pytest.raises(ValueError, match="label_smoothing"):
        pg.losses.SparseCategoricalCrossentropy(label_smoothing=0.1)


def test_categorical_hinge_max_for_odd_and_even_class_counts():
    for k in (1, 2, 3, 5, 7, 8):
        rng = np.random.default_rng(k)
        y, p = np.eye(k)[rng.integers(0, k, 5)], rng.normal(size=(5, k)) * 2
        want = np.maximum(((1 - y) * p).max(-1) - (y * p).sum(-1) + 1, 0).mean()
        assert pg.losses.CategoricalHinge()(y, p) == pytest.approx(want, rel=1e-5, abs=1e-6), k


def test_aliases_and_reductions():
    for alias, cls in [("kld", pg.losses.KLDivergence), ("kl_divergence", pg.losses.KLDivergence),
                       ("msle", pg.losses.MeanSquaredLogarithmicError), ("mape", pg.losses.MeanAbsolutePercentageError),
                       ("logcosh", pg.losses.LogCosh), ("log_cosh", pg.losses.LogCosh), ("poisson", pg.losses.Poisson),
                       ("hinge", pg.losses.Hinge), ("squared_hinge", pg.losses.SquaredHinge),
                       ("categorical_hinge", pg.losses.CategoricalHinge),
                       ("binary_focal_crossentropy", pg.losses.BinaryFocalCrossentropy),
                       ("categorical_focal_crossentropy", pg.losses.CategoricalFocalCrossentropy),
                       ("cosine_similarity", pg.losses.CosineSimilarity)]:
        assert type(pg.losses.get(alias)) is not cls   # a function, as Keras's
        assert type(pg.losses._as_loss(alias)) is cls
        assert pg.losses.serialize(cls()) in pg.losses.LOSSES
    ref, y, p, cls = CASES["poisson"]
    # Keras: the per-sample value is the mean over the last axis; "sum" adds the samples'
    assert cls(reduction="sum")(y, p) == pytest.approx((p - y * np.log(p + EPS)).mean(-1).sum(), rel=2e-5)
    with pytest.raises(ValueError, match="axis 5"):
        pg.losses.CosineSimilarity(axis=5)(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError):
        pg.losses.BinaryFocalCrossentropy(gamma=-1)


@pytest.mark.parametrize("name,act,y", [
    ("kld", "softmax", SOFT), ("poisson", "sigmoid", COUNTS), ("log_cosh", None, REAL), ("msle", None, POS),
    ("mape", None, REAL), ("hinge", None, Y01), ("squared_hinge", None, YPM), ("categorical_hinge", None, ONEHOT),
    ("cosine_similarity", None, REAL), ("binary_focal_crossentropy", "sigmoid", Y01),
    ("categorical_focal_crossentropy", "softmax", ONEHOT)])
def test_compiled_by_string_evaluate_matches_numpy(name, act, y):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, 3))
    m = pg.Sequential([pg.layers.Dense(K, activation=act)], input_shape=3).compile(loss=name, seed=4)
    p = m.predict(x).astype(np.float64)
    sw = rng.uniform(0, 2, N)
    ref = CASES[{"kld": "kl_divergence", "squared_hinge": "squared_hinge"}.get(name, name)][0]
    want = (ref(y, p) * sw).sum() / N
    got = m.evaluate(x, y, batch_size=N, sample_weight=sw, return_dict=True)["loss"]
    assert got == pytest.approx(want, rel=5e-5, abs=1e-6)
    m.free()


def test_saved_compile_config_keeps_the_loss(tmp_path):
    x = np.random.default_rng(0).normal(size=(8, 3))
    m = pg.Sequential([pg.layers.Dense(K, activation="sigmoid")], input_shape=3).compile(
        loss=pg.losses.BinaryFocalCrossentropy(gamma=3.0, apply_class_balancing=True, alpha=0.3), seed=1)
    m.save(tmp_path / "f.gguf")
    back = pg.load_model(tmp_path / "f.gguf")
    y = np.random.default_rng(1).integers(0, 2, (8, K)).astype(np.float32)
    assert back.evaluate(x, y, verbose=0) == pytest.approx(m.evaluate(x, y, verbose=0), rel=1e-6)
    m.free()
    back.free()


# --- gradients against PyTorch ---------------------------------------------------------------
torch = None
try:
    import torch
except ImportError:                                          # pragma: no cover
    pass
needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")

LR = 0.5
X = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
SAMPLE_W = np.array([1.0, 0.0, 2.5, 0.5], np.float32)
T_EPS = 1e-7


def _t_hinge_y(y):
    return 2 * y - 1 if bool(torch.all((y == 0) | (y == 1))) else y


def _t_max_last(v):
    return v.max(-1).values


def _t_unit(x):
    return x / torch.clamp(torch.sqrt((x * x).sum(-1, keepdims=True)), min=T_EPS)


def F_bce(y, p):
    p = torch.clamp(p, T_EPS, 1 - T_EPS)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean(-1)


def _t_bfce(y, p, gamma, alpha=0.25, balance=False, logits=False):
    if logits:
        p = torch.sigmoid(p)
    pc = torch.clamp(p, T_EPS, 1 - T_EPS)
    bce = -(y * torch.log(pc) + (1 - y) * torch.log(1 - pc))
    out = (1 - (y * p + (1 - y) * (1 - p))) ** gamma * bce
    if balance:
        out = (y * alpha + (1 - y) * (1 - alpha)) * out
    return out.mean(-1)


def _t_cfce(y, p, gamma, alpha=0.25, logits=False):
    if logits:
        p = torch.softmax(p, -1)
    p = torch.clamp(p / p.sum(-1, keepdims=True), T_EPS, 1 - T_EPS)
    return (alpha * (1 - p) ** gamma * -y * torch.log(p)).sum(-1)


G_Y = {
    "soft": np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3], [0.6, 0.4, 0.0]], np.float32),
    "one_hot": np.eye(3, dtype=np.float32)[[0, 2, 1, 0]],
    "binary": np.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]], np.float32),
    "pm1": np.array([[1, -1, 1], [-1, -1, 1], [1, 1, -1], [-1, 1, -1]], np.float32),
    "counts": np.array([[0, 2, 1], [3, 0, 0], [1, 1, 4], [0, 0, 2]], np.float32),
    "real": np.array([[0.5, -1.2, 2.0], [1.5, 0.3, -0.7], [-2.0, 0.8, 0.1], [0.9, -0.4, 1.3]], np.float32),
    "positive": np.array([[0.5, 1.2, 2.0], [1.5, 0.3, 0.7], [2.0, 0.8, 0.1], [0.9, 0.4, 1.3]], np.float32),
}

# (loss, output activation, targets, torch per-sample loss of (y, output))
GRAD_CASES = {
    "kld": ("kld", "softmax", "soft",
            lambda y, p: (torch.clamp(y, T_EPS, 1) * torch.log(torch.clamp(y, T_EPS, 1) / torch.clamp(p, T_EPS, 1)))
            .sum(-1)),
    "poisson": ("poisson", "sigmoid", "counts", lambda y, p: (p - y * torch.log(p + T_EPS)).mean(-1)),
    "log_cosh": ("log_cosh", None, "real", lambda y, p: torch.log(torch.cosh(p - y)).mean(-1)),
    "cosine_similarity": ("cosine_similarity", None, "real", lambda y, p: -(_t_unit(y) * _t_unit(p)).sum(-1)),
    "msle": ("msle", None, "positive",
             lambda y, p: ((torch.log(torch.clamp(p, min=T_EPS) + 1) - torch.log(torch.clamp(y, min=T_EPS) + 1)) ** 2)
             .mean(-1)),
    "mape": ("mape", None, "real", lambda y, p: (100 * torch.abs((y - p) / torch.clamp(y.abs(), min=T_EPS))).mean(-1)),
    "hinge_01": ("hinge", None, "binary", lambda y, p: torch.relu(1 - _t_hinge_y(y) * p).mean(-1)),
    "hinge_pm1": ("hinge", None, "pm1", lambda y, p: torch.relu(1 - y * p).mean(-1)),
    "squared_hinge": ("squared_hinge", None, "binary", lambda y, p: (torch.relu(1 - _t_hinge_y(y) * p) ** 2).mean(-1)),
    "categorical_hinge": ("categorical_hinge", None, "one_hot",
                          lambda y, p: torch.relu(_t_max_last((1 - y) * p) - (y * p).sum(-1) + 1)),
    "bfce": ("binary_focal_crossentropy", "sigmoid", "binary", lambda y, p: _t_bfce(y, p, 2.0)),
    "bfce_soft_balanced_g15": (pg.losses.BinaryFocalCrossentropy(gamma=1.5, apply_class_balancing=True, alpha=0.3),
                               "sigmoid", "soft", lambda y, p: _t_bfce(y, p, 1.5, 0.3, True)),
    "bfce_logits": (pg.losses.BinaryFocalCrossentropy(from_logits=True, gamma=3.0), None, "binary",
                    lambda y, p: _t_bfce(y, p, 3.0, logits=True)),
    "bce_smoothed": (pg.losses.BinaryCrossentropy(label_smoothing=0.2), "sigmoid", "binary",
                     lambda y, p: F_bce(y * 0.8 + 0.1, p)),
    "cce_smoothed_logits": (pg.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.3), None,
                            "one_hot", lambda y, p: -((y * 0.7 + 0.1) * torch.log_softmax(p, -1)).sum(-1)),
    "cfce": ("categorical_focal_crossentropy", "softmax", "soft", lambda y, p: _t_cfce(y, p, 2.0)),
    "cfce_logits_g25": (pg.losses.CategoricalFocalCrossentropy(from_logits=True, gamma=2.5, alpha=0.7), None,
                        "one_hot", lambda y, p: _t_cfce(y, p, 2.5, 0.7, logits=True)),
}


def _model(activation, loss):
    pg.set_seed(1)
    m = pg.Sequential([pg.layers.Dense(3, activation=activation)], input_shape=3)
    m.compile(optimizer=pg.optimizers.SGD(LR), loss=loss)
    w = {"dense.weight": np.random.default_rng(2).normal(size=(3, 3)).astype(np.float32),
         "dense.bias": np.array([0.1, -0.2, 0.3], np.float32)}
    m.set_weights(w)
    return m, w


@needs_torch
@pytest.mark.parametrize("case", sorted(GRAD_CASES))
@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_matches_torch(case, weighted, graph_path):
    loss, act, yname, tloss = GRAD_CASES[case]
    y = G_Y[yname]
    sw = SAMPLE_W if weighted else None
    m, w = _model(act, loss)
    before = m.evaluate(X, y, batch_size=4, sample_weight=sw)
    m.fit(X, y, batch_size=4, epochs=1, shuffle=False, verbose=0, sample_weight=sw)
    got = m.get_weights()
    m.free()

    W = torch.tensor(w["dense.weight"], requires_grad=True)
    b = torch.tensor(w["dense.bias"], requires_grad=True)
    z = torch.from_numpy(X) @ W.T + b
    out = {"softmax": lambda t: torch.softmax(t, -1), "sigmoid": torch.sigmoid, None: lambda t: t}[act](z)
    per = tloss(torch.from_numpy(y), out)
    if sw is not None:
        per = per * torch.from_numpy(sw)
    total = per.sum() / len(per)
    total.backward()
    assert before == pytest.approx(float(total.detach()), rel=1e-5, abs=1e-6)
    with torch.no_grad():
        np.testing.assert_allclose(got["dense.weight"], (W - LR * W.grad).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["dense.bias"], (b - LR * b.grad).numpy(), rtol=1e-5, atol=1e-6)
    # the step moved the weights (a gradient that is all zero would pass the comparison above)
    assert not np.allclose(got["dense.weight"], w["dense.weight"])
