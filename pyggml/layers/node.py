"""Node: a symbolic tensor of a functional model (Keras's KerasTensor).

A node is one output of one call of a layer on other nodes.  ``shape`` is
Keras's, with ``None`` for the batch (and for any variable length);
``feature_shape`` leaves the batch out.  Arithmetic on nodes adds merging
layers (``a + b`` is ``layers.Add()([a, b])``).
"""

import numpy as np

from pyggml import _symbolic

__all__ = ["Node", "MERGING_LAYERS"]

# the layers node arithmetic adds, by name; pyggml.layers.merging fills it in
# (nodes do not import layers: layers import nodes)
MERGING_LAYERS = {}


class Node:
    """``Node(feature_shape, layer, inputs, index=0, dtype="float32")``."""

    # the model's fixed batch size (Keras's Input(batch_size=...)), carried from the inputs; or None
    batch_size = None

    def __init__(self, feature_shape, layer, inputs, index=0, dtype="float32", call_kwargs=None, list_input=False):
        self.feature_shape = tuple(feature_shape)
        self.layer = layer
        self.inputs = list(inputs)          # the nodes this one was computed from
        self.index = index                  # which output of the layer's call
        self.dtype = dtype
        self.call_kwargs = dict(call_kwargs or {})
        self.list_input = bool(list_input)  # the layer was called on a list of nodes

    @property
    def shape(self):
        return (None,) + self.feature_shape

    @property
    def ndim(self):
        return len(self.feature_shape) + 1

    @property
    def cells(self):
        """Values per sample, or None when a dimension is variable."""
        if any(d is None for d in self.feature_shape):
            return None
        return int(np.prod(self.feature_shape)) if self.feature_shape else 1

    # --- arithmetic adds merging layers ------------------------------------------------
    def _merge(self, kind, other, reflected=False):
        if not isinstance(other, Node):
            if isinstance(other, (int, float, np.integer, np.floating, np.ndarray)) and not isinstance(other, bool):
                # a number or an array: Keras's op on the node (pyggml.layers.core.symbolic_op)
                op = {"Add": "add", "Subtract": "subtract", "Multiply": "multiply"}[kind]
                return _symbolic.apply(op, (other, self) if reflected else (self, other), {})
            return NotImplemented
        pair = [other, self] if reflected else [self, other]
        return MERGING_LAYERS[kind]()(pair)

    def __truediv__(self, other):
        if isinstance(other, bool) or not isinstance(other, (Node, int, float, np.integer, np.floating, np.ndarray)):
            return NotImplemented
        return _symbolic.apply("divide", (self, other), {})

    def __rtruediv__(self, other):
        if isinstance(other, bool) or not isinstance(other, (int, float, np.integer, np.floating, np.ndarray)):
            return NotImplemented
        return _symbolic.apply("divide", (other, self), {})

    def __neg__(self):
        return _symbolic.apply("negative", (self,), {})

    def __getitem__(self, key):
        """``node[:, 0]``: the op ``getitem`` as a layer of the model (numpy's basic indexing)."""
        from pyggml._indexing import encode_key
        return _symbolic.apply("getitem", (self, encode_key(key)), {})

    def __add__(self, other):
        return self._merge("Add", other)

    def __radd__(self, other):
        return self._merge("Add", other, True)

    def __sub__(self, other):
        return self._merge("Subtract", other)

    def __rsub__(self, other):
        return self._merge("Subtract", other, True)

    def __mul__(self, other):
        return self._merge("Multiply", other)

    def __rmul__(self, other):
        return self._merge("Multiply", other, True)

    def __repr__(self):
        name = self.layer.name or type(self.layer).__name__
        return f"<Node {name} shape={self.shape} dtype={self.dtype}>"


_symbolic.NODE_TYPES.append(Node)
