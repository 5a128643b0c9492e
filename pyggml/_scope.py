"""The graph being built, for layers and ops that need more than their inputs.

A model's executor builds a ggml graph by calling its layers on tensors inside
``with scope.entered(builder):``.  While it is active, ``pyggml.ops`` puts new
operations in the builder's context (``Context.as_default``), Variables
resolve to the builder's tensor for them, and layers ask it for constants,
dropout masks and the training flag.  The builder is any object with:

- ``ctx``: the Context of the graph's operations;
- ``training``: True while building a training graph;
- ``tensor_of(variable)``: the Tensor holding a Variable in this graph;
- ``constant(array, dtype)``: a Tensor holding a numpy array (set once);
- ``random_keep_mask(shape, rate)``: a 0 or ``1/(1-rate)`` mask redrawn before each step;
- ``add_update(variable, tensor)``: write ``tensor`` into the variable after a
  training step (BatchNormalization's running statistics);
- ``derived_input(source, fn, shape, dtype)``: a tensor set to ``fn(values)``
  whenever the input ``source`` is set (host-side integer arithmetic);
- ``cache``: a dict layers may use to share derived tensors within the graph.
"""

import threading

__all__ = ["current", "entered", "require"]

_local = threading.local()


def current():
    """The builder of the graph being built on this thread, or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def require(what):
    b = current()
    if b is None:
        raise RuntimeError(f"{what} is only available while a model builds its graph "
                           f"(inside a layer's call())")
    return b


class entered:
    """``with entered(builder):`` makes ``builder`` the current one."""

    def __init__(self, builder):
        self.builder = builder
        self._ctx_scope = None

    def __enter__(self):
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append(self.builder)
        self._ctx_scope = self.builder.ctx.as_default()
        self._ctx_scope.__enter__()
        return self.builder

    def __exit__(self, *exc):
        self._ctx_scope.__exit__(*exc)
        _local.stack.pop()
        return False
