"""Losses with Keras's definitions and reduction, as ggml graphs.

A loss is the mean over the batch of each sample's loss; element-wise losses
(mse, mae, huber, binary cross-entropy) average over a sample's cells.  With
weights the loss is ``sum(w * elementwise_loss) / number_of_elements``, where
padded rows of a short final batch carry weight 0 and do not count.
"""

from pyggml import activations
from pyggml.core import ops

__all__ = ["get", "LOSSES"]

_EPS = 1e-7          # Keras' clipping epsilon for probabilities


class Loss:
    name = "loss"
    elementwise = True          # per-cell loss (True) or per-sample (False)
    logits_from = None          # output activation this loss can take logits from

    def cells(self, out, y, ctx):
        """The per-cell (or per-sample, (n, 1)) loss tensor."""
        raise NotImplementedError

    def build(self, out, y, ctx, batch, n_cells, weights=None, inv_n=None, from_logits=False):
        """Scalar loss. out and y are (batch, n_cells); weights (batch, 1) or
        (batch, n_cells); inv_n a 1-element tensor holding 1/real rows."""
        e = self.cells(out, y, ctx, from_logits)
        cells = n_cells if self.elementwise else 1
        if weights is None:
            return ops.scale(ops.sum(e, ctx=ctx), 1.0 / (batch * cells), ctx=ctx)
        if weights.shape[-1] != 1 and weights.shape[-1] != e.shape[-1]:
            raise ValueError(f"{self.name}: per-cell weights need an element-wise loss")
        we = ops.mul(e, weights, ctx=ctx) if e.shape == weights.shape else ops.mul(e, ops.repeat(weights, e, ctx=ctx), ctx=ctx)
        return ops.mul(ops.scale(ops.sum(we, ctx=ctx), 1.0 / cells, ctx=ctx), inv_n, ctx=ctx)

    def get_config(self):
        return {"name": self.name}


class MeanSquaredError(Loss):
    name = "mse"

    def cells(self, out, y, ctx, from_logits=False):
        return ops.sqr(ops.sub(out, y, ctx=ctx), ctx=ctx)


class MeanAbsoluteError(Loss):
    name = "mae"

    def cells(self, out, y, ctx, from_logits=False):
        return ops.abs(ops.sub(out, y, ctx=ctx), ctx=ctx)


class Huber(Loss):
    name = "huber"

    def __init__(self, delta=1.0):
        self.delta = float(delta)

    def cells(self, out, y, ctx, from_logits=False):
        # 0.5 q^2 + d (|e| - q) with q = min(|e|, d) = d - relu(d - |e|)
        a = ops.abs(ops.sub(out, y, ctx=ctx), ctx=ctx)
        q = ops.scale_bias(ops.relu(ops.scale_bias(a, -1.0, self.delta, ctx=ctx), ctx=ctx), -1.0, self.delta, ctx=ctx)
        return ops.add(ops.scale(ops.sqr(q, ctx=ctx), 0.5, ctx=ctx),
                       ops.scale(ops.sub(a, q, ctx=ctx), self.delta, ctx=ctx), ctx=ctx)


class BinaryCrossentropy(Loss):
    name = "binary_crossentropy"
    logits_from = "sigmoid"

    def cells(self, out, y, ctx, from_logits=False):
        if from_logits:
            # softplus(z) - y z: stable for any logit
            return ops.sub(ops.softplus(out, ctx=ctx), ops.mul(y, out, ctx=ctx), ctx=ctx)
        # probabilities, clipped to [eps, 1 - eps] the way Keras does (affinely)
        p = ops.scale_bias(out, 1.0 - 2 * _EPS, _EPS, ctx=ctx)
        lp = ops.log(p, ctx=ctx)
        l1p = ops.log(ops.scale_bias(p, -1.0, 1.0, ctx=ctx), ctx=ctx)
        t = ops.add(ops.mul(y, lp, ctx=ctx),
                    ops.mul(ops.scale_bias(y, -1.0, 1.0, ctx=ctx), l1p, ctx=ctx), ctx=ctx)
        return ops.neg(t, ctx=ctx)


class CategoricalCrossentropy(Loss):
    name = "categorical_crossentropy"
    elementwise = False
    logits_from = "softmax"

    def cells(self, out, y, ctx, from_logits=False):
        if from_logits:
            # log_softmax as log(softmax + tiny): finite where softmax underflows
            lp = ops.log(ops.scale_bias(activations.softmax(out, ctx), 1.0, 1e-37, ctx=ctx), ctx=ctx)
        else:
            p = ops.scale_bias(out, 1.0 - 2 * _EPS, _EPS, ctx=ctx)
            # Keras normalises probabilities to sum to one before the log
            lp = ops.log(ops.div(p, ops.repeat(ops.sum_rows(p, ctx=ctx), p, ctx=ctx), ctx=ctx), ctx=ctx)
        return ops.neg(ops.sum_rows(ops.mul(y, lp, ctx=ctx), ctx=ctx), ctx=ctx)

    def build(self, out, y, ctx, batch, n_cells, weights=None, inv_n=None, from_logits=False):
        if weights is None and from_logits:
            # the fused, stable ggml op: mean over rows of -sum(y log_softmax(z))
            return ops.cross_entropy_loss(out, y, ctx=ctx)
        return super().build(out, y, ctx, batch, n_cells, weights, inv_n, from_logits)


class SparseCategoricalCrossentropy(CategoricalCrossentropy):
    name = "sparse_categorical_crossentropy"
    sparse = True


LOSSES = {
    "mse": MeanSquaredError, "mean_squared_error": MeanSquaredError, "MeanSquaredError": MeanSquaredError,
    "mae": MeanAbsoluteError, "mean_absolute_error": MeanAbsoluteError, "MeanAbsoluteError": MeanAbsoluteError,
    "huber": Huber, "huber_loss": Huber, "Huber": Huber,
    "binary_crossentropy": BinaryCrossentropy, "BinaryCrossentropy": BinaryCrossentropy, "bce": BinaryCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy, "CategoricalCrossentropy": CategoricalCrossentropy,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "SparseCategoricalCrossentropy": SparseCategoricalCrossentropy,
}


def get(identifier):
    """A Loss for a name (Keras names and aliases) or a Loss instance."""
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, str) and identifier in LOSSES:
        return LOSSES[identifier]()
    raise ValueError(f"unknown loss {identifier!r}; known: {sorted(set(LOSSES))}")
