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
- ``random_values(shape, draw, dtype="float32")``: a tensor set to ``draw(rng, shape)`` (an
  array, from the library's generator ``rng``) before each step (the noise layers' noise;
  "int32": rows an augmentation gathers);
- ``add_update(variable, tensor)``: write ``tensor`` into the variable after a
  training step (BatchNormalization's running statistics);
- ``add_loss(tensor, layer)`` (optional): a 1-element loss a layer adds to the
  training loss (activity regularizers, ``Layer.add_loss``);
- ``derived_input(source, fn, shape, dtype)``: a tensor set to ``fn(values)``
  whenever the input ``source`` is set (host-side integer arithmetic);
- ``cache``: a dict layers may use to share derived tensors within the graph;
- ``fused_ok`` (optional, False if absent): the graph computes on the CPU, so
  pyggml's fused CPU ops may be used (see ``fused()``).

pyggml's fused ops (ggml patches 0020-0022: ``bias_act``, ``conv_2d_cl``,
``pool_cl``, ``batch_norm``, ``lstm_cell``, the activations' backward passes,
...) exist on the CPU only: another backend (Vulkan, CUDA, Metal, RPC) refuses
them and its scheduler would run them on the CPU, copying tensors across.  So
the built-in layers and activations use them only while ``fused()`` is true,
and otherwise build the same computation from the ops every backend has (the
"composed" forms).  ``FORCE_COMPOSED`` (True when the environment variable
``PYGGML_COMPOSED`` is set to anything but 0 at import; tests assign it) makes
every graph take the composed forms, so that both stay tested on the CPU.
"""

import os
import threading

__all__ = ["current", "entered", "paused", "require", "fused", "FORCE_COMPOSED", "mark_strings", "holds_strings"]

_local = threading.local()

FORCE_COMPOSED = os.environ.get("PYGGML_COMPOSED", "").strip() not in ("", "0")


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


def fused():
    """True while a graph that computes on the CPU is being built (and the composed
    forms are not forced): the layers may use pyggml's fused CPU ops."""
    if FORCE_COMPOSED:
        return False
    b = current()
    return b is not None and bool(getattr(b, "fused_ok", False))


def mark_strings(builder, tensor):
    """``tensor`` stands in ``builder``'s graph for an input of strings: it holds nothing the
    graph can use (zeros), and a host layer called on it (a StringLookup in a layer's call)
    reads the strings themselves (pyggml.layers.preprocessing.host_layer)."""
    builder.__dict__.setdefault("_string_inputs", {})[id(tensor)] = tensor


def holds_strings(tensor):
    """Whether ``tensor`` stands for an input of strings in the graph being built."""
    marked = getattr(current(), "_string_inputs", None)
    return marked is not None and marked.get(id(tensor)) is tensor


def tape_of(values):
    """The GradientTape builder that recorded one of ``values`` (tensors, or lists of them), or
    None: an op given a tape's tensor after its ``with`` block is recorded on that tape with
    Keras's meaning (``ops.mean(loss)`` is the scalar mean, and stays differentiable)."""
    for v in values:
        for e in (v if isinstance(v, (list, tuple)) else (v,)):
            source = getattr(getattr(e, "ctx", None), "value_source", None)
            if source is not None and hasattr(source, "recording"):
                return source
    return None


def remember_host_value(t, a):
    """Note that ``t``, a constant of the graph being built, holds the array ``a`` (its value is
    known on the host: pyggml._ops_numpy.host_value)."""
    cache = getattr(current(), "cache", None)
    if isinstance(cache, dict):
        import numpy as np
        cache.setdefault("host_values", {})[id(t)] = (t, np.asarray(a))


def foreign_tape_value(t):
    """The value (an array) of ``t``, a tensor another GradientTape recorded, met while a tape
    records (Keras's eager tensors: ``total += loss`` over the tapes of a loop, each loss
    already a value); None for anything else, which stays a tensor."""
    b = current()
    ctx = getattr(t, "ctx", None)
    if b is None or ctx is None or ctx is getattr(b, "ctx", None) or not hasattr(b, "recording"):
        return None
    source = getattr(ctx, "value_source", None)
    if source is None or source is b or not hasattr(source, "recording") or source.recording:
        return None              # (a tape still recording, an outer one: its graph is refused, not cut)
    p = getattr(source, "parent", None)
    while p is not None:
        if p is b:
            return None          # a tape opened inside this one's block: this one records its ops too
        p = getattr(p, "parent", None)
    return t.numpy()


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


class paused:
    """``with paused():`` no graph is being built inside (a GradientTape's stop_recording:
    layers and ops on arrays compute at once)."""

    def __enter__(self):
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append(None)
        return None

    def __exit__(self, *exc):
        _local.stack.pop()
        return False
