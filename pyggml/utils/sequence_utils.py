"""pad_sequences: a list of sequences of different lengths to one array."""

import numpy as np

from pyggml._validation import check_choice, check_int

__all__ = ["pad_sequences"]


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre", value=0.0):
    """Keras's ``pad_sequences``: ``(len(sequences), maxlen)`` (plus the shape
    of each step, taken from the first non-empty sequence) filled with
    ``value``; sequences longer than ``maxlen`` lose their first steps
    (``truncating="pre"``) or their last (``"post"``), shorter ones are padded
    before (``padding="pre"``) or after (``"post"``).  ``maxlen`` defaults to
    the longest sequence."""
    check_choice("padding", padding, ("pre", "post"))
    check_choice("truncating", truncating, ("pre", "post"))
    if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__len__"):
        raise ValueError("pad_sequences: sequences must be a list (or array) of sequences")
    lengths = []
    step_shape = None
    for i, s in enumerate(sequences):
        if isinstance(s, (str, bytes)) or np.isscalar(s) or not hasattr(s, "__len__"):
            raise ValueError(f"pad_sequences: sequences must be a list of sequences; item {i} is {s!r}")
        lengths.append(len(s))
        if step_shape is None and len(s):
            step_shape = np.asarray(s).shape[1:]
    step_shape = tuple(step_shape or ())
    if maxlen is None:
        maxlen = max(lengths) if lengths else 0
    maxlen = check_int("maxlen", maxlen, 0, 2 ** 31)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"pad_sequences: unknown dtype {dtype!r}") from None
    if isinstance(value, str) and dt.kind not in "OU":
        raise ValueError(f"pad_sequences: dtype {dtype} does not hold the string value {value!r}; use "
                         f"dtype=object for strings")
    total = len(lengths) * maxlen * int(np.prod(step_shape) if step_shape else 1)
    if total > 2 ** 32:
        raise ValueError(f"pad_sequences: the result ({len(lengths)} x {maxlen}) is too large")
    out = np.full((len(lengths), maxlen) + step_shape, value, dtype=dt)
    if maxlen == 0:
        return out
    for i, s in enumerate(sequences):
        if not len(s):
            continue
        kept = s[-maxlen:] if truncating == "pre" else s[:maxlen]
        kept = np.asarray(kept, dtype=dt)
        if kept.shape[1:] != step_shape:
            raise ValueError(f"pad_sequences: the steps of sequence {i} have shape {kept.shape[1:]}, the first "
                             f"sequence's have {step_shape}")
        if padding == "post":
            out[i, :len(kept)] = kept
        else:
            out[i, maxlen - len(kept):] = kept
    return out
