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
            w = w.reshape(v.shape) if w.size == v.size else keras_weights(w, v.shape, self.name)
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
        # Keras's: the thresholded prediction equals the label (a soft label of 0.3 matches
        # neither), a value per entry (weights of the predictions' shape weigh each)
        yt, yp, _ = _last_axis(y_true, y_pred)
        return ((yp > self.threshold).astype(np.float64) == yt).astype(np.float64)

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
        # in the top k: fewer than k classes score strictly higher (a NaN above every number, as
        # PyTorch's topk; a NaN target is never in)
        above = ((yp > target) | np.isnan(yp)).sum(axis=-1)
        return ((above < self.k) & np.isfinite(target[..., 0])).astype(np.float64)

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
    """Area under the ROC, PR or PR-gain curve from counts at ``num_thresholds`` thresholds
    (Keras's approximation): ``summation_method`` "interpolation" (the trapezoid; for PR, Davis
    and Goadrich's interpolation of precision between thresholds), "minoring" or "majoring"
    (Riemann sums of the lower or upper heights); ``thresholds`` gives the inner thresholds
    instead; ``multi_label`` takes each label's curve apart (their mean, or weighted by
    ``label_weights``), where otherwise every value counts in one curve (weighted by
    ``label_weights`` per label)."""

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation", name="auc", dtype=None,
                 thresholds=None, multi_label=False, num_labels=None, label_weights=None, from_logits=False):
        super().__init__(name)
        if curve not in ("ROC", "PR", "PRGAIN"):
            raise ValueError(f"AUC: curve must be 'ROC', 'PR' or 'PRGAIN', got {curve!r}")
        if summation_method not in ("interpolation", "minoring", "majoring"):
            raise ValueError(f"AUC: summation_method must be 'interpolation', 'minoring' or 'majoring', got "
                             f"{summation_method!r}")
        self.curve, self.summation_method = curve, summation_method
        self.from_logits = bool(from_logits)
        self.multi_label = bool(multi_label)
        eps = 1e-7
        if thresholds is not None:
            inner = sorted(check_number("thresholds", t, 0.0, 1.0) for t in np.asarray(thresholds).reshape(-1))
            self._given_thresholds = list(inner)
            self.num_thresholds = len(inner) + 2
        else:
            # (a bound: two billion thresholds would take the metric's arrays minutes and gigabytes)
            self.num_thresholds = check_positive_int("num_thresholds", num_thresholds, 1 << 24)
            if self.num_thresholds < 2:
                raise ValueError("AUC: num_thresholds must be > 1")
            self._given_thresholds = None
            inner = [(i + 1) / (self.num_thresholds - 1) for i in range(self.num_thresholds - 2)]
        self.thresholds = np.array([0.0 - eps] + list(inner) + [1.0 + eps])
        self.label_weights = None if label_weights is None else np.asarray(label_weights, np.float64).reshape(-1)
        if self.label_weights is not None and (not np.all(np.isfinite(self.label_weights)) or
                                               np.any(self.label_weights < 0)):
            raise ValueError(f"AUC: label_weights must be non-negative numbers, got {label_weights!r}")
        self.num_labels = None if num_labels is None else check_positive_int("num_labels", num_labels)
        self.reset_state()

    def reset_state(self):
        k = self.num_thresholds
        shape = (k,) if not self.multi_label else (k, 0)
        self.tp, self.fp, self.tn, self.fn = (np.zeros(shape) for _ in range(4))

    def update_state(self, y_true, y_pred, sample_weight=None):
        yp = np.asarray(y_pred, dtype=np.float64)
        if self.from_logits:
            yp = 1.0 / (1.0 + np.exp(-yp))
        if self._given_thresholds is None:
            # Keras's counting over its evenly spread thresholds takes predictions clipped to [0, 1]
            # (-1 counts as 0, not below the first threshold)
            yp = np.clip(yp, 0.0, 1.0)
        yt = np.asarray(y_true).astype(np.float64).reshape(yp.shape) > 0.5
        if self.multi_label:
            if yp.ndim != 2:
                raise ValueError(f"AUC(multi_label=True): expected (batch, labels) predictions, got {yp.shape}")
            w = np.ones(yp.shape) if sample_weight is None else keras_weights(sample_weight, yp.shape, self.name)
            counts = [counts_at_thresholds(yp[:, j], yt[:, j], self.thresholds, w[:, j]) for j in range(yp.shape[1])]
            new = [np.stack([c[i] for c in counts], axis=1) for i in range(4)]
            if self.tp.shape[1] == 0:
                self.tp, self.fp, self.tn, self.fn = (np.zeros_like(a) for a in new)
            elif self.tp.shape[1] != yp.shape[1]:
                raise ValueError(f"AUC(multi_label=True): {yp.shape[1]} labels after {self.tp.shape[1]}")
        else:
            w = np.ones(yp.shape) if sample_weight is None else keras_weights(sample_weight, yp.shape, self.name)
            if self.label_weights is not None and yp.ndim >= 1 and yp.shape[-1] == len(self.label_weights):
                w = w * self.label_weights
            new = counts_at_thresholds(yp.reshape(-1), yt.reshape(-1), self.thresholds, w.reshape(-1))
        self.tp, self.fp, self.tn, self.fn = (a + b for a, b in zip((self.tp, self.fp, self.tn, self.fn), new))

    def _area(self, tp, fp, tn, fn):
        """The area of one curve from the counts at each threshold (k,)."""
        def div(a, b):
            return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)
        if self.curve == "PR" and self.summation_method == "interpolation":
            # Davis & Goadrich: precision interpolated along the counts between adjacent thresholds
            dtp = tp[:-1] - tp[1:]
            p = tp + fp
            dp = p[:-1] - p[1:]
            slope = div(dtp, np.maximum(dp, 0.0))
            intercept = tp[1:] - slope * p[1:]
            both = (p[:-1] > 0) & (p[1:] > 0)
            ratio = np.where(both, div(p[:-1], np.maximum(p[1:], 0.0)), 1.0)
            return float(np.sum(div(slope * (dtp + intercept * np.log(np.where(ratio > 0, ratio, 1.0))),
                                    np.maximum(tp[1:] + fn[1:], 0.0))))
        if self.curve == "ROC":
            x, y = div(fp, fp + tn), div(tp, tp + fn)
        elif self.curve == "PR":
            x, y = div(tp, tp + fn), div(tp, tp + fp)
        else:                       # PRGAIN: the gains 1 - (fn or fp / tp) (P / N); no true positive: (0, 1)
            ratio = div(tp + fn, tn + fp)
            x = np.where(tp == 0, 0.0, np.maximum(1.0 - div(fn, tp) * ratio, 0.0))
            y = np.where(tp == 0, 1.0, 1.0 - div(fp, tp) * ratio)
        if self.summation_method == "interpolation":
            heights = (y[:-1] + y[1:]) / 2.0
        elif self.summation_method == "minoring":
            heights = np.minimum(y[:-1], y[1:])
        else:
            heights = np.maximum(y[:-1], y[1:])
        return float(np.sum((x[:-1] - x[1:]) * heights))

    def result(self):
        if not self.multi_label:
            return self._area(self.tp, self.fp, self.tn, self.fn)
        if self.tp.shape[1] == 0:
            return 0.0
        areas = np.array([self._area(self.tp[:, j], self.fp[:, j], self.tn[:, j], self.fn[:, j])
                          for j in range(self.tp.shape[1])])
        if self.label_weights is None:
            return float(areas.mean())
        lw = self.label_weights[:len(areas)]
        return float((areas * lw).sum() / lw.sum()) if lw.sum() > 0 else 0.0

    def get_config(self):
        c = {"name": self.name, "num_thresholds": self.num_thresholds, "curve": self.curve,
             "summation_method": self.summation_method, "multi_label": self.multi_label,
             "from_logits": self.from_logits}
        if self._given_thresholds is not None:
            c["thresholds"] = list(self._given_thresholds)
            del c["num_thresholds"]
        if self.label_weights is not None:
            c["label_weights"] = self.label_weights.tolist()
        if self.num_labels is not None:
            c["num_labels"] = self.num_labels
        return c
