"""HostLayer: a layer computed on the host, in numpy, before the graph.

Preprocessing that ggml cannot do (strings, vocabularies, bucketing) runs on
the model's inputs before they reach the device: a HostLayer takes model
inputs (or other host layers' outputs) and gives arrays the graph takes.  It
belongs to the model: its state (a vocabulary, bin boundaries) is in its
config, saved in the GGUF file, and ``predict`` applies it after
``load_model``.  A host layer must be called on ``pg.Input`` nodes or on other
host layers' outputs; the graph starts where its outputs are used.

Subclasses define ``host_call(array) -> array`` (numpy in, numpy out, the batch
first), ``compute_output_shape`` and ``output_dtype`` ("float32" or "int32"),
and usually ``adapt(data)`` and ``get_config``.

A layer that acts differently in training (data augmentation) sets
``host_training = True`` and takes ``host_call(array, training=None)``: the
model runs it with ``training=True`` on each batch of ``fit`` (and
``train_on_batch``, ``Trainer.step``), with ``training=False`` elsewhere; an
eager call passes its ``training=`` argument (None when not given).
"""

import numpy as np

from pyggml.layers.layer import Layer

__all__ = ["HostLayer"]


class HostLayer(Layer):
    host = True
    host_training = False
    output_dtype = "float32"

    def host_call(self, inputs):
        raise NotImplementedError(f"{type(self).__name__} must define host_call(self, array)")

    def host_apply(self, inputs, training=None):
        """host_call, given ``training`` when the layer takes it."""
        if self.host_training:
            return self.host_call(inputs, training=training)
        return self.host_call(inputs)

    def call(self, inputs, training=None):
        graph_call = getattr(self, "graph_call", None)
        if graph_call is not None:           # a host layer that can also run in the graph (Resizing)
            return graph_call(inputs, training=training)
        raise TypeError(f"{type(self).__name__} runs on the host before the graph: call it on pg.Input nodes "
                        f"(or on another preprocessing layer's output), not inside a layer's call")

    def __call__(self, *args, **kwargs):
        from pyggml.layers.node import Node
        if args and isinstance(args[0], Node):
            return super().__call__(*args, **kwargs)
        # eager: on arrays, at once (numpy's, and ndarray subclasses such as a Dataset's EagerArray batches)
        if args and not isinstance(args[0], (list, tuple)) and not hasattr(args[0], "graph_tensor") and \
                (isinstance(args[0], np.ndarray) or type(args[0]).__module__.split(".")[0] != "pyggml"):
            return self.host_apply(np.asarray(args[0]), kwargs.get("training"))
        return super().__call__(*args, **kwargs)
