"""Keras's CTC loss (``CTC`` and ``ctc``): the negative log-likelihood of each
sample's label sequence under the model's per-step class logits, summed over
every alignment (Graves et al., 2006), by the forward recursion in the graph.

``y_true``: (batch, max_label_length) integer labels, 0 being the blank (and
the padding: a sample's label is its first ``count(labels != 0)`` entries, as
Keras); ``y_pred``: (batch, steps, classes) logits (a log-softmax is taken
here).  Every sample uses all ``steps``.  In ``fit`` the labels are padded
with blanks to ``steps`` columns (a padding Keras ignores too).

The recursion runs in log space over the extended label (blanks between and
around the labels, ``2 L + 1`` states): per step each state's score is the
logsumexp of its own, its predecessor's and (where the labels allow the skip,
a mask made on the host) the one before; "log 0" is -1e30, finite so the
backward pass has no NaN."""

import numpy as np

from pyggml import _eager, _scope, ops
from pyggml.core import Tensor
from pyggml.losses.loss import Loss
from pyggml.saving.object_registration import register_builtin

__all__ = ["CTC", "ctc"]

_LOG0 = -1e30


def _label_rows(a):
    """int64 (batch, width) labels: each row's first count(!= 0) entries (Keras's lengths)."""
    a = np.asarray(a).astype(np.int64)
    return a.reshape(a.shape[0], -1)


def _tables(labels, width, classes):
    """From (batch, width) labels: one-hot rows of the extended labels (batch, S, classes),
    the log-masks of the skip transition s-2 -> s (batch, S), of the start and of the end states."""
    labels = _label_rows(labels)
    batch = labels.shape[0]
    s_max = 2 * width + 1
    idx = np.arange(s_max)
    onehot = np.zeros((batch, s_max, classes), np.float32)
    skip = np.full((batch, s_max), _LOG0, np.float32)
    start = np.full((batch, s_max), _LOG0, np.float32)
    end = np.full((batch, s_max), _LOG0, np.float32)
    for b in range(batch):
        n = int(np.count_nonzero(labels[b]))
        ext = np.zeros(s_max, np.int64)
        ext[1:2 * n:2] = labels[b, :n]
        onehot[b, idx, ext] = 1.0
        # a label may follow the previous label directly when the two differ
        ok = (idx >= 2) & (ext != 0) & (ext != np.roll(ext, 2))
        skip[b, ok] = 0.0
        start[b, 0] = 0.0
        end[b, 2 * n] = 0.0
        if n:
            start[b, 1] = 0.0
            end[b, 2 * n - 1] = 0.0
    return onehot, skip, start, end


def _shift(s_max, k):
    """The (S, S) matrix a with mul_mat(a, x) = x shifted right by k along its last axis."""
    a = np.zeros((s_max, s_max), np.float32)
    a[np.arange(k, s_max), np.arange(s_max - k)] = 1.0
    return a


def _check_labels(a, classes, steps, what="ctc"):
    a = np.asarray(a)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: y_true must be integer labels, got dtype {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{what}: y_true must be labels of shape (batch, max_label_length), got {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a != np.floor(a)) or np.any(a < 0) or np.any(a >= classes):
        raise ValueError(f"{what}: labels must be integers in [0, {classes}) (0 is the blank)")
    longest = int(np.count_nonzero(a, axis=1).max()) if a.size else 0
    if longest > steps:
        raise ValueError(f"{what}: a label of {longest} classes does not fit {steps} steps of y_pred")
    return a.astype(np.int64)


def _fit_width(a, steps):
    """Labels padded with blanks (or their padding cut) to ``steps`` columns."""
    if a.shape[1] < steps:
        return np.pad(a, ((0, 0), (0, steps - a.shape[1])))
    if a.shape[1] > steps:
        if np.any(a[:, steps:]):
            raise ValueError(f"ctc: labels wider than the {steps} steps of y_pred must end in padding (0)")
        return a[:, :steps]
    return a


def ctc_values(y_true, y_pred):
    """Per-sample CTC losses (batch,) of logits ``y_pred`` (batch, steps, classes), graph
    tensors; ``y_true`` an int tensor (batch, width) or an array of labels."""
    y_pred = ops.as_tensor(y_pred)
    if len(y_pred.shape) != 3:
        raise ValueError(f"ctc: y_pred must be logits of shape (batch, steps, classes), got {tuple(y_pred.shape)}")
    batch, steps, classes = y_pred.shape
    if classes < 2:
        raise ValueError("ctc: y_pred needs at least 2 classes (0 is the blank)")
    if isinstance(y_true, Tensor):
        if len(y_true.shape) != 2 or y_true.shape[0] != batch:
            raise ValueError(f"ctc: y_true must be labels of shape ({batch}, max_label_length), "
                             f"got {tuple(y_true.shape)}")
        width = y_true.shape[1]
        b = _scope.require("ctc")
        s_max = 2 * width + 1

        made = {}

        def table(i):
            def fn(a):
                # the four tables of one batch's labels, made once
                key = np.asarray(a).tobytes()
                if made.get("key") != key:
                    made["key"] = key
                    made["tables"] = _tables(_check_labels(np.asarray(a).reshape(batch, width), classes, steps),
                                             width, classes)
                return made["tables"][i]
            return fn
        onehot = b.derived_input(y_true, table(0), (batch, s_max, classes), "float32")
        skip, start, end = (b.derived_input(y_true, table(i), (batch, s_max), "float32") for i in (1, 2, 3))
    else:
        labels = _check_labels(y_true, classes, steps)
        if labels.shape[0] != batch:
            raise ValueError(f"ctc: {labels.shape[0]} label rows for {batch} samples")
        width = labels.shape[1]
        s_max = 2 * width + 1
        onehot, skip, start, end = (ops.constant(t) for t in _tables(labels, width, classes))
    logp = ops.log_softmax(y_pred if y_pred.is_contiguous else ops.cont(y_pred), axis=-1)
    # emission scores of each state at each step: logp_b (steps, classes) @ onehot_b^T
    emit = ops.mul_mat(onehot, logp)                                   # (batch, steps, S)
    by_one, by_two = ops.constant(_shift(s_max, 1)), ops.constant(_shift(s_max, 2))
    first = np.zeros((1, s_max), np.float32)
    first[0, 0] = _LOG0
    no_prev = ops.constant(first)                                      # state 0 has no predecessor
    alpha = ops.add(emit[:, 0, :], start)
    for t in range(1, steps):
        # stay, come from s - 1, or skip from s - 2: a logsumexp of the three
        c0 = alpha
        c1 = ops.add(ops.mul_mat(by_one, alpha), no_prev)
        c2 = ops.add(ops.mul_mat(by_two, alpha), skip)
        # (an exact max inside: a max as b + relu(a - b) rounds -87 against -1e30 to 0, and exp underflows)
        alpha = ops.add(ops.logsumexp(ops.stack([c0, c1, c2], axis=-1), axis=-1), emit[:, t, :])
    return ops.neg(ops.logsumexp(ops.add(alpha, end), axis=-1))


@register_builtin
class CTC(Loss):
    """Keras's CTC loss: mean over the batch of each sample's -log p(label | logits)."""

    name = "ctc"
    elementwise = False
    sparse = True
    pads_labels = True          # fit pads the labels with blanks to the output's steps

    def __init__(self, reduction="sum_over_batch_size", name="ctc", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        return ctc_values(y_true, y_pred)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if isinstance(y_true, Tensor) or isinstance(y_pred, Tensor):
            return super().__call__(y_true, y_pred, sample_weight)
        p = np.asarray(y_pred)
        if p.ndim != 3:
            raise ValueError(f"ctc: y_pred must be logits of shape (batch, steps, classes), got {p.shape}")
        labels = _check_labels(y_true, p.shape[2], p.shape[1])
        if labels.shape[0] != p.shape[0]:
            raise ValueError(f"ctc: {labels.shape[0]} label rows for {p.shape[0]} samples")
        # the base call takes labels shaped as y_pred's leading axes, as fit gives them
        return super().__call__(_fit_width(labels, p.shape[1]), y_pred, sample_weight)


def ctc(y_true, y_pred):
    """Per-sample CTC losses of labels (batch, max_label_length) and logits (batch, steps,
    classes): graph tensors, or arrays (computed at once)."""
    if isinstance(y_true, Tensor) or isinstance(y_pred, Tensor) or _scope.current() is not None:
        return ctc_values(y_true, y_pred)
    p = np.asarray(y_pred)
    if p.dtype == object or p.dtype.kind not in "biuf":
        raise TypeError(f"ctc: y_pred must be numbers, got dtype {p.dtype}")
    if p.ndim != 3:
        raise ValueError(f"ctc: y_pred must be logits of shape (batch, steps, classes), got {p.shape}")
    labels = _check_labels(y_true, p.shape[2], p.shape[1])
    out = _eager.evaluate(lambda q: ctc_values(labels, q), [np.ascontiguousarray(p, dtype=np.float32)])
    return np.asarray(out, dtype=np.float32).reshape(p.shape[0])
