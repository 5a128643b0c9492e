"""Keras 3's overlap and metric-learning losses: Dice, Tversky and Circle, as
classes and as functions (``dice``, ``tversky``, ``circle``) that take graph
tensors (inside a model) or numpy arrays (computed at once).

Dice and Tversky reduce over ``axis`` (None: every value of the batch, one
number for the batch; e.g. ``(1, 2, 3)``: one loss per image).  Circle takes
integer labels (batch,) and embeddings (batch, dim) that the model has already
L2-normalised; its positive/negative pair masks come from the labels on the host."""

import numpy as np

from pyggml import _eager, _scope, ops
from pyggml._validation import check_bool, check_number, is_int
from pyggml.core import Tensor
from pyggml.losses.builtin import _pair
from pyggml.losses.loss import Loss
from pyggml.saving.object_registration import register_builtin

__all__ = ["Dice", "Tversky", "Circle", "dice", "tversky", "circle"]

EPSILON = 1e-7              # Keras's backend.epsilon()
_MASKED = 1e30              # stands for -inf in a masked logsumexp (finite: no NaN in the backward pass)


def _check_axis(axis, what):
    if axis is None:
        return None
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    if not axes or not all(is_int(a) for a in axes):
        raise TypeError(f"{what}: axis must be None, an int or a tuple of ints, got {axis!r}")
    return tuple(int(a) for a in axes) if isinstance(axis, (list, tuple)) else int(axis)


def _axis_in_range(axis, shape, what):
    if axis is None:
        return None
    axes = axis if isinstance(axis, tuple) else (axis,)
    r = len(shape)
    norm = [a + r if a < 0 else a for a in axes]
    if any(not 0 <= a < r for a in norm) or len(set(norm)) != len(norm):
        raise ValueError(f"{what}: axis {axis} does not fit inputs of shape {tuple(shape)}")
    return tuple(norm) if isinstance(axis, tuple) else norm[0]


def _floats(x, what):
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected numbers, got dtype {a.dtype}")
    if a.ndim > 4:
        raise ValueError(f"{what}: at most 4 dimensions, got shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float32)


def _sum(x, axis):
    """Keras's sum over ``axis`` (None: everything, a 1-element tensor)."""
    return ops.sum(x, axis=axis) if axis is not None else ops.sum(x if x.is_contiguous else ops.cont(x))


class _OverlapLoss(Loss):
    """A loss per ``axis`` reduction; None gives one number for the whole batch."""

    elementwise = False

    def __init__(self, reduction="sum_over_batch_size", name=None, axis=None, dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.axis = _check_axis(axis, type(self).__name__)

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        axis = _axis_in_range(self.axis, y_pred.shape, type(self).__name__)
        return self.overlap(y_true, y_pred, axis)

    def get_config(self):
        c = super().get_config()
        c["axis"] = list(self.axis) if isinstance(self.axis, tuple) else self.axis
        return c

    @classmethod
    def from_config(cls, config):
        c = dict(config)
        if isinstance(c.get("axis"), list):
            c["axis"] = tuple(c["axis"])
        return cls(**c)


@register_builtin
class Dice(_OverlapLoss):
    """1 - 2 sum(y p) / (sum(y) + sum(p) + 1e-7), the sums over ``axis``."""

    name = "dice"

    def __init__(self, reduction="sum_over_batch_size", name="dice", axis=None, dtype=None):
        super().__init__(reduction=reduction, name=name, axis=axis, dtype=dtype)

    def overlap(self, y_true, y_pred, axis):
        inter = _sum(ops.mul(y_true, y_pred), axis)
        denom = ops.scale_bias(ops.add(_sum(y_true, axis), _sum(y_pred, axis)), 1.0, EPSILON)
        return ops.scale_bias(ops.div(inter, denom), -2.0, 1.0)


@register_builtin
class Tversky(_OverlapLoss):
    """1 - tp / (tp + alpha fp + beta fn + 1e-7) with tp = sum(y p), fp = sum((1 - y) p),
    fn = sum(y (1 - p)) over ``axis``; alpha = beta = 0.5 is the Dice loss."""

    name = "tversky"

    def __init__(self, alpha=0.5, beta=0.5, reduction="sum_over_batch_size", name="tversky", axis=None, dtype=None):
        super().__init__(reduction=reduction, name=name, axis=axis, dtype=dtype)
        self.alpha = check_number("alpha", alpha)
        self.beta = check_number("beta", beta)

    def overlap(self, y_true, y_pred, axis):
        tp = _sum(ops.mul(y_true, y_pred), axis)
        fp = _sum(ops.mul(ops.scale_bias(y_true, -1.0, 1.0), y_pred), axis)
        fn = _sum(ops.mul(y_true, ops.scale_bias(y_pred, -1.0, 1.0)), axis)
        denom = ops.add(ops.add(tp, ops.scale(fp, self.alpha)), ops.scale(fn, self.beta))
        return ops.scale_bias(ops.div(tp, ops.scale_bias(denom, 1.0, EPSILON)), -1.0, 1.0)

    def get_config(self):
        c = super().get_config()
        c.update(alpha=self.alpha, beta=self.beta)
        return c


# --- Circle ------------------------------------------------------------------------------------------

def _pair_masks(labels, ref_labels, remove_diagonal):
    """float32 (n, m) masks: same label (without i == j when asked) and different label."""
    a = np.asarray(labels).reshape(-1, 1)
    b = a.reshape(1, -1) if ref_labels is None else np.asarray(ref_labels).reshape(1, -1)
    same = a == b
    neg = (~same).astype(np.float32)
    if remove_diagonal:
        k = min(same.shape)
        same[np.arange(k), np.arange(k)] = False
    return same.astype(np.float32), neg


def _label_array(x, what):
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"circle: {what} must be integer labels, got dtype {a.dtype}")
    if a.dtype.kind == "f" and not np.all(np.isfinite(a) & (a == np.round(a))):
        raise ValueError(f"circle: {what} must be whole numbers (class labels)")
    return a.reshape(-1).astype(np.int64)


def _circle_values(y_true, y_pred, ref_labels, ref_embeddings, remove_diagonal, gamma, margin):
    """Per-sample circle losses (n,) of graph tensors; y_true a tensor of labels (n,) or
    an array; ref_labels an array or None; ref_embeddings a tensor or None."""
    y_pred = ops.as_tensor(y_pred)
    if len(y_pred.shape) != 2:
        raise ValueError(f"circle: y_pred must be embeddings of shape (batch, dim), got {tuple(y_pred.shape)}")
    n = y_pred.shape[0]
    ref = y_pred if ref_embeddings is None else ops.as_tensor(ref_embeddings)
    if len(ref.shape) != 2 or ref.shape[1] != y_pred.shape[1]:
        raise ValueError(f"circle: ref_embeddings must be (count, {y_pred.shape[1]}), got {tuple(ref.shape)}")
    m = ref.shape[0]
    if ref_labels is not None:
        ref_labels = _label_array(ref_labels, "ref_labels")
        if ref_labels.size != m:
            raise ValueError(f"circle: {ref_labels.size} ref_labels for {m} reference embeddings")
    elif ref_embeddings is not None:
        if m != n:
            raise ValueError("circle: ref_embeddings without ref_labels must have one row per sample")
    if isinstance(y_true, Tensor):
        if y_true.nelements != n:
            raise ValueError(f"circle: {y_true.nelements} labels for {n} embeddings")
        b = _scope.require("circle")

        def masks(a, which):
            return _pair_masks(np.asarray(a).reshape(-1), ref_labels, remove_diagonal)[which]
        pos = b.derived_input(y_true, lambda a: masks(a, 0), (n, m), "float32")
        neg = b.derived_input(y_true, lambda a: masks(a, 1), (n, m), "float32")
    else:
        labels = _label_array(y_true, "y_true")
        if labels.size != n:
            raise ValueError(f"circle: {labels.size} labels for {n} embeddings")
        pm, nm = _pair_masks(labels, ref_labels, remove_diagonal)
        pos, neg = ops.constant(pm), ops.constant(nm)
    y_pred = y_pred if y_pred.is_contiguous else ops.cont(y_pred)
    ref = ref if ref.is_contiguous else ops.cont(ref)
    # cosine distances max(1 - <e_i, r_j>, 0), (n, m)
    dist = ops.relu(ops.scale_bias(ops.mul_mat(ref, y_pred), -1.0, 1.0))
    pos_w = ops.relu(ops.mul(ops.scale_bias(dist, 1.0, margin), pos))             # (margin + d) on positives
    neg_w = ops.relu(ops.mul(ops.scale_bias(dist, -1.0, 1.0 + margin), neg))      # (1 + margin - d) on negatives
    pos_logits = ops.mul(ops.scale(pos_w, -gamma), ops.scale_bias(dist, -1.0, margin))
    neg_logits = ops.mul(ops.scale(neg_w, gamma), ops.scale_bias(dist, -1.0, 1.0 - margin))

    def masked_lse(x, mask):
        # pairs outside the mask stand at -1e30: a row without any gives about -1e30 (Keras's -inf)
        return ops.logsumexp(ops.add(x, ops.scale_bias(mask, _MASKED, -_MASKED)), axis=1)
    return ops.softplus(ops.add(masked_lse(pos_logits, pos), masked_lse(neg_logits, neg)))


@register_builtin
class Circle(Loss):
    """Circle loss (Sun et al., 2020) of integer labels (batch,) and L2-normalised
    embeddings (batch, dim), pairs taken within the batch: softplus(logsumexp over
    positive pairs + logsumexp over negative pairs) per sample.  As Keras, samples
    whose loss is 0 (no positive or no negative pair) do not count in the mean."""

    name = "circle"
    elementwise = False
    sparse = True

    def __init__(self, gamma=80.0, margin=0.4, remove_diagonal=True, reduction="sum_over_batch_size",
                 name="circle", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.gamma = check_number("gamma", gamma)
        self.margin = check_number("margin", margin)
        self.remove_diagonal = check_bool("remove_diagonal", remove_diagonal)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if not isinstance(y_pred, Tensor) and not isinstance(y_true, Tensor):
            e = np.asarray(y_pred)
            if e.ndim != 2:
                raise ValueError(f"circle: y_pred must be embeddings of shape (batch, dim), got {e.shape}")
            if np.size(y_true) != len(e):
                raise ValueError(f"circle: {np.size(y_true)} labels for {len(e)} embeddings")
            _label_array(y_true, "y_true")
        return super().__call__(y_true, y_pred, sample_weight)

    def call(self, y_true, y_pred):
        return _circle_values(y_true, y_pred, None, None, self.remove_diagonal, self.gamma, self.margin)

    def values(self, y_true, y_pred, from_logits=False):
        v = self.call(y_true, y_pred)
        if self.reduction != "sum_over_batch_size":
            return v
        # Keras's mask (loss > 0): the batch's mean is over the samples that have a loss,
        # sum(w v) / count(v > 0); as weights n / count on the values for any reduction of them
        n = v.nelements
        count = ops.sum(ops.step(v))
        at_least_one = ops.scale_bias(ops.relu(ops.scale_bias(count, 1.0, -1.0)), 1.0, 1.0)
        return ops.mul(v, ops.div(ops.constant(np.array([float(n)], dtype=np.float32)), at_least_one))

    def _reduce(self, values, weights):
        if self.reduction != "mean_with_sample_weight":
            return super()._reduce(values, weights)
        # Keras's: the samples without a loss are masked, so they weigh nothing in the
        # denominator either: sum(w v) / sum(w [v > 0]) (0 when none has a loss)
        v = values if values.is_contiguous else ops.cont(values)
        n = v.nelements
        v = ops.reshape(v, (n,))
        w = ops.step(v)
        if weights is not None:
            if weights.nelements != n:
                raise ValueError(f"circle: one sample weight per sample expected ({n}), got {weights.nelements}")
            w = ops.mul(ops.reshape(weights if weights.is_contiguous else ops.cont(weights), (n,)), w)
        return ops.div(ops.sum(ops.mul(v, w)), ops.scale_bias(ops.sum(w), 1.0, 1e-12))

    def get_config(self):
        c = super().get_config()
        c.update(gamma=self.gamma, margin=self.margin, remove_diagonal=self.remove_diagonal)
        return c


# --- the functions ---------------------------------------------------------------------------------------

def _at_once(loss, y_true, y_pred):
    """loss.call on tensors (a graph), or computed at once on arrays (a numpy array)."""
    if isinstance(y_true, Tensor) or isinstance(y_pred, Tensor) or _scope.current() is not None:
        return loss.call(y_true, y_pred)
    what = loss.name
    yt, yp = _floats(y_true, what), _floats(y_pred, what)
    if yt.size != yp.size:
        try:                                  # y_true broadcast to y_pred, as Keras's losses do
            yt = np.broadcast_to(yt, yp.shape)
        except ValueError:
            raise ValueError(f"{what}: y_true of shape {yt.shape} does not fit y_pred of shape {yp.shape}") from None
    yt = yt.reshape(yp.shape)
    axis = _axis_in_range(getattr(loss, "axis", None), yp.shape, type(loss).__name__)
    out = _eager.evaluate(lambda a, b: loss.call(a, b), [yt.reshape(yp.shape or (1,)), yp.reshape(yp.shape or (1,))])
    if axis is None:
        return np.asarray(out, dtype=np.float32).reshape(())
    axes = axis if isinstance(axis, tuple) else (axis,)
    return np.asarray(out, dtype=np.float32).reshape(tuple(d for i, d in enumerate(yp.shape) if i not in axes))


def dice(y_true, y_pred, axis=None):
    """The Dice loss over ``axis`` (None: one number for all values)."""
    return _at_once(Dice(axis=axis), y_true, y_pred)


def tversky(y_true, y_pred, alpha=0.5, beta=0.5, axis=None):
    """The Tversky loss over ``axis`` (None: one number for all values)."""
    return _at_once(Tversky(alpha=alpha, beta=beta, axis=axis), y_true, y_pred)


def circle(y_true, y_pred, ref_labels=None, ref_embeddings=None, remove_diagonal=True, gamma=80, margin=0.4):
    """Per-sample circle losses of labels ``y_true`` (batch,) and normalised embeddings
    ``y_pred`` (batch, dim), against ``ref_labels`` / ``ref_embeddings`` (default: the
    batch itself); ``ref_labels`` is an array."""
    gamma = check_number("gamma", gamma)
    margin = check_number("margin", margin)
    remove_diagonal = check_bool("remove_diagonal", remove_diagonal)
    if isinstance(ref_labels, Tensor):
        raise TypeError("circle: ref_labels must be an array of labels (their pair masks are made on the host)")
    if isinstance(y_pred, Tensor) or _scope.current() is not None:
        return _circle_values(y_true, y_pred, ref_labels, ref_embeddings, remove_diagonal, gamma, margin)
    e = _floats(y_pred, "circle")
    labels = _label_array(y_true, "y_true")
    arrays = [e] + ([] if ref_embeddings is None else [_floats(ref_embeddings, "circle")])
    if e.ndim != 2:
        raise ValueError(f"circle: y_pred must be embeddings of shape (batch, dim), got {e.shape}")

    def graph(p, r=None):
        return _circle_values(labels, p, ref_labels, r, remove_diagonal, gamma, margin)
    return np.asarray(_eager.evaluate(graph, arrays), dtype=np.float32).reshape(len(e))
