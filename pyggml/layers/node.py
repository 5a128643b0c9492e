"""Node: a symbolic tensor of a functional model (Keras's KerasTensor).

A node is one output of one call of a layer on other nodes.  ``shape`` is
Keras's, with ``None`` for the batch (and for any variable length);
``feature_shape`` leaves the batch out.  Arithmetic on nodes adds merging
layers (``a + b`` is ``layers.Add()([a, b])``); the other operators are Keras's
ops on the node (``a // 2`` is ``ops.floor_divide(a, 2)``, ``a < 1`` is
``ops.less(a, 1)``, ``~m`` is ``ops.logical_not(m)``), so a model saves them.
Comparisons give float 0/1 tensors, as in a layer's call.  ``==`` stays object
equality (nodes are dict keys, as Keras's KerasTensor), ``!=`` is ``ops.not_equal``.
"""

import numpy as np

from pyggml import _symbolic

__all__ = ["Node", "MERGING_LAYERS"]

# the layers node arithmetic adds, by name; pyggml.layers.merging fills it in
# (nodes do not import layers: layers import nodes)
MERGING_LAYERS = {}


def _operand(value, logical=False):
    """True for what an operator takes beside a node: a node, a number or an array (and a
    bool for the logical operators)."""
    if isinstance(value, bool):
        return logical
    return isinstance(value, (Node, int, float, np.integer, np.floating, np.ndarray))


class Node:
    """``Node(feature_shape, layer, inputs, index=0, dtype="float32")``."""

    # numpy hands ``array + node`` (and ``array < node``) to the node's reflected operator
    # instead of making an object array of per-element nodes
    __array_ufunc__ = None

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
        """Keras's symbolic shape: the batch axis first (None unless an Input fixed it)."""
        return (self.batch_size,) + self.feature_shape

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
        layer = MERGING_LAYERS[kind]()
        layer._op_step = True           # Keras's ``a + b``: an op of the graph, not one of model.layers
        return layer(pair)

    def _op(self, name, other, reflected=False, logical=False):
        """``ops.<name>(self, other)`` (``(other, self)`` when reflected) as a layer of the model."""
        if not _operand(other, logical):
            return NotImplemented
        return _symbolic.apply(name, (other, self) if reflected else (self, other), {})

    def __pow__(self, other, modulo=None):
        return NotImplemented if modulo is not None else self._op("power", other)

    def __rpow__(self, other, modulo=None):
        return NotImplemented if modulo is not None else self._op("power", other, True)

    # __eq__ stays object equality, and defining __ne__ alone keeps object.__hash__
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __invert__(self):
        return _symbolic.apply("logical_not", (self,), {})

    def __abs__(self):
        return _symbolic.apply("absolute", (self,), {})

    def __round__(self, ndigits=None):
        return _symbolic.apply("round", (self,), {"decimals": int(ndigits or 0)})

    def __pos__(self):
        return self

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


def _node_operator(op, reflected, logical=False):
    def method(self, other):
        return self._op(op, other, reflected, logical)
    return method


# Python's binary operators on a node as Keras's KerasTensor has them (``__name__`` and its
# reflected ``__rname__``): Keras's op of that name as a layer of the model; the comparisons give
# float 0/1 tensors (Python reflects ``1.0 < node`` to ``node > 1.0``), the logical operators
# take boolean (0/1) tensors
for _name, _op, _both, _logical in (("truediv", "divide", True, False), ("floordiv", "floor_divide", True, False),
                                    ("mod", "mod", True, False), ("matmul", "matmul", True, False),
                                    ("lt", "less", False, False), ("le", "less_equal", False, False),
                                    ("gt", "greater", False, False), ("ge", "greater_equal", False, False),
                                    ("ne", "not_equal", False, False), ("and", "logical_and", True, True),
                                    ("or", "logical_or", True, True), ("xor", "logical_xor", True, True)):
    setattr(Node, f"__{_name}__", _node_operator(_op, False, _logical))
    if _both:
        setattr(Node, f"__r{_name}__", _node_operator(_op, True, _logical))
del _name, _op, _both, _logical
