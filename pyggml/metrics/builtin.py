"""Keras's metrics, computed on the host from each batch's predictions."""

import numpy as np

from pyggml._validation import check_int, check_number, check_positive_int
from pyggml.metrics.metric import Mean, Metric, as_arrays, keras_weights
from pyggml.saving.object_registration import register_builtin

__all__ = ["Accuracy", "BinaryAccuracy", "CategoricalAccuracy", "SparseCategoricalAccuracy",
           "TopKCategoricalAccuracy", "SparseTopKCategoricalAccuracy", "MeanAbsoluteError", "MeanSquaredError",
           "RootMeanSquaredError", "MeanAbsolutePercentageError", "Precision", "Recall", "AUC", "TruePositives",
           "FalsePositives", "TrueNegatives", "FalseNegatives"]


def _labels(y_true, lead):
    """Class indices shaped ``lead``: from class indices, or from one-hot rows (argmax)."""
    yt = np.asarray(y_true)
    n = int(np.prod(lead))
    if yt.size == n:
        return yt.reshape(lead).astype(np.int64)
    return np.argmax(yt.reshape(n, -1), axis=-1).reshape(lead)


def _last_axis(y_true, y_pred):
    """y_true shaped as y_pred, and y_pred's leading axes (its last one holds the classes or values)."""
    yp = np.asarray(y_pred, dtype=np.float64)
    if yp.ndim == 1:
        yp = yp.reshape(-1, 1)
    yt = np.asarray(y_true)
    if yt.size == yp.size:
        yt = yt.reshape(yp.shape)
    return yt, yp, yp.shape[:-1]


class _PerSample(Mean):
    """A mean of a value per sample (per step for sequences: over the last axis), weighted
    by sample_weight (per sample) or a padding mask (per step)."""

    def values(self, y_true, y_pred):
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None):
        v = np.asarray(self.values(y_true, y_pred), dtype=np.float64)
        w = None
        if sample_weight is not None:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.size > v.size and w.size % v.size == 0:
                # weights per output cell for a value per sample (or per step): their mean there
                w = w.reshape(v.shape + (-1,)).mean(axis=-1)
            w = w.reshape(v.shape) if w.size == v.size else \
                np.broadcast_to(w.reshape(w.shape[:1] + (1,) * (v.ndim - 1)), v.shape)
        Mean.update_state(self, v, w)

    def get_config(self):
        return {"name": self.name}


@register_builtin
class Accuracy(_PerSample):
    """Exact equality of predictions and targets."""

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name)

    def values(self, y_true, y_pred):
        yt, yp, _ = _last_axis(y_true, y_pred)
        return (yp == yt).astype(np.float64)        # each value (Keras's): weights of its shape weigh each


@register_builtin
class BinaryAccuracy(_PerSample):
    def __init__(self, name="binary_accuracy", dtype=None, threshold=0.5):
        super().__init__(name)
        self.threshold = check_number("threshold", threshold)

    def values(self, y_true, y_pred):
        # Keras's: the thresholded prediction equals the label (a soft label of 0.3 matches neither)
        yt, yp, _ = _last_axis(y_true, y_pred)
        return ((yp > self.threshold).astype(np.float64) == yt).astype(np.float64).mean(axis=-1)

    def get_config(self):
        return {"name": self.name, "threshold": self.threshold}


@register_builtin
class CategoricalAccuracy(_PerSample):
    def __init__(self, name="categorical_accuracy", dtype=None):
        super().__init__(name)

    def values(self, y_true, y_pred):
        yt, yp, lead = _last_axis(y_true, y_pred)
        return (np.argmax(yp, axis=-1) == _labels(y_true, lead)).astype(np.float64)


@register_builtin
class SparseCategoricalAccuracy(CategoricalAccuracy):
    def __init__(self, name="sparse_categorical_accuracy", dtype=None):
        super().__init__(name)


@register_builtin
class TopKCategoricalAccuracy(_PerSample):
    def __init__(self, k=5, name="top_k_categorical_accuracy", dtype=None):
        super().__init__(name)
        self.k = check_positive_int("k", k)

    def values(self, y_true, y_pred):
        yt, yp, lead = _last_axis(y_true, y_pred)
        labels = _labels(y_true, lead)
        target = np.take_along_axis(yp, labels[..., None], axis=-1)
        # in the top k: fewer than k classes score strictly higher
        return ((yp > target).sum(axis=-1) < self.k).astype(np.float64)

    def get_config(self):
        return {"name": self.name, "k": self.k}


@register_builtin
class SparseTopKCategoricalAccuracy(TopKCategoricalAccuracy):
    """``from_sorted_ids=True`` (Keras 3.10's): y_pred holds class ids ranked best first (a
    retrieval's top ids), and a hit is the label among the first k of them."""

    def __init__(self, k=5, name="sparse_top_k_categorical_accuracy", dtype=None, from_sorted_ids=False):
        super().__init__(k, name)
        if not isinstance(from_sorted_ids, (bool, np.bool_)):
            raise TypeError(f"from_sorted_ids must be True or False, got {from_sorted_ids!r}")
        self.from_sorted_ids = bool(from_sorted_ids)

    def values(self, y_true, y_pred):
        if not self.from_sorted_ids:
            return super().values(y_true, y_pred)
        ids = np.asarray(y_pred)
        if ids.ndim < 1 or (ids.dtype.kind == "f" and not np.all(np.mod(ids, 1) == 0)):
            raise ValueError(f"{self.name}: with from_sorted_ids=True, y_pred holds class ids (integers) ranked "
                             f"best first, got shape {ids.shape} of dtype {ids.dtype}")
        labels = np.asarray(y_true).reshape(ids.shape[:-1])
        return (ids[..., :self.k] == labels[..., None]).any(axis=-1).astype(np.float64)

    def get_config(self):
        return dict(super().get_config(), from_sorted_ids=self.from_sorted_ids)


@register_builtin
class MeanAbsoluteError(_PerSample):
    def __init__(self, name="mean_absolute_error", dtype=None):
        super().__init__(name)

    def values(self, y_true, y_pred):
        yt, yp, _ = _last_axis(y_true, y_pred)
        return np.abs(yp - yt).mean(axis=-1)


@register_builtin
class MeanSquaredError(_PerSample):
    def __init__(self, name="mean_squared_error", dtype=None):
        super().__init__(name)

    def values(self, y_true, y_pred):
        yt, yp, _ = _last_axis(y_true, y_pred)
        return ((yp - yt) ** 2).mean(axis=-1)


@register_builtin
class RootMeanSquaredError(MeanSquaredError):
    def __init__(self, name="root_mean_squared_error", dtype=None):
        super().__init__(name)

    def result(self):
        return float(np.sqrt(super().result()))


@register_builtin
class MeanAbsolutePercentageError(_PerSample):
    def __init__(self, name="mean_absolute_percentage_error", dtype=None):
        super().__init__(name)

    def values(self, y_true, y_pred):
        yt, yp, _ = _last_axis(y_true, y_pred)
        t = yt.astype(np.float64)
        return 100.0 * (np.abs(t - yp) / np.maximum(np.abs(t), 1e-7)).mean(axis=-1)


class _Confusion(Metric):
    """Counts of a thresholded prediction (every value counts, as Keras), at one threshold (a
    number as the result) or several (a list: one result per threshold)."""

    takes_top_k = False

    def __init__(self, thresholds=None, name=None, dtype=None, top_k=None, class_id=None):
        super().__init__(name)
        if top_k is not None or class_id is not None:
            if not self.takes_top_k:
                raise TypeError(f"{type(self).__name__} takes no top_k or class_id (Precision and Recall do)")
        self.top_k = None if top_k is None else check_positive_int("top_k", top_k)
        self.class_id = None if class_id is None else check_int("class_id", class_id, low=0)
        # Keras's default: 0.5, or every top-k prediction counted (-inf) when top_k is given
        default = 0.5 if self.top_k is None else -np.inf
        self._default_thresholds = thresholds is None and self.top_k is not None
        if isinstance(thresholds, (list, tuple, np.ndarray)):
            self.thresholds = [check_number("thresholds", t, 0.0, 1.0) for t in np.asarray(thresholds).reshape(-1)]
            if not self.thresholds:
                raise ValueError("thresholds: an empty list")
        else:
            self.thresholds = default if thresholds is None else check_number("thresholds", thresholds)
        self.reset_state()

    def reset_state(self):
        k = len(self.thresholds) if isinstance(self.thresholds, list) else None
        zero = (lambda: np.zeros(k)) if k else (lambda: 0.0)
        self.tp, self.fp, self.tn, self.fn = zero(), zero(), zero(), zero()

    def _selected(self, yt, yp):
        """Keras's filtering: predictions outside each row's top_k are -inf, then class_id's
        column alone; both as 1-D."""
        if self.top_k is not None:
            if yp.ndim == 0:
                yp = yp.reshape(1)
            order = np.argsort(-yp, axis=-1, kind="stable")[..., :self.top_k]     # ties: the first
            kept = np.zeros(yp.shape, dtype=bool)
            np.put_along_axis(kept, order, True, axis=-1)
            yp = np.where(kept, yp, -np.inf)
        if self.class_id is not None:
            if yp.ndim == 0 or self.class_id >= yp.shape[-1]:
                raise ValueError(f"{self.name}: class_id {self.class_id} for predictions of shape {yp.shape}")
            yt, yp = np.asarray(yt)[..., self.class_id], yp[..., self.class_id]
        return yt, yp

    def update_state(self, y_true, y_pred, sample_weight=None):
        yt, yp, _ = as_arrays(y_true, y_pred)
        yt = np.asarray(yt, dtype=np.float64)
        if yt.size != yp.size:
            if yt.size * (yp.shape[-1] if yp.ndim else 1) != yp.size:
                raise ValueError(f"{self.name}: y_true of shape {yt.shape} for y_pred of shape {yp.shape}")
        n = len(yp) if yp.ndim else 1
        yt, yp = self._selected(yt.reshape(yp.shape) if yt.size == yp.size else yt, yp)
        pred, true = yp.reshape(n, -1), yt.reshape(n, -1) > 0.5
        ww = np.ones(pred.shape) if sample_weight is None else keras_weights(sample_weight, pred.shape, self.name)
        t = np.asarray(self.thresholds, dtype=np.float64).reshape(-1)
        above = pred[None] > t[:, None, None]                                # (thresholds, n, k)
        counts = [(ww * m).sum(axis=(1, 2)) for m in (above & true, above & ~true, ~above & ~true, ~above & true)]
        if not isinstance(self.thresholds, list):
            counts = [float(c[0]) for c in counts]
        self.tp, self.fp, self.tn, self.fn = (a + c for a, c in zip((self.tp, self.fp, self.tn, self.fn), counts))

    def _ratio(self, num, den):
        if isinstance(self.thresholds, list):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0).astype(np.float32)
        return num / den if den else 0.0

    def _counts(self, c):
        return c.astype(np.float32) if isinstance(c, np.ndarray) else c

    # Keras's state variables, read as arrays (one entry per threshold)
    true_positives = property(lambda self: np.atleast_1d(np.asarray(self.tp, np.float32)))
    false_positives = property(lambda self: np.atleast_1d(np.asarray(self.fp, np.float32)))
    true_negatives = property(lambda self: np.atleast_1d(np.asarray(self.tn, np.float32)))
    false_negatives = property(lambda self: np.atleast_1d(np.asarray(self.fn, np.float32)))

    def get_config(self):
        c = {"name": self.name, "thresholds": None if self._default_thresholds else self.thresholds}
        if self.takes_top_k:
            c.update(top_k=self.top_k, class_id=self.class_id)
        return c


@register_builtin
class TruePositives(_Confusion):
    def result(self):
        return self._counts(self.tp)


@register_builtin
class FalsePositives(_Confusion):
    def result(self):
        return self._counts(self.fp)


@register_builtin
class TrueNegatives(_Confusion):
    def result(self):
        return self._counts(self.tn)


@register_builtin
class FalseNegatives(_Confusion):
    def result(self):
        return self._counts(self.fn)


@register_builtin
class Precision(_Confusion):
    """tp / (tp + fp); ``top_k`` counts each row's k largest predictions only (ties: the first),
    ``class_id`` one class's column only."""

    takes_top_k = True

    def result(self):
        return self._ratio(self.tp, self.tp + self.fp)


@register_builtin
class Recall(_Confusion):
    """tp / (tp + fn); ``top_k`` and ``class_id`` as Precision's."""

    takes_top_k = True

    def result(self):
        return self._ratio(self.tp, self.tp + self.fn)


def counts_at_thresholds(p, positive, thresholds, weights):
    """(tp, fp, tn, fn), each of len(thresholds): the weighted counts of predictions ``p`` (1-D)
    above each threshold (positive) against the labels ``positive`` (bool, 1-D)."""
    above = p[None, :] > thresholds[:, None]
    return tuple(m.astype(np.float64) @ weights
                 for m in (above & positive, above & ~positive, ~above & ~positive, ~above & positive))


@register_builtin
class AUC(Metric):
    """Area under the ROC (or PR) curve from counts at ``num_thresholds``
    thresholds (Keras's approximation)."""

    def __init__(self, num_thresholds=200, curve="ROC", name="auc", dtype=None, from_logits=False):
        super().__init__(name)
        self.num_thresholds = check_positive_int("num_thresholds", num_thresholds)
        if self.num_thresholds < 2:
            raise ValueError("AUC: num_thresholds must be > 1")
        if curve not in ("ROC", "PR"):
            raise ValueError(f"AUC: curve must be 'ROC' or 'PR', got {curve!r}")
        self.curve = curve
        self.from_logits = bool(from_logits)
        eps = 1e-7
        inner = [(i + 1) / (self.num_thresholds - 1) for i in range(self.num_thresholds - 2)]
        self.thresholds = np.array([0.0 - eps] + inner + [1.0 + eps])
        self.reset_state()

    def reset_state(self):
        k = self.num_thresholds
        self.tp, self.fp, self.tn, self.fn = (np.zeros(k) for _ in range(4))

    def update_state(self, y_true, y_pred, sample_weight=None):
        yt, yp, w = as_arrays(y_true, y_pred, sample_weight)
        p = yp.reshape(-1)
        if self.from_logits:
            p = 1.0 / (1.0 + np.exp(-p))
        t = yt.reshape(-1).astype(np.float64) > 0.5
        ww = np.ones_like(p) if w is None else np.broadcast_to(w, yp.reshape(len(yp), -1).shape).reshape(-1)
        tp, fp, tn, fn = counts_at_thresholds(p, t, self.thresholds, ww)
        self.tp += tp
        self.fp += fp
        self.tn += tn
        self.fn += fn

    def result(self):
        tpr = self.tp / np.maximum(self.tp + self.fn, 1e-12)
        if self.curve == "ROC":
            fpr = self.fp / np.maximum(self.fp + self.tn, 1e-12)
            return float(np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2.0))
        precision = self.tp / np.maximum(self.tp + self.fp, 1e-12)
        return float(np.sum((tpr[:-1] - tpr[1:]) * (precision[:-1] + precision[1:]) / 2.0))

    def get_config(self):
        return {"name": self.name, "num_thresholds": self.num_thresholds, "curve": self.curve,
                "from_logits": self.from_logits}
