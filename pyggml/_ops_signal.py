"""Keras's ``ops.slice``, ``ops.fft``, ``ops.fft2``, ``ops.ifft2`` (``pyggml.ops`` exports them).

Called on arrays outside a model's graph they compute at once in numpy; inside a
layer's ``call`` they are built from ops that train:

- ``slice`` takes the index range of each sliced axis (``get_rows``);
- the Fourier transforms are products with the DFT's cosine and sine matrices
  (ggml has no FFT): a complex tensor is a pair ``(real, imag)``, as Keras's,
  and ``fft2`` of (..., m, n) costs two matrix products per part, fine for the
  sizes models hold (FNet's patches and features).
"""

import numpy as np

from pyggml import _ops_numpy as _k
from pyggml import _scope
from pyggml._validation import is_int
from pyggml.core import Tensor
from pyggml.variables import Variable

__all__ = ["slice", "fft", "fft2", "ifft2"]

_builtin_slice = slice


def _graph_value(x):
    return isinstance(x, (Tensor, Variable))


def _tensor(x):
    return x.graph_tensor() if isinstance(x, Variable) else x


def _shape(x):
    if _graph_value(x):
        return tuple(int(d) for d in _tensor(x).shape)
    return tuple(np.shape(x))


def _ints(v, n, what, name):
    v = [v] if is_int(v) else v
    if not isinstance(v, (list, tuple, np.ndarray)) or len(v) != n or not all(is_int(e) for e in v):
        raise TypeError(f"{what}: {name} must be {n} ints (one per axis of the inputs), got {v!r}")
    return [int(e) for e in v]


def slice(inputs, start_indices, shape):  # noqa: A001 - Keras's name
    """Keras's ``ops.slice``: the block of ``inputs`` that starts at ``start_indices`` and has
    ``shape`` (one entry per axis; -1 or None in ``shape`` takes the rest of that axis)."""
    what = "ops.slice"
    in_shape = _shape(inputs)
    r = len(in_shape)
    starts = _ints(start_indices, r, what, "start_indices")
    sizes = [-1 if s is None else s for s in (shape if isinstance(shape, (list, tuple)) else [shape])]
    sizes = _ints(sizes, r, what, "shape")
    sizes = [in_shape[i] - starts[i] if s == -1 else s for i, s in enumerate(sizes)]
    for i, (b, s, n) in enumerate(zip(starts, sizes, in_shape)):
        if b < 0 or s < 0 or b + s > n:
            raise ValueError(f"{what}: axis {i} of size {n} has no block of size {s} starting at {b} "
                             f"(inputs of shape {in_shape})")
        if s == 0:
            raise ValueError(f"{what}: an empty block (size 0 along axis {i}) is not supported")
    if not _graph_value(inputs) and _scope.current() is None:
        a = inputs.numpy() if isinstance(inputs, Variable) else np.asarray(inputs)
        return a[tuple(_builtin_slice(b, b + s) for b, s in zip(starts, sizes))]
    x = _k.convert_to_tensor(inputs) if not _graph_value(inputs) else _tensor(inputs)
    for i, (b, s, n) in enumerate(zip(starts, sizes, in_shape)):
        if (b, s) != (0, n):
            x = _k.take(x, np.arange(b, b + s), axis=i)
    return x



def _constant(a):
    """A float32 constant in the graph being built."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    return _scope.require("pyggml.ops").constant(a.reshape(a.shape or (1,)), "float32")


# --- Fourier transforms ----------------------------------------------------------------------------

def _complex_pair(x, what):
    if not (isinstance(x, (tuple, list)) and len(x) == 2):
        raise TypeError(f"{what}: expected a pair (real, imag) of tensors of one shape, got {type(x).__name__}")
    real, imag = x
    if _shape(real) != _shape(imag):
        raise ValueError(f"{what}: the real and imaginary parts must have one shape, got {_shape(real)} and "
                         f"{_shape(imag)}")
    return real, imag


def _dft(n, inverse):
    k = np.arange(n)
    angle = 2.0 * np.pi * np.outer(k, k) / n
    scale = 1.0 / n if inverse else 1.0
    return (np.cos(angle) * scale).astype(np.float32), (np.sin(angle) * scale).astype(np.float32)


def _matmul_last(t, m):
    """t (..., n) times a constant (n, k) along the last axis."""
    shape = tuple(int(d) for d in t.shape)
    flat = _k.reshape(t, (int(np.prod(shape[:-1])) if len(shape) > 1 else 1, shape[-1]))
    y = flat @ _constant(m)
    return _k.reshape(y, shape[:-1] + (m.shape[1],))


def _dft_last(real, imag, inverse):
    """(real, imag) transformed along the last axis: x F with F = C -+ iS (symmetric)."""
    c, s = _dft(int(real.shape[-1]), inverse)
    sign = 1.0 if inverse else -1.0
    rc, rs, ic, is_ = (_matmul_last(real, c), _matmul_last(real, s), _matmul_last(imag, c),
                       _matmul_last(imag, s))
    # (xr + i xi)(C + i sign S) = (xr C - sign xi S) + i (xi C + sign xr S)
    if sign > 0:
        return rc - is_, ic + rs
    return rc + is_, ic - rs


def _swap_last_two(t):
    r = len(t.shape)
    return _k.transpose(t, tuple(range(r - 2)) + (r - 1, r - 2))


def _transform(x, axes, inverse, what):
    real, imag = _complex_pair(x, what)
    shape = _shape(real)
    if len(shape) < axes:
        raise ValueError(f"{what}: inputs need at least {axes} dimensions, got shape {shape}")
    if _scope.current() is None and not (_graph_value(real) or _graph_value(imag)):
        a = np.asarray(real, dtype=np.float64) + 1j * np.asarray(imag, dtype=np.float64)
        fn = {(1, False): np.fft.fft, (2, False): np.fft.fft2, (2, True): np.fft.ifft2}[(axes, inverse)]
        y = fn(a)
        return y.real.astype(np.float32), y.imag.astype(np.float32)
    r = _k.convert_to_tensor(real) if not _graph_value(real) else _tensor(real)
    i = _k.convert_to_tensor(imag) if not _graph_value(imag) else _tensor(imag)
    from pyggml.core import ops as core
    r = core.cast(r, "f32") if r.dtype != "f32" else r
    i = core.cast(i, "f32") if i.dtype != "f32" else i
    r, i = _dft_last(r, i, inverse)
    if axes == 2:
        r, i = _dft_last(_swap_last_two(r), _swap_last_two(i), inverse)
        r, i = _swap_last_two(r), _swap_last_two(i)
    return r, i


def fft(x):
    """Keras's ``ops.fft``: the discrete Fourier transform along the last axis of ``x = (real,
    imag)``; returns ``(real, imag)``."""
    return _transform(x, 1, False, "ops.fft")


def fft2(x):
    """Keras's ``ops.fft2``: the 2-D discrete Fourier transform over the last two axes of ``x =
    (real, imag)``; returns ``(real, imag)``."""
    return _transform(x, 2, False, "ops.fft2")


def ifft2(x):
    """Keras's ``ops.ifft2``: the inverse of ``fft2`` (scaled by 1 / (m n))."""
    return _transform(x, 2, True, "ops.ifft2")
