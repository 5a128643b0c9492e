"""Wrapper: Keras's base class of the layers that wrap another layer.

``Wrapper(layer)`` keeps ``layer`` as the sublayer ``layer`` (its weights are
``layer.<weight>``), builds it on the wrapper's input shape, takes its output
shape, and saves it inside the wrapper's config (``{"layer": {"class_name",
"config"}}``); ``from_config`` rebuilds it.  A subclass writes ``call``.
"""

from pyggml.layers.layer import Layer
from pyggml.layers.wrappers.wrapping import build_sublayer, check_layer, serialize_layer, sublayer_output_shape
from pyggml.saving.object_registration import register_builtin

__all__ = ["Wrapper"]


@register_builtin
class Wrapper(Layer):
    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = check_layer(type(self).__name__, layer)

    def build(self, input_shape=None):
        if input_shape is not None:
            build_sublayer(self.layer, input_shape)

    def compute_output_shape(self, input_shape):
        return sublayer_output_shape(self.layer, input_shape)

    def get_config(self):
        cfg = super().get_config()
        cfg["layer"] = serialize_layer(self.layer)
        return cfg

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        if "layer" not in config:
            raise ValueError(f"{cls.__name__}.from_config: the config has no 'layer'")
        return cls(check_layer(cls.__name__, config.pop("layer")), **config)
