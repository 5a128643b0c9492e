"""Sequential: a stack of layers, built as the same functional graph."""

from pyggml.layers.base import Input, InputLayer, Layer, Node, _shape_tuple
from pyggml.models.model import Model

__all__ = ["Sequential"]


class Sequential(Model):
    """``pg.Sequential(layers=None, input_shape=None, name=None)``; the first
    element of ``layers`` may be ``pg.Input(shape)``."""

    def __init__(self, layers=None, input_shape=None, name=None):
        super().__init__(name=name)
        self.name = name or "sequential"
        self._stack = []
        self._input_shape = None
        if input_shape is not None:
            self.input_shape = input_shape
        for l in layers or []:
            self.add(l)

    @property
    def input_shape(self):
        return self._input_shape

    @input_shape.setter
    def input_shape(self, shape):
        if self._compiled:
            raise RuntimeError("the input shape cannot change after compile")
        self._input_shape = _shape_tuple(shape, "input_shape")
        self._invalidate()

    def add(self, layer):
        if self._compiled:
            raise RuntimeError("cannot add layers after compile")
        if isinstance(layer, Node) and isinstance(layer.layer, InputLayer):
            if self._stack:
                raise ValueError("pg.Input can only be the first element of a Sequential")
            self._input_shape = layer.shape
            self._input_dtype = layer.layer.dtype
            return self
        if not isinstance(layer, Layer) or isinstance(layer, InputLayer):
            raise TypeError(f"Sequential.add takes a layer, got {type(layer).__name__}")
        if any(l is layer for l in self._stack):
            raise ValueError("this layer is already in the model")
        if layer._model is not None and layer._model is not self:
            raise ValueError(f"layer {layer.name!r} already belongs to another model")
        if not self._stack and self._input_shape is None and layer._batch_input_shape is not None:
            self._input_shape = layer._batch_input_shape
        self._stack.append(layer)
        self._invalidate()
        return self

    def pop(self):
        if self._compiled:
            raise RuntimeError("cannot remove layers after compile")
        if not self._stack:
            raise ValueError("the model has no layers to pop")
        layer = self._stack.pop()
        layer._model = None
        self._invalidate()
        return layer

    def _invalidate(self):
        for attr in ("_nodes", "_inputs", "_outputs", "_all_layers"):
            self.__dict__.pop(attr, None)
        for l in self._stack:
            l.built = False
            l._weight_specs = {}
        self._values = None

    def _ensure_graph(self):
        if hasattr(self, "_nodes"):
            return
        if not self._stack:
            raise ValueError("the Sequential model has no layers")
        if self._input_shape is None:
            raise ValueError("the Sequential model has no input shape: set model.input_shape, pass "
                             "input_shape=..., or start with pg.Input(shape)")
        dtype = getattr(self, "_input_dtype", "float32")
        if getattr(self._stack[0], "input_dtype", None) == "int32":
            dtype = "int32"
        inp = Input(self._input_shape, dtype=dtype)
        node = inp
        for l in self._stack:
            node = l(node)
        self._init_graph(inp, node)
        self._seq_input_layer = inp.layer

    @property
    def layers(self):
        return list(self._stack)

    def get_config(self):
        cfg = super().get_config()
        cfg["sequential"] = True
        cfg["input_shape"] = list(self._input_shape)
        return cfg

    @classmethod
    def from_config(cls, config):
        from pyggml.layers import get_class
        m = cls(name=config.get("name"))
        m.input_shape = tuple(config["input_shape"])
        for entry in config["layers"]:
            if entry["class_name"] == "InputLayer":
                continue
            klass = get_class(entry["class_name"])
            m.add(klass.from_config(entry["config"]))
        return m

    @property
    def layers_all(self):
        self._ensure_graph()
        return list(self._all_layers)
