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
"""

import contextlib
import threading

__all__ = ["graph_shape", "is_5d", "batch_of", "pending", "take", "inputs", "in_shape", "in_shapes",
           "unfold_shape", "refusal", "batch_and_features", "active", "FIVE_D_LAYERS"]

# filled in by pyggml.layers: the names of the layers that take 5-D inputs (for the refusal)
FIVE_D_LAYERS = []

_state = threading.local()


def graph_shape(shape):
    """The shape a tensor of Keras shape ``shape`` has in the graph (5-D folded to 4-D)."""
    shape = tuple(shape)
    if len(shape) == 5:
        return (shape[0] * shape[1],) + shape[2:]
    return shape


def is_5d(shape):
    return shape is not None and not isinstance(shape, (list, dict)) and len(shape) == 5


def batch_of(x, shape):
    """The batch of the folded tensor x whose Keras shape is ``shape`` (batch, D, ...)."""
    d = shape[1]
    if d is None or x.shape[0] % d:
        raise ValueError(f"a folded 5-D tensor of graph shape {tuple(x.shape)} does not hold inputs of shape "
                         f"{tuple(shape)}")
    return x.shape[0] // d


def batch_and_features(x):
    """(batch, Keras feature shape) of x, the first input of the layer call now running:
    from the call's Keras shapes where x is a folded volume, else from x."""
    shapes = in_shapes()
    if shapes and shapes[0] is not None and len(shapes[0]) == 5:
        return batch_of(x, shapes[0]), tuple(shapes[0][1:])
    return x.shape[0], tuple(x.shape[1:])


def unfold_shape(graph, like):
    """The Keras shape of a layer's output ``graph`` (a graph shape with None for the batch
    or its batch size) when its input was the 5-D ``like``: still 5-D where its first
    dimension is the batch times like's D."""
    graph = tuple(graph)
    if len(graph) == 4 and like[1] is not None:
        return (None, like[1]) + graph[1:]
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
            f"four, and 5-D inputs (volumes, videos) reach only the layers that fold them: "
            f"{', '.join(FIVE_D_LAYERS)}")
