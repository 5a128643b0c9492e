"""Keras's ``Layer.stateless_call``: a layer (or model) called with the variable values given,
leaving its own as they were; what the call wrote to its non-trainable variables (a
BatchNormalization's moving statistics in training) comes back instead.  A model's lock is held
throughout, so its predict or fit in another thread never sees the values given; for a layer of a
model in use in another thread, call the model's stateless_call."""

import contextlib

import numpy as np

__all__ = ["stateless_call"]


def _values(layer, what, mine, given):
    name = type(layer).__name__
    if isinstance(given, (str, bytes, dict)) or not hasattr(given, "__iter__"):
        raise TypeError(f"{name}.stateless_call: {what} must be a list of arrays, one per {name}().{what}, got "
                        f"{type(given).__name__}")
    given = list(given)
    if len(given) != len(mine):
        raise ValueError(f"{name}.stateless_call: {what} must be a list corresponding 1:1 to {name}().{what}: got "
                         f"{len(given)} values, expected {len(mine)}")
    out = []
    for v, g in zip(mine, given):
        a = np.asarray(g.numpy() if hasattr(g, "numpy") and not isinstance(g, np.ndarray) else g)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"{name}.stateless_call: the value for {v.name!r} must be an array of numbers, got "
                            f"dtype {a.dtype}")
        if a.shape != tuple(v.shape) and not (tuple(v.shape) == () and a.size == 1):
            raise ValueError(f"{name}.stateless_call: the value for {v.name!r} must have the variable's shape "
                             f"{tuple(v.shape)}, got {a.shape}")
        out.append(a)
    return out


def _leaves(x):
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in _leaves(e)]
    if isinstance(x, dict):
        return [leaf for e in x.values() for leaf in _leaves(e)]
    return [x]


def stateless_call(layer, trainable_variables, non_trainable_variables, args, kwargs, return_losses=False):
    """``(outputs, non_trainable_values)`` (and the losses with ``return_losses``) of ``layer``
    called on ``args`` with ``trainable_variables`` and ``non_trainable_variables`` (values in
    the order and shapes of the layer's own lists) in place of its variables' values, which
    are put back afterwards."""
    name = type(layer).__name__
    if not layer.built:
        raise ValueError(f"To call stateless_call, {name} must be built (its variables made): call it on some "
                         f"data first")
    from pyggml.layers.node import Node
    if any(isinstance(v, Node) for v in _leaves(list(args) + list(kwargs.values()))):
        raise TypeError(f"{name}.stateless_call computes on data (arrays or tensors), not on symbolic inputs: a "
                        f"model made of it would use the variables' own values")
    mine_t, mine_n = layer.trainable_variables, layer.non_trainable_variables
    given = _values(layer, "trainable_variables", mine_t, trainable_variables) + \
        _values(layer, "non_trainable_variables", mine_n, non_trainable_variables)
    from pyggml.layers.weight_rules import layer_tree
    variables = mine_t + mine_n
    lock = getattr(layer, "_lock", None) or contextlib.nullcontext()
    # a model's lock, held throughout: its predict or fit in another thread waits, and never sees
    # (or overwrites) the values given here
    with lock:
        saved = [v.numpy() for v in variables]
        tree = layer_tree([layer])
        saved_losses = [(l, l.__dict__.get("_call_losses")) for l in tree]     # (no side effect: as they were)
        try:
            for v, a in zip(variables, given):
                v.assign(a)
            outputs = layer(*args, **kwargs)
            new_state = [v.numpy() for v in mine_n]
            losses = list(layer.losses) if return_losses else None
        finally:
            for v, a in zip(variables, saved):
                v.assign(a)
            for l, kept in saved_losses:
                if kept is None:
                    l.__dict__.pop("_call_losses", None)
                else:
                    l.__dict__["_call_losses"] = kept
    return (outputs, new_state, losses) if return_losses else (outputs, new_state)
