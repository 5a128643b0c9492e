"""A model made only of preprocessing (host) layers, e.g. Keras's
``data_augmentation = Sequential([RandomFlip("horizontal"), RandomRotation(0.1)])``,
is itself a host step: called on a node of another model it runs on the host
before that model's graph (in training mode in ``fit``), and called on arrays it
computes at once (augmenting, as Keras, unless ``training=False``).

Layers that can run on either side (``host_capable``: Rescaling; host layers with a
``graph_call``: Resizing) count as host layers in such a model (TensorFlow's
``resize_and_rescale``), and run on the host in any model where they lie between
the inputs and host layers; elsewhere (a Resizing after a Conv2D) in the graph.  A model that
mixes host layers and graph layers can be the outer model, not a layer of
another one: its host layers would sit inside the other's graph.
"""

from pyggml.models import data_adapter as da

__all__ = ["HostStage", "check_no_nested_host_layers", "host_node_ids"]


def _is_input(node):
    return not node.inputs


def _either_side(layer):
    """Runs on the host or in the graph: ``host_capable`` (Rescaling), or a host layer with a
    ``graph_call`` (Resizing: on the host before host layers, in the graph after graph layers)."""
    return getattr(layer, "host_capable", False) or getattr(layer, "graph_call", None) is not None


def host_node_ids(nodes, inputs):
    """The ids of the nodes computed on the host: host layers' calls, and the calls of layers
    that can run on either side (``host_capable``: Rescaling) that lie between the inputs and
    host layers (keras-io's ``Rescaling`` before ``RandomFlip``), so the graph starts after them."""
    host = {id(n) for n in nodes if getattr(n.layer, "host", False) and not _either_side(n.layer)}
    before = {id(n) for n in inputs} | host
    maybe = set()
    for n in nodes:                      # fed only by the inputs, host layers or other such calls
        if id(n) not in host and _either_side(n.layer) and n.inputs and \
                all(id(p) in before or id(p) in maybe for p in n.inputs):
            maybe.add(id(n))
    feeds_host = set()
    for n in reversed(nodes):            # ... and feeding host layers
        if id(n) in host or id(n) in feeds_host:
            feeds_host.update(id(p) for p in n.inputs if id(p) in maybe)
    return host | feeds_host


class HostStage:
    """For Model: ``host``, ``host_training`` and ``host_apply`` as a HostLayer has them."""

    def _host_layers(self):
        """The model's layers when all are host layers (or host models), else None."""
        stack = getattr(self, "_stack", None)
        if stack is not None:
            layers = list(stack)
        else:
            topo = self._topology
            if topo is None:
                return None
            layers = [n.layer for n in topo.nodes if not _is_input(n)]
        # host layers, with layers that can run on the host too (Resizing then Rescaling)
        if not any(getattr(l, "host", False) for l in layers) or \
                not all(getattr(l, "host", False) or getattr(l, "host_capable", False) for l in layers):
            return None
        return layers

    @property
    def host(self):
        return self._host_layers() is not None

    @property
    def host_training(self):
        layers = self._host_layers()
        return bool(layers) and any(getattr(l, "host_training", False) for l in layers)

    @property
    def output_dtype(self):
        """What its (first) output holds, for the node a call on a node makes (an int32 lookup's)."""
        topo = self._topology
        return topo.outputs[0].dtype if topo is not None and topo.outputs else "float32"

    def holds_host_layers(self):
        """True when some of its layers run on the host (and it is not all host layers)."""
        if self._topology is None:
            return False
        host_ids = getattr(self._topology, "host_ids", None)
        return any((getattr(n.layer, "host", False) and (host_ids is None or id(n) in host_ids)) or
                   getattr(n.layer, "holds_host_layers", lambda: False)()
                   for n in self._topology.nodes if not _is_input(n))

    def host_apply(self, inputs, training=None):
        """The layers on arrays, in order (``training``: None lets each layer use its default)."""
        if self._host_layers() is None:
            raise TypeError(f"model {self.name!r} is not made of preprocessing layers only")
        stack = getattr(self, "_stack", None)
        if stack is not None:
            x = inputs
            for layer in stack:
                x = layer.host_apply(x, training)
            return x
        topo = self._ensure_graph()
        xs, _ = da.prepare_inputs(topo, self.input_specs, self.graph_specs, inputs, "inputs", training)
        at = {id(n): i for i, n in enumerate(topo.graph_inputs)}
        outs = [xs[at[id(o)]] for o in topo.outputs]
        return outs if self._multi_out else outs[0]


def check_no_nested_host_layers(node):
    """A graph layer that is a model must not hold host layers (see the module's docstring)."""
    layer = node.layer
    if getattr(layer, "holds_host_layers", None) is not None and layer.holds_host_layers():
        raise ValueError(f"model {layer.name!r} mixes preprocessing layers (run on the host, in numpy) and graph "
                         f"layers, so it cannot be a layer of another model: make a model of its preprocessing "
                         f"layers alone (that one can be nested), or add its layers to the outer model directly")
