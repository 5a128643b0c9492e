"""Keras's ops on symbolic nodes (Keras 3's functional API: ``ops.reshape(x, ...)`` where x is a
layer's output node) without an import cycle: ``pyggml.layers`` registers the node class and
the function that wraps an op call into a layer (``pyggml.layers.core.symbolic_op``); the ops
ask here whether an argument is a node and hand such calls over."""

__all__ = ["NODE_TYPES", "HANDLER", "holds_node", "apply"]

NODE_TYPES = []          # pyggml.layers.node.Node
HANDLER = [None]         # apply(op_name, args, kwargs) -> node(s)


def _is_node(v):
    return bool(NODE_TYPES) and isinstance(v, tuple(NODE_TYPES))


def holds_node(args, kwargs):
    """True when a node is among the arguments (or in a list/tuple argument)."""
    for v in list(args) + list(kwargs.values()):
        if _is_node(v) or (isinstance(v, (list, tuple)) and any(_is_node(e) for e in v)):
            return True
    return False


def apply(name, args, kwargs):
    if HANDLER[0] is None:
        raise TypeError(f"ops.{name} got a symbolic node, but pyggml.layers is not imported")
    return HANDLER[0](name, args, kwargs)
