"""More of Keras 3's losses: KL divergence, Poisson, log-cosh, cosine similarity,
mean squared logarithmic / absolute percentage error, the hinge family and the
focal cross-entropies.  Each is composed from ops that have a backward pass on
every backend (relu, abs, log, exp, softplus, sum_rows, mul, ...).

Losses that Keras defines as a mean over the last axis are element-wise here (as
mean squared error is): with per-sample weights the reduction is the same number."""

import math

import numpy as np

from pyggml import activations, ops
from pyggml._validation import check_number
from pyggml.losses.builtin import _pair, classes_last
from pyggml.losses.loss import EPSILON, Loss, clip
from pyggml.saving.object_registration import register_builtin

__all__ = ["KLDivergence", "Poisson", "LogCosh", "CosineSimilarity", "MeanSquaredLogarithmicError",
           "MeanAbsolutePercentageError", "Hinge", "SquaredHinge", "CategoricalHinge", "BinaryFocalCrossentropy",
           "CategoricalFocalCrossentropy", "CategoricalGeneralizedCrossEntropy"]

_LOG2 = math.log(2.0)


def _at_least(x, low):
    """max(x, low) as low + relu(x - low) (zero slope below low, as Keras's maximum)."""
    return ops.scale_bias(ops.relu(ops.scale_bias(x, 1.0, -low)), 1.0, low)


def _rows(y_true, y_pred):
    """Both as (rows, classes) and y_pred's leading axes (for the per-sample result)."""
    y_true, y_pred = _pair(y_true, y_pred)
    lead = tuple(y_pred.shape[:-1])
    if len(y_pred.shape) != 2:
        y_pred, y_true = ops.flatten_rows(y_pred), ops.flatten_rows(y_true)
    elif not y_pred.is_contiguous:
        y_pred = ops.cont(y_pred)
    if not y_true.is_contiguous:
        y_true = ops.cont(y_true)
    return y_true, y_pred, lead


def _per_row(v, lead):
    """A (rows, 1) per-sample result shaped as the leading axes (kept 2-d for one leading axis)."""
    return v if len(lead) <= 1 else ops.reshape(v, lead)


def _max_last(x):
    """The maximum over the last axis of a contiguous (rows, k) tensor, as (rows, 1):
    halves that overlap by one column when k is odd, max(a, b) = b + relu(a - b)."""
    rows, k = x.shape
    es = 4
    while k > 1:
        h = (k + 1) // 2
        stride = x.shape[1] * es
        a = ops.cont(ops.view(x, (rows, h), strides=(stride, es), offset=0))
        b = ops.cont(ops.view(x, (rows, h), strides=(stride, es), offset=(k - h) * es))
        x = ops.add(b, ops.relu(ops.sub(a, b)))
        k = h
    return x


def _power(u, gamma):
    """u ** gamma for u >= 0: products for a small whole gamma, else exp(gamma log u)
    with u floored at 1e-30 (no NaN slope at 0)."""
    if gamma == int(gamma) and 0 <= gamma <= 8:
        g = int(gamma)
        if g == 0:
            return ops.scale_bias(u, 0.0, 1.0)
        out = u
        for _ in range(g - 1):
            out = ops.mul(out, u)
        return out
    return ops.exp(ops.scale(ops.log(_at_least(u, 1e-30)), float(gamma)))


def _hinge_labels(y_true):
    """Keras's conversion: labels that are all 0 or 1 become -1 / 1 (2y - 1); any
    other labels are used as they are.  Decided in the graph, per batch:
    b = 1 - step(sum |y (y - 1)|), y' = y + b (y - 1)."""
    off = ops.sum(ops.abs(ops.mul(y_true, ops.scale_bias(y_true, 1.0, -1.0))))
    binary = ops.scale_bias(ops.step(off), -1.0, 1.0)
    return ops.add(y_true, ops.mul(ops.scale_bias(y_true, 1.0, -1.0), binary))


class _Simple(Loss):
    """A loss with no arguments beyond Keras's name and reduction."""

    broadcasts_targets = True

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)


@register_builtin
class KLDivergence(_Simple):
    """sum(y log(y / p)) over the last axis, y and p clipped to [1e-7, 1]."""

    name = "kl_divergence"
    elementwise = False

    def call(self, y_true, y_pred):
        y_true, y_pred, lead = _rows(y_true, y_pred)
        t = clip(y_true, EPSILON, 1.0)
        p = clip(y_pred, EPSILON, 1.0)
        return _per_row(ops.sum_rows(ops.mul(t, ops.sub(ops.log(t), ops.log(p)))), lead)


@register_builtin
class Poisson(_Simple):
    """p - y log(p + 1e-7)."""

    name = "poisson"

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        return ops.sub(y_pred, ops.mul(y_true, ops.log(ops.scale_bias(y_pred, 1.0, EPSILON))))


@register_builtin
class LogCosh(_Simple):
    """log(cosh(p - y)) = x + softplus(-2x) - log 2 (finite for any x)."""

    name = "log_cosh"

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        x = ops.sub(y_pred, y_true)
        return ops.scale_bias(ops.add(x, ops.softplus(ops.scale(x, -2.0))), 1.0, -_LOG2)


@register_builtin
class CosineSimilarity(Loss):
    """-sum(l2_normalize(y) * l2_normalize(p)) over the last axis; a vector's norm is
    floored at 1e-7 (a zero vector gives 0)."""

    name = "cosine_similarity"
    elementwise = False

    def __init__(self, axis=-1, reduction="sum_over_batch_size", name=None, dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"CosineSimilarity: axis must be an int, got {axis!r}")
        self.axis = axis

    def call(self, y_true, y_pred):
        if self.axis != -1:
            y_true, y_pred = _pair(y_true, y_pred)
            rank = len(y_pred.shape)
            if not -rank <= self.axis < rank:
                raise ValueError(f"CosineSimilarity: axis {self.axis} for values of shape {tuple(y_pred.shape)}")
            if self.axis % rank != rank - 1:          # the axis moved last, where the rows are
                y_true, y_pred = ops.moveaxis(y_true, self.axis, -1), ops.moveaxis(y_pred, self.axis, -1)
        y_true, y_pred, lead = _rows(y_true, y_pred)

        def unit(x):
            # x / max(||x||, eps) = x / sqrt(max(sum x^2, eps^2)): no infinite slope at 0
            norm = ops.sqrt(_at_least(ops.sum_rows(ops.sqr(x)), EPSILON * EPSILON))
            return ops.div(x, ops.repeat(norm, x))
        return _per_row(ops.neg(ops.sum_rows(ops.mul(unit(y_true), unit(y_pred)))), lead)

    def get_config(self):
        c = super().get_config()
        c["axis"] = self.axis
        return c


@register_builtin
class MeanSquaredLogarithmicError(_Simple):
    """(log(max(p, 1e-7) + 1) - log(max(y, 1e-7) + 1))^2."""

    name = "mean_squared_logarithmic_error"

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)

        def lg(x):
            return ops.log(ops.scale_bias(_at_least(x, EPSILON), 1.0, 1.0))
        return ops.sqr(ops.sub(lg(y_pred), lg(y_true)))


@register_builtin
class MeanAbsolutePercentageError(_Simple):
    """100 |y - p| / max(|y|, 1e-7)."""

    name = "mean_absolute_percentage_error"

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        denom = _at_least(ops.abs(y_true), EPSILON)
        return ops.scale(ops.abs(ops.div(ops.sub(y_true, y_pred), denom)), 100.0)


@register_builtin
class Hinge(_Simple):
    """max(1 - y p, 0); 0/1 labels are taken as -1/1."""

    name = "hinge"

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        return ops.relu(ops.scale_bias(ops.mul(_hinge_labels(y_true), y_pred), -1.0, 1.0))


@register_builtin
class SquaredHinge(_Simple):
    """max(1 - y p, 0)^2; 0/1 labels are taken as -1/1."""

    name = "squared_hinge"

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        return ops.sqr(ops.relu(ops.scale_bias(ops.mul(_hinge_labels(y_true), y_pred), -1.0, 1.0)))


@register_builtin
class CategoricalHinge(_Simple):
    """max(max((1 - y) p) - sum(y p) + 1, 0) per sample."""

    name = "categorical_hinge"
    elementwise = False

    def call(self, y_true, y_pred):
        y_true, y_pred, lead = _rows(y_true, y_pred)
        pos = ops.sum_rows(ops.mul(y_true, y_pred))
        neg = _max_last(ops.mul(ops.scale_bias(y_true, -1.0, 1.0), y_pred))
        return _per_row(ops.relu(ops.scale_bias(ops.sub(neg, pos), 1.0, 1.0)), lead)


@register_builtin
class BinaryFocalCrossentropy(Loss):
    """(1 - p_t)^gamma * binary cross-entropy, p_t = y p + (1 - y)(1 - p); with
    ``apply_class_balancing`` also times y alpha + (1 - y)(1 - alpha)."""

    name = "binary_focal_crossentropy"

    def __init__(self, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0,
                 axis=-1, reduction="sum_over_batch_size", name=None, dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise TypeError(f"{type(self).__name__}: axis must be an int, got {axis!r}")
        self.apply_class_balancing = bool(apply_class_balancing)
        self.alpha = check_number("alpha", alpha)
        self.gamma = check_number("gamma", gamma, 0.0)
        self.from_logits = bool(from_logits)
        self.label_smoothing = check_number("label_smoothing", label_smoothing, 0.0, 1.0)
        self.axis = int(axis)

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(*classes_last(self, y_true, y_pred))     # (axis=: Keras's mean over it)
        if self.label_smoothing:
            y_true = ops.scale_bias(y_true, 1.0 - self.label_smoothing, 0.5 * self.label_smoothing)
        p = activations.sigmoid(y_pred) if self.from_logits else y_pred
        # the cross-entropy of probabilities clipped to [eps, 1 - eps] (Keras's)
        pc = clip(p, EPSILON, 1.0 - EPSILON)
        one_minus_y = ops.scale_bias(y_true, -1.0, 1.0)
        bce = ops.neg(ops.add(ops.mul(y_true, ops.log(pc)),
                              ops.mul(one_minus_y, ops.log(ops.scale_bias(pc, -1.0, 1.0)))))
        # 1 - p_t = y (1 - p) + (1 - y) p
        u = ops.add(ops.mul(y_true, ops.scale_bias(p, -1.0, 1.0)), ops.mul(one_minus_y, p))
        out = ops.mul(_power(u, self.gamma), bce)
        if self.apply_class_balancing:
            out = ops.mul(ops.scale_bias(y_true, 2.0 * self.alpha - 1.0, 1.0 - self.alpha), out)
        return out

    def get_config(self):
        c = super().get_config()
        c.update(apply_class_balancing=self.apply_class_balancing, alpha=self.alpha, gamma=self.gamma,
                 from_logits=self.from_logits, label_smoothing=self.label_smoothing, axis=self.axis)
        return c


@register_builtin
class CategoricalFocalCrossentropy(Loss):
    """sum(alpha (1 - p)^gamma * -y log p) over the classes, p scaled to sum to one
    and clipped to [eps, 1 - eps] (softmax of y_pred with ``from_logits``)."""

    name = "categorical_focal_crossentropy"
    elementwise = False

    def __init__(self, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction="sum_over_batch_size", name=None, dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise TypeError(f"{type(self).__name__}: axis must be an int, got {axis!r}")
        self.alpha = check_number("alpha", alpha)
        self.gamma = check_number("gamma", gamma, 0.0)
        self.from_logits = bool(from_logits)
        self.label_smoothing = check_number("label_smoothing", label_smoothing, 0.0, 1.0)
        self.axis = int(axis)

    def call(self, y_true, y_pred):
        # Keras's smoothing spreads over the labels' last axis, also where axis= names another
        k = ops.as_tensor(y_true).shape[-1]
        y_true, y_pred, lead = _rows(*classes_last(self, y_true, y_pred))     # (axis=: the classes' axis)
        if self.label_smoothing:
            y_true = ops.scale_bias(y_true, 1.0 - self.label_smoothing, self.label_smoothing / k)
        p = activations.softmax(y_pred) if self.from_logits else y_pred
        p = clip(ops.div(p, ops.repeat(ops.sum_rows(p), p)), EPSILON, 1.0 - EPSILON)
        cce = ops.neg(ops.mul(y_true, ops.log(p)))
        focal = ops.mul(_power(ops.scale_bias(p, -1.0, 1.0), self.gamma), cce)
        return _per_row(ops.scale(ops.sum_rows(focal), self.alpha), lead)

    def get_config(self):
        c = super().get_config()
        c.update(alpha=self.alpha, gamma=self.gamma, from_logits=self.from_logits,
                 label_smoothing=self.label_smoothing, axis=self.axis)
        return c


@register_builtin
class CategoricalGeneralizedCrossEntropy(Loss):
    """Keras's generalized cross-entropy (Zhang and Sabuncu, 2018), robust to noisy labels:
    ``(1 - p^q) / q`` of each sample's probability ``p`` of its class; ``y_true`` holds class
    indices, ``y_pred`` probabilities.  q near 0 is cross-entropy, q near 1 the mean absolute
    error."""

    name = "categorical_generalized_cross_entropy"
    elementwise = False
    sparse = True

    def __init__(self, q=0.5, reduction="sum_over_batch_size", name=None, dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        q = check_number("q", q)
        if not 0.0 < q < 1.0:
            raise ValueError(f"CategoricalGeneralizedCrossEntropy: q must be in (0, 1), got {q}")
        self.q = q

    def call(self, y_true, y_pred):
        y_pred = ops.as_tensor(y_pred)
        lead = tuple(y_pred.shape[:-1])
        k = y_pred.shape[-1]
        rows = y_pred.nelements // k
        p = ops.flatten_rows(y_pred) if len(y_pred.shape) != 2 else \
            (y_pred if y_pred.is_contiguous else ops.cont(y_pred))
        labels = ops.as_tensor(y_true)
        if labels.nelements != rows:
            raise ValueError(f"categorical_generalized_cross_entropy: {labels.nelements} labels for {rows} rows of "
                             f"probabilities {tuple(y_pred.shape)}")
        col = ops.reshape(ops.cast(labels if labels.is_contiguous else ops.cont(labels), "f32"), (rows, 1))
        grid = ops.as_tensor(np.arange(k, dtype=np.float32).reshape(1, k))
        one_hot = ops.step(ops.scale_bias(ops.abs(col - grid), -1.0, 0.5))   # 1 at the label's column
        picked = ops.sum_rows(ops.mul(one_hot, p))                          # (rows, 1): p of the class
        return _per_row(ops.scale_bias(_power(picked, self.q), -1.0 / self.q, 1.0 / self.q), lead)

    def get_config(self):
        c = super().get_config()
        c.update(q=self.q)
        return c
