"""Helpers the built-in layers share (not part of the layer contract)."""

from pyggml import activations, ops
from pyggml.layers.layer import Layer

__all__ = ["Activated", "contiguous", "rows_2d"]


def contiguous(x):
    return x if x.is_contiguous else ops.cont(x)


def rows_2d(x):
    """(d0, ..., dk, c) -> (d0 * ... * dk, c): ggml's mul_mat trains only with a 2-D weight."""
    return ops.flatten_rows(x)


class Activated(Layer):
    """A layer whose output goes through ``activation``.  ``pre_activation``
    is its output before it: a loss that can take logits (cross-entropy after
    softmax or sigmoid) trains on those, which is stabler."""

    def __init__(self, activation=None, **kwargs):
        super().__init__(**kwargs)
        self._act = activations.get(activation)
        self.activation = activations.name_of(activation)

    def pre_activation(self, inputs, training=None):
        raise NotImplementedError

    def call(self, inputs, training=None):
        return self._act(self.pre_activation(inputs, training))
