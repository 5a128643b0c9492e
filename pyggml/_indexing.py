"""numpy's basic indexing on graph tensors: ``x[:, -1]``, ``x[..., 0]``,
``x[:, ::2, 1:3]``, ``x[None, :, 3]``.

An index is made of ints, slices (any step but 0), ``...`` and ``None``
(``np.newaxis``).  The result is a strided view of x (ggml's ``view`` with
the slice's strides and offset) copied into a contiguous tensor, so it trains:
the gradient of a view goes back to the viewed entries.  Ints drop their axis
and negative ints count from the end, as in numpy.  Index arrays, boolean
masks and tensors as indices (numpy's advanced indexing) are refused with a
TypeError pointing to ``pyggml.ops.take`` / ``where``.  An int32 model input
indexed (``inputs[:, 0]`` feeding an Embedding) becomes an input of its own,
set from the input's values on the host.
"""

import numpy as np

from pyggml._validation import is_int

__all__ = ["getitem", "encode_key", "decode_key"]

MAX_DIMS = 4
_F32 = 4


def _as_int(k):
    """A 0-d integer array (Keras's ops.argmax of an array) as an int; anything else as it is."""
    if isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu":
        return int(k)
    return k


def _parts(key, ndim):
    """The key as one entry per axis of x (ints and slices), and where new axes go."""
    if not isinstance(key, tuple):
        key = (key,)
    key = tuple(_as_int(k) for k in key)
    for k in key:
        if not (k is None or k is Ellipsis or isinstance(k, slice) or is_int(k)):
            raise TypeError(f"a graph tensor takes ints, slices, ... and None as indices, got "
                            f"{type(k).__name__}: use pyggml.ops.take for index arrays and pyggml.ops.where for "
                            f"masks")
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for a tensor of {ndim} dimensions: {used} were given")
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded += [slice(None)] * (ndim - used)
        else:
            expanded.append(k)
    if Ellipsis not in key:
        expanded += [slice(None)] * (ndim - used)
    return expanded


def _int_getitem(x, key, out_shape):
    """x[key] of an int32 tensor: a model input's indices (an Embedding's, ``inputs[:, 0]``)
    become an input of their own, set from the input's values whenever it is set; other
    int32 tensors go through float32 (exact for integers below 2**24)."""
    from pyggml import _scope
    from pyggml.core import ops as core_ops
    b = _scope.current()
    if x.op == "NONE" and b is not None and hasattr(b, "derived_input"):
        try:
            return b.derived_input(x, lambda a: np.ascontiguousarray(np.asarray(a)[key], dtype=np.int32),
                                   out_shape, "int32")
        except ValueError:
            pass                                     # not one of the graph's inputs: computed below
    return core_ops.cast(getitem(core_ops.cast(x, "f32"), key), "i32")


def _in_graph():
    from pyggml import _scope
    return _scope.current() is not None


def getitem(x, key):
    """x[key] for a Tensor x (see the module's docstring)."""
    from pyggml.core import ops as core_ops
    shape = tuple(int(d) for d in x.shape)
    ndim = len(shape)
    entries = _parts(key, ndim)
    src = x if x.is_contiguous else core_ops.cont(x)
    # numpy strides of the contiguous source, in bytes
    strides = [_F32 * int(np.prod(shape[i + 1:])) for i in range(ndim)]
    offset, out_shape, out_strides = 0, [], []
    axis = 0
    for k in entries:
        if k is None:
            out_shape.append(1)
            out_strides.append(_F32)
            continue
        n = shape[axis]
        if isinstance(k, slice):
            if k.step == 0:
                raise ValueError("slice step cannot be zero")
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if count == 0:
                raise IndexError(f"the slice {k} of axis {axis} (length {n}) is empty: ggml has no empty tensors")
            offset += start * strides[axis]
            out_shape.append(count)
            out_strides.append(step * strides[axis])
        else:
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            offset += (i % n) * strides[axis]
        axis += 1
    if not out_shape:                        # every axis indexed by an int: one value
        out_shape, out_strides = [1], [_F32]
    step_neg = any(s < 0 for s in out_strides)
    if (len(out_shape) > MAX_DIMS or step_neg) and x.dtype == "f32" and _in_graph():
        # a result of five dimensions or more (``x[:, None]`` of a 4-D x), or a negative step (ggml's
        # views go forward only): one axis at a time, flipped where the step is negative (pyggml._wide)
        from pyggml import _wide
        return _wide.getitem(x, key)
    if len(out_shape) > MAX_DIMS:
        raise IndexError(f"the result would have {len(out_shape)} dimensions; ggml tensors have at most {MAX_DIMS}")
    if offset < 0 or step_neg:
        raise IndexError("negative slice steps (x[::-1]) are not available on graph tensors: ggml views go forward "
                         "only" if step_neg else "bad offset")
    if x.dtype == "i32":
        return _int_getitem(x, key, tuple(out_shape))
    if x.dtype != "f32":
        raise TypeError(f"indexing takes float32 and int32 tensors, got {x.dtype}")
    # ggml's view takes the row strides (nb[1..3], bytes) of the result's ggml dims: numpy's reversed
    contiguous = all(out_strides[i] == _F32 * int(np.prod(out_shape[i + 1:])) for i in range(len(out_shape)))
    if contiguous:
        v = core_ops.view(src, tuple(out_shape), offset=offset)
    else:
        if out_strides[-1] != _F32:
            # a step on the last axis: ggml's element stride is the element size, so move that axis up
            # one place with a trailing axis of length 1 (stride 4) and drop it after
            if len(out_shape) + 1 > MAX_DIMS:
                raise IndexError("a step on the last axis of a 4-D result is not available on graph tensors")
            v = core_ops.view(src, tuple(out_shape) + (1,), strides=tuple(out_strides) + (_F32,), offset=offset)
            return core_ops.reshape(core_ops.cont(v), tuple(out_shape))
        v = core_ops.view(src, tuple(out_shape), strides=tuple(out_strides), offset=offset)
    return core_ops.cont(v)


def encode_key(key):
    """An index as plain lists (saved in a model's config when a functional model's node is
    indexed): ["i", n], ["s", start, stop, step], ["e"] (...), ["n"] (None)."""
    out = []
    for k in key if isinstance(key, tuple) else (key,):
        k = _as_int(k)
        if k is None:
            out.append(["n"])
        elif k is Ellipsis:
            out.append(["e"])
        elif isinstance(k, slice):
            for v in (k.start, k.stop, k.step):
                if v is not None and not is_int(v):
                    raise TypeError(f"slice bounds must be ints or None, got {v!r}")
            out.append(["s", k.start, k.stop, k.step])
        elif is_int(k):
            out.append(["i", int(k)])
        else:
            raise TypeError(f"a tensor takes ints, slices, ... and None as indices, got {type(k).__name__}: use "
                            f"pyggml.ops.take for index arrays")
    return out


def decode_key(spec):
    """encode_key's lists back to an index (anything else is returned as it is)."""
    if not (isinstance(spec, list) and all(isinstance(e, list) and e and e[0] in ("n", "e", "s", "i")
                                           for e in spec)):
        return spec
    parts = []
    for e in spec:
        parts.append(None if e[0] == "n" else Ellipsis if e[0] == "e" else slice(*e[1:4]) if e[0] == "s"
                     else int(e[1]))
    return tuple(parts)
