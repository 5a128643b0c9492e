"""Keras's ``clone_model``: the same architecture with new layers (new weights).

``clone_model(model)`` rebuilds a Sequential or functional model from its config,
so every layer is new and its weights are drawn afresh, as Keras's.
``clone_function(layer) -> layer`` picks each new layer instead (return the
layer itself to share it, ``layer.__class__.from_config(layer.get_config())``
is the default); the graph is then called again on new inputs, layer by layer.
``input_tensors``: the new model's inputs (``pg.Input`` nodes) in place of copies
of the old ones.  A subclassed model has no config: it is refused, naming it.
"""

from pyggml.layers.input_layer import Input, InputLayer
from pyggml.models.rebuild import from_own_config

__all__ = ["clone_model", "to_json", "model_from_json"]


def _fresh(layer):
    return layer.__class__.from_config(layer.get_config())


def clone_model(model, input_tensors=None, clone_function=None, **kwargs):
    from pyggml.models.model import Model
    from pyggml.models.sequential import Sequential
    unknown = set(kwargs) - {"call_function", "recursive"}
    if unknown:
        raise TypeError(f"clone_model() got unexpected arguments {sorted(unknown)}")
    if kwargs.get("call_function") is not None:
        raise ValueError("clone_model: call_function is not supported; give clone_function")
    if not isinstance(model, Model):
        raise TypeError(f"clone_model takes a pg.Model or pg.Sequential, got {type(model).__name__}")
    if model.__dict__.get("_subclassed") or (model._topology is None and not isinstance(model, Sequential)):
        raise TypeError(f"{type(model).__name__} is a subclassed model: it has no config to clone; make a new "
                        f"one with its constructor")
    fn = clone_function or _fresh
    if isinstance(model, Sequential) and input_tensors is None:
        topo = model._ensure_graph() if model.__dict__.get("_seq_input_shape") is not None or \
            model._topology is not None else None
        if clone_function is None:
            return from_own_config(model)
        layers = [fn(l) for l in (model.layers if topo is None else
                                  [l for l in topo.layers if not isinstance(l, InputLayer)])]
        if topo is None:
            return Sequential(layers, name=model.name)
        ins = topo.inputs[0]
        return Sequential([Input(shape=ins.feature_shape, dtype=ins.dtype)] + layers, name=model.name)
    topo = model._ensure_graph()
    if clone_function is None and input_tensors is None:
        return from_own_config(model)
    if input_tensors is None:
        new_inputs = [Input(shape=n.feature_shape, dtype=n.dtype, name=n.layer.name) for n in topo.inputs]
    else:
        new_inputs = list(input_tensors) if isinstance(input_tensors, (list, tuple)) else [input_tensors]
        if len(new_inputs) != len(topo.inputs):
            raise ValueError(f"clone_model: {len(new_inputs)} input tensors for a model of {len(topo.inputs)} inputs")
    mapped = {id(old): new for old, new in zip(topo.inputs, new_inputs)}
    layer_map, calls = {}, {}
    for node in topo.nodes:
        if id(node) in mapped:
            continue
        layer = node.layer
        if id(layer) not in layer_map:
            layer_map[id(layer)] = fn(layer)
        key = (id(layer), tuple(id(i) for i in node.inputs), repr(sorted(node.call_kwargs.items())))
        if key not in calls:
            args = [mapped[id(i)] for i in node.inputs]
            calls[key] = layer_map[id(layer)](args if node.list_input else args[0], **node.call_kwargs)
        out = calls[key]
        mapped[id(node)] = out[node.index] if isinstance(out, (list, tuple)) else out
    outs = [mapped[id(o)] for o in topo.outputs]
    return Model(new_inputs if model._multi_in else new_inputs[0], model.outputs_as_given(outs), name=model.name)


def to_json(model, **kwargs):
    """Keras's ``model.to_json()``: the architecture (no weights) as a JSON string,
    ``{"class_name": ..., "config": model.get_config()}``; ``kwargs`` go to json.dumps."""
    import json
    from pyggml.models.sequential import Sequential
    return json.dumps({"class_name": "Sequential" if isinstance(model, Sequential) else "Functional",
                       "config": model.get_config()}, **kwargs)


def model_from_json(json_string, custom_objects=None):
    """Keras's ``keras.models.model_from_json``: a new model (fresh weights) from ``to_json``'s
    string."""
    import json
    from pyggml.models.model import Model
    from pyggml.models.sequential import Sequential
    try:
        spec = json.loads(json_string)
    except (TypeError, ValueError, RecursionError) as e:
        raise ValueError(f"model_from_json: not a JSON string ({type(e).__name__}: {e})") from None
    if not isinstance(spec, dict) or "config" not in spec or spec.get("class_name") not in ("Sequential",
                                                                                            "Functional", "Model"):
        raise ValueError("model_from_json takes what model.to_json() writes: "
                         "{'class_name': 'Sequential' or 'Functional', 'config': ...}")
    cls = Sequential if spec["class_name"] == "Sequential" else Model
    return cls.from_config(spec["config"], custom_objects=custom_objects)
