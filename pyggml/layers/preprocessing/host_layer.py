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

from pyggml._tensor_arrays import as_ops_result
from pyggml.layers.layer import Layer

__all__ = ["HostLayer", "host_call_in_graph", "is_fed"]


def is_fed(x):
    """Whether ``x`` is a graph tensor the graph is given (data fed to it), not one it computes."""
    from pyggml.core import Tensor
    return isinstance(x, Tensor) and x.op == "NONE" and "param" not in x.flags


def host_call_in_graph(layer, inputs, training):
    """``layer`` (a host layer, or a model of host layers) called inside a graph that is being
    built (a subclassed model's ``call``, a GradientTape, a layer's ``call``) on data fed to that
    graph: its output is an input of the graph computed from that data on the host, for every
    batch (keras-io's shiftvit starts its ``call`` with its ``data_augmentation`` Sequential;
    patch_convnet augments inside its GradientTape).  Nothing passes back through it to its
    input in a gradient, as it is data."""
    from pyggml import _scope
    scope = _scope.current()
    if scope is None or not is_fed(inputs):
        raise TypeError(f"{type(layer).__name__} runs on the host, in numpy: inside a layer's or a model's call "
                        f"it takes the data the graph is fed (the model's input, or a GradientTape's array), "
                        f"not a tensor computed in the graph; put it before the layers that compute that tensor")
    mode = None if training is None else bool(training)
    strings = _scope.holds_strings(inputs)          # a string input: the strings as given
    src_dtype = object if strings else np.int32 if inputs.dtype in ("i32", "int32") else np.float32

    def on_host(a):
        out = np.asarray(layer.host_apply(np.asarray(a, dtype=src_dtype), mode))
        if out.dtype == object or out.dtype.kind not in "biuf":
            raise TypeError(f"{type(layer).__name__} gave values of dtype {out.dtype} inside a graph; "
                            f"a graph takes numbers")
        return np.ascontiguousarray(out, dtype=np.int32 if out.dtype.kind in "biu" else np.float32)

    probe = on_host(np.full(inputs.shape, _probe_string(layer), object) if strings else
                    np.zeros(inputs.shape, src_dtype))
    return scope.derived_input(inputs, on_host, probe.shape, "int32" if probe.dtype == np.int32 else "float32")


def _probe_string(layer):
    """A string the first layer of ``layer`` (a host layer, or a run of them) takes: a word of
    its vocabulary (a lookup without an OOV index refuses others), else ''."""
    first = (getattr(layer, "layers", None) or getattr(layer, "_stack", None) or [layer])[0]
    vocabulary = getattr(first, "get_vocabulary", None)
    try:
        words = [w for w in (vocabulary() if vocabulary is not None else ()) if isinstance(w, str) and w]
    except (ValueError, TypeError, RuntimeError):       # not adapted yet
        words = []
    return words[-1] if words else ""


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
        return host_call_in_graph(self, inputs, training)

    def __call__(self, *args, **kwargs):
        from pyggml.layers.node import Node
        if args and isinstance(args[0], Node):
            return super().__call__(*args, **kwargs)
        # eager: on arrays, at once (numpy's, and ndarray subclasses such as a Dataset's EagerArray batches)
        if args and not isinstance(args[0], (list, tuple)) and not hasattr(args[0], "graph_tensor") and \
                (isinstance(args[0], np.ndarray) or type(args[0]).__module__.split(".")[0] != "pyggml"):
            # an array that answers .numpy() too, as a Keras layer's eager tensor (``lookup(labels).numpy()``)
            return as_ops_result(self.host_apply(np.asarray(args[0]), kwargs.get("training")))
        return super().__call__(*args, **kwargs)
