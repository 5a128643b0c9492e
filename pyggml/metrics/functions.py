"""Keras's metric functions (``keras.metrics.sparse_categorical_accuracy(y_true, y_pred)``,
``keras.metrics.mean_squared_error``, ...): the value of each sample, not averaged over the
batch, on arrays (numpy, at once) or on tensors (a custom ``train_step``, a layer's call).
The loss-like ones are the loss functions of ``pyggml.losses``; given to ``compile(metrics=)``
each becomes its built-in metric under the function's name."""

from pyggml import ops
from pyggml._validation import check_number, is_int
from pyggml.losses.functions import FUNCTIONS as _LOSS_FUNCTIONS

__all__ = ["FUNCTIONS", "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
           "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy"]


def _float(x):
    return ops.cast(x, "float32")


def _as_pair(y_true, y_pred):
    return ops.convert_to_tensor(y_true), ops.convert_to_tensor(y_pred)


def binary_accuracy(y_true, y_pred, threshold=0.5):
    """1 where ``y_pred > threshold`` agrees with the 0/1 label, averaged over the last axis."""
    threshold = check_number("binary_accuracy: threshold", threshold)
    y_true, y_pred = _as_pair(y_true, y_pred)
    if len(y_true.shape) == len(y_pred.shape) - 1:
        y_true = ops.expand_dims(y_true, -1)
    hit = ops.equal(_float(y_true), _float(ops.greater(y_pred, threshold)))
    return ops.mean(_float(hit), axis=-1)


def categorical_accuracy(y_true, y_pred):
    """1 where the one-hot label's class is the prediction's largest."""
    y_true, y_pred = _as_pair(y_true, y_pred)
    return _float(ops.equal(ops.argmax(y_true, axis=-1), ops.argmax(y_pred, axis=-1)))


def _labels(y_true, y_pred):
    """Class indices of the prediction's rows: an (n, 1) column of them squeezed (Keras's)."""
    if len(y_true.shape) == len(y_pred.shape) and y_true.shape[-1] == 1:
        y_true = ops.squeeze(y_true, -1)
    return _float(y_true)


def sparse_categorical_accuracy(y_true, y_pred):
    """1 where the class index is the prediction's largest."""
    y_true, y_pred = _as_pair(y_true, y_pred)
    return _float(ops.equal(_labels(y_true, y_pred), _float(ops.argmax(y_pred, axis=-1))))


def _check_k(k, what):
    if not is_int(k) or k < 1:
        raise ValueError(f"{what}: k must be a positive int, got {k!r}")
    return int(k)


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """1 where the one-hot label's class is among the prediction's ``k`` largest."""
    k = _check_k(k, "top_k_categorical_accuracy")
    y_true, y_pred = _as_pair(y_true, y_pred)
    return sparse_top_k_categorical_accuracy(ops.argmax(y_true, axis=-1), y_pred, k=k)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5, from_sorted_ids=False):
    """1 where the class index is among the prediction's ``k`` largest (``from_sorted_ids``:
    y_pred holds the top class ids already, best first)."""
    k = _check_k(k, "sparse_top_k_categorical_accuracy")
    y_true, y_pred = _as_pair(y_true, y_pred)
    labels = _labels(y_true, y_pred)
    if from_sorted_ids:
        top = _float(y_pred[..., :k])
        return ops.max(_float(ops.equal(top, ops.expand_dims(labels, -1))), axis=-1)
    if k >= y_pred.shape[-1]:
        return ops.ones_like(labels)
    return _float(ops.in_top_k(ops.cast(labels, "int32"), y_pred, k))


FUNCTIONS = {f.__name__: f for f in (binary_accuracy, categorical_accuracy, sparse_categorical_accuracy,
                                     top_k_categorical_accuracy, sparse_top_k_categorical_accuracy)}
for _name in ("mean_squared_error", "mean_absolute_error", "mean_absolute_percentage_error",
              "mean_squared_logarithmic_error", "binary_crossentropy", "categorical_crossentropy",
              "sparse_categorical_crossentropy", "binary_focal_crossentropy", "categorical_focal_crossentropy",
              "kl_divergence", "poisson", "log_cosh", "hinge", "squared_hinge", "categorical_hinge", "huber"):
    FUNCTIONS[_name] = _LOSS_FUNCTIONS[_name]
del _name
