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
from pyggml.models import functional
from pyggml.models.rebuild import from_own_config

__all__ = ["clone_model", "to_json", "model_from_json"]


def _fresh(layer):
    return layer.__class__.from_config(layer.get_config())


def _plain_call(layer, *args, **kwargs):
    return layer(*args, **kwargs)


def _wrapped(clone_function, call_function, recursive):
    """Each layer's clone, made once (a layer shared in the model is shared in the clone); with
    ``recursive``, a Sequential or functional model inside is cloned as a model, by the same rules."""
    from pyggml.models.model import Model
    made = {}

    def clone(layer):
        if id(layer) not in made:
            if recursive and isinstance(layer, Model) and not layer.__dict__.get("_subclassed") and \
                    (layer._topology is not None or _is_sequential(layer)):
                made[id(layer)] = _clone(layer, None, clone_function, call_function, True)
            else:
                made[id(layer)] = (clone_function or _fresh)(layer)
        return made[id(layer)]
    return clone


def _is_sequential(model):
    from pyggml.models.sequential import Sequential
    return isinstance(model, Sequential)


def clone_model(model, input_tensors=None, clone_function=None, call_function=None, recursive=False):
    """Keras's: see the module's docstring.  ``call_function(layer, *args, **kwargs)`` calls each
    new layer of a functional model on its inputs in the clone (``layer(*args, **kwargs)`` by
    default: it may add layers after it); ``recursive``: models nested in it are cloned too (else
    ``clone_function`` gets them, as layers).  A compiled model's clone is compiled the same way,
    with weights of its own."""
    from pyggml.models.model import Model
    if not isinstance(model, Model):
        raise TypeError(f"clone_model takes a pg.Model or pg.Sequential, got {type(model).__name__}")
    for what, fn in (("clone_function", clone_function), ("call_function", call_function)):
        if fn is not None and not callable(fn):
            raise ValueError(f"clone_model: {what} must be a callable, got {type(fn).__name__}")
    if model.__dict__.get("_subclassed") or (model._topology is None and not _is_sequential(model)):
        raise TypeError(f"{type(model).__name__} is a subclassed model: it has no config to clone; make a new "
                        f"one with its constructor")
    if call_function is not None and _is_sequential(model):
        raise ValueError("clone_model: call_function is not supported with Sequential models (their layers are "
                         "listed, not called, when the model is made): use it with functional models")
    twin = _clone(model, input_tensors, clone_function, call_function, bool(recursive))
    if model.compiled:
        twin.compile_from_config(model.get_compile_config(), backend=model.backend_name)
    return twin


def _clone(model, input_tensors, clone_function, call_function, recursive):
    from pyggml.models.model import Model
    from pyggml.models.sequential import Sequential
    if clone_function is None and call_function is None and input_tensors is None and not recursive:
        return from_own_config(model)
    fn = _wrapped(clone_function, call_function, recursive)
    if isinstance(model, Sequential) and input_tensors is None:
        topo = model._ensure_graph() if model.__dict__.get("_seq_input_shape") is not None or \
            model._topology is not None else None
        layers = [fn(l) for l in (model.layers if topo is None else
                                  [l for l in topo.layers if not isinstance(l, InputLayer)])]
        if topo is None:
            return Sequential(layers, name=model.name)
        ins = topo.inputs[0]
        return Sequential([Input(shape=ins.feature_shape, dtype=ins.dtype)] + layers, name=model.name)
    topo = model._ensure_graph()
    call = call_function or _plain_call
    if input_tensors is None:
        new_inputs = [Input(shape=n.feature_shape, dtype=n.dtype, name=n.layer.name) for n in topo.inputs]
    else:
        new_inputs = list(input_tensors.values()) if isinstance(input_tensors, dict) else \
            list(input_tensors) if isinstance(input_tensors, (list, tuple)) else [input_tensors]
        if len(new_inputs) != len(topo.inputs):
            raise ValueError(f"clone_model: {len(new_inputs)} input tensors for a model of {len(topo.inputs)} inputs")
    mapped = {id(old): new for old, new in zip(topo.inputs, new_inputs)}
    calls = {}
    for node in topo.nodes:
        if id(node) in mapped:
            continue
        key = (id(node.layer), tuple(id(i) for i in node.inputs), repr(sorted(node.call_kwargs.items())))
        if key not in calls:
            args = [mapped[id(i)] for i in node.inputs]
            layer = fn(node.layer)
            if getattr(node.layer, "_op_step", False) and type(layer) is type(node.layer):
                layer._op_step = True       # an op's copy (a + b, ops.mean(x)) stays an op, not a layer
            calls[key] = call(layer, args if node.list_input else args[0], **node.call_kwargs)
        out = calls[key]
        if isinstance(out, dict):
            out = list(out.values())             # a nested model's dict of outputs: by position, as saved
        mapped[id(node)] = out[node.index] if isinstance(out, (list, tuple)) else out
    outs = [mapped[id(o)] for o in topo.outputs]
    paths = topo.input_paths
    ins = functional.structure_of(paths, new_inputs) if paths is not None else \
        (new_inputs if model._multi_in else new_inputs[0])
    return Model(ins, model.outputs_as_given(outs), name=model.name)


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
