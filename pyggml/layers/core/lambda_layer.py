"""Lambda: a Python function of the layer's inputs, computed in the graph.

Saving a Lambda (a safe equivalent of Keras's)
----------------------------------------------
Keras saves a Lambda's function as Python bytecode and refuses to load it unless
``safe_mode=False``.  pyggml never stores or runs code from a file.  A saved Lambda
names its function instead:

- a function registered with ``@pg.saving.register_serializable()`` is saved by its
  registered name and found by it on loading;
- a module-level function (``def`` at the top of a module) is saved as
  ``module`` + name and found on loading in that module, which must already be
  imported (loading never imports a module, which would run its code);
- anything else (a ``lambda``, a nested function, a callable object) is saved with
  its source text, for the reader, and must be handed back on loading:
  ``pg.load_model(path, custom_objects={"<layer name>": fn})``.  Loading without it
  raises a ValueError that names the layer and shows the source.

``custom_objects`` (or an active ``custom_object_scope``) also overrides the first two
forms by the function's name.  A ``mask`` function is saved the same way; an
unnamed one is handed back under ``"<layer name>.mask"``.
"""

import inspect
import json
import sys
import textwrap

from pyggml import _wide, ops
from pyggml._validation import is_int
from pyggml.core import Tensor
from pyggml.layers.layer import Layer
from pyggml.saving.object_registration import get_registered_name, get_registered_object, register_builtin
from pyggml.variables import Variable

__all__ = ["Lambda"]


def _accepts(fn, name):
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _source(fn):
    try:
        return textwrap.dedent(inspect.getsource(fn)).strip()
    except (OSError, TypeError):
        return None


def serialize_function(fn):
    """A JSON-able description of ``fn`` that names it (never its code)."""
    name = get_registered_name(fn)
    if name != getattr(fn, "__name__", None) and _lookup(name) is fn:     # register_serializable's "package>name"
        return {"class_name": "function", "registered_name": name}
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if (isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname and "." not in qualname
            and getattr(sys.modules.get(module), qualname, None) is fn):
        return {"class_name": "function", "module": module, "function_name": qualname}
    return {"class_name": "__lambda__", "source": _source(fn)}


def _lookup(key):
    """The object custom_objects (or a custom_object_scope, or the registry) has under key."""
    try:
        return get_registered_object(key)
    except ValueError:
        return None


def deserialize_function(cfg, layer_key, what):
    """The function a ``serialize_function`` description names; ``layer_key``: the
    custom_objects key an unnamed function is handed back under."""
    if callable(cfg):
        return cfg
    if not isinstance(cfg, dict) or cfg.get("class_name") not in ("function", "__lambda__"):
        raise ValueError(f"{what}: not a saved function: {cfg!r}")
    if cfg["class_name"] == "__lambda__":
        fn = _lookup(layer_key)
        if callable(fn) and not isinstance(fn, type):
            return fn
        src = cfg.get("source")
        shown = f"; its source was:\n{src}" if src else ""
        raise ValueError(f"{what} was a lambda or another unnamed function, which a saved model does not hold "
                         f"(pyggml never loads code from a file): pass it on loading, "
                         f"load_model(path, custom_objects={{{layer_key!r}: fn}}), or give the layer a "
                         f"module-level or registered function{shown}")
    if "registered_name" in cfg:
        fn = _lookup(cfg["registered_name"])
        if fn is None:
            raise ValueError(f"{what}: the function registered as {cfg['registered_name']!r} is not registered "
                             f"now: run the code that registers it (or pass it in custom_objects) before loading")
        return fn
    module, name = cfg.get("module"), cfg.get("function_name")
    fn = _lookup(name) if isinstance(name, str) else None
    if callable(fn) and not isinstance(fn, type):
        return fn
    mod = sys.modules.get(module) if isinstance(module, str) else None
    fn = getattr(mod, name, None) if mod is not None and isinstance(name, str) else None
    if not callable(fn):
        raise ValueError(f"{what}: the function {module}.{name} is not available: import {module!r} before "
                         f"loading (loading never imports modules), or pass custom_objects={{{name!r}: fn}}")
    return fn


def _shape_arg(output_shape):
    if output_shape is None or callable(output_shape):
        return output_shape
    if is_int(output_shape):
        output_shape = (output_shape,)
    try:
        t = tuple(output_shape)
    except TypeError:
        raise TypeError(f"Lambda: output_shape must be a tuple (without the batch), a function of the input "
                        f"shape, or None, got {output_shape!r}") from None
    if t and all(isinstance(e, (list, tuple)) for e in t):
        return [_shape_arg(e) for e in t]                     # one per output
    for d in t:
        if d is not None and (not is_int(d) or d < 1):
            raise ValueError(f"Lambda: output_shape entries must be positive ints or None, got {t}")
    return tuple(None if d is None else int(d) for d in t)


def _check_json(value, what):
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must hold plain values (numbers, strings, lists, dicts) to be saved, "
                        f"got {value!r}") from None


@register_builtin
class Lambda(Layer):
    """``Lambda(function, output_shape=None, mask=None, arguments=None)``: the layer's
    output is ``function(inputs, **arguments)``, computed in the model's graph, so the
    function works on tensors: with arithmetic (``x * 2``, ``x + y``, ``x @ w``) and
    ``pyggml.ops`` (``ops.reduce_mean(x, axis=1)``, ``ops.mean(x, axis=1)``,
    ``ops.sqrt``, ``ops.abs``, ...), ``pyggml.activations``, or other layers; called
    on a list of inputs it gets the list.  A function taking ``mask`` or ``training``
    gets them.

    ``output_shape`` (optional): the output shape without the batch, or a function of
    the input shape (batch included) returning it with the batch; it is found by
    running the function when omitted, and checked against it when given.
    ``mask``: None, or a function ``mask(inputs, previous_mask)`` giving the output's
    padding mask.  ``arguments``: extra keyword arguments of ``function`` (plain
    values, so that it saves).  Saving: see this module's docstring: a Lambda saves
    its function by name, never as code; a ``lambda`` must be passed back with
    ``load_model(..., custom_objects={"<layer name>": fn})``.
    """

    volumes_whole = True       # the user's function sees a volume 5-D (pyggml._wide)

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        super().__init__(**kwargs)
        if not callable(function):
            raise TypeError(f"Lambda: function must be callable, got {function!r}")
        if mask is not None and not callable(mask):
            raise TypeError(f"Lambda: mask must be None or a function mask(inputs, previous_mask), got {mask!r}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict) or not all(isinstance(k, str) for k in arguments):
            raise TypeError(f"Lambda: arguments must be a dict of keyword arguments, got {arguments!r}")
        self.function = function
        self._output_shape = _shape_arg(output_shape)
        self.mask = mask
        self.arguments = dict(arguments)
        self.supports_masking = mask is not None
        self._takes_mask = _accepts(function, "mask")
        self._takes_training = _accepts(function, "training")

    def call(self, inputs, mask=None, training=None):
        kwargs = dict(self.arguments)
        if self._takes_mask:
            kwargs["mask"] = mask
        if self._takes_training:
            kwargs["training"] = training
        out = self.function(inputs, **kwargs)
        outs = out if isinstance(out, (list, tuple)) else [out]
        if not outs:
            raise TypeError("Lambda: the function returned no tensors")
        outs = [ops.as_tensor(o) if isinstance(o, Variable) else o for o in outs]
        for o in outs:
            if not isinstance(o, (Tensor, _wide.Wide)):          # (a 5-D result is a volume: Layer folds it)
                raise TypeError(f"Lambda: the function must return tensors computed from its inputs (with "
                                f"pyggml.ops and tensor arithmetic), got {type(o).__name__}")
        first = inputs if isinstance(inputs, (Tensor, _wide.Wide)) else next(
            (t for t in (inputs.values() if isinstance(inputs, dict) else inputs) if isinstance(t, Tensor)), None)
        for o in outs:
            # (items folded into the batch, ops.reshape(x, (-1, h, w, c)), give a multiple of its rows)
            if first is not None and (not o.shape or o.shape[0] % first.shape[0] or o.shape[0] < first.shape[0]):
                raise ValueError(f"Lambda: the function must keep the batch (one output row per sample): "
                                 f"inputs of {first.shape[0]} rows gave an output of shape {tuple(o.shape)} "
                                 f"(a reduction over axis 0 or over everything mixes the samples)")
        self._check_shape(inputs, outs)
        return list(outs) if isinstance(out, (list, tuple)) else outs[0]

    def _check_shape(self, inputs, outs):
        want = self._output_shape
        if want is None:
            return
        if callable(want):
            if isinstance(inputs, dict):
                shape = {k: (None,) + tuple(t.shape[1:]) for k, t in inputs.items()}
            elif isinstance(inputs, (list, tuple)):
                shape = [(None,) + tuple(t.shape[1:]) for t in inputs]
            else:
                shape = (None,) + tuple(inputs.shape[1:])
            got = want(shape)
            many = isinstance(got, list)
            want = [tuple(s)[1:] for s in got] if many else tuple(got)[1:]
        wants = want if isinstance(want, list) else [want]
        if len(wants) != len(outs):
            raise ValueError(f"Lambda: output_shape gives {len(wants)} shapes for the function's {len(outs)} outputs")
        for w, o in zip(wants, outs):
            got = tuple(o.shape[1:])
            if len(w) != len(got) or any(d is not None and d != g for d, g in zip(w, got)):
                raise ValueError(f"Lambda: output_shape {tuple(w)} does not match the shape the function "
                                 f"computes, {got} (without the batch)")

    def compute_mask(self, inputs, mask=None):
        if self.mask is None:
            return None
        return self.mask(inputs, mask)

    def get_config(self):
        c = super().get_config()
        c["function"] = serialize_function(self.function)
        want = self._output_shape           # (output_shape and mask: named when given, as Keras's)
        if isinstance(want, (tuple, list)):
            c["output_shape"] = [list(s) for s in want] if isinstance(want, list) else list(want)
        elif want is not None:
            c["output_shape"] = serialize_function(want)
        if self.mask is not None:
            c["mask"] = serialize_function(self.mask)
        _check_json(self.arguments, f"Lambda {self.name!r}: arguments")
        c["arguments"] = dict(self.arguments)
        return c

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        name = config.get("name") or "lambda"
        config["function"] = deserialize_function(config["function"], name, f"Lambda {name!r}: its function")
        shape = config.get("output_shape")
        if isinstance(shape, dict):
            config["output_shape"] = deserialize_function(shape, f"{name}.output_shape",
                                                          f"Lambda {name!r}: its output_shape function")
        if config.get("mask") is not None:
            config["mask"] = deserialize_function(config["mask"], f"{name}.mask", f"Lambda {name!r}: its mask")
        return cls(**config)
