"""The added Keras metrics against numpy / scikit-learn references, fed in several
batches (stateful update_state / result / reset_state), with sample weights."""

import numpy as np
import pytest

import pyggml as pg

M = pg.metrics
EPS = 1e-7
rng = np.random.default_rng(11)
N, K = 30, 4
BATCHES = [slice(0, 7), slice(7, 20), slice(20, 30)]
P01 = rng.uniform(0.02, 0.98, (N, K))
PROBS = P01 / P01.sum(1, keepdims=True)
REAL = rng.normal(size=(N, K)) * 2
REAL2 = rng.normal(size=(N, K)) * 2
Y01 = rng.integers(0, 2, (N, K)).astype(float)
LABELS = rng.integers(0, K, N)
ONEHOT = np.eye(K)[LABELS]
SOFT = rng.dirichlet(np.ones(K), N)
COUNTS = rng.integers(0, 5, (N, K)).astype(float)
POS = rng.uniform(0.1, 3, (N, K))
SW = rng.uniform(0, 2, N)


def _unit(x):
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), EPS)


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


MEANS = {
    "kl_divergence": (M.KLDivergence, SOFT, PROBS,
                      lambda y, p: (np.clip(y, EPS, 1) * np.log(np.clip(y, EPS, 1) / np.clip(p, EPS, 1))).sum(-1)),
    "poisson": (M.Poisson, COUNTS, POS, lambda y, p: (p - y * np.log(p + EPS)).mean(-1)),
    "logcosh": (M.LogCoshError, REAL, REAL2, lambda y, p: np.log(np.cosh(p - y)).mean(-1)),
    "cosine_similarity": (M.CosineSimilarity, REAL, REAL2, lambda y, p: (_unit(y) * _unit(p)).sum(-1)),
    "msle": (M.MeanSquaredLogarithmicError, POS, REAL,
             lambda y, p: ((np.log1p(np.maximum(p, EPS)) - np.log1p(np.maximum(y, EPS))) ** 2).mean(-1)),
    "hinge": (M.Hinge, Y01, REAL, lambda y, p: np.maximum(1 - (2 * y - 1) * p, 0).mean(-1)),
    "squared_hinge": (M.SquaredHinge, Y01, REAL, lambda y, p: (np.maximum(1 - (2 * y - 1) * p, 0) ** 2).mean(-1)),
    "categorical_hinge": (M.CategoricalHinge, ONEHOT, REAL,
                          lambda y, p: np.maximum(((1 - y) * p).max(-1) - (y * p).sum(-1) + 1, 0)),
    "binary_crossentropy": (M.BinaryCrossentropy, Y01, P01,
                            lambda y, p: -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(-1)),
    "categorical_crossentropy": (M.CategoricalCrossentropy, SOFT, PROBS, lambda y, p: -(y * np.log(p)).sum(-1)),
    "sparse_categorical_crossentropy": (M.SparseCategoricalCrossentropy, LABELS, PROBS,
                                        lambda y, p: -np.log(p[np.arange(len(y)), y])),
}


@pytest.mark.parametrize("name", sorted(MEANS))
@pytest.mark.parametrize("weighted", [False, True])
def test_mean_metrics_over_batches(name, weighted):
    cls, y, p, ref = MEANS[name]
    for m in (cls(), M.get(name)):
        for s in BATCHES:
            m.update_state(y[s], p[s], sample_weight=SW[s] if weighted else None)
        per = ref(y, p)
        want = (per * SW).sum() / SW.sum() if weighted else per.mean()
        assert m.result() == pytest.approx(want, rel=1e-9, abs=1e-12)
        m.reset_state()
        m.update_state(y[:5], p[:5])
        assert m.result() == pytest.approx(ref(y[:5], p[:5]).mean(), rel=1e-9)


def test_crossentropy_metric_options():
    ls = 0.2
    m = M.BinaryCrossentropy(from_logits=True, label_smoothing=ls)
    ys = Y01 * (1 - ls) + 0.5 * ls
    want = (np.logaddexp(0, REAL) - ys * REAL).mean()
    assert m(Y01, REAL) == pytest.approx(want, rel=1e-9)
    m = M.CategoricalCrossentropy(from_logits=True)
    assert m(SOFT, REAL) == pytest.approx(-(SOFT * _log_softmax(REAL)).sum(-1).mean(), rel=1e-9)
    m = M.SparseCategoricalCrossentropy(from_logits=True)
    assert m(LABELS, REAL) == pytest.approx(-_log_softmax(REAL)[np.arange(N), LABELS].mean(), rel=1e-9)
    with pytest.raises(ValueError):
        m(np.full(N, K), REAL)


@pytest.mark.parametrize("aggregation,sk", [("uniform_average", "uniform_average"),
                                            ("variance_weighted_average", "variance_weighted"), (None, "raw_values")])
@pytest.mark.parametrize("weighted", [False, True])
def test_r2_score_against_sklearn(aggregation, sk, weighted):
    metrics = pytest.importorskip("sklearn.metrics")
    y = REAL
    p = y * 0.7 + REAL2 * 0.5
    m = M.R2Score(class_aggregation=aggregation)
    for s in BATCHES:
        m.update_state(y[s], p[s], sample_weight=SW[s] if weighted else None)
    want = metrics.r2_score(y, p, sample_weight=SW if weighted else None, multioutput=sk)
    np.testing.assert_allclose(m.result(), want, rtol=1e-9)
    m.reset_state()
    m.update_state(y[:, 0], p[:, 0])
    assert m.result() == pytest.approx(metrics.r2_score(y[:, 0], p[:, 0]), rel=1e-9)


def test_adjusted_r2():
    metrics = pytest.importorskip("sklearn.metrics")
    y, p = REAL[:, 0], REAL[:, 0] * 0.8 + REAL2[:, 0] * 0.3
    r2 = metrics.r2_score(y, p)
    m = M.R2Score(num_regressors=3)
    m.update_state(y, p)
    assert m.result() == pytest.approx(1 - (1 - r2) * (N - 1) / (N - 3 - 1), rel=1e-9)
    with pytest.raises(ValueError):
        M.R2Score(class_aggregation="median")


@pytest.mark.parametrize("average", [None, "micro", "macro", "weighted"])
@pytest.mark.parametrize("threshold", [None, 0.3])
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_fbeta_against_sklearn(average, threshold, beta, weighted):
    metrics = pytest.importorskip("sklearn.metrics")
    y = Y01 if threshold is not None else ONEHOT
    m = M.FBetaScore(average=average, beta=beta, threshold=threshold) if beta != 1.0 else \
        M.F1Score(average=average, threshold=threshold)
    for s in BATCHES:
        m.update_state(y[s], P01[s], sample_weight=SW[s] if weighted else None)
    pred = (P01 > threshold) if threshold is not None else (P01 == P01.max(1, keepdims=True))
    want = metrics.fbeta_score(y.astype(int), pred.astype(int), beta=beta, average=average,
                               sample_weight=SW if weighted else None, zero_division=0)
    np.testing.assert_allclose(m.result(), want, rtol=1e-5)
    again = type(m).from_config(m.get_config())
    assert again.get_config() == m.get_config()


def test_fbeta_validates():
    with pytest.raises(ValueError):
        M.F1Score(average="samples")
    with pytest.raises(ValueError):
        M.FBetaScore(beta=0)
    with pytest.raises(ValueError):
        M.F1Score().update_state(np.zeros(3), np.zeros(3))


@pytest.mark.parametrize("weighted", [False, True])
def test_mean_iou_and_iou_against_sklearn(weighted):
    metrics = pytest.importorskip("sklearn.metrics")
    t = rng.integers(0, 5, 60)
    p = np.where(rng.random(60) < 0.6, t, rng.integers(0, 5, 60))
    p[p == 4] = 3                 # class 4 never predicted
    w = rng.uniform(0, 2, 60) if weighted else None
    m = M.MeanIoU(num_classes=6)  # class 5 never seen: counts for nothing
    one = M.IoU(num_classes=6, target_class_ids=[1, 3])
    for s in (slice(0, 25), slice(25, 60)):
        for x in (m, one):
            x.update_state(t[s], p[s], sample_weight=None if w is None else w[s])
    per = metrics.jaccard_score(t, p, labels=list(range(5)), average=None, sample_weight=w, zero_division=0)
    assert m.result() == pytest.approx(per.mean(), rel=1e-9)
    assert one.result() == pytest.approx(per[[1, 3]].mean(), rel=1e-9)
    dense = M.MeanIoU(num_classes=6, sparse_y_true=False, sparse_y_pred=False)
    dense.update_state(np.eye(6)[t], np.eye(6)[p] * 0.9, sample_weight=w)
    assert dense.result() == pytest.approx(per.mean(), rel=1e-9)
    ign = M.MeanIoU(num_classes=6, ignore_class=0)
    ign.update_state(t, p)
    keep = t != 0
    per2 = metrics.jaccard_score(t[keep], p[keep], labels=list(range(1, 5)), average=None, zero_division=0)
    cm_has_0 = (p[keep] == 0).any()
    assert ign.result() == pytest.approx((per2.sum()) / (4 + cm_has_0), rel=1e-9)
    # as Keras's confusion matrix: an entry whose label or prediction lies outside
    # [0, num_classes) counts for nothing (Keras 3 gives 1.0 for both of these)
    out = M.MeanIoU(num_classes=3)
    out.update_state([0, 1, 2, 5, -1], [0, 1, 2, 1, 0])
    assert out.result() == 1.0
    assert out.total_cm.sum() == 3
    out = M.MeanIoU(num_classes=3)
    out.update_state([0, 1, 2], [0, 1, 7])
    assert out.result() == 1.0  # class 2 never counted: not seen
    # axis= picks the class axis of dense labels and scores
    ax = M.MeanIoU(num_classes=3, sparse_y_true=False, sparse_y_pred=False, axis=0)
    ax.update_state(np.eye(3)[[0, 1, 2, 1]].T, np.eye(3)[[0, 1, 1, 1]].T)
    assert ax.result() == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert M.MeanIoU.from_config(ax.get_config()).axis == 0
    with pytest.raises(ValueError, match="axis"):
        M.MeanIoU(num_classes=3, sparse_y_pred=False, axis=2).update_state([0], [[0.1, 0.9, 0.0]])


def test_metrics_by_name_in_compile():
    x = rng.normal(size=(16, 3))
    y = rng.normal(size=(16, 2))
    m = pg.Sequential([pg.layers.Dense(2)], input_shape=3).compile(
        loss="mse", metrics=["r2_score", "logcosh", "cosine_similarity"], seed=0)
    logs = m.evaluate(x, y, batch_size=5, return_dict=True, verbose=0)
    p = m.predict(x).astype(np.float64)
    metrics = pytest.importorskip("sklearn.metrics")
    assert logs["r2_score"] == pytest.approx(metrics.r2_score(y, p), rel=1e-4)
    assert logs["logcosh"] == pytest.approx(np.log(np.cosh(p - y)).mean(), rel=1e-4)
    assert logs["cosine_similarity"] == pytest.approx((_unit(y) * _unit(p)).sum(-1).mean(), rel=1e-4)
    m.free()


def test_per_class_results_are_refused_in_compile_and_averages_train(tmp_path):
    x = rng.normal(size=(20, 3))
    y = np.eye(3)[rng.integers(0, 3, 20)]
    for bad in (M.F1Score(), M.FBetaScore(beta=2.0), M.R2Score(class_aggregation=None)):
        with pytest.raises(ValueError, match="per class"):
            pg.Sequential([pg.layers.Dense(3, activation="softmax")], input_shape=3).compile(
                loss="categorical_crossentropy", metrics=[bad])
    m = pg.Sequential([pg.layers.Dense(3, activation="softmax")], input_shape=3).compile(
        loss="categorical_focal_crossentropy", seed=2,
        metrics=[M.F1Score(average="macro"), M.MeanIoU(3, sparse_y_true=False, sparse_y_pred=False), "r2_score"])
    h = m.fit(x, y, epochs=2, batch_size=8, verbose=0)
    assert set(h.history) >= {"loss", "f1_score", "mean_io_u", "r2_score"}
    metrics = pytest.importorskip("sklearn.metrics")
    logs = m.evaluate(x, y, batch_size=7, return_dict=True, verbose=0)
    p = m.predict(x)
    assert logs["f1_score"] == pytest.approx(metrics.f1_score(y.argmax(1), p.argmax(1), average="macro",
                                                              labels=[0, 1, 2], zero_division=0), rel=1e-5)
    assert logs["mean_io_u"] == pytest.approx(metrics.jaccard_score(y.argmax(1), p.argmax(1), average="macro",
                                                                    labels=sorted(set(y.argmax(1)) | set(p.argmax(1)))),
                                              rel=1e-5)
    m.save(tmp_path / "m.gguf")
    back = pg.load_model(tmp_path / "m.gguf")
    again = back.evaluate(x, y, batch_size=7, return_dict=True, verbose=0)
    for k in ("loss", "f1_score", "mean_io_u", "r2_score"):
        assert again[k] == pytest.approx(logs[k], rel=1e-6)
    m.free()
    back.free()
