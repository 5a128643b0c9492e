"""Index arrays to one-hot, multi-hot or count vectors on the host (Keras's
``encode_categorical_inputs`` rules), and the shapes they give."""

import numpy as np

__all__ = ["ENCODINGS", "encode", "encoded_shape", "check_output_mode"]

ENCODINGS = ("one_hot", "multi_hot", "count")


def check_output_mode(output_mode, who, allowed=("int",) + ENCODINGS):
    if output_mode == "binary":                 # Keras's old name of multi_hot
        output_mode = "multi_hot"
    if output_mode == "tf-idf":
        output_mode = "tf_idf"
    if output_mode not in allowed:
        raise ValueError(f"{who}: output_mode must be one of {', '.join(repr(a) for a in allowed)}, "
                         f"got {output_mode!r}")
    return output_mode


MAX_VALUES = 2 ** 30      # an encoding past this (4 GiB of float32) is refused before numpy allocates it


def encoded_shape(shape, mode, depth):
    """The output shape of ``mode`` for inputs of ``shape`` (any leading None kept)."""
    shape = tuple(shape)
    if mode == "int":
        return shape
    if mode == "one_hot":
        if len(shape) > 1 and shape[-1] == 1:
            return shape[:-1] + (depth,)
        return shape + (depth,)
    return (shape[:-1] if shape else ()) + (depth,)


def encode(indices, mode, depth):
    """float32 encodings of int indices in [0, depth); negative indices are dropped
    (a mask token outside "int" mode): they set no entry.  ("tf_idf" gives the
    counts; the lookup layers weight them.)"""
    a = np.asarray(indices, dtype=np.int64)
    if a.ndim == 0:
        a = a.reshape(1)
    n_out = int(np.prod(encoded_shape(a.shape, mode, depth)))
    if mode != "int" and n_out > MAX_VALUES:
        raise ValueError(f"output_mode={mode!r}: the encoding of shape {encoded_shape(a.shape, mode, depth)} "
                         f"({n_out} values) is too large (at most 2**30 values); lower max_tokens / num_tokens")
    if mode == "one_hot":
        if a.ndim > 1 and a.shape[-1] == 1:
            a = a[..., 0]
        out = np.zeros(a.shape + (depth,), dtype=np.float32)
        flat = a.reshape(-1)
        rows = np.flatnonzero(flat >= 0)
        out.reshape(-1, depth)[rows, flat[rows]] = 1.0
        return out
    lead, k = a.shape[:-1], a.shape[-1]
    n = int(np.prod(lead)) if lead else 1
    flat = a.reshape(n, k)
    row = np.repeat(np.arange(n, dtype=np.int64), k)
    col = flat.reshape(-1)
    keep = col >= 0
    counts = np.bincount(row[keep] * depth + col[keep], minlength=n * depth).reshape(lead + (depth,))
    if mode == "multi_hot":
        counts = np.minimum(counts, 1)
    return counts.astype(np.float32)
