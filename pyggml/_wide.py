"""Tensors of five or more dimensions inside a graph (Keras's reshape, transpose, reshape).

ggml tensors have at most four dimensions.  Keras code often passes through more
for a moment: Swin's windows (a reshape to ``(b, ny, w, nx, w, c)``, a transpose,
a reshape back), the ``qkv`` of CaiT and the ViTs (a reshape to ``(b, n, 3, heads,
d)``, a transpose to ``(3, b, heads, n, d)``, then ``qkv[0]``), a pixel shuffle, an
attention mask added over ``(b, windows, heads, n, n)``.

A ``Wide`` is such a tensor in the graph being built: a contiguous ggml tensor
holding its values in C order, and the shape they have.  A reshape of one is
free.  Every other op merges the axes it does not separate into at most four,
runs ggml's op on that, and gives back a Wide, or a Tensor once the shape has
four dimensions or fewer:

- a transpose moves blocks of axes (the axes that stay together), in one
  four-dimensional permute where at most four blocks are involved, else in a
  few, each putting one more block in place;
- a reduction, softmax or cumulative sum sees ``(before, axis, after)`` (axes
  reduced together that are not next to each other are moved together first);
- an element-wise op groups neighbouring axes by which operands broadcast along
  them (at most four such groups);
- matmul merges the stacked axes the same way; indexing takes one axis at a time.

Each step is made of ggml's own ops (reshape, permute, copy, view), so the
gradients are theirs.  An op outside those families refuses a Wide with an error
that says which ops take one.
"""

import math

import numpy as np

from pyggml._validation import axis_index
from pyggml.core import Tensor
from pyggml.core import ops as _c

__all__ = ["Wide", "wrap", "holds", "apply", "transpose", "getitem", "stack", "reshape", "broadcast", "takes", "eager_arrays", "volumes_of",
           "refusal"]

MAX_DIMS = 4

# pyggml.ops (set by it when it loads): a Wide's operators call its functions
OPS = [None]


def _prod(dims):
    return int(math.prod(int(d) for d in dims))


class Wide:
    """A tensor of more than four dimensions in the graph being built: ``t`` holds its values
    (contiguous, C order) and ``shape`` is theirs.  Its operators are pyggml.ops's."""

    __slots__ = ("t", "shape", "__weakref__")
    __array_ufunc__ = None            # numpy defers to the reflected operator (array + wide)

    def __init__(self, t, shape):
        shape = tuple(int(d) for d in shape)
        if t.nelements != _prod(shape):
            raise ValueError(f"a tensor of {t.nelements} values cannot have shape {shape}")
        self.t = t if t.is_contiguous else _c.cont(t)
        self.shape = shape

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def dtype(self):
        return self.t.dtype

    @property
    def nelements(self):
        return self.t.nelements

    @property
    def size(self):
        return self.t.nelements

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self):
        return f"<pyggml tensor {self.shape} {self.t.dtype} (held in ggml as {tuple(self.t.shape)})>"

    def numpy(self):
        raise TypeError("a graph tensor has no value while its graph is being built")

    def __bool__(self):
        raise TypeError("the truth value of a graph tensor is not known while its graph is being built: branch "
                        "inside the graph with ops.cond or ops.where")

    def __getitem__(self, key):
        return getitem(self, key)

    def __neg__(self):
        return OPS[0].negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return OPS[0].abs(self)

    def __invert__(self):
        return OPS[0].logical_not(self)


def _operator(name, reflected):
    def method(self, other):
        fn = getattr(OPS[0], name)
        return fn(other, self) if reflected else fn(self, other)
    method.__name__ = name
    return method


for _dunder, _name in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "divide"),
                       ("floordiv", "floor_divide"), ("mod", "mod"), ("pow", "power"), ("matmul", "matmul"),
                       ("and", "logical_and"), ("or", "logical_or"), ("xor", "logical_xor")):
    setattr(Wide, f"__{_dunder}__", _operator(_name, False))
    setattr(Wide, f"__r{_dunder}__", _operator(_name, True))
for _dunder, _name in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal")):
    setattr(Wide, f"__{_dunder}__", _operator(_name, False))
del _dunder, _name


# --- shapes and merged views ------------------------------------------------------------------------

def _contiguous(t):
    return t if t.is_contiguous else _c.cont(t)


def wrap(t, shape):
    """``t`` (holding prod(shape) values in C order) as a Tensor of ``shape`` where that has at
    most four dimensions (``()`` as ``(1,)``), else as a Wide."""
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_DIMS:
        return Wide(t, shape)
    shape = shape or (1,)
    t = _contiguous(t)
    return t if tuple(t.shape) == shape else _c.reshape(t, shape)


def _tensor(x):
    """The ggml tensor holding x's values (a Wide's, a Variable's graph tensor, a Tensor)."""
    if isinstance(x, Wide):
        return x.t
    if isinstance(x, Tensor):
        return x
    graph_tensor = getattr(x, "graph_tensor", None)
    if graph_tensor is not None:
        return graph_tensor()
    raise TypeError(f"expected a tensor, got {type(x).__name__}")


def _as(x, dims):
    """x (a Wide, a Tensor or a Variable) as a contiguous tensor of shape ``dims`` (at most four,
    the same number of values)."""
    t = _contiguous(_tensor(x))
    dims = tuple(int(d) for d in dims) or (1,)
    return t if tuple(t.shape) == dims else _c.reshape(t, dims)


def _shape(x):
    if isinstance(x, Wide):
        return x.shape
    if isinstance(x, Tensor):
        return tuple(int(d) for d in x.shape)
    if hasattr(x, "graph_tensor"):
        return tuple(int(d) for d in x.shape)
    return tuple(np.shape(x))


_axis = axis_index


def _around(shape, first, last):
    """(before, the axes first..last merged, after) of ``shape``."""
    return (_prod(shape[:first]), _prod(shape[first:last + 1]), _prod(shape[last + 1:]))


def reshape(x, shape):
    """x (a Wide or a contiguous Tensor) as ``shape`` (already checked: the same number of values)."""
    t = _tensor(x)
    out = wrap(t, shape)
    if out is t and isinstance(x, Wide):
        # a volume given to a call, reshaped to its folded form (Keras's (-1, h, w, c)): a tensor of
        # its own, not the volume itself (the graph knows that one as 5-D: pyggml._fold)
        out = _c.view(t, tuple(t.shape))
    return out


def _permute4(t, order):
    """A contiguous copy of the (at most 4-D) t with numpy's axes in ``order``."""
    r = len(t.shape)
    dest = list(range(4))
    for i, p in enumerate(order):
        dest[r - 1 - p] = r - 1 - i
    return _c.cont(_c.permute(t, dest))


def _runs(memory, wanted):
    """The blocks of ``wanted`` (an order of block ids) that lie next to each other, in that
    order, in ``memory`` too: each run moves as one."""
    at = {b: i for i, b in enumerate(memory)}
    runs = []
    for b in wanted:
        if runs and at[runs[-1][-1]] + 1 == at[b]:
            runs[-1].append(b)
        else:
            runs.append([b])
    return runs


def transpose(x, perm):
    """numpy's ``transpose(x, perm)`` of a Wide (or a Tensor whose result is wide)."""
    shape = _shape(x)
    perm = tuple(int(p) for p in perm)
    out_shape = tuple(shape[p] for p in perm)
    moving = [p for p in perm if shape[p] != 1]              # axes of length 1 move no value
    blocks = _runs(sorted(moving), moving)                   # axes that stay together, in output order
    size = [_prod(shape[a] for a in b) for b in blocks]
    memory = sorted(range(len(blocks)), key=lambda b: blocks[b][0])
    wanted = list(range(len(blocks)))
    t = _contiguous(_tensor(x))
    done = 0
    while memory != wanted:
        while memory[done] == wanted[done]:
            done += 1
        fixed = _prod(size[b] for b in memory[:done])
        runs = _runs(memory[done:], wanted[done:])
        if len(runs) <= MAX_DIMS - 1:
            # the rest in one permute: (done, the runs as they lie) -> (done, the runs as wanted)
            lying = sorted(runs, key=lambda run: memory.index(run[0]))
            dims = [fixed] + [_prod(size[b] for b in run) for run in lying]
            t = _permute4(_as(t, dims), [0] + [1 + lying.index(run) for run in runs])
            break
        # the block wanted next brought forward: (done, a, block, b) -> (done, block, a, b)
        block = wanted[done]
        at = memory.index(block)
        between, after = memory[done:at], memory[at + 1:]
        dims = (fixed, _prod(size[b] for b in between), size[block], _prod(size[b] for b in after))
        t = _permute4(_as(t, dims), (0, 2, 1, 3))
        memory = memory[:done] + [block] + between + after
    return wrap(t, out_shape)


# --- indexing -----------------------------------------------------------------------------------------

def _index_value(k):
    if isinstance(k, (bool, np.bool_)):
        raise TypeError("a bool is not an index")
    if isinstance(k, (int, np.integer)):
        return int(k)
    if isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu":
        return int(k)
    return None


def getitem(x, key):
    """numpy's basic indexing (ints, slices, ``...``, None) of a Wide, one axis at a time."""
    shape = _shape(x)
    r = len(shape)
    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(k is not None and k is not Ellipsis for k in key)
    if used > r:
        raise IndexError(f"too many indices ({used}) for a tensor of {r} dimensions")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (r - used) + key[at + 1:]
    else:
        key = key + (slice(None),) * (r - used)
    plan, out_shape, axis = [], [], 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        n = shape[axis]
        i = _index_value(k)
        if i is not None:
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            plan.append((axis, slice(i % n, i % n + 1), 1))
        elif isinstance(k, slice):
            picked = range(n)[k]
            if not len(picked):
                raise IndexError(f"the slice {k} of axis {axis} (size {n}) is empty: ggml has no empty tensors")
            if (picked.start, picked.step, len(picked)) != (0, 1, n):
                plan.append((axis, picked, len(picked)))
            out_shape.append(len(picked))
        else:
            raise TypeError(f"a tensor of {r} dimensions takes ints, slices, ... and None as indices, got "
                            f"{type(k).__name__}: reshape it to at most 4 dimensions to index it with a tensor")
        axis += 1
    t, now = _tensor(x), list(shape)
    for axis, sel, length in reversed(plan):
        before, n, after = _around(now, axis, axis)
        t = _as(t, (before, n, after))
        if isinstance(sel, range) and sel.step < 0:
            # ggml's views go forward: the axis flipped (ops.flip), then taken forward
            t = _contiguous(OPS[0].flip(t, axis=1))
            sel = range(n - 1 - sel.start, n - 1 - sel.start - sel.step * len(sel), -sel.step)
        t = t[:, slice(sel.start, sel.stop, sel.step) if isinstance(sel, range) else sel, :]
        now[axis] = length
    return wrap(t, out_shape)


# --- ops along axes -----------------------------------------------------------------------------------

def _reduce(fn, x, arguments, params):
    shape = _shape(x)
    r = len(shape)
    axis_name = "axes" if "axes" in params else "axis"
    axis = arguments.get(axis_name)
    keepdims = bool(arguments.get("keepdims", False))
    rest = {k: v for k, v in arguments.items() if k not in (params[0], axis_name, "keepdims")}
    if "keepdims" in params:
        rest["keepdims"] = False
    if axis is None:
        out = fn(_as(x, (_prod(shape),)), **{axis_name: None}, **rest)
        return wrap(out, (1,) * r) if keepdims else out
    axes = sorted({_axis(a, r, fn.__name__) for a in (axis if isinstance(axis, (list, tuple)) else (axis,))})
    kept = [a for a in range(r) if a not in axes]
    out_shape = [1 if a in axes else shape[a] for a in range(r)] if keepdims else [shape[a] for a in kept]
    if axes == list(range(axes[0], axes[-1] + 1)):
        merged = _as(x, _around(shape, axes[0], axes[-1]))
    else:                                               # the reduced axes brought together first
        merged = _as(transpose(x, kept + axes), (_prod(shape[a] for a in kept), _prod(shape[a] for a in axes), 1))
    out = fn(merged, **{axis_name: 1}, **rest)
    return wrap(out, out_shape)


def _along(fn, x, arguments, params):
    shape = _shape(x)
    axis = arguments.get("axis", -1)
    rest = {k: v for k, v in arguments.items() if k not in (params[0], "axis")}
    if axis is None and fn.__name__ not in ("cumsum", "cumprod"):
        raise ValueError(f"ops.{fn.__name__}: axis=None on a tensor of {len(shape)} dimensions")
    if axis is None:                                   # cumsum's: along the flattened tensor
        return fn(_as(x, (_prod(shape),)), axis=None, **rest)
    ax = _axis(axis, len(shape), fn.__name__)
    out = fn(_as(x, _around(shape, ax, ax)), axis=1, **rest)
    return wrap(out, shape)


def _groups(shapes, out_shape):
    """Neighbouring axes of ``out_shape`` merged where every operand is either whole or of
    length 1 along all of them (numpy's broadcasting stays the same on the merged shapes)."""
    groups, patterns = [], []
    for ax, n in enumerate(out_shape):
        pattern = None if n == 1 else tuple(s[ax] == n for s in shapes)
        if groups and (pattern is None or patterns[-1] is None or pattern == patterns[-1]):
            groups[-1].append(ax)
            patterns[-1] = patterns[-1] if pattern is None else pattern
        else:
            groups.append([ax])
            patterns.append(pattern)
    return groups


def _merged(value, aligned, groups, dims=None):
    """An operand as the merged ``dims`` (or those of its ``aligned`` shape over ``groups``): a
    tensor's contiguous view, an array reshaped on the host."""
    dims = dims if dims is not None else [_prod(aligned[a] for a in g) for g in groups]
    if isinstance(value, (Wide, Tensor)) or hasattr(value, "graph_tensor"):
        return _as(value, dims)
    return np.reshape(np.asarray(value), dims)


def _elementwise(fn, arguments, names, what):
    present = [n for n in names if arguments.get(n) is not None]
    shapes = {n: _shape(arguments[n]) for n in present}
    try:
        out_shape = tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        raise ValueError(f"{what}: shapes {list(shapes.values())} do not broadcast") from None
    r = len(out_shape)
    aligned = {n: (1,) * (r - len(s)) + tuple(s) for n, s in shapes.items()}
    tensors = [n for n in present if len(shapes[n])]
    groups = _groups([aligned[n] for n in tensors], out_shape)
    if len(groups) > MAX_DIMS:
        raise ValueError(f"{what}: broadcasting {[shapes[n] for n in present]} takes more than four groups of "
                         f"axes (ggml tensors have four dimensions); reshape or broadcast an operand first")
    args = dict(arguments)
    for n in tensors:
        args[n] = _merged(arguments[n], aligned[n], groups)
    out = fn(**args)
    return wrap(out, out_shape)


def _matmul(fn, a, b):
    sa, sb = _shape(a), _shape(b)
    if len(sa) < 2 or len(sb) < 2:
        raise ValueError(f"matmul: {sa} @ {sb}: a tensor of more than 4 dimensions multiplies matrices only")
    if sa[-1] != sb[-2]:
        raise ValueError(f"matmul: {sa} @ {sb}: the last axis of x1 ({sa[-1]}) must equal the "
                         f"second-to-last axis of x2 ({sb[-2]})")
    try:
        lead = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise ValueError(f"matmul: {sa} @ {sb}: the stacks' leading dims do not broadcast") from None
    ra, rb = (1,) * (len(lead) - len(sa) + 2) + sa[:-2], (1,) * (len(lead) - len(sb) + 2) + sb[:-2]
    groups = _groups([ra, rb], lead)
    if len(groups) > MAX_DIMS - 2:
        # the stacks broadcast in more than two groups of axes: the broadcast ones made whole first
        if ra != lead:
            a, ra = broadcast(a, lead + sa[-2:], OPS[0].broadcast_to), lead
        if rb != lead:
            b, rb = broadcast(b, lead + sb[-2:], OPS[0].broadcast_to), lead
        groups = [list(range(len(lead)))]
    da = [_prod(ra[x] for x in g) for g in groups] + list(sa[-2:])
    db = [_prod(rb[x] for x in g) for g in groups] + list(sb[-2:])
    out = fn(_merged(a, None, None, da), _merged(b, None, None, db))
    return wrap(out, lead + (sa[-2], sb[-1]))


def _concatenate(fn, tensors, axis):
    shapes = [_shape(t) for t in tensors]
    r = len(shapes[0])
    ax = _axis(axis, r, "concatenate")
    if any(len(s) != r or s[:ax] + s[ax + 1:] != shapes[0][:ax] + shapes[0][ax + 1:] for s in shapes):
        raise ValueError(f"concatenate: shapes {shapes} differ off axis {axis}")
    parts = [_as(t, _around(s, ax, ax)) for t, s in zip(tensors, shapes)]
    out = fn(parts, axis=1) if len(parts) > 1 else parts[0]
    return wrap(out, shapes[0][:ax] + (sum(s[ax] for s in shapes),) + shapes[0][ax + 1:])


def stack(tensors, axis, concatenate):
    """numpy's stack of tensors of one shape along a new ``axis`` (the result wide)."""
    shapes = [_shape(t) for t in tensors]
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"stack: tensors of different shapes {shapes}")
    r = len(shapes[0]) + 1
    ax = _axis(axis, r, "stack")
    dims = (_prod(shapes[0][:ax]), 1, _prod(shapes[0][ax:]))
    parts = [_as(t, dims) for t in tensors]
    out = concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
    return wrap(out, shapes[0][:ax] + (len(parts),) + shapes[0][ax:])


def broadcast(x, target, broadcast_to):
    """numpy's ``broadcast_to(x, target)`` where x or the target has more than four dimensions
    (``broadcast_to``: the op for at most four)."""
    shape = _shape(x)
    target = tuple(int(d) for d in target)
    if not isinstance(x, (Wide, Tensor)) and not hasattr(x, "graph_tensor"):
        return np.broadcast_to(np.asarray(x), target)              # an array: on the host
    aligned = (1,) * (len(target) - len(shape)) + shape
    if len(aligned) != len(target) or any(s not in (1, d) for s, d in zip(aligned, target)):
        raise ValueError(f"broadcast_to: cannot broadcast {shape} to {target}")
    groups = _groups([aligned], target)
    if len(groups) > MAX_DIMS:
        raise ValueError(f"broadcast_to: {shape} to {target} takes more than four groups of axes (ggml tensors "
                         f"have four dimensions)")
    out = broadcast_to(_merged(x, aligned, groups), [_prod(target[a] for a in g) for g in groups])
    return wrap(out, target)


def _split(x, sections, axis):
    shape = _shape(x)
    ax = _axis(axis, len(shape), "split")
    n = shape[ax]
    if isinstance(sections, (int, np.integer)):
        k = int(sections)
        if k <= 0 or n % k:
            raise ValueError(f"split: {n} entries along axis {axis} do not split into {k} equal sections")
        cuts = [n // k * i for i in range(1, k)]
    else:
        cuts = [int(c) for c in sections]
    bounds = [0] + cuts + [n]
    lead = (slice(None),) * ax
    return [getitem(x, lead + (slice(lo, hi),)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _layout(name, fn, arguments, x):
    shape = _shape(x)
    r = len(shape)
    if name == "reshape":
        new = arguments["newshape"]
        new = (new,) if isinstance(new, (int, np.integer)) else tuple(new)
        if any(not isinstance(d, (int, np.integer)) or (d < 1 and d != -1) for d in new) or list(new).count(-1) > 1:
            raise ValueError(f"reshape: the new shape must be positive ints with at most one -1, got {new!r}")
        n = _prod(shape)
        if -1 in new:
            known = _prod(d for d in new if d != -1)
            if n % known:
                raise ValueError(f"reshape: cannot reshape {shape} ({n} values) into {new}")
            new = tuple(n // known if d == -1 else int(d) for d in new)
        if _prod(new) != n:
            raise ValueError(f"reshape: cannot reshape {shape} ({n} values) into {tuple(new)}")
        return reshape(x, new)
    if name in ("transpose", "permute_axes"):
        axes = arguments.get("axes")
        axes = tuple(reversed(range(r))) if axes is None else tuple(int(a) % r for a in axes)
        if sorted(axes) != list(range(r)):
            raise ValueError(f"{name}: axes must be a permutation of {r} axes, got {arguments.get('axes')!r}")
        return transpose(x, axes)
    if name == "swapaxes":
        a, b = _axis(arguments["a"], r, name), _axis(arguments["b"], r, name)
        order = list(range(r))
        order[a], order[b] = order[b], order[a]
        return transpose(x, order)
    if name == "moveaxis":
        src, dst = arguments["source"], arguments["destination"]
        src = [_axis(a, r, name) for a in (src if isinstance(src, (list, tuple)) else (src,))]
        dst = [_axis(a, r, name) for a in (dst if isinstance(dst, (list, tuple)) else (dst,))]
        order = [i for i in range(r) if i not in src]
        for d, s in sorted(zip(dst, src)):
            order.insert(d, s)
        return transpose(x, order)
    if name == "expand_dims":
        axis = arguments["axis"]
        new = list(shape)
        for a in sorted(_axis(a, r + len(axis if isinstance(axis, (list, tuple)) else (axis,)), name)
                        for a in (axis if isinstance(axis, (list, tuple)) else (axis,))):
            new.insert(a, 1)
        return reshape(x, new)
    if name == "squeeze":
        axis = arguments.get("axis")
        if axis is None:
            drop = [a for a in range(r) if shape[a] == 1]
        else:
            drop = [_axis(a, r, name) for a in (axis if isinstance(axis, (list, tuple)) else (axis,))]
            bad = [a for a in drop if shape[a] != 1]
            if bad:
                raise ValueError(f"squeeze: axis {bad[0]} of {shape} is not of length 1")
        return reshape(x, [d for a, d in enumerate(shape) if a not in drop])
    if name == "ravel":
        return reshape(x, (_prod(shape),))
    if name in ("getitem", "get_item"):
        return getitem(x, arguments.get("key", arguments.get("indices")))
    if name == "split":
        return _split(x, arguments["indices_or_sections"], arguments.get("axis", 0))
    if name == "unstack":
        ax = _axis(arguments.get("axis", 0), r, name)
        num = arguments.get("num")
        if num is not None and num != shape[ax]:
            raise ValueError(f"unstack: num={num} but axis {ax} has {shape[ax]} entries")
        return [getitem(x, (slice(None),) * ax + (i,)) for i in range(shape[ax])]
    if name == "flip":
        axis = arguments.get("axis")
        axes = range(r) if axis is None else [_axis(a, r, name) for a in
                                               (axis if isinstance(axis, (list, tuple)) else (axis,))]
        return getitem(x, tuple(slice(None, None, -1) if a in axes else slice(None) for a in range(r)))
    if name == "broadcast_to":
        return broadcast(x, arguments["shape"], fn)
    if name == "repeat":
        repeats, axis = arguments["repeats"], arguments.get("axis")
        if not isinstance(repeats, (int, np.integer)):
            raise ValueError("repeat: a tensor of more than 4 dimensions takes one int of repeats")
        if axis is None:
            return fn(_as(x, (_prod(shape),)), int(repeats))
        ax = _axis(axis, r, name)
        out = fn(_as(x, _around(shape, ax, ax)), int(repeats), axis=1)
        return wrap(out, shape[:ax] + (shape[ax] * int(repeats),) + shape[ax + 1:])
    raise AssertionError(name)


_LAYOUT = {"reshape", "transpose", "permute_axes", "swapaxes", "moveaxis", "expand_dims", "squeeze", "ravel",
           "getitem", "get_item", "split", "unstack", "flip", "broadcast_to", "repeat"}
_REDUCE = {"sum", "mean", "max", "min", "prod", "var", "std", "logsumexp", "any", "all", "amax", "amin", "argmax",
           "argmin", "reduce_sum", "reduce_mean", "count_nonzero", "nansum", "nanmean", "nanmax", "nanmin"}
_ALONG = {"softmax", "log_softmax", "cumsum", "cumprod", "normalize", "sort", "argsort"}
_BINARY = {"add", "subtract", "multiply", "divide", "true_divide", "power", "maximum", "minimum", "floor_divide",
           "mod", "fmod", "greater", "greater_equal", "less", "less_equal", "equal", "not_equal", "logical_and",
           "logical_or", "logical_xor", "arctan2", "hypot", "logaddexp", "divide_no_nan", "heaviside", "fmax",
           "fmin", "where", "squared_difference", "copysign"}
_UNARY = {"abs", "absolute", "fabs", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "cast", "cbrt",
          "ceil", "celu", "clip", "cos", "cosh", "elu", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "floor",
          "gelu", "hard_shrink", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh", "isfinite", "isinf",
          "isnan", "leaky_relu", "log", "log10", "log1p", "log2", "log_sigmoid", "logical_not", "mish",
          "nan_to_num", "negative", "neg", "reciprocal", "relu", "relu6", "round", "rsqrt", "selu", "sigmoid",
          "sign", "silu", "sin", "sinh", "soft_shrink", "softplus", "softsign", "sparse_plus", "sparse_sigmoid",
          "sqrt", "square", "squareplus", "stop_gradient", "swish", "tan", "tanh", "tanh_shrink", "trunc",
          "threshold", "zeros_like", "ones_like", "full_like", "copy", "identity", "dropout", "saturate_cast",
          "signbit", "sqr", "conj", "conjugate", "real"}
# ops whose implementations are made of the ops above (or take wide tensors themselves)
_OWN = {"einsum", "rearrange", "fold", "image.extract_patches_3d", "image.sobel_edges", "image.scale_and_translate"}
_FAMILIES = ("reshape, transpose and the other layout ops, indexing, element-wise ops, reductions, softmax, matmul "
             "and einsum")


def holds(args, kwargs):
    """True when a Wide is among the arguments (or in a list of them: concatenate's)."""
    for v in (*args, *kwargs.values()):
        if type(v) is Wide:
            return True
        if isinstance(v, (list, tuple)) and any(type(e) is Wide for e in v):
            return True
    return False


def refusal(name, shape):
    return ValueError(f"ops.{name} on a tensor of shape {tuple(shape)}: ggml tensors have at most 4 dimensions, "
                      f"and pyggml carries more inside a call through {_FAMILIES} only; reshape it to at most "
                      f"4 dimensions before ops.{name}")


def apply(name, fn, sig, args, kwargs):
    """pyggml.ops's ``name`` (the function ``fn`` of signature ``sig``) with a Wide among its
    arguments: done on merged axes, or refused with an error naming the ops that take one."""
    wide = next(v for v in (*args, *kwargs.values(), *[e for v in (*args, *kwargs.values())
                                                        if isinstance(v, (list, tuple)) for e in v])
                if type(v) is Wide)
    if name in _OWN:
        return fn(*args, **kwargs)                    # (its implementation takes wide tensors)
    if sig is None:
        raise refusal(name, wide.shape)
    arguments = dict(sig.bind(*args, **kwargs).arguments)
    params = list(sig.parameters)
    first = arguments.get(params[0]) if params else None
    if name in ("concatenate", "stack"):
        tensors = list(first)
        axis = arguments.get("axis", -1 if name == "concatenate" else 0)
        if name == "stack":
            return stack(tensors, axis, OPS[0].concatenate)
        return _concatenate(fn, tensors, axis)
    if name == "matmul":
        return _matmul(fn, arguments[params[0]], arguments[params[1]])
    if name in _BINARY:
        names = params[:3] if name == "where" else params[:2]
        return _elementwise(fn, arguments, names, f"ops.{name}")
    if first is not wide:
        raise refusal(name, wide.shape)
    if name in _LAYOUT:
        return _layout(name, fn, arguments, wide)
    if name in _REDUCE:
        return _reduce(fn, wide, arguments, params)
    if name in _ALONG:
        return _along(fn, wide, arguments, params)
    if name in _UNARY:
        out = fn(*[wide.t if a is wide else a for a in args], **{k: wide.t if v is wide else v
                                                                  for k, v in kwargs.items()})
        if not isinstance(out, Tensor) or out.nelements != wide.nelements:
            raise refusal(name, wide.shape)
        return Wide(out, wide.shape)
    raise refusal(name, wide.shape)


def takes(name):
    """Whether pyggml.ops's ``name`` carries tensors of more than four dimensions."""
    return name in _LAYOUT or name in _REDUCE or name in _ALONG or name in _BINARY or name in _UNARY or \
        name in ("concatenate", "stack", "matmul")


def eager_arrays(args, kwargs):
    """True when an array of more than four dimensions is among the arguments of an op called
    outside a graph."""
    for v in (*args, *kwargs.values()):
        if isinstance(v, np.ndarray) and v.ndim > MAX_DIMS:
            return True
        if isinstance(v, (list, tuple)) and any(isinstance(e, np.ndarray) and e.ndim > MAX_DIMS for e in v):
            return True
    return False


def volumes_of(out, noted):
    """The folded volumes among results ``out`` (``noted``: pyggml._fold.noted, their Keras shapes)
    as wide tensors of their Keras shapes; the other results as they are."""
    many = isinstance(out, (list, tuple))
    outs = list(out) if many else [out]
    tensors = [o for o in outs if isinstance(o, Tensor)]
    known = noted(tensors) if tensors else None
    if known is None:
        return out
    it = iter(known)
    done = []
    for o in outs:
        s = next(it) if isinstance(o, Tensor) else None
        done.append(Wide(o, s) if s is not None and len(s) >= 5 and None not in s and
                    int(np.prod(s)) == o.nelements else o)
    return type(out)(done) if many else done[0]
