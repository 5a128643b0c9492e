"""The layer contract and the symbolic nodes of functional models.

A layer declares its weights in ``build(input_shape)`` (``add_weight``), adds
ggml operations in ``call(g, x, training)`` and says its output shape in
``compute_output_shape``.  Shapes never include the batch dimension.
Weights live in the model that owns the layer (drawn at ``compile``).
"""

import re

import numpy as np

__all__ = ["Layer", "Node", "InputLayer", "Input", "snake_case"]


def snake_case(name):
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    return s.replace("conv1_d", "conv1d").replace("conv2_d", "conv2d").replace("pooling2_d", "pooling2d") \
        .replace("pooling1_d", "pooling1d").replace("l_s_t_m", "lstm").replace("g_r_u", "gru")


def _shape_tuple(shape, what="shape"):
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        t = tuple(shape)
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of ints, got {shape!r}") from None
    if not t:
        raise ValueError(f"{what} must not be empty")
    out = []
    for d in t:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{what} entries must be ints, got {d!r} in {t}")
        if d < 1:
            raise ValueError(f"{what} entries must be positive, got {t}")
        if d > 2 ** 31:
            raise ValueError(f"{what} {t} is too large")
        out.append(int(d))
    if len(out) > 3:
        raise ValueError(f"{what} {t}: at most 3 dimensions besides the batch")
    return tuple(out)


class Node:
    """A symbolic tensor of a functional model: the output of a layer."""

    def __init__(self, shape, layer, inputs, index=0):
        self.shape = shape
        self.layer = layer
        self.inputs = inputs        # list of Nodes
        self.index = index          # which output of the layer
        self.cells = int(np.prod(shape)) if shape else 1

    def __repr__(self):
        return f"<Node {self.layer.name if self.layer.name else type(self.layer).__name__} shape=(None, {', '.join(map(str, self.shape))})>"


class Layer:
    """Base class of all layers (Keras names, arguments and defaults)."""

    _max_params = 2 ** 30      # elements in one weight (4 GiB of f32)

    def __init__(self, name=None, trainable=True, dtype=None, input_shape=None, input_dim=None, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments: {sorted(kwargs)}")
        if name is not None and (not isinstance(name, str) or not name or "." in name or len(name) > 40):
            raise ValueError(f"layer name must be a non-empty str without '.' (at most 40 chars), got {name!r}")
        self._given_name = name
        self.name = name
        self._trainable = bool(trainable)
        self.built = False
        self.input_shape = None
        self.output_shape = None
        self._weight_specs = {}          # name -> (shape, initializer, trainable)
        self._model = None
        self._batch_input_shape = None
        if input_shape is not None:
            self._batch_input_shape = _shape_tuple(input_shape, "input_shape")
        elif input_dim is not None:
            self._batch_input_shape = _shape_tuple(input_dim, "input_dim")

    # --- naming and flags ---------------------------------------------------
    @classmethod
    def kind(cls):
        return snake_case(cls.__name__)

    @property
    def trainable(self):
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        self._trainable = bool(value)
        if self._model is not None:
            self._model._on_trainable_changed()

    # --- weights ------------------------------------------------------------
    def add_weight(self, name, shape, initializer="glorot_uniform", trainable=True, layout="out_in"):
        shape = tuple(int(s) for s in shape)
        if int(np.prod(shape)) > self._max_params:
            raise ValueError(f"{self.name or type(self).__name__}: the {name!r} weight of shape {shape} is too large "
                             f"(at most 2**30 values)")
        self._weight_specs[name] = (shape, initializer, trainable, layout)

    def weight_names(self):
        return list(self._weight_specs)

    def count_params(self):
        return int(sum(int(np.prod(s[0])) for s in self._weight_specs.values()))

    def get_weights(self):
        if self._model is None:
            raise RuntimeError(f"layer {self.name!r} is not part of a compiled model")
        w = self._model.get_weights()
        return {k.split(".", 1)[1]: v for k, v in w.items() if k.split(".", 1)[0] == self.name}

    # --- the contract -----------------------------------------------------------
    def build(self, input_shape):
        """Declare weights for this input shape (no batch dimension)."""

    def _build_once(self, input_shape):
        if self.built:
            if input_shape != self.input_shape:
                raise ValueError(f"layer {self.name or type(self).__name__} was built for input shape "
                                 f"{self.input_shape}, got {input_shape}")
            return
        self.output_shape = self.compute_output_shape(input_shape)
        self.build(input_shape)
        self.input_shape = input_shape
        self.built = True

    def compute_output_shape(self, input_shape):
        return input_shape

    def call(self, g, x, training):
        """Add ggml operations; x is a pyggml.core.Tensor of shape (batch, *input_shape)."""
        raise NotImplementedError

    def get_config(self):
        cfg = {"name": self.name, "trainable": self.trainable, "dtype": "float32"}
        if self._batch_input_shape is not None:
            cfg["batch_input_shape"] = (None,) + tuple(self._batch_input_shape)
        return cfg

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        bis = config.pop("batch_input_shape", None)
        if bis is not None:
            config["input_shape"] = tuple(bis[1:])
        return cls(**config)

    # --- functional use -----------------------------------------------------------
    def __call__(self, inputs, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__} takes no call arguments besides its inputs")
        nodes = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        for n in nodes:
            if not isinstance(n, Node):
                raise TypeError(f"{type(self).__name__} must be called on pg.Input(...) or another "
                                f"layer's output, got {type(n).__name__}")
        shapes = [n.shape for n in nodes]
        self._build_once(shapes if isinstance(inputs, (list, tuple)) else shapes[0])
        return Node(self.output_shape, self, list(nodes))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


class InputLayer(Layer):
    def __init__(self, shape, name=None, dtype="float32"):
        super().__init__(name=name)
        self.shape = _shape_tuple(shape)
        if dtype not in ("float32", "int32", "float64", "float16"):
            raise ValueError(f"Input dtype must be 'float32' or 'int32', got {dtype!r}")
        self.dtype = dtype
        self.input_shape = self.output_shape = self.shape
        self.built = True

    @classmethod
    def kind(cls):
        return "input_layer"

    def get_config(self):
        return {"name": self.name, "batch_shape": (None,) + self.shape, "dtype": self.dtype}

    @classmethod
    def from_config(cls, config):
        return cls(tuple(config["batch_shape"][1:]), name=config.get("name"), dtype=config.get("dtype", "float32"))


def Input(shape, name=None, dtype="float32"):
    """A symbolic input of a functional model (shape without the batch)."""
    layer = InputLayer(shape, name=name, dtype=dtype)
    node = Node(layer.shape, layer, [])
    layer._node = node
    return node
