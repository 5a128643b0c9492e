"""Keras 3's threshold-curve metrics (PrecisionAtRecall, RecallAtPrecision,
SensitivityAtSpecificity, SpecificityAtSensitivity), the IoU variants for binary
and one-hot data (BinaryIoU, OneHotIoU, OneHotMeanIoU), Sum, and the per-sample
correlations (PearsonCorrelation, ConcordanceCorrelation); on the host, on numpy."""

import numpy as np

from pyggml._validation import check_fraction, check_number, is_int
from pyggml.metrics.builtin import _PerSample, counts_at_thresholds
from pyggml.metrics.extra import IoU, MeanIoU
from pyggml.metrics.metric import Metric
from pyggml.saving.object_registration import register_builtin

__all__ = ["SensitivityAtSpecificity", "SpecificityAtSensitivity", "PrecisionAtRecall", "RecallAtPrecision",
           "BinaryIoU", "OneHotIoU", "OneHotMeanIoU", "Sum", "PearsonCorrelation", "ConcordanceCorrelation",
           "pearson_correlation", "concordance_correlation"]

EPSILON = 1e-7          # Keras's backend.epsilon()


def _divide_no_nan(a, b):
    out = np.zeros_like(a, dtype=np.float64)
    np.divide(a, b, out=out, where=b != 0)
    return out


def _numbers(a, what, cls):
    a = np.asarray(a)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{cls}: {what} must be numbers, got dtype {a.dtype}")
    return a


# --- the best value of one rate where another reaches a bound ------------------------------------------

class _SensitivitySpecificityBase(Metric):
    """Counts of true/false positives/negatives at ``num_thresholds`` thresholds evenly
    spread over [0, 1] (a prediction above a threshold counts as positive; predictions
    are clipped to [0, 1]; one threshold is 0.5); ``class_id`` picks one column."""

    value_name = None       # the bound's argument name (Keras's)

    def __init__(self, value, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(name)
        cls = type(self).__name__
        if not is_int(num_thresholds) or not 0 < num_thresholds <= 1 << 24:
            # (bounded: two billion thresholds would take minutes and gigabytes to lay out)
            raise ValueError(f"{cls}: num_thresholds must be an integer in [1, 2**24], got {num_thresholds!r}")
        try:
            self.value = check_fraction(self.value_name, value)
        except ValueError:
            raise ValueError(f"{cls}: {self.value_name} must be in the range [0, 1], got {value!r}") from None
        if class_id is not None and (not is_int(class_id) or class_id < 0):
            raise ValueError(f"{cls}: class_id must be an int >= 0 or None, got {class_id!r}")
        self.num_thresholds = int(num_thresholds)
        self.class_id = None if class_id is None else int(class_id)
        n = self.num_thresholds
        if n == 1:
            self.thresholds = np.array([0.5])
        else:
            self.thresholds = np.array([0.0] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1.0])
        self.reset_state()

    def reset_state(self):
        k = len(self.thresholds)
        self.true_positives, self.false_positives, self.true_negatives, self.false_negatives = \
            (np.zeros(k) for _ in range(4))

    def update_state(self, y_true, y_pred, sample_weight=None):
        cls = type(self).__name__
        p = _numbers(y_pred, "y_pred", cls).astype(np.float64)
        t = _numbers(y_true, "y_true", cls)
        if t.size != p.size:
            raise ValueError(f"{cls}: y_true of shape {t.shape} does not fit y_pred of shape {p.shape}")
        t = t.reshape(p.shape)
        w = None
        if sample_weight is not None:
            w = _numbers(sample_weight, "sample_weight", cls).astype(np.float64)
            if w.size == p.size:
                w = w.reshape(p.shape)
            elif w.size == 1:
                w = np.broadcast_to(w.reshape(()), p.shape)
            elif p.ndim >= 1 and w.size == p.shape[0]:
                w = np.broadcast_to(w.reshape((p.shape[0],) + (1,) * (p.ndim - 1)), p.shape)
            else:
                raise ValueError(f"{cls}: sample_weight of shape {w.shape} does not fit y_pred of shape {p.shape}")
        if self.class_id is not None:
            if p.ndim < 2:
                raise ValueError(f"{cls}: with class_id, y_pred must be (samples, classes), got shape {p.shape}")
            if self.class_id >= p.shape[-1]:
                raise ValueError(f"{cls}: class_id {self.class_id} is out of range for {p.shape[-1]} classes")
            p, t = p[..., self.class_id], t[..., self.class_id]
            w = None if w is None else w[..., self.class_id]
        if len(self.thresholds) > 1:
            p = np.clip(p, 0.0, 1.0)
        p = p.reshape(-1)
        pos = t.reshape(-1) != 0
        w = np.ones(p.size) if w is None else np.asarray(w).reshape(-1)
        tp, fp, tn, fn = counts_at_thresholds(p, pos, self.thresholds, w)
        self.true_positives += tp
        self.false_positives += fp
        self.true_negatives += tn
        self.false_negatives += fn

    def _rates(self):
        tp, fp, tn, fn = self.true_positives, self.false_positives, self.true_negatives, self.false_negatives
        return {"sensitivity": _divide_no_nan(tp, tp + fn), "specificity": _divide_no_nan(tn, tn + fp),
                "precision": _divide_no_nan(tp, tp + fp)}

    def _best(self, constrained, dependent):
        """The largest ``dependent`` over the thresholds where ``constrained`` >= the bound; 0 if none."""
        feasible = constrained >= self.value
        return float(max(dependent[feasible].max(), 0.0)) if feasible.any() else 0.0

    def get_config(self):
        return {"name": self.name, "class_id": self.class_id, "num_thresholds": self.num_thresholds,
                self.value_name: self.value}


@register_builtin
class SensitivityAtSpecificity(_SensitivitySpecificityBase):
    """The best sensitivity (tp / (tp + fn)) over the thresholds whose specificity
    (tn / (tn + fp)) is at least ``specificity``."""

    value_name = "specificity"

    def __init__(self, specificity, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(specificity, num_thresholds, class_id, name, dtype)

    def result(self):
        r = self._rates()
        return self._best(r["specificity"], r["sensitivity"])


@register_builtin
class SpecificityAtSensitivity(_SensitivitySpecificityBase):
    """The best specificity over the thresholds whose sensitivity is at least ``sensitivity``."""

    value_name = "sensitivity"

    def __init__(self, sensitivity, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(sensitivity, num_thresholds, class_id, name, dtype)

    def result(self):
        r = self._rates()
        return self._best(r["sensitivity"], r["specificity"])


@register_builtin
class PrecisionAtRecall(_SensitivitySpecificityBase):
    """The best precision (tp / (tp + fp)) over the thresholds whose recall is at least ``recall``."""

    value_name = "recall"

    def __init__(self, recall, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(recall, num_thresholds, class_id, name, dtype)

    def result(self):
        r = self._rates()
        return self._best(r["sensitivity"], r["precision"])


@register_builtin
class RecallAtPrecision(_SensitivitySpecificityBase):
    """The best recall over the thresholds whose precision is at least ``precision``."""

    value_name = "precision"

    def __init__(self, precision, num_thresholds=200, class_id=None, name=None, dtype=None):
        super().__init__(precision, num_thresholds, class_id, name, dtype)

    def result(self):
        r = self._rates()
        return self._best(r["precision"], r["sensitivity"])


# --- IoU on binary scores and one-hot labels ------------------------------------------------------------

@register_builtin
class BinaryIoU(IoU):
    """IoU of two classes: a prediction >= ``threshold`` is class 1, below it class 0;
    y_true holds 0/1 labels (cast to int as Keras's); averaged over ``target_class_ids``."""

    def __init__(self, target_class_ids=(0, 1), threshold=0.5, name=None, dtype=None):
        super().__init__(2, list(target_class_ids), name=name or "binary_io_u")
        self.threshold = check_number("threshold", threshold)

    def update_state(self, y_true, y_pred, sample_weight=None):
        t = _numbers(y_true, "y_true", "BinaryIoU").astype(np.float64).astype(np.int64)
        p = (_numbers(y_pred, "y_pred", "BinaryIoU").astype(np.float64) >= self.threshold).astype(np.int64)
        super().update_state(t, p, sample_weight)

    def get_config(self):
        return {"name": self.name, "target_class_ids": self.target_class_ids, "threshold": self.threshold}


@register_builtin
class OneHotIoU(IoU):
    """IoU with one-hot y_true (its argmax is the label) and y_pred scores (argmax), or
    class indices with ``sparse_y_pred=True``; averaged over ``target_class_ids``."""

    def __init__(self, num_classes, target_class_ids, name=None, dtype=None, ignore_class=None,
                 sparse_y_pred=False, axis=-1):
        super().__init__(num_classes, target_class_ids, name=name or "one_hot_io_u", ignore_class=ignore_class,
                         sparse_y_true=False, sparse_y_pred=sparse_y_pred, axis=axis)

    def get_config(self):
        c = super().get_config()
        del c["sparse_y_true"]
        return c


@register_builtin
class OneHotMeanIoU(MeanIoU):
    """MeanIoU over every class with one-hot y_true and y_pred scores (argmax of each)."""

    def __init__(self, num_classes, name=None, dtype=None, ignore_class=None, sparse_y_pred=False, axis=-1):
        super().__init__(num_classes, name=name or "one_hot_mean_io_u", ignore_class=ignore_class,
                         sparse_y_true=False, sparse_y_pred=sparse_y_pred, axis=axis)

    def get_config(self):
        c = super().get_config()
        del c["sparse_y_true"]
        return c


# --- Sum ------------------------------------------------------------------------------------------------

@register_builtin
class Sum(Metric):
    """The (weighted) sum of the values given to ``update_state(values, sample_weight=None)``."""

    def __init__(self, name="sum", dtype=None):
        super().__init__(name)
        self.reset_state()

    def reset_state(self):
        self.total = 0.0

    def update_state(self, values, sample_weight=None, *more):
        if more:
            raise TypeError("Sum.update_state takes (values, sample_weight=None), not (y_true, y_pred, ...): as "
                            "Keras's Sum it adds up values you give it, in your own loop, not a model's outputs")
        v = _numbers(values, "values", "Sum").astype(np.float64)
        if sample_weight is not None:
            w = _numbers(sample_weight, "sample_weight", "Sum").astype(np.float64)
            if w.size == v.size:
                w = w.reshape(v.shape)
            elif v.ndim and w.ndim and w.shape == v.shape[:w.ndim]:
                w = w.reshape(w.shape + (1,) * (v.ndim - w.ndim))     # one weight per sample
            try:
                v = v * w
            except ValueError:
                raise ValueError(f"Sum: sample_weight of shape {w.shape} does not fit values of shape "
                                 f"{v.shape}") from None
        self.total += float(v.sum())

    def result(self):
        return self.total



# --- correlations, per sample -------------------------------------------------------------------------

def _same_shape(y_true, y_pred, what):
    p = _numbers(y_pred, "y_pred", what).astype(np.float64)
    t = _numbers(y_true, "y_true", what).astype(np.float64)
    if t.shape != p.shape:
        if t.size != p.size:
            raise ValueError(f"{what}: y_true of shape {t.shape} does not fit y_pred of shape {p.shape}")
        t = t.reshape(p.shape)
    return t, p


def _check_axis(axis, what):
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    if not axes or not all(is_int(a) for a in axes):
        raise TypeError(f"{what}: axis must be an int or a tuple of ints, got {axis!r}")
    return tuple(int(a) for a in axis) if isinstance(axis, (list, tuple)) else int(axis)


def _axis_for(x, axis, what):
    axes = axis if isinstance(axis, tuple) else (axis,)
    nd = max(x.ndim, 1)
    if any(not -nd <= a < nd for a in axes):
        raise ValueError(f"{what}: axis {axis} is out of range for inputs of shape {x.shape}")
    return axis


def pearson_correlation(y_true, y_pred, axis=-1):
    """Keras's per-sample Pearson coefficient over ``axis``: the mean of the product of
    both standardised inputs (population std, each plus 1e-7)."""
    t, p = _same_shape(y_true, y_pred, "pearson_correlation")
    axis = _axis_for(p, _check_axis(axis, "pearson_correlation"), "pearson_correlation")
    tc = t - t.mean(axis=axis, keepdims=True)
    pc = p - p.mean(axis=axis, keepdims=True)
    tn = tc / (tc.std(axis=axis, keepdims=True) + EPSILON)
    pn = pc / (pc.std(axis=axis, keepdims=True) + EPSILON)
    return (tn * pn).mean(axis=axis)


def concordance_correlation(y_true, y_pred, axis=-1):
    """Keras's per-sample concordance coefficient over ``axis``:
    2 cov(y, p) / (var(y) + var(p) + (mean(y) - mean(p))^2 + 1e-7), population moments."""
    t, p = _same_shape(y_true, y_pred, "concordance_correlation")
    axis = _axis_for(p, _check_axis(axis, "concordance_correlation"), "concordance_correlation")
    mt = t.mean(axis=axis, keepdims=True)
    mp = p.mean(axis=axis, keepdims=True)
    cov = ((t - mt) * (p - mp)).mean(axis=axis, keepdims=True)
    norm = t.var(axis=axis, keepdims=True) + p.var(axis=axis, keepdims=True) + (mt - mp) ** 2
    return (2.0 * cov / (norm + EPSILON)).mean(axis=axis)


class _Correlation(_PerSample):
    fn = None
    default_name = None

    def __init__(self, name=None, dtype=None, axis=-1):
        super().__init__(name or self.default_name)
        self.axis = _check_axis(axis, type(self).__name__)

    def values(self, y_true, y_pred):
        v = np.asarray(type(self).fn(y_true, y_pred, axis=self.axis), dtype=np.float64)
        return v.reshape(1) if v.ndim == 0 else v

    def update_state(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None and np.ndim(type(self).fn(y_true, y_pred, axis=self.axis)) == 0:
            # one value for the batch (a correlation over the samples): it counts with the weights' sum
            v = float(self.values(y_true, y_pred)[0])
            s = float(np.sum(_numbers(sample_weight, "sample_weight", type(self).__name__).astype(np.float64)))
            self.total += v * s
            self.count += s
            return
        super().update_state(y_true, y_pred, sample_weight)

    def get_config(self):
        return {"name": self.name, "axis": list(self.axis) if isinstance(self.axis, tuple) else self.axis}

    @classmethod
    def from_config(cls, config):
        c = dict(config)
        if isinstance(c.get("axis"), list):
            c["axis"] = tuple(c["axis"])
        return cls(**c)


@register_builtin
class PearsonCorrelation(_Correlation):
    """The mean over samples of each sample's Pearson coefficient over ``axis`` (Keras's)."""

    fn = staticmethod(pearson_correlation)
    default_name = "pearson_correlation"


@register_builtin
class ConcordanceCorrelation(_Correlation):
    """The mean over samples of each sample's concordance coefficient over ``axis`` (Keras's)."""

    fn = staticmethod(concordance_correlation)
    default_name = "concordance_correlation"

