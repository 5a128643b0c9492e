"""Keras's ``Layer.stateless_call``: a layer (or model) called with the variable values given,
leaving its own as they were; what the call wrote to its non-trainable variables (a
BatchNormalization's moving statistics in training) comes back instead."""

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


def stateless_call(layer, trainable_variables, non_trainable_variables, args, kwargs, return_losses=False):
    """``(outputs, non_trainable_values)`` (and the losses with ``return_losses``) of ``layer``
    called on ``args`` with ``trainable_variables`` and ``non_trainable_variables`` (values in
    the order and shapes of the layer's own lists) in place of its variables' values, which
    are put back afterwards."""
    name = type(layer).__name__
    if not layer.built:
        raise ValueError(f"To call stateless_call, {name} must be built (its variables made): call it on some "
                         f"data first")
    mine_t, mine_n = layer.trainable_variables, layer.non_trainable_variables
    given = _values(layer, "trainable_variables", mine_t, trainable_variables) + \
        _values(layer, "non_trainable_variables", mine_n, non_trainable_variables)
    variables = mine_t + mine_n
    saved = [v.numpy() for v in variables]
    try:
        for v, a in zip(variables, given):
            v.assign(a)
        outputs = layer(*args, **kwargs)
        new_state = [v.numpy() for v in mine_n]
        losses = list(layer.losses) if return_losses else None
    finally:
        for v, a in zip(variables, saved):
            v.assign(a)
    return (outputs, new_state, losses) if return_losses else (outputs, new_state)
