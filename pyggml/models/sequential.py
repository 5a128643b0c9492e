"""Sequential: a stack of layers, built as the same functional graph once its
input shape is known (``input_shape=``, a first ``pg.Input``, a first layer's
``input_shape=``, or the first data it sees)."""

import weakref

import numpy as np

from pyggml import _scope
from pyggml.core import Tensor
from pyggml.layers._keras_weights import BUILDERS
from pyggml.layers.input_layer import Input, InputLayer
from pyggml.layers.layer import Layer, feature_shape_of
from pyggml.layers.node import Node
from pyggml.layers.preprocessing.host_layer import host_call_in_graph, is_fed
from pyggml.models import functional
from pyggml.models.host_stage import HostRun, host_prefix, is_prefix_done
from pyggml.models.model import Model
from pyggml.models.subclassing import finish_compile
from pyggml.saving import own_state
from pyggml.saving.object_registration import get_registered_name, get_registered_object, register_builtin

__all__ = ["Sequential"]


class NotBuiltError(AttributeError, ValueError):
    """A Sequential without an input yet has no inputs nor outputs: an AttributeError, as Keras's
    (``hasattr(model, "inputs")`` is False), and a ValueError, as pyggml's other unbuilt models'."""


@register_builtin
class Sequential(Model):
    """``pg.Sequential(layers=None, input_shape=None, name=None)``; the first
    element of ``layers`` may be ``pg.Input(shape)`` or ``pg.layers.InputLayer(shape)``."""

    def __init__(self, layers=None, input_shape=None, name=None, **kwargs):
        self._stack = []
        self._given_names = set()            # the names given to its layers (each once)
        self._seq_input_shape = None
        self._seq_input_dtype = "float32"
        self._seq_batch_size = None          # Keras's fixed batch size (Input(batch_shape=...)), or None
        self._seq_has_input = False          # given a pg.Input (a second is refused)
        super().__init__(name=name, **kwargs)
        if input_shape is not None:
            self.input_shape = input_shape
        for l in layers or []:
            self.add(l)

    # a later call may have other lengths (Keras's Sequential checks nothing; each layer checks
    # its own: a transformer block's Dense feed-forward on one token after training on 15)
    build_shape_rule = "any"

    @classmethod
    def kind(cls):
        return "sequential"

    @property
    def built(self):
        """Keras's: True once built, and at once when its input shape is known (a Sequential
        that starts with an Input: Keras builds it as it is made; here it is built when asked)."""
        if self.__dict__.get("_built_flag"):
            return True
        if self.__dict__.get("_topology") is None and self.__dict__.get("_stack") and \
                self.__dict__.get("_seq_input_shape") is not None and not self.__dict__.get("_building_graph"):
            try:
                self._ensure_graph()
            except (ValueError, TypeError):
                return False              # (a layer that does not fit: compile or fit says why)
        return bool(self.__dict__.get("_built_flag"))

    @built.setter
    def built(self, value):
        self.__dict__["_built_flag"] = bool(value)

    def _plain_predict(self, x, training=False):
        """Called on an array of another shape than the one it was built for (same rank, each
        layer taking it, as Keras's): its layers run one after another on it."""
        built = self._seq_input_shape
        if built is not None and isinstance(x, np.ndarray) and x.shape[1:] != built and \
                x.ndim == len(built) + 1 and any(b is not None and b != d for b, d in zip(built, x.shape[1:])) \
                and self._stack and not self.host:
            out = x
            for layer in self._stack:
                out = layer(out, training=training) if training is not None else layer(out)
            return out
        return super()._plain_predict(x, training)

    @property
    def input_shape(self):
        """Keras's: ``(batch, *features)`` (the batch None unless fixed), None until known."""
        if self._seq_input_shape is None:
            return self._graph_shapes("inputs") if self._stack else None
        return (self._seq_batch_size,) + tuple(self._seq_input_shape)

    @input_shape.setter
    def input_shape(self, shape):
        if shape is None:
            return
        if self._seq_input_shape is not None and isinstance(shape, (tuple, list)) and \
                tuple(shape) == (self._seq_batch_size,) + tuple(self._seq_input_shape):
            return                       # its own batch shape given back (Layer._build_once): no change
        if isinstance(shape, tuple) and shape and shape[0] is None and len(shape) > 1:
            shape = shape[1:]            # Keras's batch shape, as Layer.build receives it
        self._set_features(shape)

    def _set_features(self, shape):
        if getattr(self, "_compiled", False):
            raise RuntimeError("the input shape cannot change after compile")
        self._seq_input_shape = feature_shape_of(shape, "input_shape", allow_none=True, allow_empty=True)
        self._invalidate()

    def add(self, layer):
        if self._compiled:
            raise RuntimeError("cannot add layers after compile")
        if isinstance(layer, InputLayer) and isinstance(layer.output, Node):
            layer = layer.output                    # Keras's InputLayer(shape): as pg.Input(shape)
        if isinstance(layer, Node) and isinstance(layer.layer, InputLayer):
            if self._stack:
                raise ValueError("pg.Input (or an InputLayer) can only be the first element of a Sequential")
            if self._seq_has_input:
                raise ValueError(f"Sequential model {self.name!r} has already been given the input shape "
                                 f"{self.input_shape}: it cannot take another Input")
            self._seq_has_input = True
            self._seq_input_shape = layer.feature_shape
            self._seq_input_dtype = layer.layer.dtype
            self._seq_batch_size = layer.layer.batch_size
            self._invalidate()
            return self
        if not isinstance(layer, Layer) or isinstance(layer, InputLayer):
            raise TypeError(f"Sequential.add takes a layer, got {type(layer).__name__}")
        if any(l is layer for l in self._stack):
            raise ValueError("this layer is already in the model")
        if not self._stack and self._seq_input_shape is None and layer.batch_input_shape is not None:
            self._seq_input_shape = layer.batch_input_shape
            self._seq_batch_size = layer.fixed_batch_size
        given = self.__dict__.setdefault("_given_names", set())
        if layer.given_name is not None:
            if layer.given_name in given:
                raise ValueError(f"two layers are named {layer.given_name!r}")
            given.add(layer.given_name)
        self._stack.append(layer)
        self._invalidate()
        BUILDERS[layer] = weakref.ref(self)     # its weights before compile (layer.weights, .kernel)
        return self

    def pop(self):
        if self._compiled:
            raise RuntimeError("cannot remove layers after compile")
        if not self._stack:
            raise ValueError("the model has no layers to pop")
        layer = self._stack.pop()
        self.__dict__.setdefault("_given_names", set()).discard(layer.given_name)
        self._invalidate()
        if not self._stack:
            self.built = False                # (no layers left: not built, as Keras's)
        return layer

    def _first_tensors(self, inputs):
        if self._seq_input_shape is None and isinstance(inputs, Tensor):
            # called first in a graph (a subclassed model's call): strings when they stand for an
            # input of strings (its StringLookup reads them), ids, or floats
            self._seq_input_dtype = "string" if _scope.holds_strings(inputs) else \
                "int32" if inputs.dtype in ("i32", "int32") else "float32"

    def _invalidate(self):
        self._topology = None

    def _awaits_data(self):
        """No input shape yet (Keras's deferred build): the first data gives it."""
        if self._topology is not None or self._seq_input_shape is not None or not self._stack:
            return False
        first = self._stack[0]
        if isinstance(first, Sequential) and first._awaits_data():
            return True                       # a Sequential first, waiting for data too
        return not (isinstance(first, Model) and len(first.inputs) == 1)

    def _build_from(self, array):
        """Keras's deferred build: the input shape and dtype of a first batch."""
        a = np.asarray(array)
        strings = a.dtype.kind in "USO"
        if a.ndim < (1 if strings else 2):        # a (batch,) array of texts (TextVectorization first)
            raise ValueError(f"{self.name}: the first batch fixes the input shape; it needs a batch axis and "
                             f"features, got shape {a.shape}")
        self._set_features(a.shape[1:])
        self._seq_input_dtype = "string" if strings else ("int32" if a.dtype.kind in "biu" else "float32")
        return self._ensure_graph()

    def _relax_for(self, x):
        """Keras's Sequential runs its layers on whatever data comes (a text model trained on
        40 steps predicting on 60, a CNN on larger images), built from its first data or given
        an Input alike (its call goes past the Input's shape).  A graph here has its input
        shape: the axes where ``x`` differs from it become free (None) and the graph is made
        again over the same layers and weights (the device's graphs are made anew; the weights
        and optimizer state stay).  When a layer cannot take that (Flatten before Dense), the
        graph stays as it was and the input's check refuses the data, naming the shape it takes."""
        if self._topology is None or \
                (self._rt is not None and len(self._rt.others)):
            return              # (a Trainer's graphs and state are made on this graph: it stays)
        a = x[0] if isinstance(x, (list, tuple)) and len(x) == 1 else x
        shape = getattr(a, "shape", None)
        built = self._seq_input_shape
        if not isinstance(shape, tuple) or built is None or len(shape) != len(built) + 1 or \
                not any(b is not None and b != d for b, d in zip(built, shape[1:])):
            return
        relaxed = tuple(None if b is not None and b != d else b for b, d in zip(built, shape[1:]))
        old_topology, done = self._topology, False
        # a call sets each layer's input, output and output_shape: kept to put back on failure
        from pyggml.layers.weight_rules import layer_tree
        traced = [(l, {k: l.__dict__[k] for k in ("input", "output", "output_shape") if k in l.__dict__})
                  for l in layer_tree(list(old_topology.layers))]
        try:
            # the layers on this shape first (a free axis would pass Flatten's unknown size on to a
            # Dense that checks it only when run), then the graph with the free axes
            for trial in (tuple(int(d) for d in shape[1:]), relaxed):
                self._seq_input_shape, self._topology = trial, None
                self._ensure_graph()
            done = True
        except (ValueError, TypeError):
            return                          # (the input's check then says which shape it takes)
        finally:
            if not done:                    # (any failure: the graph stays as it was, its layers' too)
                self._seq_input_shape, self._topology = built, old_topology
                for layer, attrs in traced:
                    for k in ("input", "output", "output_shape"):
                        if k in attrs:
                            layer.__dict__[k] = attrs[k]
                        else:
                            layer.__dict__.pop(k, None)
        self._predict_fast = None
        if self._rt is not None:
            self._rt.drop_graphs()
        spec = self.__dict__.get("_compile_spec")
        if spec is not None:
            spec.target_specs = None

    def prepare_inputs(self, x, what="x", training=False, one_batch=False):
        self._relax_for(x)
        return super().prepare_inputs(x, what, training, one_batch)

    def _ensure_graph(self):
        if self._topology is not None:
            return self._topology
        if not self._stack:
            raise ValueError("the Sequential model has no layers")
        shape, dtype = self._seq_input_shape, self._seq_input_dtype
        first = self._stack[0]
        if shape is None and isinstance(first, Model) and not (isinstance(first, Sequential) and
                                                               first._awaits_data()) and len(first.inputs) == 1:
            # a model first (Keras's nesting): its input is ours
            shape, dtype = tuple(first.inputs[0].shape[1:]), first.inputs[0].dtype
        if shape is None:
            raise ValueError("the Sequential model has no input shape: set model.input_shape, pass "
                             "input_shape=..., or start with pg.Input(shape)")
        if getattr(first, "input_dtype", None) == "int32":
            dtype = "int32"
        node = inp = Input(shape, dtype=dtype, batch_size=self._seq_batch_size)
        if isinstance(first, Sequential) and first._awaits_data():
            first._set_features(shape)        # a Sequential first, without an input: ours
            first._seq_input_dtype = dtype
        self._building_graph = True
        try:
            for l in self._stack:
                node = l(node)
        finally:
            self._building_graph = False
        self._topology = functional.Topology([inp], [node])
        self.built = True
        return self._topology

    def _defined_graph(self, what):
        """The graph, or (no layers, or no input shape yet: Keras's deferred build) NotBuiltError."""
        if self._topology is None and (not self._stack or self._awaits_data()):
            raise NotBuiltError(f"Sequential model {self.name!r} has no defined {what} yet: "
                                f"{'add layers' if not self._stack else 'give it an input shape'} "
                                f"(pg.Input(shape) first, build(input_shape)) or call it on data first")
        return self._ensure_graph()

    @property
    def inputs(self):
        return list(self._defined_graph("inputs").inputs)

    @property
    def outputs(self):
        return list(self._defined_graph("outputs").outputs)

    def compute_output_shape(self, input_shape):
        """Keras's: the batch of ``input_shape`` kept; without an input yet, each layer's
        compute_output_shape in turn (nothing is built)."""
        if self._topology is None and self._stack and self._awaits_data():
            shape = tuple(input_shape)
            for layer in self._stack:
                shape = layer.compute_output_shape(shape)
            return shape
        out = super().compute_output_shape(input_shape)
        if isinstance(input_shape, (tuple, list)) and input_shape and \
                not isinstance(input_shape[0], (tuple, list)) and isinstance(out, tuple) and out:
            out = (input_shape[0],) + tuple(out[1:])
        return out

    @property
    def layers(self):
        functional.name_layers(self._stack)     # named as Keras names them ("dense_1") before any build
        return list(self._stack)

    def build(self, input_shape=None):
        """Build for inputs of this shape (Keras's, with the batch)."""
        if input_shape is not None and self._seq_input_shape is None:
            shape = tuple(input_shape) if isinstance(input_shape, (tuple, list)) else input_shape
            # Keras's batch shape: its first axis is the batch (None, or a size: (4, 3) is four rows
            # of 3), the rest the features ((None, None, 3): images of any size)
            self._set_features(shape[1:] if isinstance(shape, tuple) and len(shape) >= 2 else shape)
        elif isinstance(input_shape, (tuple, list)) and input_shape and \
                all(d is None or isinstance(d, (int, np.integer)) for d in input_shape):
            # already given an input shape: another one is refused, as Keras's (a batch size given
            # is taken; a None in the model's shape takes any size)
            features, own = tuple(input_shape)[1:], tuple(self._seq_input_shape)
            if len(features) != len(own) or any(o is not None and f != o for f, o in zip(features, own)):
                raise ValueError(f"Sequential model {self.name!r} has already been configured to use input shape "
                                 f"{self.input_shape}: it cannot be built with input_shape {tuple(input_shape)}")
        self._ensure_graph()
        finish_compile(self)                  # compile() before build(): Keras takes either order

    def call(self, inputs, training=None):
        stack = self._stack
        if is_prefix_done(self):
            stack = stack[host_prefix(stack):]
        elif self.host and is_fed(inputs):
            # keras-io's data_augmentation Sequential called in a graph on its data
            return host_call_in_graph(self, inputs, training)
        k = host_prefix(stack) if is_fed(inputs) and stack is self._stack else 0
        x = host_call_in_graph(HostRun(stack[:k]), inputs, training) if k else inputs
        for l in stack[k:]:
            x = l(x, training=training)
        return x

    def named_variables(self):
        if self._topology is None and self._seq_input_shape is not None:
            self._ensure_graph()
        out, seen = [], set()
        for l in (self._topology.layers if self._topology is not None else self._stack):
            for n, v in l.named_variables():
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append((f"{l.name}.{n}", v))
        return out

    _named_variables = named_variables

    def get_config(self):
        if self._topology is None and self._stack and self._awaits_data():
            shape, dtype = None, self._seq_input_dtype           # Keras's deferred build: no input shape yet
            functional.name_layers(self._stack)                  # (named as a build would name them)
        else:
            topo = self._ensure_graph()
            # (a first layer that is a model with its own Input gives the shape: none was set here)
            shape = list(self._seq_input_shape if self._seq_input_shape is not None else
                         topo.inputs[0].feature_shape)
            dtype = self._seq_input_dtype if self._seq_input_shape is not None else topo.inputs[0].dtype
        cfg = {"name": self.name, "sequential": True, "input_shape": shape, "input_dtype": dtype,
               "layers": [{"class_name": get_registered_name(type(l)), "config": l.get_config(),
                           **own_state.build_config_entry(l)} for l in self._stack]}
        if self._seq_batch_size is not None:
            cfg["batch_size"] = self._seq_batch_size
        if not self.trainable:
            cfg["trainable"] = False                    # (Keras's Sequential(..., trainable=False) kept)
        return cfg

    @classmethod
    def from_config(cls, config, custom_objects=None):
        m = cls(name=config.get("name"))
        m._seq_input_dtype = config.get("input_dtype", "float32")
        if config.get("input_shape") is not None:          # (None: no input yet, Keras's deferred build)
            m._set_features(tuple(config["input_shape"]))     # the features' shape (a leading None is an axis)
            m._seq_has_input = True
        m._seq_batch_size = config.get("batch_size")
        for entry in config["layers"]:
            if entry["class_name"] == "InputLayer":
                continue
            klass = get_registered_object(entry["class_name"], custom_objects)
            if not (isinstance(klass, type) and issubclass(klass, Layer)):
                raise ValueError(f"{entry['class_name']!r} is not a layer class")
            layer = klass.from_config(entry["config"])
            own_state.build_from_entry(layer, entry)
            m.add(layer)
        if config.get("trainable") is False:
            m.trainable = False
        return m
