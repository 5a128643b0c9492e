"""Keras's ``ops.tensordot`` (``pyggml.ops`` exports it): numpy's tensordot, on arrays at
once and inside a layer's ``call`` as one matrix product of the two operands moved and
flattened to 2-D (ops with backward passes)."""

import numpy as np

from pyggml import _ops_numpy as _k
from pyggml import _scope
from pyggml._validation import is_int
from pyggml.core import Tensor
from pyggml.variables import Variable

__all__ = ["tensordot"]


def _shape(x):
    if isinstance(x, Variable):
        return tuple(x.shape)
    if isinstance(x, Tensor):
        return tuple(int(d) for d in x.shape)
    return tuple(np.shape(x))


def _axes_lists(axes, r1, r2):
    what = "ops.tensordot"
    if is_int(axes):
        n = int(axes)
        if n < 0 or n > min(r1, r2):
            raise ValueError(f"{what}: axes={axes} must be between 0 and {min(r1, r2)} for inputs of ranks {r1} "
                             f"and {r2}")
        return list(range(r1 - n, r1)), list(range(n))
    if not (isinstance(axes, (list, tuple)) and len(axes) == 2):
        raise TypeError(f"{what}: axes must be an int or a pair (axes of x1, axes of x2), got {axes!r}")
    a, b = ([v] if is_int(v) else list(v) for v in axes)
    if len(a) != len(b) or not all(is_int(v) for v in a + b):
        raise ValueError(f"{what}: axes must pair as many ints for x1 as for x2, got {axes!r}")
    for v, r in [(v, r1) for v in a] + [(v, r2) for v in b]:
        if not -r <= v < r:
            raise ValueError(f"{what}: axis {v} is out of range for an input of rank {r}")
    a, b = [int(v) % r1 for v in a], [int(v) % r2 for v in b]
    if len(set(a)) != len(a) or len(set(b)) != len(b):
        raise ValueError(f"{what}: an axis is repeated in {axes!r}")
    return a, b


def tensordot(x1, x2, axes=2):
    """numpy's tensordot: the sum of products over ``axes`` (an int: the last ``axes`` of x1
    with the first of x2; or a pair of axis lists)."""
    s1, s2 = _shape(x1), _shape(x2)
    a, b = _axes_lists(axes, len(s1), len(s2))
    for i, j in zip(a, b):
        if s1[i] != s2[j]:
            raise ValueError(f"ops.tensordot: axis {i} of x1 (size {s1[i]}) and axis {j} of x2 (size {s2[j]}) "
                             f"differ; shapes {s1} and {s2}")
    graph = isinstance(x1, (Tensor, Variable)) or isinstance(x2, (Tensor, Variable)) or \
        _scope.current() is not None
    if not graph:
        out = np.tensordot(np.asarray(x1, np.float64), np.asarray(x2, np.float64), axes=(a, b))
        return np.asarray(out, np.float32)
    free1 = [i for i in range(len(s1)) if i not in a]
    free2 = [j for j in range(len(s2)) if j not in b]
    out_shape = tuple(s1[i] for i in free1) + tuple(s2[j] for j in free2)
    if len(out_shape) > 4:
        raise ValueError(f"ops.tensordot: the result would have {len(out_shape)} dimensions (at most 4)")
    k = int(np.prod([s1[i] for i in a])) if a else 1
    m = int(np.prod([s1[i] for i in free1])) if free1 else 1
    n = int(np.prod([s2[j] for j in free2])) if free2 else 1
    t1 = _k.convert_to_tensor(x1) if not isinstance(x1, (Tensor, Variable)) else x1
    t2 = _k.convert_to_tensor(x2) if not isinstance(x2, (Tensor, Variable)) else x2
    t1 = t1.graph_tensor() if isinstance(t1, Variable) else t1
    t2 = t2.graph_tensor() if isinstance(t2, Variable) else t2
    left = _k.reshape(_k.transpose(t1, free1 + a) if free1 + a != list(range(len(s1))) else t1, (m, k))
    right = _k.reshape(_k.transpose(t2, b + free2) if b + free2 != list(range(len(s2))) else t2, (k, n))
    return _k.reshape(left @ right, out_shape or (1,))
