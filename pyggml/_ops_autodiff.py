"""Keras's ``ops.jvp``: a Jacobian-vector product by two reverse passes.

``jvp(fun, primals, tangents)`` gives ``(fun(*primals), J t)``.  With ``u`` a stand-in for
the output's cotangent, the inner GradientTape gives ``g(u) = J^T u`` (linear in ``u``); the outer
tape differentiates ``<g(u), t>`` by ``u``, which is ``J t``.  It runs where pyggml's second-order
gradients run (the functions' backward passes must themselves have backward passes)."""

import sys

import numpy as np

from pyggml.autodiff import GradientTape
from pyggml.variables import Variable

__all__ = ["jvp"]

# names that are also ggml ops of pyggml.core.ops
SHARED_WITH_GGML = ()


def _k():
    return sys.modules["pyggml.ops"]


def _values(xs, what):
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"jvp: {what} must be a tuple or list of arrays (one per argument of fun), got {xs!r}")
    out = []
    for x in xs:
        a = np.asarray(x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"jvp: {what} must hold real numbers, got dtype {a.dtype}")
        out.append(a.astype(np.float32))
    return out


def jvp(fun, primals, tangents, has_aux=False):
    """Keras's ``ops.jvp(fun, primals, tangents, has_aux=False)``: ``(fun(*primals), J t)``
    (and ``fun``'s auxiliary output with ``has_aux``), ``fun``'s output a tensor or a list or
    tuple of them; each tangent has its primal's shape."""
    if not callable(fun):
        raise TypeError(f"jvp: fun must be callable, got {fun!r}")
    ps, ts = _values(primals, "primals"), _values(tangents, "tangents")
    if len(ps) != len(ts) or any(p.shape != t.shape for p, t in zip(ps, ts)):
        raise ValueError(f"jvp: each tangent must have its primal's shape, got {[p.shape for p in ps]} and "
                         f"{[t.shape for t in ts]}")
    ops = _k()
    xs = [Variable(p) for p in ps]
    first = fun(*[ops.convert_to_numpy(p) for p in ps])         # the output's structure and shapes
    first = first[0] if has_aux else first
    many = isinstance(first, (list, tuple))
    shapes = [np.shape(ops.convert_to_numpy(o)) for o in (first if many else [first])]
    us = [Variable(np.zeros(s, np.float32)) for s in shapes]
    with GradientTape(persistent=True) as outer:
        for u in us:
            outer.watch(u)
        with GradientTape() as inner:
            for x in xs:
                inner.watch(x)
            res = fun(*xs)
            out, aux = (res[0], res[1]) if has_aux else (res, None)
            outs = list(out) if many else [out]
            if len(outs) != len(us):
                raise ValueError("jvp: fun's output changed its structure between calls")
            s = None
            for o, u in zip(outs, us):
                term = ops.sum(ops.multiply(o, u))
                s = term if s is None else s + term
        grads = inner.gradient(s, xs)
        r = None
        for g, t in zip(grads, ts):
            if g is not None:
                term = ops.sum(ops.multiply(g, t))
                r = term if r is None else r + term
    if r is None:
        jt = [np.zeros(sh, np.float32) for sh in shapes]            # fun does not depend on the primals
    else:
        jt = [np.asarray(g) if g is not None else np.zeros(sh, np.float32)
              for g, sh in zip(outer.gradient(r, us), shapes)]
    values = [np.asarray(ops.convert_to_numpy(o)).reshape(sh) for o, sh in zip(outs, shapes)]
    jt = [np.asarray(j).reshape(sh) for j, sh in zip(jt, shapes)]
    pair = (type(first)(values), type(first)(jt)) if many else (values[0], jt[0])
    return pair + (aux,) if has_aux else pair
