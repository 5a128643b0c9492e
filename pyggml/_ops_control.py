"""Keras's control flow, sorting, scatter and linear-algebra functions of
``keras.ops``, with numpy's axes: on graph tensors
(built from ggml ops that train) and on arrays (computed at once).  ``pyggml.ops``
installs them (its ``_KERAS_MODULES``).

On arrays (outside any model's graph) every function computes at once: the
control flow runs as Python loops, the rest with numpy.

Inside a model's graph (a layer's ``call``, a ``Lambda``) a ggml graph is
static, so control flow is built when the graph is built:

- ``cond``/``switch`` with a Python (or known) predicate/index pick a branch;
  with a graph tensor they compute every branch and select with ``where``.
- ``fori_loop``, ``while_loop`` (whose condition is known while unrolling, or
  with ``maximum_iterations``: masked steps), ``scan``, ``map``,
  ``vectorized_map`` and ``associative_scan`` unroll over static sizes.
- ``sort``/``argsort``/``argpartition`` and ``top_k`` rank by comparisons: a
  permutation of 0/1 masks times the values, so sorted values train (O(n^2) memory along
  the sorted axis).  Their int32 indices come from ggml's argmax over the permutation.
- ``scatter``/``scatter_update``/``slice_update`` take indices known when the
  graph is built and place the values with ``get_rows`` and masks (they train).
- ``det``, ``slogdet``, ``inv``, ``solve``, ``cholesky`` and ``solve_triangular`` are
  unrolled for matrices up to 8 x 8 (partial pivoting by comparisons; they train).
- ``custom_gradient`` adds the gradient function's Jacobian (built row by row while the
  graph is built) behind ``stop_gradient``: exact, for outputs of up to 4096 entries.
- ``nonzero`` and the other linear algebra compute on arrays; inside a graph they compute
  on the host when every argument is known there and are refused (TypeError) on computed
  tensors.
"""

import builtins

import numpy as np

from pyggml import _ops_numpy as _np_ops
from pyggml import _scope
from pyggml._ops_numpy import host_constant, host_value
from pyggml._tensor_arrays import refuse_tensor_array
from pyggml._validation import is_int
from pyggml.core import Tensor
from pyggml.core import ops as _c
from pyggml.variables import Variable

__all__ = ["top_k", "vectorize", "cond", "switch", "while_loop", "fori_loop", "scan", "map", "vectorized_map", "associative_scan",
           "custom_gradient", "sort", "argsort", "argpartition", "scatter", "scatter_update", "slice_update",
           "nonzero", "where", "qr", "svd", "eig", "eigh", "inv", "det", "slogdet", "solve", "lstsq", "lu_factor", "cholesky",
           "solve_triangular"]

# names that are also ggml ops of pyggml.core.ops: ggml's form for a Tensor outside a model's graph
SHARED_WITH_GGML = ()

MAX_DIMS = 4
# a while_loop unrolled into a graph stops here (a condition that never turns false would grow the graph forever)
MAX_UNROLLED_STEPS = 10000


# --- helpers --------------------------------------------------------------------------------------------

def _is_graph(v):
    return isinstance(v, (Tensor, Variable))


def _flatten(tree):
    """The leaves of nested lists, tuples and dicts (dicts in sorted key order)."""
    if isinstance(tree, (list, tuple)):
        return [leaf for e in tree for leaf in _flatten(e)]
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _flatten(tree[k])]
    return [tree]


def _pack(tree, leaves):
    """``leaves`` in the structure of ``tree``."""
    it = iter(leaves)

    def build(t):
        if isinstance(t, (list, tuple)):
            items = [build(e) for e in t]
            return type(t)(*items) if hasattr(t, "_fields") else type(t)(items)
        if isinstance(t, dict):
            return {k: build(t[k]) for k in sorted(t)}
        return next(it)
    out = build(tree)
    return out


def _structure(tree):
    """The nesting of ``tree`` with its leaves blanked (to compare two structures)."""
    if isinstance(tree, (list, tuple)):
        return (type(tree) is tuple or hasattr(tree, "_fields"), tuple(_structure(e) for e in tree))
    if isinstance(tree, dict):
        return ("dict", tuple((k, _structure(tree[k])) for k in sorted(tree)))
    return None


def _in_graph(*values):
    """True inside a model's graph, or when a graph tensor is among the values (a Variable
    outside any graph is its current value, an array)."""
    return _scope.current() is not None or builtins.any(isinstance(v, Tensor) for v in _flatten(list(values)))


def _known(v):
    """v's value when it is known while the graph is built (an array, a number, a constant
    tensor made from one); None for a computed graph tensor or a Variable."""
    if isinstance(v, Variable):
        return None if _scope.current() is not None else v.numpy()
    if isinstance(v, Tensor):
        return host_value(v) if _scope.current() is not None else None
    if v is None:
        return None
    a = np.asarray(v)
    return None if a.dtype == object else a


def _array(x, what, name="x"):
    """x as a numpy array of real numbers (a Variable's value)."""
    a = x.numpy() if isinstance(x, Variable) else np.asarray(x)
    refuse_tensor_array(a, what)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: {name} must hold real numbers, got dtype {a.dtype}")
    return a


def _float_array(x, what, name="x"):
    a = _array(x, what, name)
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float32)


def _truth(v, what):
    """A Python bool for a known predicate (numpy's truth rules: one element)."""
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{what}: the predicate must be a single value, got shape {a.shape}")
    return bool(a.reshape(-1)[0])


def _stack(values, what):
    """numpy's stack along a new first axis, of arrays or graph tensors."""
    if builtins.any(_is_graph(v) for v in values) or _scope.current() is not None:
        shape = None
        for v in values:
            s = tuple(v.shape) if _is_graph(v) else np.shape(v)
            if shape is not None and s != shape:
                raise ValueError(f"{what}: the function's outputs differ in shape between steps: {shape} and {s}")
            shape = s
        if len(shape) + 1 > MAX_DIMS:
            raise ValueError(f"{what}: stacking outputs of shape {shape} needs {len(shape) + 1} dimensions; a graph "
                             f"tensor has at most {MAX_DIMS}")
        return _np_ops.stack(list(values), axis=0)
    return np.stack([np.asarray(v) for v in values])


def _leading(x, what):
    """The size of x's first axis."""
    shape = tuple(x.shape) if _is_graph(x) else np.shape(x)
    if not shape:
        raise ValueError(f"{what}: the values to loop over need a leading axis, got a scalar")
    return int(shape[0])


def _item(x, i):
    """x[i] along the first axis."""
    if _is_graph(x):
        t = x.graph_tensor() if isinstance(x, Variable) and _scope.current() is not None else x
        if isinstance(t, Variable):
            return t.numpy()[i]
        return t[i]
    return np.asarray(x)[i]


def _check_callable(f, what, name="f"):
    if not callable(f):
        raise TypeError(f"{what}: {name} must be callable, got {type(f).__name__}")


def _select(pred, a, b, what):
    """where(pred, a, b) over matching structures (graph select of two branches)."""
    if _structure(a) != _structure(b):
        raise ValueError(f"{what}: with a graph-tensor predicate both branches are computed and selected, so they "
                         f"must return the same structure; got {_describe(a)} and {_describe(b)}")
    la, lb = _flatten(a), _flatten(b)
    out = []
    for x, y in zip(la, lb):
        if x is None and y is None:
            out.append(None)
            continue
        if x is None or y is None:
            raise ValueError(f"{what}: one branch returned None where the other returned a value")
        out.append(_np_ops.where(pred, x, y))
    return _pack(a, out)


def _describe(tree):
    if isinstance(tree, (list, tuple)):
        return f"{type(tree).__name__} of {len(tree)}"
    if isinstance(tree, dict):
        return f"dict with keys {sorted(tree)}"
    return type(tree).__name__


# --- control flow -------------------------------------------------------------------------------------------

def cond(pred, true_fn, false_fn):
    """Keras's ``ops.cond``: ``true_fn()`` if ``pred`` else ``false_fn()``.

    A Python or numpy predicate (or a constant known while a graph is built) picks the
    branch.  A predicate computed in a model's graph (shape ``()``/(1,), or broadcastable
    to the outputs) cannot pick one while the graph is built: both branches are computed
    and their outputs selected element-wise with ``where``, so they must return the same
    structure of broadcast-compatible tensors (gradients reach the chosen branch only)."""
    _check_callable(true_fn, "cond", "true_fn")
    _check_callable(false_fn, "cond", "false_fn")
    if pred is None or callable(pred):
        raise TypeError(f"cond: pred must be a boolean value or tensor, got {type(pred).__name__}")
    known = _known(pred)
    if known is not None:
        return true_fn() if _truth(known, "cond") else false_fn()
    if isinstance(pred, Variable):
        pred = pred.graph_tensor()
    _check_pred_shape(pred, "cond")
    return _select(pred, true_fn(), false_fn(), "cond")


def _check_pred_shape(pred, what):
    if isinstance(pred, Tensor) and len(pred.shape) > MAX_DIMS:
        raise ValueError(f"{what}: the predicate has more than {MAX_DIMS} dimensions")


def switch(index, branches, *operands):
    """Keras's ``ops.switch``: ``branches[index](*operands)``, the index clamped into
    ``[0, len(branches) - 1]``.  A Python (or known) index picks a branch; an index
    computed in a model's graph (one value) computes every branch and selects the one it
    names (the branches must return the same structure)."""
    if not isinstance(branches, (list, tuple)) or not branches:
        raise TypeError(f"switch: branches must be a non-empty list of callables, got {branches!r}")
    for k, b in enumerate(branches):
        _check_callable(b, "switch", f"branches[{k}]")
    if index is None:
        raise TypeError("switch: index must be an integer or a tensor holding one, got None")
    known = _known(index)
    last = len(branches) - 1
    if known is not None:
        a = np.asarray(known)
        if a.size != 1 or a.dtype.kind not in "biuf":
            raise ValueError(f"switch: index must be a single integer, got {a!r}")
        i = int(np.clip(int(a.reshape(-1)[0]), 0, last))
        return branches[i](*operands)
    t = index.graph_tensor() if isinstance(index, Variable) else index
    if t.nelements != 1:
        raise ValueError(f"switch: a graph-tensor index must hold one value, got shape {tuple(t.shape)}")
    idx = _np_ops.clip(_np_ops.cast(t, "float32"), 0.0, float(last))
    outs = [b(*operands) for b in branches]
    result = outs[0]
    for k in range(1, len(outs)):
        # the index is an integer: k - 0.5 < idx picks branch k or a later one
        result = _select(_np_ops.greater(idx, k - 0.5), outs[k], result, "switch")
    return result


def while_loop(cond, body, loop_vars, maximum_iterations=None):
    """Keras's ``ops.while_loop``: ``while cond(*loop_vars): loop_vars = body(*loop_vars)``,
    at most ``maximum_iterations`` times; ``loop_vars`` is one value or a list/tuple (the
    result has the same form).

    In a model's graph the loop is unrolled while the condition is known (Python values,
    arrays, shape arithmetic).  A condition computed from graph tensors cannot be known
    while the graph is built: then ``maximum_iterations`` is required and that many steps
    are unrolled, each one applied only where the condition still holds (masked)."""
    _check_callable(cond, "while_loop", "cond")
    _check_callable(body, "while_loop", "body")
    if maximum_iterations is not None and (not is_int(maximum_iterations) or maximum_iterations < 0):
        raise ValueError(f"while_loop: maximum_iterations must be a non-negative int or None, got "
                         f"{maximum_iterations!r}")
    is_tuple = isinstance(loop_vars, (list, tuple))
    state = tuple(loop_vars) if is_tuple else (loop_vars,)
    graph = _in_graph(state)
    active = None          # the mask of steps still running, once a condition was a graph tensor
    steps = 0
    while maximum_iterations is None or steps < maximum_iterations:
        c = cond(*state)
        known = _known(c)
        if known is not None:
            if not _truth(known, "while_loop"):
                break
        elif maximum_iterations is None:
            raise TypeError("while_loop: the condition depends on graph tensors, so its value is unknown while the "
                            "graph is built; pass maximum_iterations (that many steps are unrolled and masked) or "
                            "use fori_loop with Python bounds")
        else:
            c = c.graph_tensor() if isinstance(c, Variable) else c
            c = _np_ops.cast(c, "bool")
            active = c if active is None else active * c
        new = body(*state)
        new = tuple(new) if isinstance(new, (list, tuple)) else (new,)
        if len(new) != len(state):
            raise ValueError(f"while_loop: body returned {len(new)} values for {len(state)} loop variables")
        state = new if active is None else _select(active, new, state, "while_loop")
        steps += 1
        if graph and maximum_iterations is None and steps >= MAX_UNROLLED_STEPS:
            raise ValueError(f"while_loop: the condition still held after {MAX_UNROLLED_STEPS} steps unrolled into "
                             f"the graph; pass maximum_iterations")
    return state if is_tuple else state[0]


def fori_loop(lower, upper, body_fun, init_val):
    """Keras's ``ops.fori_loop``: ``val = body_fun(i, val)`` for i in ``range(lower, upper)``.
    In a model's graph the bounds must be known (ints): the loop is unrolled."""
    _check_callable(body_fun, "fori_loop", "body_fun")
    bounds = []
    for name, v in (("lower", lower), ("upper", upper)):
        known = _known(v)
        if known is None:
            raise TypeError(f"fori_loop: {name} is a graph tensor whose value is unknown while the graph is built; "
                            f"pass a Python int (the loop is unrolled)")
        a = np.asarray(known)
        if a.size != 1 or a.dtype.kind not in "iub" and not (a.dtype.kind == "f" and float(a.reshape(-1)[0])
                                                               .is_integer()):
            raise TypeError(f"fori_loop: {name} must be an int, got {v!r}")
        bounds.append(int(a.reshape(-1)[0]))
    val = init_val
    for i in range(bounds[0], bounds[1]):
        val = body_fun(i, val)
    return val


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Keras's ``ops.scan``: ``carry, y = f(carry, x)`` over the leading axis of ``xs`` (a
    value or a nested list/tuple/dict of them), returning the last carry and the ys
    stacked (None when every y is None).  With ``xs=None``, ``length`` steps with
    ``x=None``.  In a model's graph the steps are unrolled (the leading axis is static);
    ``unroll`` is checked and otherwise has no effect (everything is unrolled)."""
    _check_callable(f, "scan")
    if not isinstance(unroll, bool) and (not is_int(unroll) or unroll < 1):
        raise ValueError(f"scan: unroll must be a positive int or a bool, got {unroll!r}")
    if not isinstance(reverse, (bool, np.bool_)):
        raise TypeError(f"scan: reverse must be True or False, got {reverse!r}")
    if xs is None and length is None:
        raise ValueError("scan: pass xs to scan over, or length (the number of steps) with xs=None")
    if length is not None and (not is_int(length) or length < 0):
        raise ValueError(f"scan: length must be a non-negative int, got {length!r}")
    leaves = [] if xs is None else _flatten(xs)
    if leaves:
        sizes = {_leading(x, "scan") for x in leaves}
        if len(sizes) != 1:
            raise ValueError(f"scan: the arrays in xs differ in their leading axis: {sorted(sizes)}")
        n = sizes.pop()
        if length is not None and int(length) != n:
            raise ValueError(f"scan: length={length} but xs has {n} entries along its leading axis")
    else:
        n = int(length) if length is not None else 0
    carry = init
    ys = []
    order = range(n - 1, -1, -1) if reverse else range(n)
    for i in order:
        x = None if xs is None else _pack(xs, [_item(leaf, i) for leaf in leaves])
        out = f(carry, x)
        if not isinstance(out, (list, tuple)) or len(out) != 2:
            raise ValueError("scan: f must return a pair (new carry, y)")
        new_carry, y = out
        if _structure(new_carry) != _structure(carry):
            raise ValueError(f"scan: f's new carry ({_describe(new_carry)}) must have the structure of init "
                             f"({_describe(carry)})")
        carry = new_carry
        ys.append(y)
    if reverse:
        ys = ys[::-1]
    if not ys or builtins.all(y is None for y in ys):
        return carry, None
    if builtins.len({_structure(y) for y in ys}) != 1:
        raise ValueError("scan: f returned ys of different structures in different steps")
    flat = [_flatten(y) for y in ys]
    stacked = [None if col[0] is None else _stack(col, "scan") for col in zip(*flat)]
    return carry, _pack(ys[0], stacked)


def map(f, xs):
    """Keras's ``ops.map``: ``f`` applied to each entry of ``xs`` along its leading axis
    (``xs`` may be nested), the results stacked.  Unrolled in a model's graph."""
    _check_callable(f, "map")
    _, ys = scan(lambda carry, x: ((), f(x)), (), xs)
    return ys


def vectorized_map(function, elements):
    """Keras's ``ops.vectorized_map``: ``function`` applied to each entry of ``elements``
    along its leading axis, stacked.  When ``elements`` is a list/tuple of tensors,
    ``function`` gets a list of their entries.  Unrolled in a model's graph."""
    _check_callable(function, "vectorized_map", "function")
    if isinstance(elements, (list, tuple)):
        if not elements:
            raise ValueError("vectorized_map: elements is empty")
        sizes = {_leading(e, "vectorized_map") for e in elements}
        if len(sizes) != 1:
            raise ValueError(f"vectorized_map: the elements differ in their leading axis: {sorted(sizes)}")
        outs = [function([_item(e, i) for e in elements]) for i in range(sizes.pop())]
    else:
        outs = [function(_item(elements, i)) for i in range(_leading(elements, "vectorized_map"))]
    if len({_structure(o) for o in outs}) != 1:
        raise ValueError("vectorized_map: function returned different structures for different entries")
    flat = [_flatten(o) for o in outs]
    return _pack(outs[0], [_stack(col, "vectorized_map") for col in zip(*flat)])


def vectorize(pyfunc, *, excluded=None, signature=None):
    """Keras's ``ops.vectorize`` (numpy's ``vectorize``): a function that applies ``pyfunc``
    entry by entry.  On arrays it is ``np.vectorize``; on graph tensors ``pyfunc`` is applied
    to the tensors whole when ``signature`` is None (so it must be made of entry-by-entry
    ops, as a function written for ``vectorize`` is), and over the leading axis with
    ``vectorized_map`` when a ``signature`` says it takes rows."""
    _check_callable(pyfunc, "vectorize", "pyfunc")
    if signature is not None and not isinstance(signature, str):
        raise TypeError(f"vectorize: signature must be a string such as '(n)->()', got {signature!r}")
    excluded = set(excluded or ())
    on_arrays = np.vectorize(pyfunc, excluded=excluded, signature=signature)

    def vectorized(*args, **kwargs):
        if not builtins.any(_is_graph(a) for a in list(args) + list(kwargs.values())):
            return on_arrays(*args, **kwargs)
        if signature is None:
            return pyfunc(*args, **kwargs)
        if kwargs or len(args) != 1:
            raise TypeError("vectorize: with a signature, a graph tensor is taken as the one positional argument")
        return vectorized_map(pyfunc, args[0])
    return vectorized


def _slice_axis(x, start, stop, axis):
    key = (slice(None),) * axis + (slice(start, stop),)
    if _is_graph(x):
        return x[key]
    return np.asarray(x)[key]


def _concat(parts, axis):
    if builtins.any(_is_graph(p) for p in parts) or _scope.current() is not None:
        return _np_ops.concatenate(list(parts), axis=axis)
    return np.concatenate([np.asarray(p) for p in parts], axis=axis)


def _flip(x, axis):
    n = x.shape[axis]
    if _is_graph(x):
        if n == 1:
            return x
        return _np_ops.take(x, np.arange(n - 1, -1, -1), axis=axis)
    return np.flip(np.asarray(x), axis)


def associative_scan(f, elems, reverse=False, axis=0):
    """Keras's ``ops.associative_scan``: the inclusive prefix combination of ``elems`` (a
    value or a nested list/tuple/dict of them) along ``axis`` by the associative ``f``,
    which is called on whole arrays (element-wise over ``axis``).  Built as ceil(log2 n)
    rounds of ``f`` (Hillis-Steele), in a graph as on arrays."""
    _check_callable(f, "associative_scan")
    if not isinstance(reverse, (bool, np.bool_)):
        raise TypeError(f"associative_scan: reverse must be True or False, got {reverse!r}")
    leaves = _flatten(elems)
    if not leaves or builtins.any(x is None for x in leaves):
        raise ValueError("associative_scan: elems must be arrays or tensors")
    leaves = [x if _is_graph(x) else np.asarray(x) for x in leaves]
    leaves = [x.graph_tensor() if isinstance(x, Variable) and _scope.current() is not None else
              (x.numpy() if isinstance(x, Variable) else x) for x in leaves]
    rank = len(leaves[0].shape)
    if not is_int(axis) or not -rank <= axis < rank:
        raise ValueError(f"associative_scan: axis {axis!r} is out of range for {rank} dimensions")
    ax = int(axis) % rank
    sizes = {int(x.shape[ax]) for x in leaves}
    if len(sizes) != 1:
        raise ValueError(f"associative_scan: the inputs differ along axis {axis}: {sorted(sizes)}")
    n = sizes.pop()
    if reverse:
        leaves = [_flip(x, ax) for x in leaves]
    d = 1
    while d < n:
        left = _pack(elems, [_slice_axis(x, 0, n - d, ax) for x in leaves])
        right = _pack(elems, [_slice_axis(x, d, n, ax) for x in leaves])
        combined = f(left, right)
        if _structure(combined) != _structure(elems):
            raise ValueError("associative_scan: f must return the structure of elems")
        leaves = [_concat([_slice_axis(x, 0, d, ax), c], ax) for x, c in zip(leaves, _flatten(combined))]
        d *= 2
    if reverse:
        leaves = [_flip(x, ax) for x in leaves]
    return _pack(elems, leaves)


# a custom gradient in a graph evaluates the gradient function once per output entry (the rows of
# the Jacobian's transpose): bounded so that a graph stays small
MAX_CUSTOM_GRADIENT_OUTPUTS = 4096
MAX_CUSTOM_GRADIENT_MATRIX = 1 << 24


def custom_gradient(f):
    """Keras's ``ops.custom_gradient`` decorator: ``f(*args)`` returns ``(y, grad_fn)``, where
    ``grad_fn(upstream)`` gives the gradient for each argument (one value for one argument,
    a tuple for several; None for an argument without one).  On arrays it returns ``y``.

    Inside a model's graph (ggml derives gradients from the ops, with no Python hook) the
    result is ``stop_gradient(y) + G @ (x - stop_gradient(x))``, whose value is y and whose
    gradient is ``grad_fn(upstream)`` exactly for any gradient function (which is linear in
    ``upstream``): the rows of G are ``grad_fn(e_j)`` for each entry j of y, computed while
    the graph is built (so y may have at most MAX_CUSTOM_GRADIENT_OUTPUTS entries, batch
    included).  y must be one tensor there."""
    _check_callable(f, "custom_gradient")

    def wrapper(*args, **kwargs):
        out = f(*args, **kwargs)
        if not isinstance(out, (list, tuple)) or len(out) != 2 or not callable(out[1]):
            raise ValueError("custom_gradient: the decorated function must return (output, grad_fn)")
        y, grad_fn = out
        if not _in_graph(list(args), list(kwargs.values()), y):
            return y
        return _custom_gradient_graph(getattr(f, "__name__", "the function"), args, y, grad_fn)
    wrapper.__name__ = getattr(f, "__name__", "custom_gradient")
    wrapper.__doc__ = getattr(f, "__doc__", None)
    return wrapper


def _custom_gradient_graph(name, args, y, grad_fn):
    if not _is_graph(y):
        if isinstance(y, (list, tuple, dict)):
            raise TypeError(f"custom_gradient: {name} returned a {type(y).__name__}; inside a model's graph the "
                            f"output must be one tensor")
        return y
    y = _np_ops._f(_graph_tensor(y))
    ny = int(y.nelements)
    if ny > MAX_CUSTOM_GRADIENT_OUTPUTS:
        raise TypeError(f"custom_gradient: {name}'s output has {ny} entries; inside a model's graph the gradient "
                        f"function is evaluated once per entry, at most {MAX_CUSTOM_GRADIENT_OUTPUTS} (use a smaller "
                        f"batch or write the forward with ops whose gradients are right)")
    inputs = [(k, _graph_tensor(a)) for k, a in enumerate(args) if _is_graph(a)]
    if not inputs:
        return y
    rows = {k: [] for k, _ in inputs}
    yshape = tuple(int(d) for d in y.shape)
    for j in range(ny):
        basis = np.zeros(ny, np.float32)          # a new array each time: a graph constant keeps its array
        basis[j] = 1.0
        grads = grad_fn(basis.reshape(yshape))
        grads = tuple(grads) if isinstance(grads, (list, tuple)) else (grads,)
        if len(grads) != len(args):
            raise ValueError(f"custom_gradient: {name}'s gradient function returned {len(grads)} gradients for "
                             f"{len(args)} arguments")
        for k, x in inputs:
            g = grads[k]
            if g is None:
                continue
            gshape = tuple(g.shape) if _is_graph(g) else np.shape(g)
            if int(np.prod(gshape)) != int(x.nelements):
                g = _np_ops.broadcast_to(g, tuple(int(d) for d in x.shape))
            rows[k].append((j, g))
    total = _np_ops.stop_gradient(y)
    for k, x in inputs:
        if not rows[k]:
            continue
        nx = int(x.nelements)
        if ny * nx > MAX_CUSTOM_GRADIENT_MATRIX:
            raise TypeError(f"custom_gradient: {name}'s Jacobian would hold {ny} x {nx} entries inside the graph, "
                            f"more than {MAX_CUSTOM_GRADIENT_MATRIX}")
        got = dict(rows[k])
        flat = [_c.reshape(_np_ops._cont(_np_ops._f(got[j])), (1, nx)) if j in got else
                _np_ops._t(np.zeros((1, nx), np.float32)) for j in range(ny)]
        jac = _np_ops.stop_gradient(flat[0] if ny == 1 else _np_ops.concatenate(flat, axis=0))   # (ny, nx)
        x = _np_ops._f(x)
        zero = _c.reshape(_np_ops._cont(x - _np_ops.stop_gradient(x)), (nx, 1))
        total = total + _c.reshape(_np_ops._cont(_np_ops.dot(jac, zero)), yshape)
    return total


# --- sorting ------------------------------------------------------------------------------------------------

def _graph_tensor(x):
    return x.graph_tensor() if isinstance(x, Variable) else x


def _check_axis(axis, ndim, what):
    if not is_int(axis):
        raise TypeError(f"{what}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what}: axis {axis} is out of range for {ndim} dimensions")
    return int(axis) % ndim


# a sort in a graph by comparisons holds a few tensors of rows x n x n floats (n: the sorted
# axis); above that, ggml's argsort (stable, patch 0044) orders the rows, and the values are
# picked by a rows x k x n 0/1 selection (which trains) up to MAX_PICKS, beyond that gathered
# without a gradient
MAX_SORT_COMPARISONS = 1 << 25
MAX_PICKS = 1 << 26


def _ranked(x, axis, descending, k, what):
    """Sorted values and their indices (float) of graph tensor x along ``axis``, the first
    ``k`` of them: each entry's rank counts the entries before it in the order (ties by
    index), and a 0/1 permutation built from the ranks (no gradient) picks the values (which
    train through the product)."""
    x = _np_ops._f(_graph_tensor(x))
    r = len(x.shape)
    ax = _check_axis(axis, r, what)
    moved = _np_ops._swap_last(x, ax)
    shape = tuple(int(d) for d in moved.shape)
    n = shape[-1]
    m = int(np.prod(shape[:-1])) if r > 1 else 1
    rows = _c.reshape(_np_ops._cont(moved), (m, n))
    out_shape = shape[:-1] + (k,)

    def back(t):
        return _np_ops._swap_last(_c.reshape(_np_ops._cont(t), out_shape), ax)
    if m * n * n > MAX_SORT_COMPARISONS:
        values, index = _argsorted(rows, m, n, k, descending, what)
        return back(values), back(index)
    row = _c.reshape(rows, (m, 1, n))           # [p, k] = x_k
    # the order is built behind stop_gradient (it has no gradient): the indices made from it
    # are then no node of the backward pass (an int32 tensor there is refused)
    fixed = _np_ops.stop_gradient(rows)
    col_s = _c.reshape(fixed, (m, n, 1))        # [p, j] = x_j
    row_s = _c.reshape(fixed, (m, 1, n))
    ahead = _np_ops.greater(row_s, col_s) if descending else _np_ops.less(row_s, col_s)
    earlier_tie = _np_ops.equal(row_s, col_s) * np.tril(np.ones((n, n), np.float32), -1)
    rank = _np_ops.sum(ahead + earlier_tie, axis=-1)                      # (m, n): where x_j goes
    places = np.arange(k, dtype=np.float32).reshape(k, 1)
    perm = _np_ops.equal(_c.reshape(_np_ops._cont(rank), (m, 1, n)), places)   # (m, k, n): [p, i, j] = rank_j == i
    values = _np_ops.sum(perm * row, axis=-1)
    # the indices: where each row of the permutation has its 1, by ggml's argmax (int32, and
    # bounded by n, so take/get_rows accepts them as indices)
    index = _c.reshape(_c.argmax(_c.reshape(_np_ops._cont(perm), (m * k, n))), (m, k))
    return back(values), back(index)


def _argsorted(rows, m, n, k, descending, what):
    """The first k of each row of (m, n) ``rows`` in order, and their int32 indices, by ggml's
    argsort: the values train through a (m, k, n) 0/1 selection while it is at most
    MAX_PICKS values, and are gathered without a gradient beyond that."""
    order = _c.argsort_rows(_np_ops.stop_gradient(rows), descending=descending)       # (m, n) int32
    index = order if k == n else _c.cont(_c.view(order, (m, k), (4 * n, 4), 0))
    if m * k * n <= MAX_PICKS:
        places = _c.reshape(_c.cast(_np_ops._cont(index), "f32"), (m, k, 1))
        picks = _np_ops.equal(places, np.arange(n, dtype=np.float32))          # (m, k, n): [p, i, j] = order_i == j
        values = _np_ops.sum(picks * _c.reshape(rows, (m, 1, n)), axis=-1)
        return values, index
    flat = _c.reshape(_np_ops.stop_gradient(rows), (m, n, 1))
    values = _c.reshape(_c.get_rows(flat, index), (m, k))                      # per row: its own k
    return values, index


def _sortable(x, what):
    a = _array(x, what)
    if a.ndim == 0:
        raise ValueError(f"{what}: x needs at least one axis, got a scalar")
    return a


def _check_graph_dims(x, what):
    if len(x.shape) > MAX_DIMS:
        raise ValueError(f"{what}: a graph tensor has at most {MAX_DIMS} dimensions, got {tuple(x.shape)}")


def sort(x, axis=-1):
    """Keras's ``ops.sort``: x's values in ascending order along ``axis``.  In a model's
    graph the sorted values train (each goes back to the entry it came from)."""
    if _in_graph(x) and _known(x) is None:
        return _ranked(x, axis, False, int(_graph_tensor(x).shape[_check_axis(axis, len(x.shape), "sort")]),
                       "sort")[0]
    a = _sortable(_known(x) if _in_graph(x) else x, "sort")
    out = np.sort(a, axis=_check_axis(axis, a.ndim, "sort"), kind="stable")
    return host_constant(out) if _in_graph(x) else out


def argsort(x, axis=-1):
    """Keras's ``ops.argsort``: the int32 indices that sort x along ``axis`` (ascending;
    equal values keep their order)."""
    if _in_graph(x) and _known(x) is None:
        ax = _check_axis(axis, len(x.shape), "argsort")
        return _ranked(x, ax, False, int(_graph_tensor(x).shape[ax]), "argsort")[1]
    a = _sortable(_known(x) if _in_graph(x) else x, "argsort")
    out = np.argsort(a, axis=_check_axis(axis, a.ndim, "argsort"), kind="stable").astype(np.int32)
    return host_constant(out) if _in_graph(x) else out


def argpartition(x, kth, axis=-1):
    """Keras's ``ops.argpartition``: int32 indices along ``axis`` that put x's ``kth``
    smallest value at position kth, smaller ones before it and the others after (numpy's
    argpartition on arrays; in a model's graph a full argsort, which is such an order)."""
    shape = tuple(x.shape) if _is_graph(x) else np.shape(x)
    if not shape:
        raise ValueError("argpartition: x needs at least one axis, got a scalar")
    ax = _check_axis(axis, len(shape), "argpartition")
    n = int(shape[ax])
    kths = np.atleast_1d(np.asarray(kth))
    if kths.dtype.kind not in "iu" or kths.ndim != 1 or kths.size == 0:
        raise TypeError(f"argpartition: kth must be an int or a sequence of ints, got {kth!r}")
    if kths.min() < -n or kths.max() >= n:
        raise ValueError(f"argpartition: kth {kth!r} is out of range for an axis of {n}")
    if _in_graph(x) and _known(x) is None:
        return _ranked(x, ax, False, n, "argpartition")[1]
    a = _sortable(_known(x) if _in_graph(x) else x, "argpartition")
    out = np.argpartition(a, kth, axis=ax).astype(np.int32)
    return host_constant(out) if _in_graph(x) else out


def top_k(x, k, sorted=True, is_stable=True):
    """Keras's ``ops.top_k`` in a graph and on arrays: the ``k`` largest values along the last
    axis, largest first (ties: the lower index first), and their int32 indices.  In a
    model's graph the values train.  ``sorted=False`` still gives them sorted (any order is
    allowed)."""
    shape = tuple(x.shape) if _is_graph(x) else np.shape(x)
    if not shape:
        raise ValueError("top_k: x needs at least one axis")
    if not is_int(k) or not 1 <= k <= shape[-1]:
        raise ValueError(f"top_k: k must be an int in [1, {shape[-1]}] (the last axis), got {k!r}")
    for name, v in (("sorted", sorted), ("is_stable", is_stable)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"top_k: {name} must be True or False, got {v!r}")
    if _in_graph(x) and _known(x) is None:
        return _ranked(x, -1, True, int(k), "top_k")
    a = _sortable(_known(x) if _in_graph(x) else x, "top_k")
    idx = np.argsort(-a.astype(np.float64), axis=-1, kind="stable")[..., :int(k)]
    values, idx = np.take_along_axis(a, idx, axis=-1), idx.astype(np.int32)
    if _in_graph(x):
        return host_constant(values), host_constant(idx)
    return values, idx


# --- scatter ------------------------------------------------------------------------------------------------

_REDUCTIONS = (None, "add", "max", "min", "mul")


def _static_indices(indices, what, name="indices"):
    """Integer indices known while the graph is built (arrays, lists, constant tensors)."""
    known = _known(indices)
    if known is None:
        raise TypeError(f"{what}: {name} is a graph tensor computed in the graph; the positions must be known when "
                        f"the graph is built (a list or a numpy array)")
    a = np.asarray(known)
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and a.size and np.all(np.mod(a, 1) == 0):
            a = a.astype(np.int64)
        elif a.size:
            raise TypeError(f"{what}: {name} must be integers, got dtype {a.dtype}")
        else:
            a = a.astype(np.int64)
    return a.astype(np.int64)


def _positions(idx, dims, what):
    """Flat positions in ``dims`` for index rows ``idx`` (N, k); negatives count from the end."""
    dims = np.asarray(dims, dtype=np.int64)
    if idx.size and ((idx < -dims).any() or (idx >= dims).any()):
        bad = idx[((idx < -dims) | (idx >= dims)).any(axis=1)][0]
        raise IndexError(f"{what}: index {bad.tolist()} is out of bounds for shape {tuple(dims.tolist())}")
    idx = np.where(idx < 0, idx + dims, idx)
    return np.ravel_multi_index(tuple(idx.T), tuple(dims.tolist())) if idx.size else np.zeros(0, np.int64)


def _place(base, positions, rows, size, reduction):
    """In a graph: ``base`` (size, c) or None (zeros) with ``rows`` (N, c) combined at
    ``positions`` (N,) by ``reduction`` (None: replace, the last one winning; "add" ...).
    Duplicated positions are applied in rounds of distinct positions, in their order."""
    n = len(positions)
    seen = {}
    rounds = np.zeros(n, np.int64)
    for i, p in enumerate(positions.tolist()):
        rounds[i] = seen.get(p, 0)
        seen[p] = rounds[i] + 1
    out = base
    for r in range(int(rounds.max()) + 1):
        sel = np.nonzero(rounds == r)[0]
        src = np.zeros(size, np.int64)
        mask = np.zeros((size, 1), np.float32)
        src[positions[sel]] = sel
        mask[positions[sel]] = 1.0
        picked = _np_ops.take(rows, src, axis=0) * mask
        if out is None:
            out = picked
        elif reduction is None:
            out = out * (1.0 - mask) + picked
        elif reduction == "add":
            out = out + picked
        elif reduction == "mul":
            out = out * (picked + (1.0 - mask))
        else:
            pick = _np_ops.maximum if reduction == "max" else _np_ops.minimum
            out = out + (pick(out, picked) - out) * mask
    return out


def _graph_values(v):
    v = _graph_tensor(v)
    return v if isinstance(v, Tensor) else _np_ops._f(_float_array(v, "values"))


def _reduction(reduction):
    if isinstance(reduction, str):
        reduction = reduction.lower()
    if not (reduction is None or isinstance(reduction, str)) or reduction not in _REDUCTIONS:
        raise ValueError(f"scatter_update: reduction must be None, 'add', 'max', 'min' or 'mul', got {reduction!r}")
    return reduction


def _index_rows(indices, shape, values, what, name, one_row=False):
    """scatter's and scatter_update's indices, checked: (rows of k ints, the entry shape
    ``shape[k:]``, their flat positions); ``values`` must hold one entry per row (``one_row``:
    a 1-D ``indices`` is one row)."""
    idx = _static_indices(indices, what)
    if idx.ndim == 0:
        raise ValueError(f"{what}: indices must have at least one axis (rows of indices)")
    if one_row and idx.ndim == 1:
        idx = idx.reshape(1, -1)
    k = idx.shape[-1]
    if not 1 <= k <= len(shape):
        raise ValueError(f"{what}: each index has {k} entries, but shape {shape} has {len(shape)} dimensions")
    rows_idx = idx.reshape(-1, k)
    rest = shape[k:]
    vshape = tuple(values.shape) if _is_graph(values) else np.shape(values)
    if int(np.prod(vshape)) != len(rows_idx) * int(np.prod(rest)):
        raise ValueError(f"{what}: {name} of shape {vshape} do not hold one entry of shape {rest} for each of the "
                         f"{len(rows_idx)} indices")
    return rows_idx, rest, _positions(rows_idx, shape[:k], what)


_MAX_ONE_HOT = 1 << 26        # entries of the (indices x positions) matrix of a computed-index scatter


def _scatter_computed(indices, values, shape):
    """scatter with indices computed in the graph (top_k's, argmax's: keras-io's mixture of
    experts counting its experts' use): each index row picks its flat position through a one-hot
    row, and the values are summed into place by one product, so duplicates add and the
    gradient reaches the values.  An index out of range adds nothing."""
    what = "scatter"
    t = _c.cast(_np_ops._cont(indices), "f32") if indices.dtype == "i32" else _np_ops._cont(indices)
    ishape = tuple(int(d) for d in t.shape)
    if not ishape:
        raise ValueError(f"{what}: indices must have at least one axis (rows of indices)")
    k = ishape[-1]
    if not 1 <= k <= len(shape):
        raise ValueError(f"{what}: each index has {k} entries, but shape {shape} has {len(shape)} dimensions")
    n = int(np.prod(ishape[:-1])) if len(ishape) > 1 else 1
    rest = shape[k:]
    c = int(np.prod(rest)) if rest else 1
    vshape = tuple(values.shape) if _is_graph(values) else np.shape(values)
    if int(np.prod(vshape)) != n * c:
        raise ValueError(f"{what}: values of shape {vshape} do not hold one entry of shape {rest} for each of the "
                         f"{n} indices")
    size = int(np.prod(shape[:k]))
    if n * size > _MAX_ONE_HOT or len(shape) > MAX_DIMS:
        raise ValueError(f"{what}: {n} computed indices into {shape} are too many for a graph (a one-hot matrix of "
                         f"{n} x {size}); give indices known when the graph is built")
    strides = np.cumprod((1,) + tuple(reversed(shape[1:k])))[::-1].astype(np.float32).reshape(k, 1)
    flat = _np_ops.matmul(_c.reshape(t, (n, k)), _np_ops._t(strides)) if k > 1 else _c.reshape(t, (n, 1))
    grid = _np_ops._t(np.arange(size, dtype=np.float32).reshape(1, size))
    one_hot = _c.step(_c.scale_bias(_c.abs(_np_ops._cont(flat - grid)), -1.0, 0.5))              # (n, size)
    v = _graph_values(values)
    rows = _c.reshape(_np_ops._cont(v), (n, c))
    placed = _np_ops.matmul(_np_ops.transpose(one_hot, (1, 0)), rows)                            # (size, c)
    return _c.reshape(_np_ops._cont(placed), shape)


def scatter(indices, values, shape):
    """Keras's ``ops.scatter``: a tensor of ``shape``, zero except at ``indices`` (rows of k
    ints, the first k axes), where ``values`` (one entry of ``shape[k:]`` per index) are
    added (duplicated indices sum).  Gradients flow to ``values``; indices computed in the graph
    (top_k's) place the values through one-hot rows (see _scatter_computed)."""
    if is_int(shape):
        shape = (shape,)
    if not isinstance(shape, (list, tuple, np.ndarray)) or not len(shape) or not builtins.all(
            is_int(d) and d > 0 for d in shape):
        raise ValueError(f"scatter: shape must be a tuple of positive ints, got {shape!r}")
    shape = tuple(int(d) for d in shape)
    if _is_graph(indices) and _known(indices) is None:
        return _scatter_computed(indices, values, shape)
    rows_idx, rest, positions = _index_rows(indices, shape, values, "scatter", "values")
    if not _in_graph(values):
        v = _array(values, "scatter", "values")
        out = np.zeros(shape, dtype=v.dtype)
        np.add.at(out.reshape((-1,) + rest), positions, v.reshape((-1,) + rest))
        return out
    if len(shape) > MAX_DIMS:
        raise ValueError(f"scatter: a graph tensor has at most {MAX_DIMS} dimensions, got shape {shape}")
    if not len(rows_idx):
        return _np_ops.zeros(shape)
    c = int(np.prod(rest)) if rest else 1
    v = _graph_values(values)
    rows = _c.reshape(_np_ops._cont(v), (len(rows_idx), c))
    size = int(np.prod(shape[:len(shape) - len(rest)]))
    placed = _place(None, positions, rows, size, "add")
    return _c.reshape(_np_ops._cont(placed), shape)


def scatter_update(inputs, indices, updates, reduction=None):
    """Keras's ``ops.scatter_update``: ``inputs`` with the entries at ``indices`` (rows of k
    ints, the first k axes) set to ``updates`` (one entry of ``inputs.shape[k:]`` each), or
    combined with them by ``reduction`` ("add", "max", "min", "mul"; None replaces, the last
    of duplicated indices winning).  On arrays the input is not changed (a copy is
    returned).  In a model's graph the indices must be known when the graph is built;
    gradients flow to ``inputs`` and ``updates``."""
    reduction = _reduction(reduction)
    ishape = tuple(int(d) for d in (inputs.shape if _is_graph(inputs) else np.shape(inputs)))
    if not ishape:
        raise ValueError("scatter_update: inputs must have at least one axis")
    rows_idx, rest, positions = _index_rows(indices, ishape, updates, "scatter_update", "updates", one_row=True)
    if not _in_graph(inputs, updates):
        out = _array(inputs, "scatter_update", "inputs").copy()
        u = _array(updates, "scatter_update", "updates").reshape((-1,) + rest)
        flat = out.reshape((-1,) + rest)
        if reduction is None:
            flat[positions] = u
        else:
            {"add": np.add, "max": np.maximum, "min": np.minimum, "mul": np.multiply}[reduction].at(flat, positions, u)
        return out
    if not len(rows_idx):
        return _graph_values(inputs)
    c = int(np.prod(rest)) if rest else 1
    size = int(np.prod(ishape[:len(ishape) - len(rest)]))
    base = _c.reshape(_np_ops._cont(_graph_values(inputs)), (size, c))
    rows = _c.reshape(_np_ops._cont(_graph_values(updates)), (len(rows_idx), c))
    return _c.reshape(_np_ops._cont(_place(base, positions, rows, size, reduction)), ishape)


def slice_update(inputs, start_indices, updates):
    """Keras's ``ops.slice_update``: ``inputs`` with the block starting at ``start_indices``
    (one int per axis) replaced by ``updates`` (of inputs' rank, fitting inside it).  On
    arrays the input is not changed (a copy is returned).  In a model's graph the start
    must be known when the graph is built; gradients flow to both."""
    ishape = tuple(int(d) for d in (inputs.shape if _is_graph(inputs) else np.shape(inputs)))
    ushape = tuple(int(d) for d in (updates.shape if _is_graph(updates) else np.shape(updates)))
    start = _static_indices(start_indices, "slice_update", "start_indices").reshape(-1)
    if len(start) != len(ishape):
        raise ValueError(f"slice_update: start_indices needs one int per axis of inputs {ishape}, got "
                         f"{start.tolist()}")
    if len(ushape) != len(ishape):
        raise ValueError(f"slice_update: updates of shape {ushape} must have the rank of inputs {ishape}")
    for s, u, d in zip(start.tolist(), ushape, ishape):
        if s < 0 or s + u > d:
            raise ValueError(f"slice_update: updates of shape {ushape} at {start.tolist()} do not fit in inputs of "
                             f"shape {ishape}")
    block = tuple(builtins.slice(s, s + u) for s, u in zip(start.tolist(), ushape))
    if not _in_graph(inputs, updates):
        out = _array(inputs, "slice_update", "inputs").copy()
        out[block] = _array(updates, "slice_update", "updates")
        return out
    size = int(np.prod(ishape))
    positions = np.arange(size).reshape(ishape)[block].reshape(-1)
    base = _c.reshape(_np_ops._cont(_graph_values(inputs)), (size, 1))
    rows = _c.reshape(_np_ops._cont(_graph_values(updates)), (len(positions), 1))
    return _c.reshape(_np_ops._cont(_place(base, positions, rows, size, None)), ishape)


def nonzero(x):
    """Keras's ``ops.nonzero``: a tuple of int32 index arrays, one per axis, of x's non-zero
    entries.  Their length depends on the values, so it is computed on arrays (inside a
    graph only from values known when it is built)."""
    if _in_graph(x):
        known = _known(x)
        if known is None:
            raise TypeError("nonzero: the number of non-zero entries depends on values unknown while the graph is "
                            "built; compute it on arrays, or use ops.where(condition, x1, x2) for a mask")
        found = np.nonzero(_array(known, "nonzero"))
        if builtins.any(i.size == 0 for i in found):
            raise ValueError("nonzero: no entry is non-zero, and a graph tensor cannot be empty")
        return tuple(host_constant(i.astype(np.int32)) for i in found)
    return tuple(i.astype(np.int32) for i in np.nonzero(_array(x, "nonzero")))


def where(condition, x1=None, x2=None):
    """Keras's ``ops.where``: x1 where the condition is true (non-zero), x2 elsewhere
    (broadcast); with the condition alone, the indices of its true entries, one int32 array
    per axis, as ``nonzero`` (on arrays, or on values known while a graph is built)."""
    if x1 is None and x2 is None:
        return nonzero(condition)
    return _np_ops.where(condition, x1, x2)


# --- linear algebra -----------------------------------------------------------------------------------------

def _on_arrays(name, compute, *args, graph=None):
    """compute(*arrays) on arrays; inside a graph on the values known there (results become
    constants); for computed graph tensors ``graph(*args)`` (the small unrolled forms) or a
    TypeError."""
    if _in_graph(*args):
        known = [_known(a) for a in args]
        if builtins.any(k is None for k in known):
            if graph is not None:
                return graph(*args)
            raise TypeError(f"{name}: linear algebra is computed on arrays, not on graph tensors computed in a "
                            f"model's graph (ggml has no {name}); call it on arrays, e.g. the results of predict")
        out = compute(*known)
        outs = out if isinstance(out, tuple) else (out,)
        if builtins.any(np.iscomplexobj(o) for o in outs):
            raise TypeError(f"{name}: the result is complex, which a graph tensor cannot hold")
        consts = tuple(host_constant(np.asarray(o, dtype=np.int32 if np.asarray(o).dtype.kind in "iu"
                                                 else np.float32)) for o in outs)
        return consts if isinstance(out, tuple) else consts[0]
    return compute(*args)


# --- small matrices inside a graph: unrolled from element-wise ops (they train) ----------------------------

MAX_GRAPH_MATRIX = 8


def _graph_matrix(x, what, name="a"):
    t = _np_ops._f(_graph_tensor(x) if _is_graph(x) else _float_array(x, what, name))
    shape = tuple(int(d) for d in t.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"{what}: {name} must be square (..., n, n), got shape {shape}")
    n = shape[-1]
    if n > MAX_GRAPH_MATRIX:
        raise TypeError(f"{what}: inside a model's graph it is unrolled for matrices up to {MAX_GRAPH_MATRIX} x "
                        f"{MAX_GRAPH_MATRIX}, got {n} x {n}; compute it on arrays")
    return t, n


def _entry(t, i, j):
    """t[..., i, j] keeping a last axis of 1."""
    return t[..., i, j:j + 1]


def _stack_rows(rows):
    return rows[0][..., None, :] if len(rows) == 1 else _np_ops.stack(rows, axis=-2)


def _batch_shape(t):
    return tuple(int(d) for d in t.shape[:-2])


def _eliminate(rows, n, full):
    """Gaussian elimination with partial pivoting on ``rows`` (tensors (..., m), m >= n): the
    pivot of each column is picked by comparisons (the first largest magnitude, a 0/1 choice
    without gradient) and swapped in by masks.  ``full``: Gauss-Jordan (every other row is
    cleared).  Returns the rows, the pivots (..., 1) and the sign of the row swaps (None when
    there was no choice)."""
    sign = None
    pivots = []
    for k in range(n):
        cand = list(range(k, n))
        if len(cand) > 1:
            mags = {i: _c.abs(_np_ops._cont(rows[i][..., k:k + 1])) for i in cand}
            first = {}
            for i in cand:
                mask = None
                for j in cand:
                    if j != i:
                        c = _np_ops.greater_equal(mags[i], mags[j]) if j > i else _np_ops.greater(mags[i], mags[j])
                        mask = c if mask is None else mask * c
                first[i] = mask
            pivot_row = None
            for i in cand:
                part = first[i] * rows[i]
                pivot_row = part if pivot_row is None else pivot_row + part
            old = rows[k]
            for i in cand[1:]:
                rows[i] = rows[i] + first[i] * (old - rows[i])
            rows[k] = pivot_row
            flip = first[k] * 2.0 - 1.0                    # -1 where another row came up
            sign = flip if sign is None else sign * flip
        piv = rows[k][..., k:k + 1]
        pivots.append(piv)
        # a zero pivot has a zero column below it (the largest magnitude is 0): nothing to clear
        safe = piv + _np_ops.equal(piv, 0.0)
        for i in (range(n) if full else range(k + 1, n)):
            if i != k:
                rows[i] = rows[i] - (rows[i][..., k:k + 1] / safe) * rows[k]
    return rows, pivots, sign


def _to_batch(t, batch):
    return _c.reshape(_np_ops._cont(t), batch or (1,))


def _det_graph(x):
    t, n = _graph_matrix(x, "det", "x")
    _, pivots, sign = _eliminate([t[..., i, :] for i in range(n)], n, False)
    out = pivots[0]
    for p in pivots[1:]:
        out = out * p
    if sign is not None:
        out = out * sign
    return _to_batch(out, _batch_shape(t))


def _slogdet_graph(x):
    t, n = _graph_matrix(x, "slogdet", "x")
    _, pivots, sign = _eliminate([t[..., i, :] for i in range(n)], n, False)
    sgn = sign
    logabs = None
    for p in pivots:
        s = _np_ops.sign(p)
        sgn = s if sgn is None else sgn * s
        la = _c.log(_c.abs(_np_ops._cont(p)))
        logabs = la if logabs is None else logabs + la
    batch = _batch_shape(t)
    return _to_batch(sgn, batch), _to_batch(logabs, batch)


def _solve_graph(a, b, what="solve"):
    t, n = _graph_matrix(a, what)
    batch = _batch_shape(t)
    bt = _np_ops._f(_graph_tensor(b) if _is_graph(b) else _float_array(b, what, "b"))
    bshape = tuple(int(d) for d in bt.shape)
    vector = len(bshape) == len(batch) + 1
    if not (vector and bshape == batch + (n,)) and not (len(bshape) == len(batch) + 2 and bshape[:-1] ==
                                                         batch + (n,)):
        if len(bshape) in (1, 2) and bshape[0] == n and batch:
            bt = _np_ops.broadcast_to(bt, batch + bshape)             # one right-hand side for every matrix
            bshape = batch + bshape
            vector = len(bshape) == len(batch) + 1
        else:
            raise ValueError(f"{what}: b of shape {bshape} does not match a of shape {tuple(t.shape)} (b needs {n} "
                             f"rows and a's leading axes)")
    if vector:
        bt = _c.reshape(_np_ops._cont(bt), bshape + (1,))
    if len(bt.shape) > MAX_DIMS:
        raise ValueError(f"{what}: b needs {len(bt.shape)} dimensions as a matrix; a graph tensor has at most "
                         f"{MAX_DIMS}")
    aug = _np_ops.concatenate([t, bt], axis=-1)
    rows, _, _ = _eliminate([aug[..., i, :] for i in range(n)], n, True)
    xs = [rows[i][..., n:] / rows[i][..., i:i + 1] for i in range(n)]
    out = _stack_rows(xs)
    return _c.reshape(_np_ops._cont(out), bshape) if vector else out


def _inv_graph(x):
    t, n = _graph_matrix(x, "inv", "x")
    eye = np.broadcast_to(np.eye(n, dtype=np.float32), tuple(t.shape)).copy()
    return _solve_graph(t, eye, "inv")


def _cholesky_graph(x, upper):
    t, n = _graph_matrix(x, "cholesky", "x")
    low = [[None] * n for _ in range(n)]
    for j in range(n):
        s = _entry(t, j, j)
        for k in range(j):
            s = s - low[j][k] * low[j][k]
        low[j][j] = _c.sqrt(_np_ops._cont(s))
        for i in range(j + 1, n):
            v = _entry(t, i, j)
            for k in range(j):
                v = v - low[i][k] * low[j][k]
            low[i][j] = v / low[j][j]
    batch = _batch_shape(t)
    rows = []
    for i in range(n):
        parts = low[i][:i + 1]
        if i < n - 1:
            parts = parts + [_np_ops._t(np.zeros(batch + (n - 1 - i,), np.float32))]
        rows.append(parts[0] if len(parts) == 1 else _np_ops.concatenate(parts, axis=-1))
    out = _stack_rows(rows)
    if not upper:
        return out
    r = len(out.shape)
    return _np_ops.transpose(out, tuple(range(r - 2)) + (r - 1, r - 2))


def _solve_triangular_graph(a, b, lower):
    t, n = _graph_matrix(a, "solve_triangular")
    batch = _batch_shape(t)
    bt = _np_ops._f(_graph_tensor(b) if _is_graph(b) else _float_array(b, "solve_triangular", "b"))
    bshape = tuple(int(d) for d in bt.shape)
    vector = bshape == batch + (n,)
    if not vector and not (len(bshape) == len(batch) + 2 and bshape[:-1] == batch + (n,)):
        raise ValueError(f"solve_triangular: b of shape {bshape} does not match a of shape {tuple(t.shape)} (b needs "
                         f"{n} rows and a's leading axes)")
    if vector:
        bt = _c.reshape(_np_ops._cont(bt), bshape + (1,))
    xs = [None] * n
    for i in (range(n) if lower else range(n - 1, -1, -1)):
        v = bt[..., i, :]
        for k in (range(i) if lower else range(i + 1, n)):
            v = v - _entry(t, i, k) * xs[k]
        xs[i] = v / _entry(t, i, i)
    out = _stack_rows(xs)
    return _c.reshape(_np_ops._cont(out), bshape) if vector else out


def _matrices(x, what, square=True, name="x"):
    a = _float_array(x, what, name)
    if a.ndim < 2:
        raise ValueError(f"{what}: {name} must be a matrix or a batch of matrices, got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{what}: {name} must be square (..., n, n), got shape {a.shape}")
    return a


def _linalg_errors(what, fn):
    try:
        return fn()
    except np.linalg.LinAlgError as e:
        raise ValueError(f"{what}: {e}") from None


def cholesky(x, upper=False):
    """Keras's ``ops.cholesky``: the lower triangular L with ``L @ L.T == x`` (x symmetric
    positive definite; ValueError otherwise), or its transpose with ``upper=True``."""
    if not isinstance(upper, (bool, np.bool_)):
        raise TypeError(f"cholesky: upper must be True or False, got {upper!r}")

    def compute(a):
        a = _matrices(a, "cholesky")
        low = _linalg_errors("cholesky", lambda: np.linalg.cholesky(a))
        return np.swapaxes(low, -1, -2).conj() if upper else low
    return _on_arrays("cholesky", compute, x, graph=lambda t: _cholesky_graph(t, upper))


def det(x):
    """Keras's ``ops.det``: the determinant of each square matrix."""
    return _on_arrays("det", lambda a: np.linalg.det(_matrices(a, "det")), x, graph=_det_graph)


def slogdet(x):
    """Keras's ``ops.slogdet``: ``(sign, log|det|)`` of each square matrix."""
    return _on_arrays("slogdet", lambda a: tuple(np.linalg.slogdet(_matrices(a, "slogdet"))), x,
                      graph=_slogdet_graph)


def eig(x):
    """Keras's ``ops.eig``: ``(eigenvalues, eigenvectors)`` of each square matrix (complex
    where they are)."""
    return _on_arrays("eig", lambda a: tuple(_linalg_errors("eig", lambda: np.linalg.eig(_matrices(a, "eig")))), x)


def eigh(x):
    """Keras's ``ops.eigh``: ``(eigenvalues ascending, eigenvectors)`` of each symmetric
    (Hermitian) matrix, from its lower triangle."""
    return _on_arrays("eigh", lambda a: tuple(_linalg_errors("eigh", lambda: np.linalg.eigh(_matrices(a, "eigh")))),
                      x)


def inv(x):
    """Keras's ``ops.inv``: the inverse of each square matrix (ValueError when singular)."""
    return _on_arrays("inv", lambda a: _linalg_errors("inv", lambda: np.linalg.inv(_matrices(a, "inv"))), x,
                      graph=_inv_graph)


def qr(x, mode="reduced"):
    """Keras's ``ops.qr``: ``(q, r)`` with ``mode`` "reduced" (q: (..., m, k), k = min(m, n))
    or "complete" (q: (..., m, m))."""
    if not isinstance(mode, str) or mode not in ("reduced", "complete"):
        raise ValueError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return _on_arrays("qr", lambda a: tuple(np.linalg.qr(_matrices(a, "qr", square=False), mode=mode)), x)


def svd(x, full_matrices=True, compute_uv=True):
    """Keras's ``ops.svd``: ``(u, s, vh)`` (``s`` alone with ``compute_uv=False``)."""
    for name, v in (("full_matrices", full_matrices), ("compute_uv", compute_uv)):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"svd: {name} must be True or False, got {v!r}")

    def compute(a):
        a = _matrices(a, "svd", square=False)
        if compute_uv and full_matrices and builtins.max(a.shape[-2:]) ** 2 * int(np.prod(a.shape[:-2])) > 1 << 28:
            raise ValueError(f"svd: full_matrices=True for x of shape {a.shape} would make square factors of "
                             f"{builtins.max(a.shape[-2:])} x {builtins.max(a.shape[-2:])}; pass full_matrices=False")
        out = _linalg_errors("svd", lambda: np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv))
        return tuple(out) if compute_uv else out
    return _on_arrays("svd", compute, x)


def _rhs(a, b, what):
    b = _float_array(b, what, "b")
    n = a.shape[-1]
    if b.ndim == 0 or (b.ndim == a.ndim - 1 and b.shape[-1] != n) or (b.ndim >= a.ndim and b.shape[-2] != n) or \
            b.ndim < a.ndim - 1:
        raise ValueError(f"{what}: b of shape {b.shape} does not match a of shape {a.shape} (b needs {n} rows)")
    return b


def solve(a, b):
    """Keras's ``ops.solve``: x with ``a @ x == b`` (b a vector or matrices of n rows)."""
    def compute(a, b):
        a = _matrices(a, "solve", name="a")
        b = _rhs(a, b, "solve")
        if b.ndim == a.ndim - 1:
            return _linalg_errors("solve", lambda: np.linalg.solve(a, b[..., None]))[..., 0]
        return _linalg_errors("solve", lambda: np.linalg.solve(a, b))
    return _on_arrays("solve", compute, a, b, graph=_solve_graph)


def lstsq(a, b, rcond=None):
    """Keras's ``ops.lstsq``: the least-squares solution x of ``a @ x ~= b`` (a (m, n), b (m,)
    or (m, k)); ``rcond`` cuts small singular values (numpy's default when None)."""
    if rcond is not None and not isinstance(rcond, (int, float, np.number)):
        raise TypeError(f"lstsq: rcond must be a number or None, got {rcond!r}")

    def compute(a, b):
        a = _float_array(a, "lstsq", "a")
        b = _float_array(b, "lstsq", "b")
        if a.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
            raise ValueError(f"lstsq: a must be (m, n) and b (m,) or (m, k); got {a.shape} and {b.shape}")
        return _linalg_errors("lstsq", lambda: np.linalg.lstsq(a, b, rcond=rcond)[0])
    return _on_arrays("lstsq", compute, a, b)


def _lu_one(a):
    """LAPACK's getrf with partial pivoting: the packed LU and the 0-based row swaps."""
    lu = a.copy()
    m, n = lu.shape
    piv = np.zeros(builtins.min(m, n), np.int32)
    for j in range(builtins.min(m, n)):
        p = j + int(np.argmax(np.abs(lu[j:, j])))
        piv[j] = p
        if p != j:
            lu[[j, p]] = lu[[p, j]]
        if lu[j, j] != 0:
            lu[j + 1:, j] /= lu[j, j]
        lu[j + 1:, j + 1:] -= np.outer(lu[j + 1:, j], lu[j, j + 1:])
    return lu, piv


def lu_factor(x):
    """Keras's ``ops.lu_factor``: ``(lu, pivots)`` as LAPACK's getrf (scipy's lu_factor):
    L below the diagonal (unit diagonal implied) and U on and above it in one matrix, and
    the 0-based row interchanged with each row."""
    def compute(a):
        a = _matrices(a, "lu_factor", square=False)
        if a.dtype != np.float64:
            a = a.astype(np.float32)
        batch = a.shape[:-2]
        lus = np.empty_like(a)
        pivs = np.empty(batch + (builtins.min(a.shape[-2:]),), np.int32)
        for i in np.ndindex(*batch):
            lus[i], pivs[i] = _lu_one(a[i])
        return lus, pivs
    return _on_arrays("lu_factor", compute, x)


def solve_triangular(a, b, lower=False):
    """Keras's ``ops.solve_triangular``: x with ``a @ x == b`` for a triangular ``a`` (its
    lower triangle with ``lower=True``, the upper one otherwise; the other is ignored)."""
    if not isinstance(lower, (bool, np.bool_)):
        raise TypeError(f"solve_triangular: lower must be True or False, got {lower!r}")

    def compute(a, b):
        a = _matrices(a, "solve_triangular", name="a")
        b = _rhs(a, b, "solve_triangular")
        tri = np.tril(a) if lower else np.triu(a)
        if np.any(np.diagonal(tri, axis1=-2, axis2=-1) == 0):
            raise ValueError("solve_triangular: a is singular (a zero on its diagonal)")
        if b.ndim == a.ndim - 1:
            return np.linalg.solve(tri, b[..., None])[..., 0]
        return np.linalg.solve(tri, b)
    return _on_arrays("solve_triangular", compute, a, b, graph=lambda a, b: _solve_triangular_graph(a, b, lower))
