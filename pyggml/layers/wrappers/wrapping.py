"""What the wrapper layers share: saving a wrapped layer in a config, building
it, and its output shape."""

from types import SimpleNamespace

from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import get_registered_name, get_registered_object

__all__ = ["serialize_layer", "build_sublayer", "sublayer_output_shape", "check_layer"]


def check_layer(owner, layer, what="layer"):
    """A layer, given as one or in the serialized form ``serialize_layer`` makes."""
    if isinstance(layer, dict) and "class_name" in layer and "config" in layer:
        layer = get_registered_object(layer["class_name"]).from_config(layer["config"])
    if not isinstance(layer, Layer):
        raise TypeError(f"{owner}: {what} must be a pyggml.layers.Layer (or its serialized form), "
                        f"got {layer!r}")
    return layer


def serialize_layer(layer):
    """{"class_name", "config"} of a layer (a class of yours must be registered to load)."""
    return {"class_name": get_registered_name(type(layer)), "config": layer.get_config()}


def build_sublayer(layer, input_shape):
    """Build a wrapped layer for inputs of this Keras shape (once)."""
    layer._build_once(tuple(input_shape))


def sublayer_output_shape(layer, input_shape):
    """The wrapped layer's output shape: its compute_output_shape, or found by
    running its call on shapes alone."""
    input_shape = tuple(input_shape)
    if type(layer).compute_output_shape is not Layer.compute_output_shape:
        return layer.compute_output_shape(input_shape)
    from pyggml.layers import tracing
    probe = SimpleNamespace(feature_shape=input_shape[1:], dtype="float32", batch_size=None)
    shape, _ = tracing.output_shapes(layer, probe, {})
    return shape
