"""Pipeline (Keras's layer): its layers applied in order, as one layer.

Keras uses it to chain preprocessing and augmentation layers in a dataset's
``map`` or at the front of a model.  Here it takes on the side its layers run
on: a Pipeline of preprocessing layers that run on the host (``RandomFlip``,
``MixUp``, ``Resizing``; ``Rescaling`` beside them) is a host step itself (in
training mode in ``fit``, the identity of its random layers elsewhere); a
Pipeline of graph layers computes in the graph (their weights are its
weights).  One that mixes the two is refused: its host layers would sit inside
the graph.  Called on ``{"images": ..., "labels": ...}`` it passes the dict to
the layers that take one (MixUp, CutMix and the other augmentations that mix
or keep labels) and the images alone to the others."""

import numpy as np

from pyggml.layers.layer import Layer
from pyggml.layers.node import Node
from pyggml.layers.preprocessing._augment_helpers import DictAugmentation
from pyggml.layers.wrappers.wrapping import build_sublayer, check_layer, serialize_layer, sublayer_output_shape
from pyggml.saving.object_registration import register_builtin

__all__ = ["Pipeline"]


def _on_host(layer):
    return bool(getattr(layer, "host", False))


@register_builtin
class Pipeline(Layer):
    """``Pipeline(layers, name=None)``."""

    def __init__(self, layers, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(layers, Layer) or not isinstance(layers, (list, tuple)):
            raise TypeError(f"Pipeline: layers must be a list of layers, got {layers!r}")
        steps = [check_layer("Pipeline", l, f"layers[{i}]") for i, l in enumerate(layers)]
        host = [type(l).__name__ for l in steps if _on_host(l)]
        graph = [type(l).__name__ for l in steps if not _on_host(l) and not getattr(l, "host_capable", False)]
        if host and graph:
            raise ValueError(f"Pipeline mixes preprocessing layers that run on the host ({', '.join(host)}) with "
                             f"graph layers ({', '.join(graph)}): put the graph layers after the Pipeline in the "
                             f"model")
        self.pipeline_layers = steps

    @property
    def layers(self):
        return list(self.pipeline_layers)

    # --- on the host -----------------------------------------------------------------------------

    @property
    def host(self):
        return any(_on_host(l) for l in self.pipeline_layers)

    @property
    def host_training(self):
        return any(getattr(l, "host_training", False) for l in self.pipeline_layers)

    @property
    def output_dtype(self):
        dtypes = [getattr(l, "output_dtype", "float32") for l in self.pipeline_layers if _on_host(l)]
        return dtypes[-1] if dtypes else "float32"

    def host_apply(self, inputs, training=None):
        x = inputs
        for layer in self.pipeline_layers:
            x = layer.host_apply(x, training)
        return x

    def _apply_to_dict(self, data, training):
        out = dict(data)
        for layer in self.pipeline_layers:
            if isinstance(layer, DictAugmentation):
                out = layer(out, training=training)
            elif _on_host(layer) or getattr(layer, "host_capable", False):
                out["images"] = layer.host_apply(np.asarray(out["images"]), training)
            else:
                out["images"] = layer(np.asarray(out["images"]), training=training)
        return out

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], dict) and "images" in args[0] and \
                not any(isinstance(v, Node) for v in args[0].values()):
            return self._apply_to_dict(args[0], kwargs.get("training"))
        if self.host and args and not isinstance(args[0], Node) and not hasattr(args[0], "graph_tensor") and \
                (isinstance(args[0], (np.ndarray, list, tuple)) or type(args[0]).__module__.split(".")[0] != "pyggml"):
            return self.host_apply(np.asarray(args[0]), kwargs.get("training"))
        return super().__call__(*args, **kwargs)

    # --- in the graph ------------------------------------------------------------------------------

    def build(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.pipeline_layers:
            build_sublayer(layer, shape)          # a nested Sequential learns its input shape here
            shape = tuple(sublayer_output_shape(layer, shape))

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        for layer in self.pipeline_layers:
            shape = tuple(sublayer_output_shape(layer, shape))
        return shape

    def call(self, inputs, training=None):
        if self.host:
            raise TypeError("Pipeline of preprocessing layers runs on the host before the graph: call it on "
                            "pg.Input nodes (or on another preprocessing layer's output), not inside a layer's "
                            "call")
        x = inputs
        for layer in self.pipeline_layers:
            x = layer(x, training=training)
        return x

    def get_config(self):
        cfg = super().get_config()
        cfg["layers"] = [serialize_layer(l) for l in self.pipeline_layers]
        return cfg
