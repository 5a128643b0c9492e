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

import threading

from pyggml.layers.preprocessing.host_layer import host_call_in_graph, is_fed
from pyggml.models import data_adapter as da

__all__ = ["HostStage", "HostRun", "check_no_nested_host_layers", "host_node_ids", "host_prefix", "graph_only_view",
           "nested_view", "host_call_in_graph", "is_fed", "split_nested", "prefix_done", "is_prefix_done"]


def _is_input(node):
    return not node.inputs


def host_node_ids(nodes, inputs):
    """The ids of the nodes computed on the host: host layers' calls, except those of host
    layers that can also run in the graph (a ``graph_call``: Resizing) when graph layers feed
    them; and the calls of layers that can run on either side (``host_capable``: Rescaling,
    Normalization) that lie between the inputs and host layers (keras-io's ``Rescaling``
    before ``RandomFlip``), so the graph starts after them."""
    host, maybe = set(), set()
    on_host = {id(n) for n in inputs}
    for n in nodes:
        layer = n.layer
        fed_on_host = bool(n.inputs) and all(id(p) in on_host or id(p) in maybe for p in n.inputs)
        if getattr(layer, "host", False) and (getattr(layer, "graph_call", None) is None or fed_on_host):
            host.add(id(n))
            on_host.add(id(n))
        elif getattr(layer, "host_capable", False) and fed_on_host:
            maybe.add(id(n))             # fed only by the inputs, host layers or other such calls
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
    def graph_call(self):
        """A Sequential of preprocessing layers that can all run in a graph too (Resizing,
        Normalization, the random image layers with a graph form): its call, which runs them
        there on a tensor the graph computes (a model holding it nested in another); else None."""
        layers = self._host_layers() if getattr(self, "_stack", None) is not None else None
        if not layers or any(_runs_on_host(l) for l in layers):
            return None
        return self.call

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
        # a host layer that can also run in the graph (Resizing's graph_call) does so when the
        # model is a layer of another (Model.call runs graph_only_view)
        return any((getattr(n.layer, "host", False) and getattr(n.layer, "graph_call", None) is None) or
                   getattr(n.layer, "holds_host_layers", lambda: False)()
                   for n in self._topology.nodes if not _is_input(n))

    def host_apply(self, inputs, training=None):
        """The layers on arrays, in order (``training``: None lets each layer use its default)."""
        if self._host_layers() is None:
            raise TypeError(f"model {self.name!r} is not made of preprocessing layers only")
        stack = getattr(self, "_stack", None)
        if stack is not None:
            return HostRun(stack).host_apply(inputs, training)
        topo = self._ensure_graph()
        xs, _ = da.prepare_inputs(topo, self.input_specs, self.graph_specs, inputs, "inputs", training)
        at = {id(n): i for i, n in enumerate(topo.graph_inputs)}
        outs = [xs[at[id(o)]] for o in topo.outputs]
        return self.outputs_as_given(outs)


def _runs_on_host(layer):
    return getattr(layer, "host", False) and getattr(layer, "graph_call", None) is None


def host_prefix(layers):
    """How many of a Sequential's ``layers``, from the first, run on the host when it is called
    on data fed to a graph: up to its last host layer, with layers that run on either side
    (Rescaling) among them (simclr's augmenter: Rescaling, RandomFlip, ..., then its own
    colour layer in the graph)."""
    n = 0
    for i, layer in enumerate(layers):
        if _runs_on_host(layer):
            n = i + 1
        elif not (getattr(layer, "host", False) or getattr(layer, "host_capable", False)):
            break
    return n


class HostRun:
    """Layers applied on arrays in turn: a Sequential's host prefix, for host_call_in_graph,
    or as a host step of the model holding that Sequential (``split_nested``)."""

    host = True

    def __init__(self, layers, name="preprocessing"):
        self.layers = list(layers)
        self.name = name

    @property
    def host_training(self):
        return any(getattr(l, "host_training", False) for l in self.layers)

    def host_apply(self, inputs, training=None):
        for layer in self.layers:
            inputs = layer.host_apply(inputs, training)
        return inputs


_prefix_done = threading.local()


def split_nested(node, fed):
    """For a node of a Sequential whose host layers come first, called on one input the host
    stage gives (``fed``: a model input or a host layer's output), a host node computing that
    prefix on the host (keras-io's ``Sequential([StringLookup(...), Embedding(...)])`` on a
    string input: the strings never reach the graph); None for any other node."""
    from pyggml.layers.node import Node
    stack = getattr(node.layer, "_stack", None)
    if stack is None or len(node.inputs) != 1 or not fed:
        return None
    k = host_prefix(stack)
    if not k or k == len(stack):
        return None
    inner = node.layer._ensure_graph()
    last = next((n for n in inner.nodes if n.layer is stack[k - 1]), None)
    if last is None:
        return None
    return Node(last.feature_shape, HostRun(stack[:k], f"{node.layer.name}_preprocessing"), node.inputs,
                dtype=last.dtype)


class prefix_done:
    """``with prefix_done(sequential):`` its call takes its host prefix's output (the host stage
    of the model holding it computed that prefix)."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        done = getattr(_prefix_done, "ids", None)
        if done is None:
            done = _prefix_done.ids = []
        done.append(id(self.model))

    def __exit__(self, *exc):
        _prefix_done.ids.pop()
        return False


def is_prefix_done(model):
    return id(model) in (getattr(_prefix_done, "ids", None) or ())


def check_no_nested_host_layers(node, fed=False):
    """A graph layer that is a model must not hold host layers (see the module's docstring),
    except a Sequential whose host layers come first, called on data (``fed``: the model's
    inputs or its host layers' outputs): those run on the host on that data."""
    layer = node.layer
    stack = getattr(layer, "_stack", None)
    if fed and stack is None and getattr(layer, "_topology", None) is not None and \
            all(all(p in layer._topology.inputs for p in n.inputs) for n in layer._topology.host_nodes):
        # a functional model called on data whose preprocessing takes its inputs (an encoder that
        # augments, reused in a classifier): those layers run on the host, on that data, inside
        # the outer graph (host_call_in_graph)
        return
    if fed and stack is not None and not any(_runs_on_host(l) or getattr(l, "holds_host_layers", lambda: False)()
                                             for l in stack[host_prefix(stack):]):
        return
    if getattr(layer, "holds_host_layers", None) is not None and layer.holds_host_layers():
        raise ValueError(f"model {layer.name!r} mixes preprocessing layers (run on the host, in numpy) and graph "
                         f"layers, so it cannot be a layer of another model: make a model of its preprocessing "
                         f"layers alone (that one can be nested), or add its layers to the outer model directly")


class _GraphOnlyView:
    """A topology with no host stage: every node in the graph (for a model nested in another,
    whose host layers all have a graph_call)."""

    def __init__(self, topology):
        self.nodes, self.outputs, self.inputs = topology.nodes, topology.outputs, topology.inputs
        self.graph_inputs = list(topology.inputs)
        self.host_ids = set()


def graph_only_view(topology):
    """``topology`` itself when it has no host stage; a view that runs its host layers in the
    graph when each of them can (a graph_call); else None."""
    host_ids = getattr(topology, "host_ids", None) or set()
    if not host_ids:
        return topology
    if all(getattr(n.layer, "graph_call", None) is not None for n in topology.nodes if id(n) in host_ids):
        return _GraphOnlyView(topology)
    return None


def nested_view(topology):
    """What Model.call runs: inside another model's graph, every layer is called there: host
    layers that can run in the graph (Resizing) do so, the others on the host on the data the
    outer graph is fed (host_call_in_graph: an encoder that augments its input, nested in a
    classifier); one given a computed tensor says so."""
    return _GraphOnlyView(topology) if getattr(topology, "host_ids", None) else topology
