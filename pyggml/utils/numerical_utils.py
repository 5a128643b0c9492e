"""One-hot class matrices and normalised rows (numpy in, numpy out)."""

import numpy as np

from pyggml._validation import check_positive_int, is_int, is_number

__all__ = ["to_categorical", "normalize"]


def _class_indices(y):
    try:
        a = np.asarray(y)
    except Exception as e:
        raise TypeError(f"to_categorical: y must be an array of class indices: {e}") from None
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"to_categorical: y must hold integer class indices, got dtype {a.dtype}")
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or np.any(a != np.floor(a)):
            raise ValueError("to_categorical: y must hold whole numbers (class indices)")
    if a.size and (a.min() < 0 or a.max() >= 2 ** 31):
        raise ValueError(f"to_categorical: class indices must be in [0, 2**31), got values from {a.min()} "
                         f"to {a.max()}")
    return a.astype(np.int64)


def to_categorical(y, num_classes=None, dtype="float32"):
    """Class indices to one-hot rows (Keras's): ``y`` of shape ``(n,)`` (or
    ``(..., 1)``, whose last axis is dropped) gives ``(..., num_classes)``.
    ``num_classes`` defaults to ``max(y) + 1``; an index outside
    ``[0, num_classes)`` raises."""
    a = _class_indices(y)
    shape = a.shape
    if len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    flat = a.reshape(-1)
    if num_classes is None or num_classes == 0:
        if flat.size == 0:
            raise ValueError("to_categorical: y is empty; give num_classes")
        num_classes = int(flat.max()) + 1
    num_classes = check_positive_int("num_classes", num_classes)
    if flat.size and flat.max() >= num_classes:
        raise ValueError(f"to_categorical: class index {int(flat.max())} is out of range for "
                         f"num_classes={num_classes}")
    if flat.size * num_classes > 2 ** 31:
        raise ValueError(f"to_categorical: the result of {flat.size} rows x {num_classes} classes is too large")
    out = np.zeros((flat.size, num_classes), dtype=np.dtype(dtype))
    out[np.arange(flat.size), flat] = 1
    return out.reshape(tuple(shape) + (num_classes,))


def normalize(x, axis=-1, order=2):
    """``x`` divided by its ``order``-norm along ``axis`` (rows of norm 0 stay as
    they are), as Keras's ``utils.normalize``: float inputs keep their dtype,
    others give float32.  On a graph tensor (in a layer's call) it is Keras's
    ``ops.normalize`` (a norm of 0 gives 0: Keras's epsilon)."""
    from pyggml.core import Tensor
    from pyggml.variables import Variable
    if isinstance(x, (Tensor, Variable)):
        from pyggml import ops
        return ops.normalize(x, axis=axis, order=order)
    try:
        a = np.asarray(x)
    except Exception as e:
        raise TypeError(f"normalize: x must be an array of numbers: {e}") from None
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"normalize: x must hold real numbers, got dtype {a.dtype}")
    if a.ndim == 0:
        raise ValueError("normalize: x must have at least one axis")
    if not is_int(axis):
        raise TypeError(f"normalize: axis must be an int, got {axis!r}")
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"normalize: axis {axis} is out of range for an array of {a.ndim} dims")
    if not (is_number(order) or order in ("fro", "nuc")):
        raise TypeError(f"normalize: order must be a number, got {order!r}")
    if a.dtype.kind != "f":
        a = a.astype(np.float32)
    norm = np.linalg.norm(a, ord=order, axis=axis, keepdims=True)
    norm = np.where(norm == 0, np.ones_like(norm), norm)
    return (a / norm).astype(a.dtype, copy=False)
