"""Keras's losses: mean squared / absolute error, Huber, binary, categorical and
sparse categorical cross-entropy (with ``from_logits``)."""

import numpy as np
from pyggml import _logits, activations, ops
from pyggml._validation import check_number, is_int
from pyggml.losses.loss import EPSILON, Loss, clip
from pyggml.saving.object_registration import register_builtin

__all__ = ["MeanSquaredError", "MeanAbsoluteError", "Huber", "BinaryCrossentropy", "CategoricalCrossentropy",
           "SparseCategoricalCrossentropy"]


def _pair(y_true, y_pred):
    y_true, y_pred = ops.as_tensor(y_true), ops.as_tensor(y_pred)
    if y_true.shape != y_pred.shape:
        if y_true.nelements != y_pred.nelements:
            # Keras's losses broadcast one against the other (a GAN's Hinge()(1.0, scores), MSE
            # against 0.0, a forecast of one step against a window of targets)
            rt, rp = len(y_true.shape), len(y_pred.shape)
            if rt == rp - 1:                # Keras first brings y_true to y_pred's rank
                y_true = ops.expand_dims(y_true, -1)
            elif rt == rp + 1 and y_true.shape[-1] == 1:
                y_true = ops.squeeze(y_true, -1)
            try:
                common = tuple(np.broadcast_shapes(tuple(y_true.shape), tuple(y_pred.shape)))
            except ValueError:
                raise ValueError(f"y_true of shape {y_true.shape} does not fit y_pred of shape {y_pred.shape}") \
                    from None
            return tuple(t if tuple(t.shape) == common else ops.broadcast_to(t, common) for t in (y_true, y_pred))
        y_true = ops.reshape(y_true if y_true.is_contiguous else ops.cont(y_true), y_pred.shape)
    return y_true, y_pred


def classes_last(loss, y_true, y_pred):
    """With a loss's ``axis`` other than the last (channels-first segmentation, axis=1), both
    moved so the classes come last (sparse labels have no class axis: they stay)."""
    if loss.axis == -1:
        return y_true, y_pred
    y_true, y_pred = ops.as_tensor(y_true), ops.as_tensor(y_pred)
    rank = len(y_pred.shape)
    if not -rank <= loss.axis < rank:
        raise ValueError(f"{loss.name}: axis {loss.axis} for predictions of shape {tuple(y_pred.shape)}")
    a = loss.axis % rank
    if a == rank - 1:
        return y_true, y_pred
    y_pred = ops.moveaxis(y_pred, a, -1)
    if not loss.sparse and len(y_true.shape) == rank:
        y_true = ops.moveaxis(y_true, a, -1)
    return y_true, y_pred


def _same_shape(name, y_true, y_pred):
    """Keras's cross-entropies want labels shaped as the predictions, up to a trailing axis of 1
    on either side (a label per class broadcast over several outputs, or the reverse, is a
    mistake, not a loss)."""
    t0, p = tuple(ops.as_tensor(y_true).shape), tuple(ops.as_tensor(y_pred).shape)
    t = t0
    if len(t) == len(p) + 1 and t[-1:] == (1,):
        t = t[:-1]
    elif len(t) + 1 == len(p) and p[-1:] == (1,):
        t = t + (1,)
    if t != p:
        raise ValueError(f"{name}: y_true and y_pred must have the same shape (up to a trailing axis of 1), "
                         f"got {t0} and {p}")


@register_builtin
class MeanSquaredError(Loss):
    name = "mse"
    broadcasts_targets = True

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        return ops.sqr(ops.sub(y_pred, y_true))


@register_builtin
class MeanAbsoluteError(Loss):
    name = "mae"
    broadcasts_targets = True

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        return ops.abs(ops.sub(y_pred, y_true))


@register_builtin
class Huber(Loss):
    name = "huber"
    broadcasts_targets = True

    def __init__(self, delta=1.0, name=None, reduction="sum_over_batch_size", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)
        self.delta = check_number("delta", delta, 0.0, low_open=True)

    def call(self, y_true, y_pred):
        y_true, y_pred = _pair(y_true, y_pred)
        # 0.5 q^2 + d (|e| - q) with q = min(|e|, d) = d - relu(d - |e|)
        a = ops.abs(ops.sub(y_pred, y_true))
        q = ops.scale_bias(ops.relu(ops.scale_bias(a, -1.0, self.delta)), -1.0, self.delta)
        return ops.add(ops.scale(ops.sqr(q), 0.5), ops.scale(ops.sub(a, q), self.delta))

    def get_config(self):
        c = super().get_config()
        c["delta"] = self.delta
        return c


class _CrossEntropy(Loss):
    def __init__(self, from_logits=False, label_smoothing=0.0, name=None, reduction="sum_over_batch_size",
                 axis=-1, **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)
        self.from_logits = bool(from_logits)
        self.label_smoothing = check_number("label_smoothing", label_smoothing, 0.0, 1.0)
        if isinstance(axis, bool) or not is_int(axis):
            raise TypeError(f"{type(self).__name__}: axis must be an int, got {axis!r}")
        self.axis = int(axis)

    def _classes_last(self, y_true, y_pred):
        return classes_last(self, y_true, y_pred)

    def call(self, y_true, y_pred):
        return self.values(y_true, y_pred, self.from_logits)

    def get_config(self):
        c = super().get_config()
        c.update(from_logits=self.from_logits, label_smoothing=self.label_smoothing)
        if self.axis != -1:
            c["axis"] = self.axis
        return c


@register_builtin
class BinaryCrossentropy(_CrossEntropy):
    name = "binary_crossentropy"
    logits_from = "sigmoid"

    def values(self, y_true, y_pred, from_logits=False):
        y_true, y_pred = self._classes_last(y_true, y_pred)
        _same_shape(self.name, y_true, y_pred)
        y_true, y_pred = _pair(y_true, y_pred)
        y_pred, from_logits = _behind(y_pred, from_logits or self.from_logits, "sigmoid")
        if self.label_smoothing:
            y_true = ops.scale_bias(y_true, 1.0 - self.label_smoothing, 0.5 * self.label_smoothing)
        if from_logits:
            # softplus(z) - y z: stable for any logit
            return ops.sub(ops.softplus(y_pred), ops.mul(y_true, y_pred))
        # probabilities clipped to [eps, 1 - eps] as Keras does (finite for any output)
        p = clip(y_pred, EPSILON, 1.0 - EPSILON)
        t = ops.add(ops.mul(y_true, ops.log(p)),
                    ops.mul(ops.scale_bias(y_true, -1.0, 1.0), ops.log(ops.scale_bias(p, -1.0, 1.0))))
        return ops.neg(t)


def _behind(y_pred, from_logits, kind):
    """(logits, True) where y_pred is a sigmoid's or softmax's output whose logits the graph
    knows (pyggml._logits: Keras's TensorFlow backend computes from them too), else as given."""
    if not from_logits:
        z = _logits.of(y_pred, kind)
        if z is not None and tuple(z.shape) == tuple(y_pred.shape):
            return z, True
    return y_pred, from_logits


def _log_probs(y_pred, from_logits):
    if from_logits:
        return activations.log_softmax(y_pred)
    # Keras scales probabilities to sum to one, then clips
    p = ops.div(y_pred, ops.repeat(ops.sum_rows(y_pred), y_pred))
    return ops.log(clip(p, EPSILON, 1.0 - EPSILON))


@register_builtin
class CategoricalCrossentropy(_CrossEntropy):
    """-sum(y log p) per sample.  Its gradient is right for any targets (soft,
    unnormalised, zero or negative rows): sum(y) * softmax(z) - y."""

    name = "categorical_crossentropy"
    elementwise = False
    logits_from = "softmax"

    def values(self, y_true, y_pred, from_logits=False):
        """Over the last axis (the classes): one loss per row, shaped as y_pred's leading axes."""
        # Keras's smoothing spreads over the labels' last axis, also where axis= names another
        k = ops.as_tensor(y_true).shape[-1]
        y_true, y_pred = self._classes_last(y_true, y_pred)
        if not self.sparse:
            _same_shape(self.name, y_true, y_pred)
        y_true, y_pred = _pair(y_true, y_pred)
        y_pred, from_logits = _behind(y_pred, from_logits or self.from_logits, "softmax")
        lead = tuple(y_pred.shape[:-1])
        if len(y_pred.shape) != 2:
            y_pred, y_true = ops.flatten_rows(y_pred), ops.flatten_rows(y_true)
        if self.label_smoothing:
            y_true = ops.scale_bias(y_true, 1.0 - self.label_smoothing, self.label_smoothing / k)
        lp = _log_probs(y_pred, from_logits)
        per_row = ops.neg(ops.sum_rows(ops.mul(y_true, lp)))
        return per_row if len(lead) == 1 else ops.reshape(per_row, lead)

    def mean_loss(self, y_true, y_pred, from_logits=False):
        """From logits: ggml's fused cross-entropy (one op and one backward op, exact
        log-softmax; patch 0026 makes its gradient sum(y) * softmax(z) - y for any targets)."""
        given = (y_true, y_pred, from_logits)
        y_true, y_pred = self._classes_last(y_true, y_pred)
        own = type(self).values is CategoricalCrossentropy.values and type(self).call is _CrossEntropy.call
        y_true, y_pred = _pair(y_true, y_pred)
        y_pred, from_logits = _behind(y_pred, from_logits or self.from_logits, "softmax")
        if not (own and (from_logits or self.from_logits) and len(y_pred.shape) == 2
                and y_pred.dtype == "f32" and y_true.dtype == "f32"):
            # (values() moves the classes last itself: the tensors as given)
            return super().mean_loss(*given)
        if self.label_smoothing:
            k = y_pred.shape[-1]
            y_true = ops.scale_bias(y_true, 1.0 - self.label_smoothing, self.label_smoothing / k)
        return ops.cross_entropy_loss(y_pred if y_pred.is_contiguous else ops.cont(y_pred),
                                      y_true if y_true.is_contiguous else ops.cont(y_true))


@register_builtin
class SparseCategoricalCrossentropy(_CrossEntropy):
    """-log p[label] per sample; y_true holds class indices (int)."""

    name = "sparse_categorical_crossentropy"
    elementwise = False
    logits_from = "softmax"
    sparse = True

    def __init__(self, from_logits=False, ignore_class=None, name=None, reduction="sum_over_batch_size",
                 axis=-1, label_smoothing=0.0, **kwargs):
        super().__init__(from_logits, label_smoothing, name, reduction, axis, **kwargs)
        if self.label_smoothing:
            raise ValueError("SparseCategoricalCrossentropy takes no label_smoothing (Keras's has none): "
                             "use CategoricalCrossentropy on one-hot targets")
        if ignore_class is not None and (isinstance(ignore_class, bool) or not is_int(ignore_class)):
            raise TypeError(f"ignore_class must be an int or None, got {ignore_class!r}")
        # Keras's: the positions labelled ignore_class count for nothing, and the mean is over the others
        self.ignore_class = None if ignore_class is None else int(ignore_class)

    def get_config(self):
        c = super().get_config()
        c.pop("label_smoothing", None)
        c["ignore_class"] = self.ignore_class
        return c

    def values(self, y_true, y_pred, from_logits=False):
        """-log p[label] per row of y_pred's last axis, shaped as its leading axes."""
        y_true, y_pred = self._classes_last(y_true, y_pred)
        y_pred = ops.as_tensor(y_pred)
        y_pred, from_logits = _behind(y_pred, from_logits or self.from_logits, "softmax")
        lead = tuple(y_pred.shape[:-1])
        k = y_pred.shape[-1]
        rows = y_pred.nelements // k
        lp = _log_probs(ops.flatten_rows(y_pred) if len(lead) != 1 else
                        (y_pred if y_pred.is_contiguous else ops.cont(y_pred)), from_logits)
        labels = ops.as_tensor(y_true)
        if labels.dtype != "i32":
            raise TypeError("sparse_categorical_crossentropy: labels must be integers")
        if labels.nelements != rows:
            raise ValueError(f"sparse_categorical_crossentropy: {labels.nelements} labels for {rows} rows of "
                             f"predictions {tuple(y_pred.shape)}")
        ignore = self.ignore_class
        if ignore is not None and labels.op != "NONE":
            raise ValueError("SparseCategoricalCrossentropy(ignore_class=...) needs the labels as data (y), not "
                             "computed in the graph")
        if labels.op != "NONE":
            # labels computed in the graph (Keras's ops.argmax(y_true, -1) in a custom loss, a
            # where(labels == -100, 0, labels)): each row's one-hot compares its label with 0..k-1
            # (no row is read by a computed index: ggml takes those only from argmax), and
            # weighs the row; a label out of range gives a row of zeros
            col = ops.reshape(ops.cast(labels if labels.is_contiguous else ops.cont(labels), "f32"), (rows, 1))
            grid = ops.as_tensor(np.arange(k, dtype=np.float32).reshape(1, k))
            one_hot = ops.step(ops.scale_bias(ops.abs(col - grid), -1.0, 0.5))
            picked = ops.sum_rows(ops.mul(one_hot, lp if lp.is_contiguous else ops.cont(lp)))
        else:
            # pick each row's log-probability: rows of the flattened (rows * k, 1) by index label + row * k
            flat = ops.reshape(lp, (rows * k, 1))
            picked = ops.get_rows(flat, ops.as_tensor(_row_offsets(labels, rows, k, ignore)))
        out = ops.neg(ops.reshape(picked, lead if len(lead) > 1 else (rows, 1)))
        if ignore is not None:
            out = ops.mul(out, ops.reshape(_kept(labels, rows, ignore, self.reduction == "sum_over_batch_size"),
                                           tuple(out.shape)))
        return out


def _row_offsets(labels, n, k, ignore=None):
    """The flat indices label[i] + i * k, computed on the host from the labels' values
    whenever they are set (ggml adds no integers); an ignored label picks its row's first."""
    import numpy as np
    from pyggml import _scope
    b = _scope.require("sparse_categorical_crossentropy")
    offsets = np.arange(n, dtype=np.int64) * k

    def flat(a):
        a = np.asarray(a).reshape(-1).astype(np.int64)
        return (np.where(a == ignore, 0, a) if ignore is not None else a) + offsets
    return b.derived_input(labels, lambda a: flat(a).astype(np.int32), (n,), "int32")


def _kept(labels, n, ignore, mean_of_kept):
    """1 where the label is not ``ignore``, else 0 (scaled by n / kept with ``mean_of_kept``: the
    batch's mean is then the mean over the kept positions, as Keras's masked reduction)."""
    import numpy as np
    from pyggml import _scope
    b = _scope.require("sparse_categorical_crossentropy")

    def weights(a):
        keep = (np.asarray(a).reshape(-1) != ignore).astype(np.float32)
        kept = keep.sum()
        return keep * (n / kept) if mean_of_kept and kept else keep
    return b.derived_input(labels, weights, (n,), "float32")
