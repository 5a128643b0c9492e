"""The threshold-curve metrics (PrecisionAtRecall, RecallAtPrecision,
SensitivityAtSpecificity, SpecificityAtSensitivity), BinaryIoU / OneHotIoU /
OneHotMeanIoU, Sum and the correlations: against scikit-learn, a brute-force
numpy reference and hand-worked numbers, fed in several batches, with sample
weights, reset_state, config round trips and use in compile with fit/evaluate."""

import numpy as np
import pytest

import pyggml as pg

M = pg.metrics
EPS = 1e-7
rng = np.random.default_rng(23)
N, K = 40, 3
BATCHES = [slice(0, 9), slice(9, 25), slice(25, 40)]
SW = rng.uniform(0, 2, N)

# scores on a grid of tenths (so 11 thresholds land exactly between distinct scores) and labels
GRID = rng.integers(1, 10, N) / 10.0
GRID_Y = (rng.random(N) < 0.25 + 0.6 * GRID).astype(float)


def _counts(y, p, w, thresholds):
    """tp, fp, tn, fn per threshold, one loop per threshold (the definition, written out)."""
    out = np.zeros((4, len(thresholds)))
    for i, th in enumerate(thresholds):
        pos = p > th
        out[0, i] = w[pos & (y != 0)].sum()
        out[1, i] = w[pos & (y == 0)].sum()
        out[2, i] = w[~pos & (y == 0)].sum()
        out[3, i] = w[~pos & (y != 0)].sum()
    return out


def _ratio(a, b):
    return np.where(b > 0, a / np.where(b > 0, b, 1), 0.0)


def _brute(kind, value, y, p, w=None, n=200):
    th = np.array([0.5]) if n == 1 else np.linspace(0, 1, n)
    pp = p if n == 1 else np.clip(p, 0, 1)
    tp, fp, tn, fn = _counts(y.reshape(-1), pp.reshape(-1), np.ones(y.size) if w is None else w.reshape(-1), th)
    sens, spec, prec = _ratio(tp, tp + fn), _ratio(tn, tn + fp), _ratio(tp, tp + fp)
    constrained, dependent = {"sens_at_spec": (spec, sens), "spec_at_sens": (sens, spec),
                              "prec_at_rec": (sens, prec), "rec_at_prec": (prec, sens)}[kind]
    ok = constrained >= value
    return max(dependent[ok].max(), 0.0) if ok.any() else 0.0


CLASSES = {"sens_at_spec": M.SensitivityAtSpecificity, "spec_at_sens": M.SpecificityAtSensitivity,
           "prec_at_rec": M.PrecisionAtRecall, "rec_at_prec": M.RecallAtPrecision}


def test_keras_documented_numbers_worked_by_hand():
    y, p = [0, 0, 0, 1, 1], [0, 0.3, 0.8, 0.3, 0.8]
    # thresholds just above 0.3 and up to 0.8: tp 1/2, tn 2/3 -> sensitivity 0.5 at specificity 2/3 >= 0.5
    m = M.SensitivityAtSpecificity(0.5)
    m.update_state(y, p)
    assert m.result() == pytest.approx(0.5)
    m.reset_state()
    # weights 1,1,2,2,1: above 0.3 tn = 1 + 1 of 4 (0.5 >= 0.5), tp = 1 of 3
    m.update_state(y, p, sample_weight=[1, 1, 2, 2, 1])
    assert m.result() == pytest.approx(1 / 3)
    m = M.SpecificityAtSensitivity(0.5)
    m.update_state(y, p)
    assert m.result() == pytest.approx(2 / 3)
    m = M.PrecisionAtRecall(0.5)
    m.update_state([0, 0, 0, 1, 1], [0, 0.3, 0.8, 0.3, 0.8])
    assert m.result() == pytest.approx(0.5)          # above 0.3: tp 1, fp 1
    m = M.RecallAtPrecision(0.8)
    m.update_state([0, 0, 1, 1], [0, 0.5, 0.3, 0.9])
    assert m.result() == pytest.approx(0.5)          # above 0.5: only 0.9 (a positive): precision 1, recall 1/2


@pytest.mark.parametrize("kind,value", [("sens_at_spec", 0.6), ("spec_at_sens", 0.7), ("prec_at_rec", 0.4),
                                        ("rec_at_prec", 0.75)])
def test_against_sklearn_curves(kind, value):
    metrics = pytest.importorskip("sklearn.metrics")
    m = CLASSES[kind](value, num_thresholds=11)
    for s in BATCHES:
        m.update_state(GRID_Y[s], GRID[s])
    if kind in ("sens_at_spec", "spec_at_sens"):
        fpr, tpr, _ = metrics.roc_curve(GRID_Y, GRID, drop_intermediate=False)
        spec, sens = 1 - fpr, tpr
        c, d = (spec, sens) if kind == "sens_at_spec" else (sens, spec)
    else:
        prec, rec, _ = metrics.precision_recall_curve(GRID_Y, GRID)
        c, d = (rec, prec) if kind == "prec_at_rec" else (prec, rec)
    want = d[c >= value].max()
    assert m.result() == pytest.approx(want, rel=1e-12)
    assert 0 < want < 1


@pytest.mark.parametrize("kind", sorted(CLASSES))
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("num_thresholds", [1, 7, 200])
def test_streaming_equals_one_shot_and_brute_force(kind, weighted, num_thresholds):
    y = rng.integers(0, 2, (N, K)).astype(float)
    p = np.clip(y * 0.3 + rng.uniform(-0.1, 0.8, (N, K)), -0.2, 1.2)      # some scores outside [0, 1]
    value = 0.55
    m = CLASSES[kind](value, num_thresholds=num_thresholds)
    for s in BATCHES:
        m.update_state(y[s], p[s], sample_weight=SW[s] if weighted else None)
    w = np.broadcast_to(SW[:, None], (N, K)) if weighted else None
    want = _brute(kind, value, y, p, w, num_thresholds)
    assert m.result() == pytest.approx(want, rel=1e-12, abs=1e-15)
    one = CLASSES[kind](value, num_thresholds=num_thresholds)
    one.update_state(y, p, sample_weight=SW if weighted else None)
    assert one.result() == pytest.approx(m.result(), rel=1e-12)
    m.reset_state()
    assert m.result() == 0.0
    m.update_state(y[:10], p[:10])
    assert m.result() == pytest.approx(_brute(kind, value, y[:10], p[:10], None, num_thresholds), rel=1e-12)


def test_class_id_and_config():
    y = rng.integers(0, 2, (N, K)).astype(float)
    p = rng.random((N, K))
    m = M.RecallAtPrecision(0.6, num_thresholds=50, class_id=2, name="rap")
    m.update_state(y, p)
    assert m.result() == pytest.approx(_brute("rec_at_prec", 0.6, y[:, 2], p[:, 2], None, 50), rel=1e-12)
    c = m.get_config()
    assert c == {"name": "rap", "class_id": 2, "num_thresholds": 50, "precision": 0.6}
    again = M.RecallAtPrecision.from_config(c)
    assert again.get_config() == c
    assert M.deserialize(M.serialize(m, m)).get_config() == c
    for cls, arg in [(M.PrecisionAtRecall, "recall"), (M.SensitivityAtSpecificity, "specificity"),
                     (M.SpecificityAtSensitivity, "sensitivity")]:
        x = cls(0.3)
        assert x.get_config()[arg] == 0.3 and x.get_config()["num_thresholds"] == 200
        assert type(x).from_config(x.get_config()).get_config() == x.get_config()
    assert M.PrecisionAtRecall(0.5).name == "precision_at_recall"
    assert M.SpecificityAtSensitivity(0.5).name == "specificity_at_sensitivity"


def test_threshold_metrics_bad_arguments():
    with pytest.raises(ValueError, match="recall"):
        M.PrecisionAtRecall(1.5)
    with pytest.raises(ValueError, match="precision"):
        M.RecallAtPrecision(-0.1)
    with pytest.raises(ValueError, match="num_thresholds"):
        M.SensitivityAtSpecificity(0.5, num_thresholds=0)
    with pytest.raises(ValueError, match="class_id"):
        M.SpecificityAtSensitivity(0.5, class_id=-1)
    with pytest.raises(ValueError, match="class_id"):
        M.PrecisionAtRecall(0.5, class_id=3).update_state(np.zeros((4, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="class_id"):
        M.PrecisionAtRecall(0.5, class_id=0).update_state(np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match="does not fit"):
        M.PrecisionAtRecall(0.5).update_state(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError, match="sample_weight"):
        M.PrecisionAtRecall(0.5).update_state(np.zeros((4, 2)), np.zeros((4, 2)), sample_weight=np.ones(3))
    with pytest.raises(TypeError):
        M.PrecisionAtRecall(0.5).update_state(["a", "b"], [0.1, 0.2])


# --- IoU variants -------------------------------------------------------------------------------------

@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("threshold,ids", [(0.5, (0, 1)), (0.3, [1]), (0.7, [0])])
def test_binary_iou_against_sklearn(weighted, threshold, ids):
    metrics = pytest.importorskip("sklearn.metrics")
    y = rng.integers(0, 2, 60)
    p = np.clip(y * 0.4 + rng.random(60) * 0.7, 0, 1)
    p[:3] = threshold                                # exactly at the threshold: class 1 (>=)
    w = rng.uniform(0, 2, 60) if weighted else None
    m = M.BinaryIoU(target_class_ids=ids, threshold=threshold)
    for s in (slice(0, 20), slice(20, 60)):
        m.update_state(y[s], p[s], sample_weight=None if w is None else w[s])
    per = metrics.jaccard_score(y, (p >= threshold).astype(int), labels=[0, 1], average=None, sample_weight=w)
    assert m.result() == pytest.approx(per[list(ids)].mean(), rel=1e-9)
    c = m.get_config()
    assert c == {"name": "binary_io_u", "target_class_ids": list(ids), "threshold": threshold}
    assert M.BinaryIoU.from_config(c).get_config() == c
    m.reset_state()
    assert m.result() == 0.0


def test_binary_iou_keras_example_by_hand():
    # threshold 0.3: predictions 0, 0, 1, 1 for labels 0, 1, 0, 1 -> IoU 1/3 for each class
    m = M.BinaryIoU(target_class_ids=[0, 1], threshold=0.3)
    m.update_state([0, 1, 0, 1], [0.1, 0.2, 0.4, 0.7])
    assert m.result() == pytest.approx(1 / 3)
    m.reset_state()
    # weights 0.2, 0.3, 0.4, 0.1: class 0 -> 0.2 / (0.2 + 0.3 + 0.4), class 1 -> 0.1 / (0.1 + 0.3 + 0.4)
    m.update_state([0, 1, 0, 1], [0.1, 0.2, 0.4, 0.7], sample_weight=[0.2, 0.3, 0.4, 0.1])
    assert m.result() == pytest.approx((0.2 / 0.9 + 0.1 / 0.8) / 2)
    with pytest.raises(ValueError):
        M.BinaryIoU(target_class_ids=[2])


@pytest.mark.parametrize("weighted", [False, True])
def test_one_hot_iou_and_mean_iou_against_sklearn(weighted):
    metrics = pytest.importorskip("sklearn.metrics")
    k = 4
    t = rng.integers(0, k, 50)
    scores = rng.random((50, k)) + 0.8 * np.eye(k)[t]
    w = rng.uniform(0, 2, 50) if weighted else None
    one = M.OneHotIoU(num_classes=k, target_class_ids=[0, 2])
    mean = M.OneHotMeanIoU(num_classes=k)
    sparse = M.OneHotMeanIoU(num_classes=k, sparse_y_pred=True)
    for s in (slice(0, 17), slice(17, 50)):
        sw = None if w is None else w[s]
        one.update_state(np.eye(k)[t[s]], scores[s], sample_weight=sw)
        mean.update_state(np.eye(k)[t[s]], scores[s], sample_weight=sw)
        sparse.update_state(np.eye(k)[t[s]], scores[s].argmax(1), sample_weight=sw)
    per = metrics.jaccard_score(t, scores.argmax(1), labels=list(range(k)), average=None, sample_weight=w)
    assert one.result() == pytest.approx(per[[0, 2]].mean(), rel=1e-9)
    assert mean.result() == pytest.approx(per.mean(), rel=1e-9)
    assert sparse.result() == pytest.approx(per.mean(), rel=1e-9)
    assert one.name == "one_hot_io_u" and mean.name == "one_hot_mean_io_u"
    for m in (one, mean, sparse):
        c = m.get_config()
        assert "sparse_y_true" not in c and c["axis"] == -1
        assert type(m).from_config(c).get_config() == c
    ign = M.OneHotMeanIoU(num_classes=k, ignore_class=1)
    ign.update_state(np.eye(k)[t], scores)
    keep = t != 1
    cm = metrics.confusion_matrix(t[keep], scores.argmax(1)[keep], labels=list(range(k)))
    tp = np.diag(cm)
    denom = cm.sum(0) + cm.sum(1) - tp
    assert ign.result() == pytest.approx((tp[denom > 0] / denom[denom > 0]).mean(), rel=1e-9)
    with pytest.raises(ValueError):
        M.OneHotIoU(num_classes=3, target_class_ids=[3])
    with pytest.raises(ValueError):
        M.OneHotMeanIoU(num_classes=0)


# --- Sum ------------------------------------------------------------------------------------------------

def test_sum_streams_weights_and_resets():
    m = M.Sum()
    v = rng.normal(size=(12, 3))
    w = rng.uniform(0, 2, 12)
    m.update_state(v[:5], sample_weight=w[:5])
    m.update_state(v[5:], sample_weight=w[5:])
    assert m.result() == pytest.approx((v * w[:, None]).sum(), rel=1e-12)
    m.update_state(2.5)
    assert m.result() == pytest.approx((v * w[:, None]).sum() + 2.5, rel=1e-12)
    m.reset_state()
    assert m.result() == 0.0
    m.update_state([1, 3, 5, 7], sample_weight=[1, 0, 0, 1])
    assert m.result() == 8.0
    m.update_state(v, sample_weight=np.ones_like(v) * 0.5)
    assert m.result() == pytest.approx(8.0 + 0.5 * v.sum(), rel=1e-12)
    assert M.Sum.from_config(m.get_config()).name == "sum"
    before = m.result()
    # Keras's metric(...): update_state, then the result so far
    assert m([1.0, 2.0, 4.0], sample_weight=[1, 0.5, 0.25]) == pytest.approx(before + 3.0, rel=1e-12)
    assert m.result() == pytest.approx(before + 3.0, rel=1e-12)
    with pytest.raises(ValueError, match="sample_weight"):
        m.update_state(np.ones((4, 3)), sample_weight=np.ones(5))
    with pytest.raises(TypeError):
        m.update_state(["x"])
    with pytest.raises(TypeError, match="values"):
        m.update_state(np.ones(3), np.ones(3), None)           # as compile's metrics would call it


# --- correlations ---------------------------------------------------------------------------------------

def _pearson(y, p, axis=-1):
    yc, pc = y - y.mean(axis, keepdims=True), p - p.mean(axis, keepdims=True)
    return (yc / (yc.std(axis, keepdims=True) + EPS) * pc / (pc.std(axis, keepdims=True) + EPS)).mean(axis)


def _ccc(y, p, axis=-1):
    my, mp = y.mean(axis, keepdims=True), p.mean(axis, keepdims=True)
    cov = ((y - my) * (p - mp)).mean(axis, keepdims=True)
    return (2 * cov / (y.var(axis, keepdims=True) + p.var(axis, keepdims=True) + (my - mp) ** 2 + EPS)).mean(axis)


CORR = {"pearson_correlation": (M.PearsonCorrelation, _pearson), "concordance_correlation": (M.ConcordanceCorrelation,
                                                                                             _ccc)}


@pytest.mark.parametrize("name", sorted(CORR))
@pytest.mark.parametrize("weighted", [False, True])
def test_correlations_per_sample_over_batches(name, weighted):
    cls, ref = CORR[name]
    y = rng.normal(size=(N, 6))
    p = 0.7 * y + 0.5 * rng.normal(size=(N, 6)) + 0.2
    for m in (cls(), M.get(name)):
        for s in BATCHES:
            m.update_state(y[s], p[s], sample_weight=SW[s] if weighted else None)
        per = ref(y, p)
        want = (per * SW).sum() / SW.sum() if weighted else per.mean()
        assert m.result() == pytest.approx(want, rel=1e-12)
        m.reset_state()
        assert m.result() == 0.0


def test_correlations_against_scipy_style_formulas_and_keras_example():
    # Pearson of one row: numpy's corrcoef; concordance: Lin's coefficient with population moments
    y = np.array([[0, 1, 0.5], [1, 1, 0.2]])
    p = np.array([[0.1, 0.9, 0.5], [1, 0.9, 0.2]])
    pr = [np.corrcoef(a, b)[0, 1] for a, b in zip(y, p)]
    assert M.PearsonCorrelation()(y, p) == pytest.approx(np.mean(pr), rel=1e-6)
    lin = [2 * np.cov(a, b, bias=True)[0, 1] / (a.var() + b.var() + (a.mean() - b.mean()) ** 2) for a, b in zip(y, p)]
    assert M.ConcordanceCorrelation()(y, p) == pytest.approx(np.mean(lin), rel=1e-6)
    assert np.mean(lin) == pytest.approx(0.98163204, rel=1e-6)        # the value Keras documents
    np.testing.assert_allclose(pg.metrics.pearson_correlation(y, p), pr, rtol=1e-6)
    np.testing.assert_allclose(pg.metrics.concordance_correlation(y, p), lin, rtol=1e-6)


def test_correlation_axis_and_config():
    y = rng.normal(size=(5, 4, 3))
    p = y + rng.normal(size=(5, 4, 3))
    m = M.PearsonCorrelation(axis=(1, 2), name="pc")
    m.update_state(y, p)
    assert m.result() == pytest.approx(_pearson(y, p, axis=(1, 2)).mean(), rel=1e-12)
    c = m.get_config()
    assert c == {"name": "pc", "axis": [1, 2]}
    assert M.PearsonCorrelation.from_config(c).axis == (1, 2)
    m = M.ConcordanceCorrelation(axis=1)
    m.update_state(y, p)
    assert m.result() == pytest.approx(_ccc(y, p, axis=1).mean(), rel=1e-12)
    # a 1-d batch: one coefficient over the samples, weighted by the weights' sum when given
    a, b = rng.normal(size=10), rng.normal(size=10)
    m = M.PearsonCorrelation()
    m.update_state(a, b, sample_weight=np.full(10, 2.0))
    m.update_state(a[:5], b[:5])
    want = (_pearson(a, b) * 20 + _pearson(a[:5], b[:5]) * 1) / 21
    assert m.result() == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="axis"):
        M.PearsonCorrelation(axis=2).update_state(np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises(TypeError, match="axis"):
        M.ConcordanceCorrelation(axis="last")
    with pytest.raises(ValueError, match="does not fit"):
        M.PearsonCorrelation().update_state(np.ones((3, 2)), np.ones((3, 3)))


# --- in compile, fit and evaluate ---------------------------------------------------------------------

def test_in_compile_fit_evaluate_and_saved(tmp_path):
    metrics = pytest.importorskip("sklearn.metrics")
    x = rng.normal(size=(48, 3))
    y = (x @ np.array([1.0, -1.0, 0.5]) + 0.3 * rng.normal(size=48) > 0).astype(np.float32).reshape(-1, 1)
    ms = [M.PrecisionAtRecall(0.5, num_thresholds=50), M.RecallAtPrecision(0.7), M.SensitivityAtSpecificity(0.6),
          M.SpecificityAtSensitivity(0.6), M.BinaryIoU(), M.BinaryIoU(target_class_ids=[1], name="iou1")]
    m = pg.Sequential([pg.layers.Dense(1, activation="sigmoid")], input_shape=3).compile(
        optimizer=pg.optimizers.Adam(0.05), loss="binary_crossentropy", metrics=ms, seed=3)
    h = m.fit(x, y, epochs=3, batch_size=16, verbose=0)
    assert set(h.history) >= {"loss", "precision_at_recall", "recall_at_precision", "sensitivity_at_specificity",
                              "specificity_at_sensitivity", "binary_io_u", "iou1"}
    logs = m.evaluate(x, y, batch_size=10, return_dict=True, verbose=0)
    p = m.predict(x, verbose=0).astype(np.float64)
    assert logs["precision_at_recall"] == pytest.approx(_brute("prec_at_rec", 0.5, y, p, None, 50), rel=1e-6)
    assert logs["recall_at_precision"] == pytest.approx(_brute("rec_at_prec", 0.7, y, p), rel=1e-6)
    assert logs["sensitivity_at_specificity"] == pytest.approx(_brute("sens_at_spec", 0.6, y, p), rel=1e-6)
    assert logs["specificity_at_sensitivity"] == pytest.approx(_brute("spec_at_sens", 0.6, y, p), rel=1e-6)
    per = metrics.jaccard_score(y.ravel(), (p.ravel() >= 0.5).astype(int), labels=[0, 1], average=None)
    assert logs["binary_io_u"] == pytest.approx(per.mean(), rel=1e-6)
    assert logs["iou1"] == pytest.approx(per[1], rel=1e-6)
    m.save(tmp_path / "m.gguf")
    back = pg.load_model(tmp_path / "m.gguf")
    again = back.evaluate(x, y, batch_size=10, return_dict=True, verbose=0)
    for k, v in logs.items():
        assert again[k] == pytest.approx(v, rel=1e-6), k
    m.free()
    back.free()


def test_correlations_and_one_hot_iou_in_compile():
    x = rng.normal(size=(30, 4))
    y = x @ rng.normal(size=(4, 3))
    m = pg.Sequential([pg.layers.Dense(3)], input_shape=4).compile(
        loss="mse", metrics=["pearson_correlation", M.ConcordanceCorrelation(), M.OneHotMeanIoU(3)], seed=1)
    m.fit(x, y, epochs=2, batch_size=10, verbose=0)
    logs = m.evaluate(x, y, batch_size=7, return_dict=True, verbose=0)
    p = m.predict(x, verbose=0).astype(np.float64)
    assert logs["pearson_correlation"] == pytest.approx(_pearson(y, p).mean(), rel=1e-5)
    assert logs["concordance_correlation"] == pytest.approx(_ccc(y, p).mean(), rel=1e-5)
    metrics = pytest.importorskip("sklearn.metrics")
    t, q = y.argmax(1), p.argmax(1)
    labels = sorted(set(t) | set(q))
    assert logs["one_hot_mean_io_u"] == pytest.approx(metrics.jaccard_score(t, q, labels=labels, average="macro"),
                                                      rel=1e-5)
    m.free()


def test_calls_accumulate_as_keras_metric_call_does():
    # Keras's metric(y, p): update_state(y, p), then the result over everything seen
    y = np.array([0, 1, 1, 0, 1])
    p = np.array([0.2, 0.7, 0.4, 0.6, 0.9])
    for m in (M.PrecisionAtRecall(0.6), M.RecallAtPrecision(0.6), M.SensitivityAtSpecificity(0.5),
              M.SpecificityAtSensitivity(0.5), M.BinaryIoU(), M.PearsonCorrelation(), M.ConcordanceCorrelation()):
        m.update_state(y[:2], p[:2])
        fresh = type(m).from_config(m.get_config())
        fresh.update_state(y[:2], p[:2])
        fresh.update_state(y, p)
        assert m(y, p) == pytest.approx(fresh.result())
        assert m.result() == pytest.approx(fresh.result())
    one = M.OneHotMeanIoU(2)
    assert one(np.eye(2)[y], np.stack([1 - p, p], 1)) == pytest.approx(
        M.BinaryIoU(threshold=0.5000001)(y, p), rel=1e-12)
