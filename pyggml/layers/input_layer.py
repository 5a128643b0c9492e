"""Input: the symbolic input of a functional model, and its layer."""

from pyggml._validation import check_positive_int
from pyggml.layers.layer import Layer, feature_shape_of
from pyggml.layers.node import Node
from pyggml.saving.object_registration import register_builtin

__all__ = ["InputLayer", "Input"]

# what a model's input may hold; integer inputs are converted to int32 at the boundary
_DTYPES = {"float32": "float32", "float64": "float32", "float16": "float32", "int32": "int32",
           "int64": "int32", "int16": "int32", "int8": "int32", "uint8": "int32", "uint16": "int32",
           "uint32": "int32", "bool": "int32",
           # only preprocessing layers (on the host, before the graph) take strings
           "string": "string", "str": "string", "object": "string"}


@register_builtin
class InputLayer(Layer):
    """The layer behind ``pg.Input``: no weights, the model's data enters here.

    ``InputLayer(shape=None, batch_size=None, dtype="float32", batch_shape=None, name=None)``
    (Keras's order; ``input_shape=`` and ``batch_input_shape=`` are Keras 2's names).  Its
    ``output`` is the symbolic input; as the first element of a Sequential (or given to
    ``Sequential.add``) it sets the model's input shape, as ``pg.Input`` does."""

    _dotted_names = True

    def __init__(self, shape=None, batch_size=None, dtype="float32", sparse=None, batch_shape=None,
                 input_tensor=None, optional=False, name=None, **kwargs):
        shape, batch_shape = _legacy_shapes(shape, batch_shape, kwargs)
        if sparse:
            raise ValueError("InputLayer: sparse inputs are not supported (pyggml's tensors are dense)")
        if input_tensor is not None:
            raise ValueError("InputLayer: input_tensor is not supported; pass shape= (and dtype=), or use the "
                             "symbolic tensor itself where the model takes inputs")
        if optional:
            raise ValueError("InputLayer: optional inputs are not supported")
        super().__init__(name=name, **kwargs)
        if batch_shape is not None:
            try:
                batch_shape = tuple(batch_shape)
            except TypeError:
                raise TypeError(f"Input: batch_shape must be a tuple (batch, *shape), got {batch_shape!r}") from None
            if not batch_shape:
                raise ValueError("Input: batch_shape must be a tuple (batch, *shape), got ()")
            if shape is not None and feature_shape_of(shape, allow_none=True) != \
                    feature_shape_of(batch_shape[1:], "batch_shape", allow_none=True):
                raise ValueError(f"Input: shape {shape!r} and batch_shape {batch_shape!r} disagree")
            if batch_size is not None and batch_shape[0] is not None and batch_shape[0] != batch_size:
                raise ValueError(f"Input: batch_size {batch_size!r} and batch_shape {batch_shape!r} disagree")
            shape = batch_shape[1:]
            if batch_size is None:
                batch_size = batch_shape[0]
        if shape is None:
            raise ValueError("Input needs a shape (without the batch dimension)")
        # Keras's fixed batch size (stateful recurrent layers need one), or None
        self.batch_size = None if batch_size is None else check_positive_int("Input batch_size", batch_size)
        self._batch_size = self.batch_size
        self.shape = feature_shape_of(shape, allow_none=True, allow_empty=True)   # () : one number per row
        key = str(getattr(dtype, "__name__", dtype)) if dtype is not None else "float32"
        if key not in _DTYPES:
            raise ValueError(f"Input dtype must be a float or integer type ({', '.join(sorted(_DTYPES))}), "
                             f"got {dtype!r}")
        self.dtype = key
        self.input_shape = self.output_shape = (None,) + self.shape
        self.built = True
        # the symbolic input (Keras's InputLayer(...).output); a loaded functional model
        # replaces it with the node it wires
        node = Node(self.shape, self, [], dtype=self.graph_dtype)
        node.batch_size = self.batch_size
        self.output = node

    @property
    def graph_dtype(self):
        """What the graph holds for this input: 'float32' or 'int32'."""
        return _DTYPES[self.dtype]

    @classmethod
    def kind(cls):
        return "input_layer"

    @property
    def batch_shape(self):
        """Keras's: (batch size or None, *shape)."""
        return (self.batch_size,) + tuple(self.shape)

    def get_config(self):
        return {"name": self.name, "batch_shape": (self.batch_size,) + self.shape, "dtype": self.dtype}

    @classmethod
    def from_config(cls, config):
        shape = tuple(config["batch_shape"])
        return cls(shape[1:], name=config.get("name"), dtype=config.get("dtype", "float32"), batch_size=shape[0])


def Input(shape=None, name=None, dtype="float32", batch_size=None, batch_shape=None, sparse=None, tensor=None,
          optional=False):
    """A symbolic input of a functional model (``shape`` without the batch; Keras's
    arguments, in API.md's order: ``Input(shape, name=None, dtype="float32")`` first).

    ``batch_size`` (or ``batch_shape=(batch, *shape)``) fixes the model's batch size,
    as Keras's: a stateful recurrent layer needs it.

    ``None`` in the shape stands for a length that varies from batch to batch
    (a graph is built and cached per length).  Integer dtypes (int64, int32,
    ...) hold indices for an Embedding; floats are float32 in the graph."""
    layer = InputLayer(shape, batch_size=batch_size, dtype=dtype, sparse=sparse, batch_shape=batch_shape,
                       input_tensor=tensor, optional=optional, name=name)
    return layer.output


def _legacy_shapes(shape, batch_shape, kwargs):
    """Keras 2's ``input_shape=`` and ``batch_input_shape=`` (Keras 3 still takes them) as
    ``shape`` and ``batch_shape``; taken out of ``kwargs``."""
    input_shape = kwargs.pop("input_shape", None)
    batch_input_shape = kwargs.pop("batch_input_shape", None)
    if input_shape is not None:
        if shape is not None and feature_shape_of(shape, allow_none=True) != \
                feature_shape_of(input_shape, "input_shape", allow_none=True):
            raise ValueError(f"InputLayer: shape {shape!r} and input_shape {input_shape!r} disagree")
        shape = input_shape
    if batch_input_shape is not None:
        if batch_shape is not None and tuple(batch_shape) != tuple(batch_input_shape):
            raise ValueError(f"InputLayer: batch_shape {batch_shape!r} and batch_input_shape "
                             f"{batch_input_shape!r} disagree")
        batch_shape = batch_input_shape
    return shape, batch_shape
