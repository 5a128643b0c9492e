"""A model called on arrays: Keras's eager forward pass (``model(x)``), which also works
before compile.  Plain calls take the model's cached predict graph; a training call, a
subclassed call given more arguments, a call that keeps tensors as attributes and one
that draws numpy's random numbers run eagerly through the layer's own call
(``layer_call``: Layer.__call__ of the model)."""

import inspect
import re
import weakref

import numpy as np

from pyggml._tensor_arrays import as_ops_result, no_rows_call

__all__ = ["call_on_arrays"]

# numpy's or Python's random draws in a call: made once when a graph is traced
_HOST_RANDOM = re.compile(r"\b(?:np|numpy)\.random\.|\brandom\.(?:random|uniform|randint|choice|choices|gauss|"
                          r"normalvariate|shuffle|sample|randrange|betavariate|triangular)\(|\bdefault_rng\(")
_DRAWS = weakref.WeakKeyDictionary()         # class -> whether its call draws on the host


def _own_call(model):
    """Whether the model's class (or a class of the user's it derives from) writes its call."""
    return any("call" in c.__dict__ for c in type(model).__mro__ if c.__module__.split(".")[0] != "pyggml")


def _draws_on_host(model):
    """Whether a call of the user's draws numpy's or Python's random numbers (an augmentation
    model's ``x + np.random.uniform(...)``): Keras's eager call draws anew each time, so each
    call runs it again instead of the cached predict graph, which holds one draw."""
    cls = type(model)
    if cls not in _DRAWS:
        found = False
        for c in cls.__mro__:
            if c.__module__.split(".")[0] == "pyggml" or "call" not in c.__dict__:
                continue
            try:
                found = found or bool(_HOST_RANDOM.search(inspect.getsource(c.__dict__["call"])))
            except (OSError, TypeError):
                pass
        _DRAWS[cls] = found
    return _DRAWS[cls]


def with_unit_axes(model, x):
    """Arrays missing an input's last axis of 1 given that axis, as Keras (``Input((1,))`` fed
    ``(n,)`` arrays), for a call inside a GradientTape (``call_on_arrays``' data path does it
    for the others)."""
    topology = model.__dict__.get("_topology")
    nodes = list(getattr(topology, "inputs", None) or ())
    if not nodes:
        return x                        # a model without a graph yet: as given

    def fix(a, node):
        shape = tuple(getattr(node, "feature_shape", ()))
        if isinstance(a, np.ndarray) and a.ndim == len(shape) and shape[-1:] == (1,):
            return a[..., None]
        return a
    if isinstance(x, dict):
        by_name = {getattr(n, "name", None): n for n in nodes}
        return {k: fix(v, by_name[k]) if k in by_name else v for k, v in x.items()}
    if isinstance(x, (list, tuple)) and len(x) == len(nodes) and len(nodes) > 1:
        return type(x)(fix(a, n) for a, n in zip(x, nodes))
    return fix(x, nodes[0]) if len(nodes) == 1 else x


def call_on_arrays(model, layer_call, args, kwargs):
    if model.host and set(kwargs) <= {"training"}:        # preprocessing only: at once, as Keras
        return as_ops_result(model.host_apply(args[0], kwargs.get("training")))
    if len(args) > 1 or set(kwargs) - {"training"}:
        if _own_call(model):
            # a call of the user's with more arguments (``self(x, y)`` in a test_step, a
            # ``targets=`` keyword): one eager pass of it, every argument given
            return layer_call(*args, **kwargs)
        raise TypeError(f"calling a model on arrays takes its inputs and training= only, got "
                        f"{len(args)} positional arguments and {sorted(kwargs)}")
    training = kwargs.get("training")
    if training is None and model._training_default():
        kwargs = dict(kwargs, training=True)  # Keras: call(self, x, training=True) is a training call
    elif not training:
        if "_keeps_tensors" not in model.__dict__ and model._topology is not None:
            # a call that keeps tensors as attributes (FocalNet's self.gates, to plot; set when its
            # graph was traced): eager passes of it, which give them each call's values as Keras's
            # does (and run the call's side effects once, as the predict graph does)
            from pyggml.layers.eager import tensor_attributes
            model.__dict__["_keeps_tensors"] = bool(tensor_attributes(model, None, closed_too=True))
        if model.__dict__.get("_keeps_tensors") or _draws_on_host(model):
            return layer_call(*args, **kwargs)
        empty = no_rows_call(args[0], lambda one: model._plain_predict(one, training))
        if empty is not None:
            return empty                    # a batch of no rows: outputs of no rows, as Keras's
        return model._plain_predict(args[0], training)   # never an overridden predict_step
    model._ensure_graph()                      # training=True: one eager pass, dropout on (MC dropout)
    return layer_call(*args, **kwargs)
