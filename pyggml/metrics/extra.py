"""More of Keras 3's metrics, on the host: the loss-like means (KL divergence,
Poisson, log-cosh, cosine similarity, mean squared logarithmic error, the hinge
family, the cross-entropies), R2Score, FBetaScore and F1Score, IoU and MeanIoU."""

import numpy as np

from pyggml._validation import check_int, check_number, check_positive_int
from pyggml.metrics.builtin import _last_axis, _PerSample
from pyggml.metrics.metric import Mean, Metric, keras_weights
from pyggml.saving.object_registration import register_builtin

__all__ = ["KLDivergence", "Poisson", "LogCoshError", "CosineSimilarity", "MeanSquaredLogarithmicError", "Hinge",
           "SquaredHinge", "CategoricalHinge", "BinaryCrossentropy", "CategoricalCrossentropy",
           "SparseCategoricalCrossentropy", "R2Score", "FBetaScore", "F1Score", "IoU", "MeanIoU"]

EPS = 1e-7


def _floats(y_true, y_pred):
    yt, yp, _ = _last_axis(y_true, y_pred)
    return yt.astype(np.float64), yp


def _hinge_y(y):
    return 2.0 * y - 1.0 if np.all((y == 0) | (y == 1)) else y


def _unit(x, axis=-1):
    return x / np.maximum(np.sqrt((x * x).sum(axis, keepdims=True)), EPS)


# Keras clips probabilities at 1 - 1e-7 in float32: 0.99999988, so -log(1 - p) is at most 15.94
_HIGH = float(np.float32(1.0 - EPS))


class _Simple(_PerSample):
    default_name = None

    def __init__(self, name=None, dtype=None):
        super().__init__(name or self.default_name)


@register_builtin
class KLDivergence(_Simple):
    default_name = "kl_divergence"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        t, p = np.clip(t, EPS, 1.0), np.clip(p, EPS, 1.0)
        return (t * np.log(t / p)).sum(-1)


@register_builtin
class Poisson(_Simple):
    default_name = "poisson"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        return (p - t * np.log(p + EPS)).mean(-1)


@register_builtin
class LogCoshError(_Simple):
    default_name = "logcosh"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        x = p - t
        return (x + np.logaddexp(0.0, -2.0 * x) - np.log(2.0)).mean(-1)


@register_builtin
class CosineSimilarity(_Simple):
    """sum(l2_normalize(y) * l2_normalize(p)) (the loss is its negative)."""

    default_name = "cosine_similarity"

    def __init__(self, name=None, dtype=None, axis=-1):
        super().__init__(name)
        self.axis = check_int("axis", axis)

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        t, p = np.broadcast_arrays(t, p)
        if not -p.ndim <= self.axis < max(p.ndim, 1):
            raise ValueError(f"CosineSimilarity: axis {self.axis} for values of shape {p.shape}")
        return (_unit(t, self.axis) * _unit(p, self.axis)).sum(self.axis)

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}


@register_builtin
class MeanSquaredLogarithmicError(_Simple):
    default_name = "mean_squared_logarithmic_error"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        return ((np.log(np.maximum(p, EPS) + 1.0) - np.log(np.maximum(t, EPS) + 1.0)) ** 2).mean(-1)


@register_builtin
class Hinge(_Simple):
    default_name = "hinge"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        return np.maximum(1.0 - _hinge_y(t) * p, 0.0).mean(-1)


@register_builtin
class SquaredHinge(_Simple):
    default_name = "squared_hinge"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        return (np.maximum(1.0 - _hinge_y(t) * p, 0.0) ** 2).mean(-1)


@register_builtin
class CategoricalHinge(_Simple):
    default_name = "categorical_hinge"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        return np.maximum(((1.0 - t) * p).max(-1) - (t * p).sum(-1) + 1.0, 0.0)


def _log_sigmoid(z):
    return -np.logaddexp(0.0, -z)


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


class _XentMetric(_PerSample):
    default_name = None

    def __init__(self, name=None, dtype=None, from_logits=False, label_smoothing=0.0, axis=-1):
        super().__init__(name or self.default_name)
        self.from_logits = bool(from_logits)
        self.label_smoothing = check_number("label_smoothing", label_smoothing, 0.0, 1.0)
        if axis != -1:
            raise ValueError(f"{type(self).__name__}: only axis=-1 is supported")

    def get_config(self):
        return {"name": self.name, "from_logits": self.from_logits, "label_smoothing": self.label_smoothing}


@register_builtin
class BinaryCrossentropy(_XentMetric):
    default_name = "binary_crossentropy"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        if self.label_smoothing:
            t = t * (1.0 - self.label_smoothing) + 0.5 * self.label_smoothing
        if self.from_logits:
            return (np.logaddexp(0.0, p) - t * p).mean(-1)
        p = np.clip(p, EPS, _HIGH)
        return -(t * np.log(p) + (1.0 - t) * np.log(1.0 - p)).mean(-1)


@register_builtin
class CategoricalCrossentropy(_XentMetric):
    default_name = "categorical_crossentropy"

    def values(self, y_true, y_pred):
        t, p = _floats(y_true, y_pred)
        if self.label_smoothing:
            t = t * (1.0 - self.label_smoothing) + self.label_smoothing / p.shape[-1]
        if self.from_logits:
            lp = _log_softmax(p)
        else:
            lp = np.log(np.clip(p / p.sum(-1, keepdims=True), EPS, 1.0 - EPS))
        return -(t * lp).sum(-1)


@register_builtin
class SparseCategoricalCrossentropy(_XentMetric):
    default_name = "sparse_categorical_crossentropy"

    def __init__(self, name=None, dtype=None, from_logits=False, axis=-1, ignore_class=None):
        super().__init__(name, from_logits=from_logits, axis=axis)
        if ignore_class is not None and (isinstance(ignore_class, bool) or not isinstance(ignore_class, int)):
            raise TypeError(f"ignore_class must be an int or None, got {ignore_class!r}")
        self.ignore_class = ignore_class

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self.ignore_class is None:
            return super().update_state(y_true, y_pred, sample_weight)
        # Keras's: the positions labelled ignore_class count for nothing (weight 0)
        p = np.asarray(y_pred, dtype=np.float64)
        labels = np.asarray(y_true).reshape(p.shape[:-1] if p.ndim > 1 else (-1,))
        keep = (labels != self.ignore_class).astype(np.float64)
        if sample_weight is None:
            # Keras 3's, without weights: an ignored position's loss is 0 but it stays in the count
            v = np.asarray(self.values(np.where(keep > 0, labels, 0), y_pred), dtype=np.float64)
            return Mean.update_state(self, v * keep.reshape(v.shape))
        w = keep * keras_weights(sample_weight, keep.shape, self.name)
        return super().update_state(np.where(keep > 0, labels, 0), y_pred, w)

    def get_config(self):
        return {**super().get_config(), "ignore_class": self.ignore_class}

    def values(self, y_true, y_pred):
        p = np.asarray(y_pred, dtype=np.float64)
        if p.ndim == 1:
            p = p.reshape(1, -1)
        lead = p.shape[:-1]
        labels = np.asarray(y_true).reshape(lead).astype(np.int64)
        k = p.shape[-1]
        if labels.size and (labels.min() < 0 or labels.max() >= k):
            raise ValueError(f"sparse_categorical_crossentropy: labels must lie in [0, {k}), got "
                             f"{labels.min()}..{labels.max()}")
        lp = _log_softmax(p) if self.from_logits else \
            np.log(np.clip(p / p.sum(-1, keepdims=True), EPS, 1.0 - EPS))
        return -np.take_along_axis(lp, labels[..., None], axis=-1)[..., 0]

    def get_config(self):
        return {"name": self.name, "from_logits": self.from_logits}


def _weights_for(w, n, shape):
    if w is None:
        return np.ones(shape)
    w = np.asarray(w, dtype=np.float64)
    if w.size == n:
        return np.broadcast_to(w.reshape((n,) + (1,) * (len(shape) - 1)), shape)
    return keras_weights(w, shape)       # a number, a weight per entry, or one that broadcasts


@register_builtin
class R2Score(Metric):
    """The coefficient of determination, 1 - SS_res / SS_tot, per output column;
    ``class_aggregation``: "uniform_average" (the mean over outputs),
    "variance_weighted_average" or None (one per output); ``num_regressors``
    gives the adjusted R2."""

    def __init__(self, class_aggregation="uniform_average", num_regressors=0, name="r2_score", dtype=None):
        super().__init__(name)
        if class_aggregation not in ("uniform_average", "variance_weighted_average", None):
            raise ValueError("R2Score: class_aggregation must be 'uniform_average', 'variance_weighted_average' "
                             f"or None, got {class_aggregation!r}")
        if not isinstance(num_regressors, (int, np.integer)) or isinstance(num_regressors, bool) \
                or num_regressors < 0:
            raise ValueError(f"R2Score: num_regressors must be an int >= 0, got {num_regressors!r}")
        self.class_aggregation = class_aggregation
        self.num_regressors = int(num_regressors)
        self.reset_state()

    @property
    def vector_result(self):
        """True when result() is one value per output (class_aggregation=None)."""
        return self.class_aggregation is None

    def reset_state(self):
        self.sum = self.squared_sum = self.total_mse = self.count = None
        self.num_samples = 0

    def update_state(self, y_true, y_pred, sample_weight=None):
        p = np.asarray(y_pred, dtype=np.float64)
        t = np.asarray(y_true, dtype=np.float64)
        if p.ndim == 1:
            p = p.reshape(-1, 1)
        if p.ndim != 2:
            raise ValueError(f"R2Score: expected predictions of shape (samples, outputs), got {p.shape}")
        t = t.reshape(p.shape)
        w = _weights_for(sample_weight, len(p), p.shape)
        if self.sum is None:
            self.sum, self.squared_sum, self.total_mse, self.count = (np.zeros(p.shape[1]) for _ in range(4))
        elif p.shape[1] != len(self.sum):
            raise ValueError(f"R2Score: {p.shape[1]} outputs after {len(self.sum)}")
        self.sum += (w * t).sum(0)
        self.squared_sum += (w * t * t).sum(0)
        self.total_mse += (w * (t - p) ** 2).sum(0)
        self.count += w.sum(0)
        self.num_samples += len(p)

    def result(self):
        if self.sum is None:
            return 0.0
        mean = self.sum / np.where(self.count == 0, 1.0, self.count)
        total = self.squared_sum - self.sum * mean
        with np.errstate(divide="ignore", invalid="ignore"):
            raw = 1.0 - self.total_mse / total
        raw = np.where(np.isfinite(raw), raw, 0.0)
        if self.class_aggregation == "uniform_average":
            r2 = float(raw.mean())
        elif self.class_aggregation == "variance_weighted_average":
            s = total.sum()
            r2 = float((raw * total).sum() / s) if s else 0.0
        else:
            r2 = raw
        if self.num_regressors:
            n, k = self.num_samples, self.num_regressors
            if n - k - 1 > 0:
                r2 = 1.0 - (1.0 - r2) * (n - 1) / (n - k - 1)
        return r2

    def get_config(self):
        return {"name": self.name, "class_aggregation": self.class_aggregation,
                "num_regressors": self.num_regressors}


@register_builtin
class FBetaScore(Metric):
    """F-beta from per-class true/false positive and false negative counts; y_pred is
    thresholded (``threshold=None``: each row's largest values count as positive);
    ``average``: None (per class), "micro", "macro" or "weighted" (by support)."""

    def __init__(self, average=None, beta=1.0, threshold=None, name="fbeta_score", dtype=None):
        super().__init__(name)
        if average not in (None, "micro", "macro", "weighted"):
            raise ValueError(f"{type(self).__name__}: average must be None, 'micro', 'macro' or 'weighted', "
                             f"got {average!r}")
        self.average = average
        # Keras's checks, ValueErrors all: beta a number > 0, threshold None or in (0, 1]
        if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)) or \
                not beta > 0 or not np.isfinite(beta):
            raise ValueError(f"Invalid `beta` argument value. It should be a Python float > 0. Received: "
                             f"beta={beta!r}")
        self.beta = float(beta)
        if threshold is not None and (isinstance(threshold, bool) or
                                      not isinstance(threshold, (int, float, np.integer, np.floating)) or
                                      not 0 < threshold <= 1):
            raise ValueError(f"Invalid `threshold` argument value. It should verify 0 < threshold <= 1. "
                             f"Received: threshold={threshold!r}")
        self.threshold = None if threshold is None else float(threshold)
        self.reset_state()

    @property
    def vector_result(self):
        """True when result() is one value per class (average=None)."""
        return self.average is None

    def reset_state(self):
        self.tp = self.fp = self.fn = self.support = None

    def update_state(self, y_true, y_pred, sample_weight=None):
        p = np.asarray(y_pred, dtype=np.float64)
        if p.ndim != 2:
            raise ValueError(f"{type(self).__name__}: expected predictions of shape (samples, classes), got {p.shape}")
        t = np.asarray(y_true, dtype=np.float64).reshape(p.shape)
        if self.threshold is None:
            pred = (p >= p.max(-1, keepdims=True)).astype(np.float64)
        else:
            pred = (p > self.threshold).astype(np.float64)
        w = _weights_for(sample_weight, len(p), p.shape)
        if self.tp is None:
            self.tp, self.fp, self.fn, self.support = (np.zeros(p.shape[1]) for _ in range(4))
        elif p.shape[1] != len(self.tp):
            raise ValueError(f"{type(self).__name__}: {p.shape[1]} classes after {len(self.tp)}")
        self.tp += (w * pred * t).sum(0)
        self.fp += (w * pred * (1.0 - t)).sum(0)
        self.fn += (w * (1.0 - pred) * t).sum(0)
        self.support += (w * t).sum(0)

    def result(self):
        if self.tp is None:
            return 0.0
        tp, fp, fn = self.tp, self.fp, self.fn
        if self.average == "micro":
            tp, fp, fn = tp.sum(), fp.sum(), fn.sum()
        precision = tp / (tp + fp + EPS)
        recall = tp / (tp + fn + EPS)
        b2 = self.beta ** 2
        f = (1.0 + b2) * precision * recall / (b2 * precision + recall + EPS)
        if self.average == "weighted":
            s = self.support.sum()
            return float((f * self.support).sum() / s) if s else 0.0
        if self.average is not None:
            return float(np.mean(f))
        return f

    def get_config(self):
        return {"name": self.name, "average": self.average, "beta": self.beta, "threshold": self.threshold}


@register_builtin
class F1Score(FBetaScore):
    def __init__(self, average=None, threshold=None, name="f1_score", dtype=None):
        super().__init__(average=average, beta=1.0, threshold=threshold, name=name)

    def get_config(self):
        return {"name": self.name, "average": self.average, "threshold": self.threshold}


@register_builtin
class IoU(Metric):
    """Intersection over union, tp / (tp + fp + fn), from a confusion matrix over
    ``num_classes``, averaged over ``target_class_ids`` (classes never seen count
    for nothing).  Labels are class indices (``sparse_y_true``) or one-hot/scores
    (argmax over ``axis``); entries labelled ``ignore_class``, and those whose
    label or prediction lies outside ``[0, num_classes)``, count for nothing."""

    def __init__(self, num_classes, target_class_ids, name=None, dtype=None, ignore_class=None,
                 sparse_y_true=True, sparse_y_pred=True, axis=-1):
        super().__init__(name or "io_u")
        self.num_classes = check_positive_int("num_classes", num_classes)
        ids = [int(i) for i in target_class_ids]
        if not ids or any(i < 0 or i >= self.num_classes for i in ids):
            raise ValueError(f"IoU: target_class_ids must be in [0, {self.num_classes}), got {target_class_ids!r}")
        self.target_class_ids = ids
        self.ignore_class = None if ignore_class is None else int(ignore_class)
        self.sparse_y_true = bool(sparse_y_true)
        self.sparse_y_pred = bool(sparse_y_pred)
        self.axis = int(axis)
        self.reset_state()

    def reset_state(self):
        self.total_cm = np.zeros((self.num_classes, self.num_classes))

    def update_state(self, y_true, y_pred, sample_weight=None):
        t = np.asarray(y_true)
        p = np.asarray(y_pred)
        for name, a in (("y_true", t), ("y_pred", p)):
            if not getattr(self, "sparse_" + name) and not -a.ndim <= self.axis < a.ndim:
                raise ValueError(f"{type(self).__name__}: axis={self.axis} is outside {name}'s "
                                 f"{a.ndim} dimensions")
        if not self.sparse_y_true:
            t = np.argmax(t, axis=self.axis)
        if not self.sparse_y_pred:
            p = np.argmax(p, axis=self.axis)
        t = t.reshape(-1).astype(np.int64)
        p = p.reshape(-1).astype(np.int64)
        if t.size != p.size:
            raise ValueError(f"{type(self).__name__}: {t.size} labels for {p.size} predictions")
        w = np.ones(t.size)
        if sample_weight is not None:
            sw = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
            if sw.size == 0 or t.size % sw.size:
                raise ValueError(f"{type(self).__name__}: {sw.size} sample weights for {t.size} labels")
            w = np.repeat(sw, t.size // sw.size)
        # as Keras's confusion matrix: an entry whose label or prediction lies
        # outside [0, num_classes) counts for nothing
        k = self.num_classes
        keep = (t >= 0) & (t < k) & (p >= 0) & (p < k)
        if self.ignore_class is not None:
            keep &= t != self.ignore_class
        t, p, w = t[keep], p[keep], w[keep]
        np.add.at(self.total_cm, (t, p), w)

    def result(self):
        cm = self.total_cm
        tp = np.diag(cm)
        denom = cm.sum(0) + cm.sum(1) - tp
        ids = self.target_class_ids
        d = denom[ids]
        seen = d > 0
        if not seen.any():
            return 0.0
        return float((tp[ids][seen] / d[seen]).sum() / seen.sum())

    def get_config(self):
        return {"name": self.name, "num_classes": self.num_classes, "target_class_ids": self.target_class_ids,
                "ignore_class": self.ignore_class, "sparse_y_true": self.sparse_y_true,
                "sparse_y_pred": self.sparse_y_pred, "axis": self.axis}


@register_builtin
class MeanIoU(IoU):
    """IoU averaged over every class."""

    def __init__(self, num_classes, name=None, dtype=None, ignore_class=None, sparse_y_true=True,
                 sparse_y_pred=True, axis=-1):
        super().__init__(num_classes, list(range(check_positive_int("num_classes", num_classes))),
                         name=name or "mean_io_u", ignore_class=ignore_class, sparse_y_true=sparse_y_true,
                         sparse_y_pred=sparse_y_pred, axis=axis)

    def get_config(self):
        c = super().get_config()
        del c["target_class_ids"]
        return c
