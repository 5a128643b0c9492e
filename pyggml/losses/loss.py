"""The loss contract.

``call(y_true, y_pred)`` returns the loss of each value (an element-wise loss:
mse, mae, huber, binary cross-entropy) or of each sample (cross-entropy), as
a tensor whose first axis is the batch.  The model reduces it as Keras does:
the mean over everything, or with weights ``sum(w * loss) / number of values``.
A loss object called on numpy arrays returns that number (``Huber()(y, p)``).

Write your own by subclassing ``Loss`` and defining ``call`` with
``pyggml.ops`` (register it with ``@pyggml.saving.register_serializable()`` to
load saved models), or pass a plain function ``fn(y_true, y_pred)`` to
``compile``.
"""

import numpy as np

from pyggml import _eager, _scope, ops
from pyggml._tensor_arrays import as_ops_result
from pyggml.core import Tensor
from pyggml.variables import Variable
from pyggml.saving.object_registration import register_builtin

__all__ = ["Loss", "LossFunctionWrapper", "reduce_loss"]

EPSILON = 1e-7          # Keras's clipping epsilon for probabilities


def clip(p, low, high):
    """p limited to [low, high], exactly at both ends as Keras's clip (a zero probability's
    -log is -log(1e-7) = 16.118), with the gradient 1 inside and 0 outside.  On the CPU it is
    the clamp op (its backward a fused CPU op); in the composed form, the low end is
    relu(p - low) + low and the high end a pick by a 0/1 step mask, exact where a
    difference with ``high`` near 1 would round (1 - 1e-7 is 1 - 1.19e-7 in float32)."""
    if _scope.fused():
        return ops.clamp(p if p.is_contiguous else ops.cont(p), low, high)
    q = ops.scale_bias(ops.relu(ops.scale_bias(p, 1.0, -low)), 1.0, low)
    above = ops.step(ops.scale_bias(q, 1.0, -high))
    return ops.add(ops.mul(q, ops.scale_bias(above, -1.0, 1.0)), ops.scale(above, high))


def reduce_loss(values, weights=None, mask=None):
    """Keras's reduction of per-value losses (batch, ...): the mean; with weights
    (batch, 1) or of the values' shape, sum(w * values) / number of values.  With a
    padding mask (batch, steps), padded steps count for nothing: the sum over real
    steps divided by their number (times the values per step)."""
    v = values if values.is_contiguous else ops.cont(values)
    n = v.nelements
    batch = v.shape[0]
    if n == 1 and (mask is not None or (weights is not None and weights.nelements > 1)):
        # one loss for the whole batch (a Dice loss over every axis): Keras weights it by the
        # weights' mean; a padding mask leaves it as it is
        if weights is None:
            return v
        w = weights if weights.is_contiguous else ops.cont(weights)
        return ops.mul(v, ops.scale(ops.sum(w), 1.0 / w.nelements))
    if mask is not None and n == batch and mask.shape[1] > 1:
        # one loss per sample (CTC, a Dice over the steps): it took the sequence as a whole
        mask = None
    if mask is not None:
        steps = mask.shape[1]
        per_step = n // (batch * steps)
        v3 = ops.reshape(v, (batch, steps, per_step))
        m3 = ops.reshape(ops.as_tensor(mask), (batch, steps, 1))
        v3 = ops.mul(v3, m3) if per_step == 1 else ops.mul(v3, ops.repeat(m3, v3))
        if weights is not None:
            w = ops.reshape(weights if weights.is_contiguous else ops.cont(weights), (batch, 1, 1)) \
                if weights.nelements == batch else None
            if w is None:
                raise ValueError("with a padding mask, sample weights are per sample (batch,)")
            v3 = ops.mul(v3, ops.repeat(w, v3))
        real = ops.scale(ops.sum(m3), float(per_step))
        return ops.div(ops.sum(v3), real)
    if weights is None:
        return ops.scale(ops.sum(v), 1.0 / n)
    v2 = ops.reshape(v, (batch, n // batch))
    w = weights
    if tuple(w.shape) != tuple(v2.shape):
        if w.shape[-1] != 1 and w.nelements != batch:
            raise ValueError(f"weights of shape {w.shape} do not fit losses of shape {v2.shape}")
        w = ops.repeat(ops.reshape(w, (batch, 1)), v2)
    return ops.scale(ops.sum(ops.mul(v2, w)), 1.0 / n)


def _nested(v):
    """A nest of several tensors or arrays (a list, tuple or dict of them), not one array
    written as a list of numbers."""
    if isinstance(v, dict):
        return bool(v)
    if not isinstance(v, (list, tuple)) or not v:
        return False
    leaves = []
    _flatten(v, leaves)
    if any(isinstance(x, (Tensor, Variable)) or (hasattr(x, "shape") and len(x.shape) and
                                                  not isinstance(x, np.generic)) for x in leaves):
        shapes = {tuple(np.shape(x)) if not isinstance(x, (Tensor, Variable)) else tuple(x.shape) for x in leaves}
        return len(shapes) > 1 or any(isinstance(x, (Tensor, Variable)) for x in leaves)
    return False


def _flatten(v, out):
    if isinstance(v, dict):
        for k in v:
            _flatten(v[k], out)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _flatten(x, out)
    else:
        out.append(v)


def _rebuild(v, it):
    if isinstance(v, dict):
        return {k: _rebuild(v[k], it) for k in v}
    if isinstance(v, (list, tuple)):
        return type(v)(_rebuild(x, it) for x in v) if not hasattr(v, "_fields") else \
            type(v)(*(_rebuild(x, it) for x in v))
    return next(it)


def _label_shape(loss, shape):
    """Class indices' shape for predictions of ``shape``: it without the class axis (the last,
    or the loss's ``axis``)."""
    axis = getattr(loss, "axis", -1)
    axis = axis % len(shape) if shape and isinstance(axis, int) and -len(shape) <= axis < len(shape) else -1
    return tuple(d for i, d in enumerate(shape) if i != (axis % len(shape) if shape else 0))


def _keras_weight_rank(w, y_pred):
    """A sample weight as the losses take it, Keras's broadcasts done: a number weighs every
    sample alike, and a weight of the predictions' rank whose last axis is 1 (``(n, steps,
    1)`` beside ``(n, steps, 1)`` predictions) loses that axis, as the per-step losses do."""
    n = y_pred.shape[0] if y_pred.ndim else 1
    if w.ndim == 0 or w.size == 1 and n > 1 and w.ndim <= 1:
        return np.full((n,), float(w.reshape(-1)[0]), np.float32)
    if w.ndim == y_pred.ndim and w.ndim > 1 and w.shape[-1] == 1 and w.shape[:-1] == y_pred.shape[:-1]:
        return w.reshape(w.shape[:-1])
    return w


def _mask_weight(mask, sample_weight, reduction):
    """Keras's apply_mask: a padding mask as sample weights (0 where padded; where the loss is
    a mean, total / real where real), times the sample weights given (ranks matched as
    Keras's squeeze_or_expand_to_same_rank)."""
    if mask.dtype == object or mask.dtype.kind not in "biuf":
        raise TypeError(f"a padding mask (_keras_mask) holds booleans or numbers, got dtype {mask.dtype}")
    m = mask.astype(bool)
    if reduction in ("mean", "sum_over_batch_size"):
        real = int(m.sum())
        fm = np.where(m, m.size / real if real else 0.0, 0.0).astype(np.float32)
    else:
        fm = m.astype(np.float32)
    if sample_weight is None:
        return fm
    w = np.asarray(sample_weight, dtype=np.float32)
    if fm.ndim == w.ndim + 1 and fm.shape[-1] == 1:
        fm = fm[..., 0] if w.ndim != 1 else fm
        w = w[:, None] if w.ndim == 1 else w
    elif w.ndim == fm.ndim + 1 and w.shape[-1] == 1:
        w = w[..., 0] if fm.ndim != 1 else w
        fm = fm[:, None] if fm.ndim == 1 else fm
    elif w.ndim < fm.ndim:
        w = w.reshape(w.shape + (1,) * (fm.ndim - w.ndim))       # one weight per sample: over its steps
    try:
        return fm * w
    except ValueError:
        raise ValueError(f"sample_weight of shape {np.shape(sample_weight)} does not fit the padding mask of "
                         f"shape {mask.shape}") from None


def _constants(v):
    """A nest's arrays as graph constants (its tensors as they are)."""
    if isinstance(v, dict):
        return {k: _constants(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_constants(x) for x in v)
    if isinstance(v, (Tensor, Variable)) or v is None:
        return v
    return ops.constant(np.asarray(v, dtype=np.float32))


class Loss:
    """Base class of the losses (Keras's names and definitions)."""

    name = "loss"
    elementwise = True          # call gives a loss per value (True) or per sample
    logits_from = None          # the output activation whose logits this loss can train on
    sparse = False              # y_true holds class indices
    broadcasts_targets = False  # fit broadcasts y to the output, as Keras (mse of (n,) against (n, k))

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        if reduction not in ("sum_over_batch_size", "auto", None, "none", "sum", "mean", "mean_with_sample_weight"):
            raise ValueError(f"Invalid value for argument `reduction`: {reduction!r}; expected one of "
                             f"'sum_over_batch_size', 'mean', 'mean_with_sample_weight', 'sum', 'none', 'auto' "
                             f"or None")
        # Keras 3: None is no reduction (as "none"); "auto" the default
        self.reduction = "sum_over_batch_size" if reduction in ("auto", "mean") else \
            ("none" if reduction is None else reduction)
        if name is not None:
            self.name = name

    def call(self, y_true, y_pred):
        raise NotImplementedError(f"{type(self).__name__} must define call(self, y_true, y_pred)")

    @property
    def takes_targets_as_given(self):
        """A loss the user wrote (a Loss subclass or a function of their own): fit gives it
        y_true as the data has it (Keras's), e.g. class indices (n, steps) for an output
        (n, steps, classes), instead of requiring the output's shape."""
        return not type(self).__module__.startswith("pyggml.")

    def values(self, y_true, y_pred, from_logits=False):
        """Per-value (or per-sample) losses; ``from_logits``: y_pred is before the
        output activation named by ``logits_from``."""
        if type(self).call is Loss.call and type(self).__call__ is not Loss.__call__:
            # a subclass that overrides __call__ itself (keras-io's supervised contrastive loss)
            return self(y_true, y_pred)
        return self.call(y_true, y_pred)

    def mean_loss(self, y_true, y_pred, from_logits=False):
        """The batch's mean loss as one scalar (Keras's default reduction without weights or
        masks): what training minimises. A loss with a fused form of it overrides this."""
        return reduce_loss(self.values(y_true, y_pred, from_logits))

    def __call__(self, y_true, y_pred, sample_weight=None):
        if _nested(y_true) or _nested(y_pred):
            return self._call_nested(y_true, y_pred, sample_weight)
        if isinstance(y_pred, Tensor) or isinstance(y_true, Tensor):
            # in a graph (a layer's call, a GradientTape): arrays among the arguments are constants
            y_pred = ops.as_tensor(np.asarray(y_pred, dtype=np.float32) if not isinstance(y_pred, Tensor) else y_pred)
            if not isinstance(y_true, Tensor):
                yt = np.asarray(y_true)
                if self.sparse:
                    y_true = ops.constant(yt.astype(np.int32).reshape(_label_shape(self, tuple(y_pred.shape)) or (1,)),
                                          "int32")
                else:
                    y_true = ops.constant(yt.astype(np.float32))
            if sample_weight is not None and not isinstance(sample_weight, Tensor):
                sample_weight = _keras_weight_rank(np.asarray(sample_weight, dtype=np.float32),
                                                   np.empty(tuple(y_pred.shape), np.float32))
            w = sample_weight if isinstance(sample_weight, Tensor) or sample_weight is None else \
                ops.constant(np.asarray(sample_weight, dtype=np.float32).reshape(
                    (-1, 1) if np.ndim(sample_weight) == 1 and len(y_pred.shape) > 1 else np.shape(sample_weight)))
            v = self._per_step(self.values(y_true, y_pred), y_pred, w)
            out = self._reduce(v, w)
            scalars = getattr(_scope.current(), "scalars", None)
            if scalars is not None and self.reduction != "none" and tuple(out.shape) == (1,):
                scalars.add(hash(out))           # (in a GradientTape: Keras's 0-d loss)
            lead = tuple(y_pred.shape[:-1])
            if self.reduction == "none" and lead and tuple(out.shape) != lead and \
                    out.nelements == int(np.prod(lead)):
                out = ops.reshape(out if out.is_contiguous else ops.cont(out), lead)   # (batch,), as Keras's
            return out
        # the padding mask of a masked output (a Masking layer's, eagerly), as Keras's loss reads
        # it: a weight of 0 on a padded entry, and total / real on a real one where the loss is a
        # mean (so the mean is over the real entries), times any sample weight
        mask = getattr(y_pred, "_keras_mask", None)
        if mask is not None:
            sample_weight = _mask_weight(np.asarray(mask), sample_weight, self.reduction)
        arrays = [np.asarray(y_true), np.asarray(y_pred, dtype=np.float32)]
        if self.sparse:
            arrays[0] = arrays[0].astype(np.int64).reshape(_label_shape(self, arrays[1].shape))
        elif arrays[0].dtype.kind in "biu":
            arrays[0] = arrays[0].astype(np.float32)
        if sample_weight is not None:
            w = _keras_weight_rank(np.asarray(sample_weight, dtype=np.float32), arrays[1])
            arrays.append(w.reshape(-1, 1) if w.ndim == 1 and arrays[1].ndim > 1 else w)   # one per sample
        for a in arrays:
            if a.dtype == object or a.dtype.kind not in "biuf":
                raise TypeError(f"{self.name}: expected arrays of numbers, got dtype {a.dtype}")

        n_w = len(arrays) - 2

        def graph(*t):
            w = t[2] if n_w else None
            return self._reduce(self._per_step(self.values(t[0], t[1]), t[1], w), w)
        out = np.asarray(_eager.evaluate(graph, arrays), dtype=np.float32)
        if self.reduction == "none":
            lead = arrays[1].shape[:-1]
            if arrays[1].ndim > 1 and out.size == int(np.prod(lead)):
                return out.reshape(lead)
            return as_ops_result(out.reshape(()) if out.size == 1 and arrays[1].size > 1 else out)
        return as_ops_result(np.asarray(out.reshape(-1)[0], dtype=np.float32))   # Keras's 0-d tensor (.numpy())

    def _call_nested(self, y_true, y_pred, sample_weight):
        """Keras's loss of nested targets and predictions (lists or dicts of tensors of
        different shapes: gaugan's feature-matching loss over a discriminator's feature maps):
        ``call`` gets the nests as they are, their arrays as constants in a graph."""
        if sample_weight is not None:
            raise ValueError(f"{self.name}: sample_weight is taken with array targets, not nested ones")
        leaves = []
        _flatten(y_true, leaves)
        _flatten(y_pred, leaves)
        if _scope.current() is not None or any(isinstance(v, Tensor) for v in leaves):
            v = self.values(_constants(y_true), _constants(y_pred))
            v = ops.as_tensor(v) if not isinstance(v, Tensor) else v
            return self._reduce(v, None) if self.reduction != "none" else v
        arrays = [np.asarray(a, dtype=np.float32) for a in leaves]
        for a in arrays:
            if a.dtype == object:
                raise TypeError(f"{self.name}: expected arrays of numbers in the nested targets")

        def graph(*t):
            it = iter(t)
            yt, yp = _rebuild(y_true, it), _rebuild(y_pred, it)
            v = self.values(yt, yp)
            v = ops.as_tensor(v) if not isinstance(v, Tensor) else v
            return self._reduce(v, None) if self.reduction != "none" else v
        out = np.asarray(_eager.evaluate(graph, arrays), dtype=np.float32)
        return as_ops_result(np.asarray(out.reshape(-1)[0], dtype=np.float32) if out.size == 1 else out)

    def _per_step(self, v, y_pred, weights):
        """An element-wise loss as Keras's per-sample (per-step) values, the mean over the last
        axis (the classes or values; moved there for ``axis=``), where the reduction is not a
        plain mean or the weights are one per step; the values as they are otherwise."""
        if len(v.shape) <= 1 or len(v.shape) != len(y_pred.shape) or v.nelements != y_pred.nelements:
            return v
        per_step = weights is not None and len(weights.shape) == len(v.shape) - 1 and \
            weights.nelements > v.shape[0]
        if self.reduction != "sum_over_batch_size" or per_step:
            return ops.reduce_mean(v, axis=-1)
        return v

    def _reduce(self, values, weights):
        if self.reduction == "sum_over_batch_size":
            return reduce_loss(values, weights)
        if self.reduction == "mean_with_sample_weight":
            # Keras's: the weighted sum divided by the sum of the weights (over the values they weigh)
            if weights is None:
                return reduce_loss(values)
            v = values if values.is_contiguous else ops.cont(values)
            n = v.shape[0]
            v2 = ops.reshape(v, (n, v.nelements // n))
            w = weights if weights.is_contiguous else ops.cont(weights)
            per_sample = w.nelements == n
            w2 = ops.reshape(w, (n, 1)) if per_sample else ops.reshape(w, tuple(v2.shape))
            den = ops.scale(ops.sum(w2), float(v2.shape[1]) if per_sample else 1.0)
            return ops.div(ops.sum(ops.mul(v2, ops.repeat(w2, v2) if per_sample else w2)), den)
        v = values if values.is_contiguous else ops.cont(values)
        if weights is not None and v.nelements == 1 and weights.nelements > 1:
            # one loss for the whole batch, times each sample's weight (Keras's broadcast)
            w = weights if weights.is_contiguous else ops.cont(weights)
            v = ops.mul(ops.reshape(w, (w.nelements,)), ops.reshape(v, (1,)))
        elif weights is not None:
            v = ops.mul(ops.reshape(v, (v.shape[0], v.nelements // v.shape[0])), weights)
        return ops.sum(v) if self.reduction == "sum" else v

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


@register_builtin
class LossFunctionWrapper(Loss):
    """A plain function ``fn(y_true, y_pred) -> tensor`` as a Loss."""

    def __init__(self, fn, name=None, reduction="sum_over_batch_size", **kwargs):
        super().__init__(name=name or getattr(fn, "__name__", "loss"), reduction=reduction)
        if not callable(fn):
            raise TypeError(f"a loss must be callable, got {fn!r}")
        self.fn = fn
        self.fn_kwargs = kwargs

    def call(self, y_true, y_pred):
        return self.fn(y_true, y_pred, **self.fn_kwargs)

    @property
    def takes_targets_as_given(self):
        return not getattr(self.fn, "__module__", "").startswith("pyggml.")

    def get_config(self):
        from pyggml.saving.object_registration import get_registered_name
        c = super().get_config()
        c["fn"] = get_registered_name(self.fn) if isinstance(self.fn, type) else getattr(self.fn, "__name__", None)
        return c
