"""A functional model's layer graph: its nodes in order, its layers and their
names, running it on tensors, and its config.

Nodes are ordered without recursion (a model may have thousands of layers).
Layers are named as Keras does, within the model: the name given to the
layer, else the class's snake-case name numbered in order (``dense``,
``dense_1``, ...); a layer that already has a name (from another model
holding it) keeps it.
"""

import contextlib
import numpy as np

from pyggml import _fold, backend
from pyggml.layers.input_layer import InputLayer
from pyggml.layers.layer import Layer
from pyggml.layers.node import Node
from pyggml.models.host_stage import check_no_nested_host_layers, host_node_ids, prefix_done, split_nested
from pyggml.saving import own_state

__all__ = ["GraphShapes", "output_keys", "Topology", "order_nodes", "name_layers", "default_model_name", "cut_at_inputs", "ordered_inputs", "run_nodes", "config_of",
           "from_config"]


def order_nodes(inputs, outputs):
    """The nodes the outputs depend on, each after its inputs (iterative DFS)."""
    order, done, on_path = [], set(), set()
    for out in outputs:
        stack = [(out, iter(out.inputs))]
        on_path.add(id(out))
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                on_path.discard(id(node))
                if id(node) not in done:
                    done.add(id(node))
                    order.append(node)
                continue
            if id(nxt) in done:
                continue
            if id(nxt) in on_path:
                raise ValueError("the layer graph has a cycle")
            on_path.add(id(nxt))
            stack.append((nxt, iter(nxt.inputs)))
    input_ids = {id(n) for n in inputs}
    for n in order:
        if isinstance(n.layer, InputLayer) and id(n) not in input_ids:
            raise ValueError(f"an output depends on the input {n.layer.name or 'input'!r}, which is not "
                             f"among the model's inputs")
    return order


def flat_inputs(inputs):
    """A model's inputs given as a list: its items, a dict among them giving its values (Keras's
    ``Model([image_1, image_2, text_inputs], ...)`` with ``text_inputs`` a dict of Inputs)."""
    out = []
    for e in inputs:
        if isinstance(e, dict):
            out.extend(e.values())
        elif isinstance(e, (list, tuple)):
            out.extend(flat_inputs(e))          # Keras flattens a list of inputs' lists (backbone.inputs)
        else:
            out.append(e)
    return out


def keyed_inputs(inputs):
    """{key: Input} of the inputs given in dicts (the whole dict, or dicts inside a list)."""
    if isinstance(inputs, dict):
        return inputs
    if isinstance(inputs, (list, tuple)):
        return {k: v for e in inputs if isinstance(e, dict) for k, v in e.items()}
    return {}


def input_leaves(structure, path=()):
    """[(path, leaf)] of a structure of inputs (dicts within dicts, lists): each leaf with the keys
    (list indices) leading to it, in the structure's order."""
    if isinstance(structure, dict):
        return [leaf for k, v in structure.items() for leaf in input_leaves(v, path + (k,))]
    if isinstance(structure, (list, tuple)):
        return [leaf for i, v in enumerate(structure) for leaf in input_leaves(v, path + (i,))]
    return [(path, structure)]


def _nested(inputs):
    return any(isinstance(v, (dict, list, tuple)) for v in inputs)


def structure_of(paths, values):
    """The nested dicts (lists) the inputs were given in, rebuilt from their paths (``input_leaves``)
    with ``values`` at the leaves."""
    if len(paths) == 1 and paths[0] == ():
        return values[0]
    heads = []
    for p in paths:
        if not p:
            raise ValueError(f"an input structure's paths must not be empty where there are several: {paths!r}")
        if p[0] not in heads:
            heads.append(p[0])
    parts = {h: structure_of([p[1:] for p in paths if p[0] == h], [v for p, v in zip(paths, values) if p[0] == h])
             for h in heads}
    if all(isinstance(h, int) for h in heads) and sorted(heads) == list(range(len(heads))):
        return [parts[i] for i in range(len(heads))]
    return parts


def name_inputs_by_keys(topology, inputs):
    """Model(inputs={"a": Input(...), ...}): data is matched to the inputs by the dict's keys, as
    Keras 3 matches it (``topology.input_paths``: each input's keys, nested dicts giving several),
    so an Input given no name of its own takes its key as its name (where no other layer of the
    model has that name)."""
    if isinstance(inputs, dict):
        leaves = input_leaves(inputs)
        if len(leaves) == len(topology.inputs):
            topology.input_paths = [p for p, _ in leaves]
        inputs = {p[-1]: node for p, node in leaves if p}
    taken = {layer.name for layer in topology.layers}
    for key, node in inputs.items():
        layer = getattr(node, "layer", None)
        if isinstance(layer, InputLayer) and layer.given_name is None and layer.name != key and \
                isinstance(key, str) and key not in taken:
            taken.discard(layer.name)
            layer.name = key
            taken.add(key)


def cut_at_inputs(inputs, outputs, names=None):
    """Keras's model on intermediate nodes: each given input that is a layer's output, not
    an Input node, gets a new Input in its place (same shape and dtype, named ``names[i]``
    when given: a dict's key), and the nodes between it and the outputs are made again on
    it.  The layers that computed it are not part of the model (a warning says so).
    Returns (inputs, outputs)."""
    if _nested(inputs):
        # nested dicts (lists) of inputs, Keras's {"1": i1, "others": {"2": i2, "3": i3}}: their leaves,
        # each named by its own key
        leaves = [leaf for i, v in enumerate(inputs)
                  for leaf in input_leaves(v, (names[i],) if names is not None else (i,))]
        inputs = [n for _, n in leaves]
        names = [p[-1] if isinstance(p[-1], str) else None for p, _ in leaves] if names is not None else None
    new = {}
    for i, n in enumerate(inputs):
        if not isinstance(n, Node):
            raise TypeError(f"Model inputs must be pg.Input(...) nodes (or layer outputs), got {type(n).__name__}")
        if isinstance(n.layer, InputLayer) or id(n) in new:
            continue
        from pyggml.layers.input_layer import Input
        name = names[i] if names is not None else None
        new[id(n)] = Input(shape=n.feature_shape, dtype=n.dtype, name=name)
        if getattr(n, "model_input", False):
            continue                    # made to be a model's input (FeatureSpace's encoded features)
        import warnings
        what = n.layer.name or type(n.layer).__name__
        warnings.warn(f"the model input {name or i!r} is the output of layer {what!r}, not a pg.Input: as Keras "
                      f"does, a new Input takes its place, and {what!r} and the layers before it are not part "
                      f"of the model (its data enters as it is)", UserWarning, stacklevel=3)
    if not new:
        return list(inputs), list(outputs)
    # the nodes the outputs depend on, each after its inputs, not going past the replaced ones
    order, done = [], set(new)
    for out in outputs:
        stack = [(out, iter(out.inputs))] if isinstance(out, Node) and id(out) not in done else []
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                if id(node) not in done:
                    done.add(id(node))
                    order.append(node)
            elif id(nxt) not in done:
                stack.append((nxt, iter(nxt.inputs)))
    remade = dict(new)
    for node in order:
        if any(id(p) in remade for p in node.inputs):
            remade[id(node)] = Node(node.feature_shape, node.layer, [remade.get(id(p), p) for p in node.inputs],
                                    index=node.index, dtype=node.dtype, call_kwargs=node.call_kwargs,
                                    list_input=node.list_input)
    return [remade.get(id(n), n) for n in inputs], [remade.get(id(o), o) if isinstance(o, Node) else o
                                                    for o in outputs]


def default_model_name(kind):
    """Keras's name of a model not given one: its kind numbered in the process (``sequential``,
    ``sequential_1``, ...; ``keras.backend.clear_session()`` starts again).  A model holding it
    names it within itself instead (``name_layers``), so weight names do not depend on what
    else the process built."""
    uid = backend.get_uid(kind)
    return kind if uid == 1 else f"{kind}_{uid - 1}"


def name_layers(layers):
    """Give every layer a name unique in this list (see the module's docstring)."""
    used = {}
    for l in layers:
        if l.given_name is not None:
            if l.given_name in used:
                raise ValueError(f"two layers are named {l.given_name!r}")
            used[l.given_name] = l
    counts = {}
    for l in layers:
        if l.given_name is not None:
            l.name = l.given_name
            continue
        if l._has_name() and not l.__dict__.get("_default_named") and l.name not in used:
            used[l.name] = l
            continue
        base = l.kind()
        while True:
            k = counts.get(base, 0)
            cand = base if k == 0 else f"{base}_{k}"
            counts[base] = k + 1
            if cand not in used:
                break
        l.name = cand
        used[cand] = l


def flat_outputs(model, outputs):
    """A model's outputs as a list; a nested structure of them (lists, tuples, dicts within a
    list: Keras's ``Model(inp, [[a, b], [c]])``) is kept for ``outputs_as_given``."""
    if isinstance(outputs, dict) and not any(isinstance(v, (list, tuple, dict)) for v in outputs.values()):
        return list(outputs.values())
    if not isinstance(outputs, (list, tuple, dict)):
        return [outputs]
    if not isinstance(outputs, dict) and not any(isinstance(o, (list, tuple, dict)) or o is None for o in outputs):
        if isinstance(outputs, tuple):         # (a tuple comes back a tuple, as Keras's)
            model._output_structure = {"list": list(range(len(outputs))), "tuple": True}
        return list(outputs)
    flat = []

    def template(o):
        if o is None:
            return {"none": True}           # (a subclassed call's ``return logits, None``)
        if isinstance(o, dict):
            if not all(isinstance(k, str) for k in o):
                raise TypeError(f"a Model's outputs in a dict need string keys, got {list(o)!r}")
            return {"dict": [[k, template(v)] for k, v in o.items()]}
        if isinstance(o, (list, tuple)):
            return {"list": [template(v) for v in o], "tuple": isinstance(o, tuple)}
        flat.append(o)
        return len(flat) - 1
    model._output_structure = template(outputs)
    return flat


def _rebuild(template, values):
    if isinstance(template, int) and not isinstance(template, bool) and 0 <= template < len(values):
        return values[template]
    if isinstance(template, dict) and template.get("none") is True and len(template) == 1:
        return None
    if not isinstance(template, dict) or not isinstance(template.get("dict", template.get("list")), list):
        raise ValueError(f"an output structure entry must be an output's index or a list or dict of them, got "
                         f"{template!r}")
    if "dict" in template:
        return {k: _rebuild(v, values) for k, v in template["dict"]}
    items = [_rebuild(v, values) for v in template["list"]]
    return tuple(items) if template.get("tuple") else items


def output_keys(outputs):
    """The keys of a model's outputs given as a dict (Keras 3: its outputs' names), else None (a
    dict holding lists or dicts is a nested structure of outputs)."""
    if not isinstance(outputs, dict) or any(isinstance(v, (list, tuple, dict)) for v in outputs.values()):
        return None
    if not outputs or not all(isinstance(k, str) for k in outputs):
        raise TypeError(f"a Model's outputs as a dict need string keys (the outputs' names), got {list(outputs)!r}")
    return list(outputs)


# the keys of a functional model's config (GraphShapes.get_config); a subclass's get_config may add
# others, which from_config gives its __init__ as Keras does
_CONFIG_KEYS = {"name", "layers", "inputs", "outputs", "multi_input", "multi_output", "output_keys",
                "output_structure", "input_paths", "trainable"}


class GraphShapes:
    """A functional model's structure as Keras shows it: ``model.input_shape`` and
    ``output_shape`` (the graph's inputs' and outputs' shapes with the batch: the model's fixed
    batch size or None; a list where there are several; before the model has a graph (a
    subclassed model), what its build was given, else None), its outputs in the form they were
    given (one, a list, a dict by name), and its config."""

    # a model takes volumes (5-D inputs) as its layers do: each checks its own (pyggml._fold)
    takes_5d = True

    def output_mask(self, inputs, mask, spread=False):
        """The masks its layers put on its outputs in the call just made on ``inputs`` (a model
        nested in another), else a layer's rule."""
        cached = self.__dict__.get("_call_masks")
        if cached is not None and not self.__dict__.get("_subclassed", False):
            flat = list(inputs.values()) if isinstance(inputs, dict) else \
                list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            if cached[0] == frozenset(id(t) for t in flat):
                masks = cached[1]
                if all(m is None for m in masks):
                    return None
                return list(masks) if self._multi_out else masks[0]
        return super().output_mask(inputs, mask, spread)

    _output_keys = None

    def outputs_as_given(self, outs):
        """A list of one value per output as the model's outputs were given: one, a list, or a
        dict by the keys it was built with."""
        if self._output_keys is not None:
            return dict(zip(self._output_keys, outs))
        structure = self.__dict__.get("_output_structure")
        if structure is not None:
            return _rebuild(structure, list(outs))
        return outs if self._multi_out else outs[0]

    def get_config(self):
        cfg = config_of(self._ensure_graph(), self.name)
        cfg["trainable"] = self.trainable                      # (Keras's: Model(..., trainable=False) kept)
        cfg["multi_input"], cfg["multi_output"] = self._multi_in, self._multi_out
        if self._output_keys is not None:
            cfg["output_keys"] = list(self._output_keys)
        if self.__dict__.get("_output_structure") is not None:
            cfg["output_structure"] = self._output_structure
        paths = getattr(self._ensure_graph(), "input_paths", None)
        if paths is not None:
            cfg["input_paths"] = [list(p) for p in paths]      # the dict (of dicts) of inputs, by its keys
        return cfg

    @classmethod
    def from_config(cls, config, custom_objects=None):
        if not _functional_constructor(cls):
            # Keras's: a subclass that makes its own graph (``__init__(self, **kwargs)`` calling
            # ``super().__init__(inputs, outputs, **kwargs)``) is made again by its constructor,
            # given its name and what its own get_config added; the weights are then loaded by name
            extra = {k: v for k, v in config.items() if k not in _CONFIG_KEYS}
            model = cls(name=config.get("name"), **extra)
            if config.get("trainable") is False:
                model.trainable = False
            return model
        ins, outs = from_config(config, custom_objects)
        keys = config.get("output_keys")
        structure = config.get("output_structure")
        if structure is not None:
            outs = _rebuild(structure, outs)                # Keras's nested outputs, as they were given
        else:
            outs = dict(zip(keys, outs)) if keys else (outs if config.get("multi_output") else outs[0])
        paths = config.get("input_paths")
        if paths is not None:
            if not isinstance(paths, list) or len(paths) != len(ins) or \
                    not all(isinstance(p, (list, tuple)) and p for p in paths):
                raise ValueError(f"a model config's input_paths must be one non-empty list of keys per input, "
                                 f"got {paths!r}")
            ins = structure_of([tuple(p) for p in paths], ins)
        elif not config.get("multi_input"):
            ins = ins[0]
        # (a subclass of the user's whose get_config adds keys: its __init__ takes them, as Keras gives them)
        extra = {} if cls.__module__.startswith("pyggml.") else \
            {k: v for k, v in config.items() if k not in _CONFIG_KEYS}
        model = cls(ins, outs, name=config.get("name"), **extra)
        if config.get("trainable") is False:                # (Keras's Model(..., trainable=False))
            model.trainable = False
        return model

    def _graph_shapes(self, which):
        try:
            topo = self._ensure_graph()
        except ValueError:                  # no graph (yet): no layers or no input shape
            return self.__dict__.get(f"_given_{which}")
        shapes = [(n.batch_size,) + tuple(n.feature_shape) for n in getattr(topo, which)]
        return shapes if (self._multi_in if which == "inputs" else self._multi_out) else shapes[0]

    @property
    def input_shape(self):
        return self._graph_shapes("inputs")

    @input_shape.setter
    def input_shape(self, value):
        self.__dict__["_given_inputs"] = value          # Layer's own record (a build, a call)

    @property
    def output_shape(self):
        return self._graph_shapes("outputs")

    @output_shape.setter
    def output_shape(self, value):
        self.__dict__["_given_outputs"] = value


def _functional_constructor(cls):
    """Whether ``cls`` is made as Functional is, from ``(inputs, outputs, ...)`` (or takes any
    ``*args``); False for a subclass of the user's whose constructor makes its own graph."""
    import inspect
    if cls.__module__.startswith("pyggml."):
        return True
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return True
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return any(p.kind is p.VAR_POSITIONAL for p in params) or positional[:2] == ["inputs", "outputs"]


class Topology:
    """inputs, outputs (nodes), the ordered nodes and the layers of a functional graph."""

    def __init__(self, inputs, outputs):
        if not inputs or not outputs:
            raise ValueError("a Model needs at least one input and one output")
        for n in inputs:
            if not isinstance(n, Node) or not isinstance(n.layer, InputLayer):
                raise TypeError("Model inputs must be pg.Input(...) nodes")
        for n in outputs:
            if not isinstance(n, Node):
                raise TypeError(f"Model outputs must be layer outputs (nodes), got {type(n).__name__}")
        if len({id(n) for n in inputs}) != len(inputs):
            raise ValueError("the same input is given twice")
        self.inputs, self.outputs = list(inputs), list(outputs)
        self.nodes = order_nodes(self.inputs, self.outputs)
        layers = []
        seen = set()
        for n in self.inputs + self.nodes:
            if id(n.layer) not in seen:
                seen.add(id(n.layer))
                layers.append(n.layer)
        self.layers = layers
        name_layers(layers)
        self.input_paths = None          # each input's keys in the dict the model was given (name_inputs_by_keys)
        self.input_specs = None          # the data each input takes (Model.input_specs)
        self.graph_specs = None          # what the graph takes (Model.graph_specs)
        self._split_host_stage()

    def _split_host_stage(self):
        """Host layers (preprocessing in numpy) come first; the graph starts at their outputs."""
        host = host_node_ids(self.nodes, self.inputs)
        input_ids = {id(n) for n in self.inputs}
        for n in self.nodes:
            if id(n) not in host:
                check_no_nested_host_layers(n, all(id(p) in host or id(p) in input_ids for p in n.inputs))
            if id(n) in host:
                for p in n.inputs:
                    if id(p) not in host and id(p) not in input_ids:
                        raise ValueError(f"{type(n.layer).__name__} {n.layer.name!r} preprocesses on the host: call "
                                         f"it on pg.Input nodes (or on other preprocessing layers' outputs)")
        self.host_nodes = [n for n in self.nodes if id(n) in host]
        self.host_ids = host
        # a nested Sequential whose host layers come first, on data: its prefix runs as a host step
        self.split = {}
        for n in self.nodes:
            if id(n) not in host and id(n) not in input_ids:
                h = split_nested(n, all(id(p) in host or id(p) in input_ids for p in n.inputs))
                if h is not None:
                    self.split[id(n)] = h
                    self.host_nodes.append(h)
                    host.add(id(h))
        fed = set()
        for n in self.nodes:
            if id(n) not in host and id(n) not in input_ids:
                fed.update(id(p) for p in ([self.split[id(n)]] if id(n) in self.split else n.inputs))
        fed.update(id(o) for o in self.outputs)
        self.graph_inputs = [n for n in self.inputs + self.host_nodes if id(n) in fed]
        for n in self.graph_inputs:
            # strings reach the graph only as a stand-in for the host layers inside a call of the
            # user's own (a StringLookup in a custom layer's or a subclassed model's call)
            if n.dtype == "string" and not all(_own_call(c.layer) for c in self.consumers(n)):
                raise ValueError(f"the string input {n.layer.name!r} must go through a lookup layer "
                                 f"(StringLookup, ...) before the graph")

    def consumers(self, node):
        return [n for n in self.nodes if any(p is node for p in n.inputs)]


def _own_call(layer):
    """Whether the layer's call is the user's (a custom layer, a subclassed model's call)."""
    call = getattr(type(layer), "call", None)
    owner = next((c for c in type(layer).__mro__ if "call" in c.__dict__), None)
    if type(layer).__name__ in ("SubclassedCall", "Lambda"):
        return True             # (a Lambda's function is the user's: ``x == "fixed"`` on the strings)
    return call is not None and owner is not None and not owner.__module__.startswith("pyggml.")


def ordered_inputs(topology, inputs):
    """A model's call inputs as a list in the order of its inputs: a dict matched by the
    inputs' names (in the dict's order when its keys are other names), a list as given."""
    if isinstance(inputs, dict):
        found = find_paths(inputs, getattr(topology, "input_paths", None))
        if found is not None:
            return found
        names = [n.layer.name for n in topology.inputs]
        return [inputs[n] for n in names] if set(inputs) == set(names) else list(inputs.values())
    return list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]


def nested_inputs_in_order(topology, args):
    """A model's call arguments, where the inputs are a dict of dicts of symbolic inputs or
    tensors given to a model made on nested dicts (called in another model): its inputs in the
    model's order, by their keys; other arguments as given."""
    inputs = args[0] if args else None
    if topology is None or not isinstance(inputs, dict) or not any(isinstance(v, dict) for v in inputs.values()):
        return args
    from pyggml.core import Tensor
    from pyggml.variables import Variable
    found = find_paths(inputs, getattr(topology, "input_paths", None))
    if found is not None and all(isinstance(v, (Node, Tensor, Variable)) for v in found):
        return (found,) + tuple(args[1:])
    return args


def find_paths(data, paths):
    """The values at ``paths`` (``Topology.input_paths``) in ``data`` (nested dicts, lists), or None
    where one is missing."""
    if not paths:
        return None
    out = []
    for path in paths:
        v = data
        for k in path:
            if isinstance(v, dict) and k in v:
                v = v[k]
            elif isinstance(v, (list, tuple)) and isinstance(k, int) and 0 <= k < len(v):
                v = v[k]
            else:
                return None
        out.append(v)
    return out


def _keras_shape(node, t):
    """The Keras shape of the tensor ``t`` computed for ``node`` in this graph: a folded volume's
    as noted where it was made (its depth, None in the model, is the data's), else from the node."""
    if node.ndim < 5:
        return (t.shape[0],) + node.feature_shape
    known = _fold.noted([t])
    if known is not None and _fold.folds(known[0]):
        return known[0]
    d = _fold.depth((None,) + tuple(node.feature_shape))
    if d is None:
        raise ValueError(f"the depth of a {node.ndim}-D tensor of shape {node.shape} is not known in this graph: "
                         f"give Input(shape=...) its depth")
    return (t.shape[0] // d,) + node.feature_shape


def run_nodes(topology, tensors, training, logits_for=(), with_masks=False, input_masks=None):
    """Compute the graph on tensors (one per graph input: the model's inputs, or its
    preprocessing layers' outputs) inside a graph scope.

    Returns the outputs' tensors; for output indices in ``logits_for`` whose layer
    has a ``pre_activation``, that (the logits) instead.  With ``with_masks``,
    (outputs, their padding masks or None).  A mask (batch, steps, 1 for a real
    step) starts at an Embedding(mask_zero=True) and goes on through the layers
    that keep the steps (``Layer.output_mask``); ``input_masks``, the masks the inputs come with
    (a model nested in another, called on masked steps)."""
    vals = {id(n): t for n, t in zip(topology.graph_inputs, tensors)}
    masks = {id(n): m for n, m in zip(topology.graph_inputs, input_masks or ()) if m is not None}
    calls = {}
    out_index = {}
    for i, o in enumerate(topology.outputs):
        out_index.setdefault(id(o), []).append(i)
    logits, logits_of = {}, {}
    for node in topology.nodes:
        if id(node) in vals or not node.inputs or id(node) in topology.host_ids:
            continue
        split = getattr(topology, "split", {}).get(id(node))
        args = [vals[id(p)] for p in (node.inputs if split is None else [split])]
        arg = args if node.list_input else args[0]
        in_masks = [masks.get(id(p)) for p in node.inputs]
        m_arg = in_masks if node.list_input else in_masks[0]
        any_mask = any(m is not None for m in in_masks)
        key = (id(node.layer), tuple(id(p) for p in node.inputs))
        # Keras: a training= given where the layer was called on nodes (the transfer-learning
        # guide's base_model(x, training=False)) holds in every run; else the run's mode
        fixed = node.call_kwargs.get("training")
        mode = training if fixed is None else bool(fixed)
        nested_logits = not any_mask and split is None and getattr(node.layer, "logits_inside", False) and \
            any(i in logits_for for i in out_index.get(id(node), ())) and node.layer.activation_name is not None
        if key not in calls and nested_logits:
            # a nested model ending in softmax (sigmoid) under cross-entropy: its logits, once, and
            # its output from them (one pass of the model, not one per form), as for a flat model
            from pyggml import activations
            z = node.layer.pre_activation(arg, training=mode)
            calls[key] = (activations.get(node.layer.activation_name)(z), node.layer.output_mask(arg, None))
            logits_of[key] = z
        if key not in calls:
            kwargs = {k: v for k, v in node.call_kwargs.items() if k != "training"}
            if any_mask:
                kwargs["mask"] = m_arg
            if any(p.ndim >= 5 for p in node.inputs):
                # the inputs' Keras shapes reach the layer's call (their tensors are folded)
                with _fold.pending([_keras_shape(p, vals[id(p)]) for p in node.inputs]):
                    out = node.layer(arg, training=mode, **kwargs)
            elif split is not None:
                with prefix_done(node.layer):          # the host stage gave its prefix's output
                    out = node.layer(arg, training=mode, **kwargs)
            else:
                out = node.layer(arg, training=mode, **kwargs)
            calls[key] = (out, node.layer.output_mask(arg, m_arg if any_mask else None,
                                                      bool(node.call_kwargs.get("_spread"))))
        out, omask = calls[key]
        if isinstance(out, dict):
            out = list(out.values())                  # a call that returns a dict: its values, in order
        vals[id(node)] = out[node.index] if isinstance(out, (list, tuple)) else out
        if omask is not None:
            masks[id(node)] = omask[node.index] if isinstance(omask, (list, tuple)) else omask
        for i in out_index.get(id(node), ()):
            if i in logits_for and key in logits_of:
                logits[i] = logits_of[key]
            elif i in logits_for and hasattr(node.layer, "pre_activation"):
                # (called directly, not through Layer.__call__: its inputs' Keras shapes given so)
                with _fold.inputs([_keras_shape(p, vals[id(p)]) for p in node.inputs]) \
                        if any(p.ndim >= 5 for p in node.inputs) else contextlib.nullcontext():
                    logits[i] = node.layer.pre_activation(arg, training=mode)
    outs = [logits.get(i, vals[id(o)]) for i, o in enumerate(topology.outputs)]
    if with_masks:
        return outs, [masks.get(id(o)) for o in topology.outputs]
    return outs


def call_graph(model, view, inputs, training, mask=None):
    """A functional model's call inside a graph (nested in another model): its outputs as given,
    with the masks its layers put on them kept for ``output_mask`` (Keras's nested decoder whose
    Embedding(mask_zero=True) masks the outer model's loss)."""
    ordered = ordered_inputs(view, inputs)
    in_masks = list(mask) if isinstance(mask, (list, tuple)) else [mask]
    outs, masks = run_nodes(view, ordered, training, with_masks=True,
                            input_masks=in_masks if len(in_masks) == len(ordered) else None)
    model.__dict__["_call_masks"] = (frozenset(id(t) for t in ordered), masks)
    return model.outputs_as_given(outs)


def install_logits(cls):
    """A model (nested in another) ending in a softmax (sigmoid) layer gives its logits to a
    cross-entropy loss, as that layer does in a flat model (the same loss either way)."""
    def activation_name(self):
        """Its one output layer's activation where that layer gives logits, else None."""
        try:
            outs = self.outputs
        except (ValueError, AttributeError):       # not built yet
            return None
        if not outs or len(outs) != 1 or self._multi_out:
            return None
        layer = outs[0].layer
        return getattr(layer, "activation_name", None) if hasattr(layer, "pre_activation") else None

    def pre_activation(self, inputs, training=None):
        """Its output before that activation (in the graph being built)."""
        from pyggml.models import host_stage
        view = host_stage.nested_view(self._ensure_graph())
        ordered = ordered_inputs(view, inputs)
        outs, masks = run_nodes(view, ordered, bool(training), logits_for=(0,), with_masks=True)
        self.__dict__["_call_masks"] = (frozenset(id(t) for t in ordered), masks)   # for output_mask
        return outs[0]
    cls.activation_name = property(activation_name)
    cls.pre_activation = pre_activation
    # (a model of its own call, a subclass's, is left as it is; so is one that preprocesses)
    cls.logits_inside = property(lambda self: not self.host and getattr(type(self).call, "__qualname__", "") in
                                 ("Model.call", "Sequential.call"))


def _call_keys(topology):
    """{id(node): (layer name, call index)}: a shared layer's calls are numbered in order."""
    keys, calls = {}, {}
    for n in topology.inputs + topology.nodes:
        sig = (id(n.layer), tuple(id(p) for p in n.inputs))
        per_layer = calls.setdefault(id(n.layer), [])
        if sig not in per_layer:
            per_layer.append(sig)
        keys[id(n)] = (n.layer.name, per_layer.index(sig))
    return keys


def config_of(topology, name):
    """The graph as JSON-able data: layers (class, config, and each call's inbound
    [layer, call, output] triples, whether it took a list, its call arguments),
    inputs and outputs."""
    from pyggml.saving.object_registration import get_registered_name
    keys = _call_keys(topology)
    entries = []
    for l in topology.layers:
        calls = []
        if not isinstance(l, InputLayer):
            seen = set()
            for n in topology.nodes:
                if n.layer is l and keys[id(n)][1] not in seen:
                    seen.add(keys[id(n)][1])
                    calls.append({"inputs": [list(keys[id(p)]) + [p.index] for p in n.inputs],
                                  "list": n.list_input, "kwargs": n.call_kwargs})
        entries.append({"class_name": get_registered_name(type(l)), "name": l.name,
                        "config": _serialized_objects(l.get_config()), "calls": calls,
                        **own_state.build_config_entry(l)})
        if getattr(l, "_op_step", False) and not getattr(type(l), "_op_step", False):
            entries[-1]["op"] = True            # a merge layer made by an operator (a + b): an op
    return {"name": name, "layers": entries,
            "inputs": [n.layer.name for n in topology.inputs],
            "outputs": [list(keys[id(n)]) + [n.index] for n in topology.outputs]}


def _serialized_objects(config):
    """A layer's config with the layers and other Keras objects it holds (a get_config of the
    user's returning ``self.first_layer``) as their serialized dicts, as Keras saves them."""
    def walk(v):
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(walk(x) for x in v)
        if isinstance(v, Layer) or (not isinstance(v, (str, bytes, int, float, bool, type(None), np.generic,
                                                        np.ndarray)) and hasattr(v, "get_config")):
            from pyggml.saving.serialization_lib import serialize_keras_object
            return serialize_keras_object(v)
        return v
    return walk(config)


def from_config(config, custom_objects=None):
    """(inputs, outputs) nodes rebuilt from ``config_of``'s data."""
    from pyggml.saving.object_registration import get_registered_object
    made = {}
    for entry in config["layers"]:
        cls = get_registered_object(entry["class_name"], custom_objects)
        if not (isinstance(cls, type) and issubclass(cls, Layer)):
            raise ValueError(f"{entry['class_name']!r} is not a layer class")
        layer = cls.from_config(entry["config"], custom_objects) if _takes_custom(cls) else \
            cls.from_config(entry["config"])
        # the name the graph knows it by (Keras keeps it beside the config: a get_config of the
        # user's may leave it out)
        name = entry.get("name") or entry["config"].get("name")
        if not isinstance(name, str):
            raise ValueError(f"a layer of class {entry['class_name']!r} has no name in the config")
        if layer.name != name:
            layer.name = name
        if entry.get("op") is True:
            layer._op_step = True
        own_state.build_from_entry(layer, entry)
        made[name] = (layer, entry.get("calls", []))
    made_calls = {}               # (layer name, call index) -> [output nodes]
    for name, (layer, calls) in made.items():
        if isinstance(layer, InputLayer):
            node = Node(layer.shape, layer, [], dtype=layer.graph_dtype)
            node.batch_size = layer.batch_size
            layer.output = node
            made_calls[(name, 0)] = [node]
    pending = [(name, i, c) for name, (layer, calls) in made.items() for i, c in enumerate(calls)]
    while pending:
        rest = []
        for name, i, call in pending:
            srcs = call["inputs"]
            if all((s[0], s[1]) in made_calls for s in srcs):
                args = [made_calls[(s[0], s[1])][s[2]] for s in srcs]
                out = made[name][0](args if call["list"] else args[0], **call.get("kwargs", {}))
                # (a nested model's dict of outputs: its values, which the nodes index as saved)
                made_calls[(name, i)] = list(out.values()) if isinstance(out, dict) else \
                    list(out) if isinstance(out, (list, tuple)) else [out]
            else:
                rest.append((name, i, call))
        if len(rest) == len(pending):
            raise ValueError("the model config refers to layers it does not define (or has a cycle)")
        pending = rest
    inputs = [made_calls[(n, 0)][0] for n in config["inputs"]]
    outputs = [made_calls[(o[0], o[1])][o[2]] for o in config["outputs"]]
    return inputs, outputs


def _takes_custom(cls):
    import inspect
    try:
        return "custom_objects" in inspect.signature(cls.from_config).parameters
    except (TypeError, ValueError):
        return False
