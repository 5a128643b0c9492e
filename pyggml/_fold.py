"""5-D tensors (Keras's volumes and videos, ``(batch, D, H, W, C)``) in ggml's four dimensions.

ggml tensors have at most four dimensions.  A node of a functional or
Sequential model may have five (the batch and four more); in the graph its
tensor holds the same values, C-ordered, with the batch and the first axis
after it folded into one: ``(batch * D, H, W, C)``.  The fold is free (the
memory is the same) and every op that works along the last axes, or element
by element, works on it unchanged: Dense, the activations, BatchNormalization
over the channels, the merging layers.

A layer opts in with ``takes_5d`` (a class attribute, or a method for a layer
whose arguments decide); the others refuse a 5-D input with a clear error.
While an opted-in layer's call runs, ``in_shapes()`` gives the Keras shapes of
its inputs (the model's nodes), from which it finds the batch of a folded
tensor: ``batch_of(x, shape)``.

Inside a custom layer's (or a subclassed model's) call the layers it calls get
tensors, not nodes: the graph being built keeps the Keras shape of each folded
tensor it has seen (``note``/``noted``: the inputs of a call given volumes, and
the outputs of a layer that takes them), so that a Conv3D inside a custom layer
still knows its volume.  A custom layer (a class outside pyggml) takes volumes:
its own ops see the folded tensor.
"""

import contextlib
import math
import threading

from pyggml import _scope

__all__ = ["folds", "depth", "MAX_DIMS", "note", "noted", "note_outputs", "said_shapes", "graph_shape", "batch_of", "pending", "take", "inputs",
           "in_shape", "in_shapes", "unfold_shape", "refusal", "batch_and_features", "active", "FIVE_D_LAYERS"]

# filled in by pyggml.layers: the names of the layers that take 5-D inputs (for the refusal)
FIVE_D_LAYERS = []

_state = threading.local()


# the most dimensions a node (the batch included) may have: pyggml._wide's
MAX_DIMS = 8


def folds(shape):
    """Whether a tensor of Keras shape ``shape`` is held folded: five dimensions or more."""
    return shape is not None and len(shape) >= 5


def depth(shape):
    """How many of a folded tensor's items are in one sample's rows: the product of the axes
    between the batch and the last three (a volume's D), None where one is unknown."""
    mid = tuple(shape)[1:-3]
    if any(d is None for d in mid):
        return None
    return int(math.prod(int(d) for d in mid))


def graph_shape(shape):
    """The shape a tensor of Keras shape ``shape`` has in the graph: five dimensions or more
    folded to four, the batch and the axes before the last three merged."""
    shape = tuple(shape)
    if len(shape) >= 5:
        return (shape[0] * depth(shape),) + shape[-3:]
    return shape


def batch_of(x, shape):
    """The batch of the folded tensor x whose Keras shape is ``shape`` (batch, D, ...)."""
    d = depth(shape)
    if d is None or x.shape[0] % d:
        raise ValueError(f"a folded {len(shape)}-D tensor of graph shape {tuple(x.shape)} does not hold inputs of "
                         f"shape {tuple(shape)}")
    return x.shape[0] // d


def batch_and_features(x):
    """(batch, Keras feature shape) of x, the first input of the layer call now running:
    from the call's Keras shapes where x is a folded volume, else from x."""
    shapes = in_shapes()
    if shapes and folds(shapes[0]):
        return batch_of(x, shapes[0]), tuple(shapes[0][1:])
    return x.shape[0], tuple(x.shape[1:])


def unfold_shape(graph, like):
    """The Keras shape of a layer's output ``graph`` (a graph shape with None for the batch
    or its batch size) when its input was the folded ``like``: still as many dimensions
    where its first dimension is the batch times like's depth."""
    graph = tuple(graph)
    if len(graph) == 4 and depth(like) is not None:
        return (None,) + tuple(like[1:-3]) + graph[1:]
    return graph


@contextlib.contextmanager
def pending(shapes):
    """The Keras shapes of the inputs of the next layer call on tensors (run_nodes sets
    them for the call of a node whose inputs are 5-D)."""
    prev = getattr(_state, "pending", None)
    _state.pending = shapes
    try:
        yield
    finally:
        _state.pending = prev


def take():
    """The pending Keras input shapes, for this call only (a layer's sublayers get none)."""
    shapes = getattr(_state, "pending", None)
    _state.pending = None
    return shapes


@contextlib.contextmanager
def inputs(shapes):
    """While a layer's call runs: its inputs' Keras shapes (None where none were given)."""
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(shapes)
    try:
        yield
    finally:
        stack.pop()


def _registry(create=False):
    b = _scope.current()
    cache = getattr(b, "cache", None)
    if cache is None:
        return None
    reg = cache.get("_fold_shapes")
    if reg is None and create:
        reg = cache["_fold_shapes"] = {}
    return reg


def note(tensors, shapes):
    """Keep the Keras shapes of the folded (5-D) ones of ``tensors`` for this graph."""
    reg = None
    for t, s in zip(tensors, shapes):
        if folds(s) and hasattr(t, "shape") and len(t.shape) == 4:
            reg = reg if reg is not None else _registry(create=True)
            if reg is not None:
                reg[t] = tuple(s)


def noted(tensors):
    """The Keras shapes of ``tensors`` (a folded one's as noted, any other's its own), or None
    where none of them is a noted volume."""
    reg = _registry()
    if not reg:
        return None
    shapes = [reg.get(t) if hasattr(t, "shape") else None for t in tensors]
    if all(s is None for s in shapes):
        return None
    return [s if s is not None else tuple(t.shape) for s, t in zip(shapes, tensors)]


def said_shapes(layer, shapes):
    """The Keras output shapes ``layer``'s own compute_output_shape gives for inputs of Keras
    shapes ``shapes`` (a list, one per output), or None where it has none of its own."""
    root = next(c for c in reversed(type(layer).__mro__) if "compute_output_shape" in c.__dict__)
    if type(layer).compute_output_shape is root.compute_output_shape:
        return None
    ins = [(None,) + tuple(s[1:]) for s in shapes]
    said = layer.compute_output_shape(ins if len(ins) > 1 else ins[0])
    return said if isinstance(said, list) else [said]


def note_outputs(layer, out, shapes):
    """After ``layer``'s call on volumes of Keras shapes ``shapes``: note its folded outputs'
    Keras shapes (a noted one keeps its note: a layer inside made it; else the layer's
    compute_output_shape; else a result of (batch * D) rows stays 5-D)."""
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    five = next(s for s in shapes if folds(s))
    n, d = five[0], depth(five)
    known = noted(outs) or [None] * len(outs)
    try:
        said = said_shapes(layer, shapes)
    except Exception:       # a compute_output_shape that needs more than shapes
        said = None
    found = []
    for i, t in enumerate(outs):
        if not hasattr(t, "shape"):
            found.append(None)
            continue
        k = known[i] if folds(known[i]) else None
        if k is None and said is not None and i < len(said) and isinstance(said[i], tuple) and folds(said[i]):
            k = (n,) + tuple(said[i][1:])
        if k is None and said is None and len(t.shape) == 4 and d is not None and t.shape[0] == n * d and \
                not layer.sees_whole_volumes():
            # (a custom call sees its volumes 5-D, pyggml._wide, and those it returns are noted: a
            # result of n * d rows there is 4-D, its items folded into the batch)
            k = (n,) + tuple(five[1:-3]) + tuple(t.shape[1:])
        found.append(k)
    note(outs, found)


def active():
    """Whether a layer call given Keras shapes is running (its sublayers' calls must say theirs)."""
    return bool(getattr(_state, "stack", None))


def in_shapes():
    """The Keras shapes of the inputs of the layer call now running (a list, or None)."""
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


def in_shape(layer):
    """The Keras shape of the (first) input of ``layer``'s call now running; its build
    shape where the call was given none."""
    shapes = in_shapes()
    if shapes:
        return tuple(shapes[0])
    built = getattr(layer, "_built_shape", None)
    if isinstance(built, list):
        built = built[0]
    return tuple(built) if built is not None else None


def refusal(layer, shapes):
    who = type(layer).__name__ + (f" ({layer.name})" if getattr(layer, "name", None) else "")
    shapes = [tuple(s) for s in shapes]
    rule = type(layer).takes_5d
    if callable(rule):
        return f"{who} cannot take the 5-D inputs {shapes} with its arguments: {(rule.__doc__ or '').strip()}"
    return (f"{who} takes inputs of at most 4 dimensions, the batch included, got {shapes}: ggml tensors have "
            f"four, and inputs of 5 dimensions or more (volumes, videos) reach only the layers that fold them: "
            f"{', '.join(FIVE_D_LAYERS)}")


def enter_call(custom):
    """A layer's call begins: ``custom`` for a class outside pyggml (whose raw ops see the fold)."""
    stack = _state.__dict__.setdefault("custom", [])
    stack.append(bool(custom))


def leave_call():
    _state.__dict__["custom"].pop()


def caller_is_custom():
    """Whether the innermost running layer call (the one calling the next) is user code's."""
    stack = _state.__dict__.get("custom")
    return bool(stack) and stack[-1]


def called_from_a_tape():
    """Whether no layer's call is running and the graph being built is a GradientTape's: the
    next layer is called by the user's code in the tape's block."""
    return not _state.__dict__.get("custom") and getattr(_scope.current(), "open_tapes", None) is not None


def in_custom_call():
    """Whether the innermost running layer call is a custom layer's, in a graph holding volumes
    (pyggml.ops refuses there an axis other than the channels' on a volume)."""
    stack = _state.__dict__.get("custom")
    return bool(stack) and stack[-1] and bool(_registry())
