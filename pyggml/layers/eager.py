"""Calling a layer on arrays (Keras's eager call): ``Dense(3)(np.ones((2, 4)))``
computes it at once, in inference mode unless ``training=True``, on the CPU."""

import numpy as np

from pyggml import _eager
from pyggml._tensor_arrays import as_ops_result

__all__ = ["run_layer"]


def run_layer(layer, inputs, kwargs):
    many = isinstance(inputs, (list, tuple))
    arrays = [np.asarray(a) for a in (inputs if many else [inputs])]
    for a in arrays:
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"{type(layer).__name__}: inputs must be arrays of numbers, got dtype {a.dtype}")
    kwargs = dict(kwargs)
    training = bool(kwargs.pop("training", False))

    def graph(*tensors):
        return layer(list(tensors) if many else tensors[0], training=training, **kwargs)
    losses = []
    out = _eager.evaluate(graph, arrays, training=training, losses=losses)
    # Keras's layer.losses after a call: this call's losses, by the layer that added them
    from pyggml.layers.weight_rules import record_call_losses
    record_call_losses(layer, losses)
    return as_ops_result(out)       # TensorFlow's eager .numpy() answers, as the ops' results
