"""The layer contract (Keras's), for pyggml's layers and for yours.

A layer subclasses ``pyggml.layers.Layer`` and writes:

- ``__init__(self, ..., **kwargs)``: its settings; ``super().__init__(**kwargs)``
  takes ``name`` and ``trainable``.  Layers assigned to attributes
  (``self.att = MultiHeadAttention(...)``, also lists of layers) become
  sublayers: their weights are this layer's too, named after the attribute.
- ``build(self, input_shape)``: makes the weights with ``self.add_weight(...)``
  for an input of this shape (Keras's: the batch is ``None``).
- ``call(self, inputs, training=None)``: the computation, on tensors, written
  with ``pyggml.ops``, ``pyggml.activations``, arithmetic (``+ - * / @``) and
  other layers.  A weight (a ``Variable``) stands for its tensor.
- ``compute_output_shape(self, input_shape)``: optional; without it the
  output shape is found by running ``call`` once on shapes alone.
- ``get_config(self)``: the constructor's arguments, so that
  ``from_config`` rebuilds it; register the class with
  ``@pyggml.saving.register_serializable()`` to load saved models holding it.

Calling a layer on ``pg.Input`` nodes adds it to a functional model; calling
it on tensors inside another layer's ``call`` computes it in the graph being
built.  Every op used must have a backward pass for the model to train;
``compile``/``fit`` name the op that lacks one.
"""

import functools
import inspect
import re
import sys
import threading

import weakref

import numpy as np

from pyggml import _fold, _logits, _scope, _wide, autodiff, ops
from pyggml._validation import check_str, is_int
from pyggml._tensor_arrays import as_ops_result
from pyggml.dtype_policies import QuantizedDTypePolicy, policy_mode
from pyggml.core import Tensor
from pyggml.core.ops import scale as ops_scale
from pyggml.layers._keras_weights import BUILDERS, KerasKernel, build_through_owner, keras_list_by_name
from pyggml.layers.node import Node
from pyggml.variables import Variable

__all__ = ["Layer", "snake_case", "feature_shape_of"]

_MAX_WEIGHT_VALUES = 2 ** 30           # one weight of 4 GiB of f32 at most
# ggml tensors have 4 dims; a node of more folds them into its batch (pyggml._fold)
_MAX_FEATURE_DIMS = _fold.MAX_DIMS - 1
# the training mode of the layer calls running on this thread, innermost last (Keras's call
# context): a layer called without training= inside another's call takes the outer one's
_CALLS = threading.local()


_INT_DTYPES = {"int": "int64", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
               "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64"}


def _weight_dtype(dtype, trainable):
    """add_weight's dtype: float32 (also float16/bfloat16/float64 asked for: pyggml computes in
    float32), or an integer type for a weight that is not trained (a counter, as Keras's
    Normalization keeps), held as float32 (exact to 2**24) and read back as that type."""
    if dtype is None:
        return "float32"
    name = getattr(dtype, "name", None) or (np.dtype(dtype).name if isinstance(dtype, type) else dtype)
    if name in ("float32", "float16", "bfloat16", "float64", "float"):
        return "float32"
    if name in _INT_DTYPES:
        if trainable:
            raise ValueError(f"add_weight: a trainable weight must be a float, got dtype={dtype!r} "
                             f"(give trainable=False for a counter)")
        return _INT_DTYPES[name]
    raise ValueError(f"add_weight: dtype must be a float or an integer type, got {dtype!r}")


class training_context:
    """``with training_context(False):`` layer calls given no training= inside take this mode (as
    an enclosing call's would): a subclassed model's graph is traced in inference mode."""

    def __init__(self, training):
        self.training = bool(training)

    def __enter__(self):
        _CALLS.__dict__.setdefault("training", []).append(self.training)
        return self

    def __exit__(self, *exc):
        _CALLS.__dict__["training"].pop()
        return False


# functions called with a layer whose computation changed after its graphs were made (an
# activation set anew): the models layer registers one that drops the graphs holding it
LAYER_CHANGED = []


def layer_changed(layer, weights_added=False):
    """``weights_added``: the layer made new weights after it was built (``enable_lora``)."""
    for hook in LAYER_CHANGED:
        hook(layer, weights_added)


def _note_logits(layer, inputs, out, training):
    """A layer ending in a sigmoid or softmax it fuses (Dense(1, "sigmoid") in a custom call): its
    pre-activation, made if a cross-entropy asks, are the output's logits (pyggml._logits)."""
    act = getattr(layer, "activation_name", None) if isinstance(out, Tensor) else None
    if act in ("sigmoid", "softmax") and hasattr(layer, "pre_activation") and not _logits.known(out):
        _logits.note(out, lambda: layer.pre_activation(inputs, training=training), act)


_VALUE_NEEDED = ("has no value while its graph is being built", "truth value of a graph tensor is not known")


def _run_in_python(layer, inputs, kwargs, error):
    """A call of the user's that reads values in Python (``int(keras.random.randint(...))``, an
    ``if`` on a random draw: keras-io's barlow twins augmentations), which a graph cannot run:
    on arrays, as Keras's eager call, it runs as written, each op computing at once with numpy
    and each random draw new.  Any other error is the graph's, raised as it was."""
    if not any(t in str(error) for t in _VALUE_NEEDED) or type(layer).__module__.startswith("pyggml."):
        raise error
    if not layer.built:
        many = isinstance(inputs, (list, tuple))
        shapes = [np.shape(a) for a in inputs] if many else np.shape(inputs)
        layer._build_once(shapes)
    kwargs = {k: v for k, v in kwargs.items() if k != "training" or layer._accepts("training")}
    return as_ops_result(layer.call(inputs, **kwargs))


def _numbered(kind, taken):
    """``kind``, else ``kind_1``, ``kind_2``, ...: the first not in ``taken``."""
    if kind not in taken:
        return kind
    k = 1
    while f"{kind}_{k}" in taken:
        k += 1
    return f"{kind}_{k}"


def _set_by_user_code():
    """Whether the caller of the function calling this one (Layer.__setattr__'s, add_weight's) is
    code outside pyggml."""
    return not sys._getframe(2).f_globals.get("__name__", "").startswith("pyggml")


def _layers_in(value, path):
    """[(path, layer)] of the layers in ``value``: a layer, or lists, tuples and dicts of them."""
    if isinstance(value, Layer):
        return [(path, value)]
    if isinstance(value, (list, tuple)):
        return [found for i, v in enumerate(value) for found in _layers_in(v, f"{path}.{i}")]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _layers_in(v, f"{path}.{k}")]
    return []


class _Tracked:
    """A container attribute of a layer that tells the layer when it changes."""

    def _changed(self):
        owner = self._owner()
        if owner is not None:
            owner._track(self._attr, self)

    def __reduce_ex__(self, protocol):
        plain = list if isinstance(self, list) else dict       # pickles and copies as a plain one
        return plain, (plain(self),)


class _TrackedList(_Tracked, list):
    """A list attribute of a layer: layers appended later are its sublayers too (Keras's
    ``self.blocks = []; self.blocks.append(Dense(8))``)."""


class _TrackedDict(_Tracked, dict):
    """A dict attribute of a layer: the layers it holds, also set later, are its sublayers."""


def _mutator(base, method):
    def changed(self, *args, **kwargs):
        out = getattr(base, method)(self, *args, **kwargs)
        self._changed()
        return out
    changed.__name__ = method
    return changed


for _m in ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
           "__delitem__", "__iadd__"):
    setattr(_TrackedList, _m, _mutator(list, _m))
for _m in ("__setitem__", "__delitem__", "update", "pop", "popitem", "clear", "setdefault"):
    setattr(_TrackedDict, _m, _mutator(dict, _m))
del _m


def _tracked(value, owner, attr):
    """A plain list or dict assigned to a layer, empty or holding layers, as one that tells the
    layer when it changes; anything else as it is."""
    kind = {list: _TrackedList, dict: _TrackedDict}.get(type(value))
    if kind is None or (value and not _layers_in(value, "")):
        return value
    out = kind(value)
    out._owner, out._attr = weakref.ref(owner), attr
    return out


def snake_case(name):
    """Keras's layer name for a class name: Conv2D -> conv2d, LSTM -> lstm."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    s = re.sub(r"(\d)_d(?=_|$)", r"\1d", s)          # ZeroPadding2D -> zero_padding2d, as every "<n>D"
    for a, b in (("l_s_t_m", "lstm"), ("g_r_u", "gru"), ("re_l_u", "relu"), ("p_re_lu", "prelu")):
        s = s.replace(a, b)
    return s


def feature_shape_of(shape, what="shape", allow_none=False, allow_empty=False):
    """A shape without the batch (an int or a sequence) as a tuple of positive ints
    (or None where lengths vary, with ``allow_none``; ``()`` for one number per sample with
    ``allow_empty``)."""
    if is_int(shape):
        shape = (int(shape),)
    try:
        t = tuple(shape)
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of ints, got {shape!r}") from None
    if not t and not allow_empty:
        raise ValueError(f"{what} must not be empty")
    out = []
    for d in t:
        if d is None and allow_none:
            out.append(None)
            continue
        if not is_int(d):
            raise TypeError(f"{what} entries must be ints{' or None' if allow_none else ''}, got {d!r} in {t}")
        if d < 1:
            raise ValueError(f"{what} entries must be positive, got {t}")
        if d > 2 ** 31:
            raise ValueError(f"{what} {t} is too large")
        out.append(int(d))
    if len(out) > _MAX_FEATURE_DIMS:
        raise ValueError(f"{what} {t}: at most {_MAX_FEATURE_DIMS} dimensions besides the batch")
    return tuple(out)


# pyggml's layers that work along the last axis or value by value: on a tensor of more than four
# dimensions inside a call (pyggml._wide) they run on its leading axes merged into one
_LAST_AXIS_LAYERS = {"Dense", "LayerNormalization", "RMSNormalization", "BatchNormalization", "Activation", "ReLU",
                     "LeakyReLU", "ELU", "PReLU", "Softmax", "Dropout", "GaussianNoise", "GaussianDropout",
                     "AlphaDropout", "Identity", "Rescaling"}


def _call_on_wide(layer, inputs, kwargs):
    """A layer called inside a call on a tensor of more than four dimensions (a wide one)."""
    cls = type(layer)
    flat = inputs if isinstance(inputs, list) else [inputs]
    if all(type(v) is not _wide.Wide or v.ndim >= 5 for v in flat) and \
            layer._folds_5d([tuple(v.shape) for v in flat]):
        # a volume (5-D) to a layer that takes volumes (Conv3D, Reshape, a custom layer): folded, as
        # pyggml holds volumes in the graph (pyggml._fold), its Keras shape noted; a volume it gives
        # comes back 5-D
        folded = [_wide.reshape(v, _fold.graph_shape(v.shape)) if type(v) is _wide.Wide else v for v in flat]
        _fold.note([f for f, v in zip(folded, flat) if type(v) is _wide.Wide],
                   [v.shape for v in flat if type(v) is _wide.Wide])
        out = layer(folded if isinstance(inputs, list) else folded[0], **kwargs)
        return _as_wide_volumes(out)
    axis = getattr(layer, "axis", -1)
    along_last = axis in (-1, None) or (isinstance(axis, (list, tuple)) and list(axis) in ([-1], []))
    if isinstance(inputs, list) or cls.__name__ not in _LAST_AXIS_LAYERS or \
            not cls.__module__.startswith("pyggml.") or not along_last:
        shapes = [getattr(v, "shape", None) for v in (inputs if isinstance(inputs, list) else [inputs])]
        raise ValueError(f"{cls.__name__} on inputs of shapes {shapes}: ggml tensors have at most 4 dimensions; "
                         f"inside a call the layers that work along the last axis or value by value "
                         f"({', '.join(sorted(_LAST_AXIS_LAYERS))}) take more, and ops carry them through "
                         f"{_wide._FAMILIES}: reshape to at most 4 dimensions before {cls.__name__}")
    shape = inputs.shape
    out = layer(_wide.reshape(inputs, (int(np.prod(shape[:-3])),) + shape[-3:]), **kwargs)
    return _wide.reshape(out, shape[:-3] + tuple(out.shape[1:]))


def _widened(inputs, shapes):
    """The folded volumes among a call's inputs (dict, list or one) as wide 5-D tensors."""
    def one(t, s):
        if isinstance(t, Tensor) and _fold.folds(s) and None not in s and \
                int(np.prod(s)) == t.nelements:
            return _wide.Wide(t, s)
        return t
    if isinstance(inputs, dict):
        return {k: one(t, s) for (k, t), s in zip(inputs.items(), shapes)}
    if isinstance(inputs, list):
        return [one(t, s) for t, s in zip(inputs, shapes)]
    return one(inputs, shapes[0])


def _as_wide_volumes(out):
    """Folded volumes among a layer's results as wide tensors: what a custom call's ops take as 5-D."""
    return _wide.volumes_of(out, _fold.noted)


def _folded_volumes(layer, out):
    """A call's results of more than four dimensions (pyggml._wide): a 5-D one as a volume (its
    batch and first axis folded into one: pyggml._fold), noted with its Keras shape; more refused."""
    many = isinstance(out, (list, tuple))
    if not any(type(o) is _wide.Wide for o in (out if many else [out])):
        return out

    def one(o):
        if type(o) is not _wide.Wide:
            return o
        if o.ndim > _fold.MAX_DIMS:
            raise ValueError(f"{type(layer).__name__}'s call returns a tensor of shape {o.shape}: a layer's output has "
                             f"at most {_fold.MAX_DIMS} dimensions (folded into ggml's four); reshape it first")
        t = _wide.reshape(o, _fold.graph_shape(o.shape))
        _fold.note([t], [o.shape])
        return t
    return type(out)(one(o) for o in out) if many else one(out)


_MIXED_POLICIES = ("mixed_float16", "mixed_bfloat16")


def _carry_masks(out, masks):
    """Keras's eager ``_keras_mask`` on each output array, from compute_mask's result."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    ms = list(masks) if isinstance(masks, (list, tuple)) else [masks] * len(outs)
    for o, m in zip(outs, ms):
        if m is not None and isinstance(o, np.ndarray):
            try:
                o._keras_mask = np.asarray(m).astype(bool)
            except AttributeError:               # a plain ndarray takes no attribute
                pass


def _graph_constants(inputs):
    """Arrays among a layer's inputs as constants of the graph being built (tensors stay)."""
    def one(v):
        if isinstance(v, (Tensor, Variable)):
            return v
        a = np.asarray(v)
        return ops.constant(a, "int32" if a.dtype.kind in "iub" else "float32")
    return [one(v) for v in inputs] if isinstance(inputs, list) else one(inputs)


def _is_option(v):
    """A call argument that is not an input: a Python number, bool, str or None."""
    return v is None or isinstance(v, (bool, int, float, str)) and not isinstance(v, np.generic)


def dict_leaves(d, path=()):
    """[(key, value)] of a dict of inputs: a top-level input's key is its name, a nested dict's
    input's the tuple of keys down to it (``{"a": x, "b": {"c": y}}``: ``"a"``, ``("b", "c")``)."""
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and v and all(isinstance(j, str) for j in v):
            out += dict_leaves(v, path + (k,))
        else:
            out.append((path + (k,) if path else k, v))
    return out


def nest_by_keys(keys, values):
    """The dict of ``values`` by ``keys`` as ``dict_leaves`` gave them (paths nest again)."""
    out = {}
    for k, v in zip(keys, values):
        if isinstance(k, (tuple, list)):
            d = out
            for p in k[:-1]:
                d = d.setdefault(p, {})
            d[k[-1]] = v
        else:
            out[k] = v
    return out


def flatten_inputs(x):
    if isinstance(x, (list, tuple)):
        out = []
        for e in x:
            out.extend(flatten_inputs(e))
        return out
    return [x]


def _basic(value):
    """Whether a config can hold ``value`` as it is (JSON's kinds: numbers, strings, None, lists
    and dicts of them)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return not isinstance(value, float) or np.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_basic(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _basic(v) for k, v in value.items())
    return False


def _keras_object(value):
    """A regularizer, initializer or constraint of pyggml's (Keras's kinds): a config holds it
    serialized (Keras's ``{"module", "class_name", "config"}``)."""
    from pyggml import constraints, initializers, regularizers
    return isinstance(value, (regularizers.Regularizer, initializers.Initializer, constraints.Constraint))


def _savable(value):
    """Whether an automatic config can hold ``value``: JSON's kinds, numpy numbers, and
    regularizers, initializers and constraints (serialized)."""
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return _basic(value.item())
    if _keras_object(value):
        return True
    if isinstance(value, (list, tuple)):
        return all(_savable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _savable(v) for k, v in value.items())
    return _basic(value)


def _config_value(value):
    """``value`` as an automatic config holds it (see _savable)."""
    if isinstance(value, np.generic):
        return value.item()
    if _keras_object(value):
        from pyggml.saving.serialization_lib import serialize_keras_object
        return serialize_keras_object(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_config_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _config_value(v) for k, v in value.items()}
    return value


def _from_config_value(value):
    """An automatic config's value as the constructor got it: a serialized regularizer,
    initializer, constraint, layer or model becomes the object again."""
    if isinstance(value, dict):
        module = value.get("module")
        if "class_name" in value and isinstance(module, str) and \
                module in ("keras.regularizers", "keras.initializers", "keras.constraints", "keras.layers",
                           "keras.models", "keras"):
            from pyggml.saving.serialization_lib import deserialize_keras_object
            return deserialize_keras_object(value)
        return {k: _from_config_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_config_value(v) for v in value]
    return value


def _variable_values(inputs):
    """``inputs`` (an array, a Variable, or a list or tuple of them) with each Variable's value."""
    if isinstance(inputs, Variable):
        return inputs.numpy()
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(_variable_values(v) for v in inputs)
    return inputs


def _taking_image_data_format(init):
    """An __init__ with a ``data_format`` argument that takes Keras's global one
    (``keras.config.set_image_data_format``) where none is given, as Keras's layers do: a
    layer that computes channels-last only then says so, instead of reading the other layout."""
    from pyggml import backend

    @functools.wraps(init)
    def run(self, *args, **kwargs):
        if backend.image_data_format() == "channels_first" and kwargs.get("data_format") is None:
            try:
                given = inspect.signature(init).bind(self, *args, **kwargs).arguments.get("data_format")
            except TypeError:
                given = None
            if given is None:
                kwargs["data_format"] = "channels_first"
        return init(self, *args, **kwargs)
    run._formats = True
    return run


def _recording_arguments(init):
    """A user layer's __init__ that records the arguments of its outermost call (Keras 3's
    automatic config: a custom layer without get_config saves and loads when they are all
    basic values)."""
    @functools.wraps(init)
    def recording(self, *args, **kwargs):
        if "_auto_config" not in self.__dict__:
            try:
                bound = inspect.signature(init).bind(self, *args, **kwargs)
            except TypeError:
                bound = None
            auto = None
            if bound is not None:
                auto = {}
                for name, p in list(bound.signature.parameters.items())[1:]:
                    if name not in bound.arguments:
                        continue
                    if p.kind == p.VAR_KEYWORD:
                        auto.update(bound.arguments[name])
                    elif p.kind == p.VAR_POSITIONAL:
                        auto = None if bound.arguments[name] else auto
                    else:
                        auto[name] = bound.arguments[name]
                    if auto is None:
                        break
                if auto is not None and not _savable(auto):
                    auto = None
            object.__setattr__(self, "_auto_config", auto)
        return init(self, *args, **kwargs)
    recording._records = True
    return recording


def _compatible(built, given, last_only=False):
    """Shapes agree wherever both are known (None is a variable length): every axis after the
    batch, or with ``last_only`` the rank and the last axis."""
    if built is None or given is None:
        return True
    if isinstance(built, dict) or isinstance(given, dict):        # a dict (of dicts) of inputs' shapes
        return isinstance(built, dict) and isinstance(given, dict) and built.keys() == given.keys() and \
            all(_compatible(built[k], given[k], last_only) for k in built)
    if isinstance(built, list) or isinstance(given, list):
        return isinstance(built, list) and isinstance(given, list) and len(built) == len(given) and \
            all(_compatible(a, b, last_only) for a, b in zip(built, given))
    if len(built) != len(given):
        return False
    pairs = zip(built[1:][-1:], given[1:][-1:]) if last_only else zip(built[1:], given[1:])
    return all(a is None or b is None or a == b for a, b in pairs)


def _as_float(t):
    return ops.cast(t, "f32") if isinstance(t, Tensor) and t.dtype == "i32" else t


def _json_shape(value):
    """A shape (or a build argument) as a config holds it: tuples as lists."""
    if isinstance(value, (tuple, list)):
        return [_json_shape(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_shape(v) for k, v in value.items()}
    return value


def _record_build_arguments(layer, build, args, kwargs):
    """The arguments of a build called by hand (``layer.build((None, 8))``, a custom
    ``build(input_shape, layer_init)``), by name, for get_build_config."""
    sig = inspect.signature(build)
    try:
        named = dict(sig.bind(layer, *args, **kwargs).arguments)
    except TypeError:
        return
    named.pop(next(iter(sig.parameters)), None)          # self
    if named:
        layer.__dict__["_build_arguments"] = named


class Layer:
    """Base class of every layer (Keras's names, arguments and defaults)."""

    # True: the layer computes in float32 and takes integer tensors converted (a Dense on an
    # Input(dtype="int64"), as Keras promotes); the built-in computing layers set it
    float_inputs = False
    # whether the layer takes 5-D inputs, folded (pyggml._fold): a bool, or a method
    # ``takes_5d(self, shapes)`` (the inputs' Keras shapes) for a layer whose arguments decide
    takes_5d = False
    _dotted_names = False      # InputLayer's name may hold '.' (a CSV column's, "emp.var.rate"): no weights
    input_spec = None          # an InputSpec (or a list): checked before every call (Keras's)
    _config_activity_regularizer = False   # the config names it even when None (Keras's conv, RNN, ...)

    def __init__(self, name=None, trainable=True, dtype=None, input_shape=None, input_dim=None,
                 batch_input_shape=None, activity_regularizer=None, **kwargs):
        kwargs.pop("autocast", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments: {sorted(kwargs)}")
        if name is not None and (not isinstance(name, str) or not name or "\0" in name or len(name) > 200
                                 or not name.isprintable() or ("." in name and not self._dotted_names)):
            # ('.' parts a weight's name from its layer's: a layer without weights may have one)
            raise ValueError(f"layer name must be a printable str without '.' (1 to 200 chars), got {name!r}")
        if dtype not in (None, "float32", "mixed_float16", "mixed_bfloat16") and \
                getattr(dtype, "__name__", None) != "float32":
            # a mixed policy keeps float32 variables in Keras too: computed in float32 (pg.mixed_precision)
            raise ValueError(f"layers keep their weights and compute in float32 (a mixed policy computes in "
                             f"float32 too); dtype={dtype!r} is not supported")
        if "_sublayers" not in self.__dict__:        # (sublayers set before super().__init__() stay)
            object.__setattr__(self, "_sublayers", {})
        if "_variables" not in self.__dict__:        # (and Variables: Layer.__setattr__)
            self._variables = []
        self._given_name = name
        self.name = name
        self._policy = getattr(dtype, "name", dtype) if getattr(dtype, "name", dtype) in _MIXED_POLICIES else None
        self._trainable = bool(trainable)
        self.built = False
        self.input_shape = None
        self.output_shape = None
        self._batch_input_shape = None
        self._batch_size = None          # the batch of batch_input_shape (Keras's fixed batch size), or None
        self.input = self.output = None
        self.activity_regularizer = activity_regularizer
        self._call_losses = []           # the losses of the last call on arrays (Layer.losses)
        if batch_input_shape is not None:
            self._batch_input_shape = feature_shape_of(tuple(batch_input_shape)[1:], "batch_input_shape", True)
            first = tuple(batch_input_shape)[0]
            if first is not None:
                if not is_int(first) or first < 1:
                    raise ValueError(f"batch_input_shape: the batch size must be a positive int or None, "
                                     f"got {first!r}")
                self._batch_size = int(first)
        elif input_shape is not None:
            self._batch_input_shape = feature_shape_of(input_shape, "input_shape", True)
        elif input_dim is not None:
            self._batch_input_shape = feature_shape_of(input_dim, "input_dim")

    # --- sublayers ---------------------------------------------------------------------
    def __setattr__(self, name, value):
        if not name.startswith("_") and isinstance(getattr(type(self), name, None), KerasKernel) and \
                (sys._getframe(1).f_locals.get("self") is not self or
                 (getattr(type(self), "_keras_kernel_property", False) and not isinstance(value, Variable))):
            # a kernel set from outside (a hypernetwork's ``dense.kernel = w``) would be ignored by
            # the call, which computes with the weight the kernel views: refused (Keras's Dense and
            # ConvND have a property without a setter; its other layers use what is set, pyggml's
            # do not); a subclass's own weight (``self.kernel = self.add_weight(...)``) in its methods
            # is its attribute (where the Keras class has the property: a weight only)
            how = f"set its values with layer.{name}.assign(...), or compute the layer with ops and a kernel of " \
                  f"your own"
            if getattr(type(self), "_keras_kernel_property", False):
                raise AttributeError(f"property {name!r} of {type(self).__name__!r} object has no setter (as Keras's): "
                                     f"{how}")
            raise AttributeError(f"{type(self).__name__}.{name} views the layer's weight, which its call computes "
                                 f"with: a value set here would not be used (pyggml; Keras's {type(self).__name__} "
                                 f"would use it): {how}")
        if not name.startswith("_") and name not in ("input", "output") or \
                (name.startswith("_") and not name.startswith("__") and
                 isinstance(value, (Layer, list, tuple, dict)) and _layers_in(value, name) and _set_by_user_code()):
            # (Keras 3 tracks the layers of every attribute: keras_hub's ``self._self_attention_layer``;
            # pyggml's own code keeps its private ones untracked)
            if "_sublayers" not in self.__dict__:          # set before super().__init__() (Keras tracks it)
                object.__setattr__(self, "_sublayers", {})
            old = self.__dict__.get(name)
            if isinstance(old, np.ndarray) and old is not value and _scope.current() is None:
                # an array a call reads (a GNN's graph kept as an attribute) went into the graphs
                # made from the call as a constant: a new one makes them again, as Keras's call
                # reads the attribute each time
                layer_changed(self)
            value = _tracked(value, self, name)
            object.__setattr__(self, name, value)
            self._track(name, value)
            if isinstance(value, Variable) and value._layer is None and not getattr(value, "is_state", False):
                self._adopt(value)
            return
        object.__setattr__(self, name, value)

    def _adopt(self, variable):
        """A Variable made on its own (Keras's ``self.emb = keras.Variable(...)``) becomes a weight
        of this layer, as Keras tracks it (numbered if its name is taken)."""
        own = self.__dict__.setdefault("_variables", [])
        if any(v is variable for v in own):
            return
        used = {v.name for v in own}
        if variable.name in used:
            k = 1
            while f"{variable.name}_{k}" in used:
                k += 1
            variable.name = f"{variable.name}_{k}"
        variable._layer = self
        own.append(variable)

    def _track(self, name, value):
        """Record the layers attribute ``name`` holds (itself, or in a list, tuple or dict, nested:
        ``name.0``, ``name.key``) in place of what it held, keeping the attributes' order."""
        subs = self.__dict__["_sublayers"]
        found = [(p, l) for p, l in _layers_in(value, name) if l is not self]
        mine = [k for k in subs if k == name or k.startswith(name + ".")]
        if not found and not mine:
            return
        for path, layer in found:
            if layer._given_name is None and not layer._has_name():
                # Keras's: the kind's name, numbered among the layers held here (``ff_dense_1``);
                # the attribute names the layer's weights (``<attribute>.<weight>``)
                taken = {l.name for l in subs.values() if l is not layer and l._has_name()} | \
                    {l.name for _, l in found if l is not layer and l._has_name()}
                layer.name = _numbered(layer.kind(), taken)
        if mine and [(k, subs[k]) for k in mine] == found:
            return
        items, placed = [], False
        for k, v in subs.items():
            if k == name or k.startswith(name + "."):
                if not placed:
                    items += found
                    placed = True
            else:
                items.append((k, v))
        if not placed:
            items += found
        subs.clear()                        # the same dict (a subclassed model's call shares it)
        subs.update(items)

    @property
    def sublayers(self):
        """{attribute path: layer} of the layers this one holds."""
        return dict(self._sublayers)

    # --- naming and flags ----------------------------------------------------------------
    @classmethod
    def kind(cls):
        """The default name of this class's layers, in Keras's snake case."""
        return snake_case(cls.__name__)

    @property
    def given_name(self):
        """The name passed to the constructor, or None."""
        return self._given_name

    @property
    def name(self):
        """The layer's name: the one given, else the one its model gave it; before it is in a
        model, its class's default (``"dense"``), so that ``self.name + "_proj"`` works in an
        ``__init__`` as in Keras (the model still numbers it: ``"dense_1"``)."""
        n = self.__dict__.get("_name")
        return n if n is not None else self.kind()

    @name.setter
    def name(self, value):
        object.__setattr__(self, "_name", value)

    def _has_name(self):
        """True once a name was given or a model named the layer."""
        return self.__dict__.get("_name") is not None

    @property
    def trainable(self):
        return self._trainable

    @trainable.setter
    def trainable(self, value):
        # as Keras: freezing a layer freezes the layers inside it
        self._trainable = bool(value)
        for sub in self._sublayers.values():
            sub.trainable = value

    @property
    def activity_regularizer(self):
        """A regularizer of the layer's output (Keras's): its penalty, divided by the
        batch size, joins the training loss.  Settable, as in Keras."""
        return self.__dict__.get("_activity_regularizer")

    @activity_regularizer.setter
    def activity_regularizer(self, value):
        from pyggml import regularizers
        self.__dict__["_activity_regularizer"] = regularizers.get(value)

    # --- losses (regularization) -----------------------------------------------------------
    def add_loss(self, loss):
        """Add a scalar loss (a tensor computed in ``call``, or a number) to the loss the
        model trains on (Keras's ``add_loss``): call it inside ``call``.  A larger
        tensor is summed."""
        from pyggml.regularizers import penalty_tensor
        builder = _scope.current()
        if builder is None:
            raise RuntimeError(f"{type(self).__name__}.add_loss is called inside call(), while the model builds "
                               f"its graph (on a tensor computed there)")
        t = penalty_tensor(loss, f"{type(self).__name__}.add_loss's loss")
        add = getattr(builder, "add_loss", None)
        if add is not None:
            add(t, self)

    @property
    def losses(self):
        """The regularization penalties of this layer's trainable weights (and its
        sublayers') at their current values, after the losses (activity
        regularizers, ``add_loss``) of its last call on arrays: a list of floats."""
        from pyggml.layers import weight_rules
        tree = weight_rules.layer_tree([self])
        recorded = [x for l in tree for x in l.__dict__.get("_call_losses", ())]
        return recorded + weight_rules.current_penalties([self])

    # --- weights --------------------------------------------------------------------------
    # the positional orders: pyggml's (a name first) and Keras 3's (a shape first)
    _ADD_WEIGHT_ORDER = ("name", "shape", "initializer", "trainable", "dtype", "layout", "regularizer", "constraint")
    _ADD_WEIGHT_KERAS_ORDER = ("shape", "initializer", "dtype", "trainable", "autocast", "regularizer", "constraint",
                               "aggregation", "overwrite_with_gradient", "name")

    def add_weight(self, *args, **kwargs):
        """A new weight of this layer (a Variable): ``add_weight(name, shape, initializer,
        trainable)``; Keras 3's forms, ``add_weight(shape, initializer, dtype, trainable, ...,
        name=...)`` by position (a shape first) or keyword, work too.  ``layout`` says how the
        initializer counts fans: "out_in" (PyTorch's layouts, the default) or "in_out".
        ``regularizer`` (pyggml.regularizers) adds a penalty on the weight to the training loss;
        ``constraint`` (pyggml.constraints) projects it after every optimizer update.  Keras's
        ``autocast``, ``aggregation`` and ``overwrite_with_gradient`` are taken and have no
        effect here (one device, no mixed-precision casts of weights)."""
        order = self._ADD_WEIGHT_KERAS_ORDER if args and args[0] is not None and not isinstance(args[0], str) \
            else self._ADD_WEIGHT_ORDER
        if len(args) > len(order):
            raise TypeError(f"add_weight takes at most {len(order)} positional arguments, got {len(args)}")
        given = dict(zip(order, args))
        for k, v in kwargs.items():
            if k in given:
                raise TypeError(f"add_weight got multiple values for argument {k!r}")
            given[k] = v
        known = set(self._ADD_WEIGHT_ORDER) | set(self._ADD_WEIGHT_KERAS_ORDER)
        unknown = sorted(set(given) - known)
        if unknown:
            raise TypeError(f"add_weight got unexpected keyword arguments {unknown}")
        for k in ("autocast", "aggregation", "overwrite_with_gradient"):
            given.pop(k, None)
        if given.get("initializer") is None:
            given.pop("initializer", None)
        if "layout" not in given and _set_by_user_code():
            given["layout"] = "keras"      # a weight of the user's is in Keras's layout: Keras's fans
        return self._add_weight(**given)

    def add_variable(self, shape, initializer, dtype=None, trainable=True, autocast=True, regularizer=None,
                     constraint=None, name=None):
        """Keras 3's other name of ``add_weight``, its shape and initializer first."""
        return self.add_weight(shape=shape, initializer=initializer, dtype=dtype, trainable=trainable,
                               regularizer=regularizer, constraint=constraint, name=name,
                               layout="keras" if _set_by_user_code() else "out_in")

    def _add_weight(self, name=None, shape=None, initializer="glorot_uniform", trainable=True, dtype=None,
                    layout="out_in", regularizer=None, constraint=None):
        if name is not None and not isinstance(name, str):
            raise TypeError(f"add_weight: name must be a str, got {name!r}")
        from pyggml import constraints as constraints_mod, regularizers as regularizers_mod
        regularizer = regularizers_mod.get(regularizer)
        constraint = constraints_mod.get(constraint)
        dtype = _weight_dtype(dtype, trainable)
        if shape is None:
            raise ValueError("add_weight needs a shape")
        shape = (int(shape),) if is_int(shape) else tuple(shape)
        for d in shape:
            if not is_int(d) or d < 1:
                raise ValueError(f"add_weight: shape entries must be positive ints, got {shape}")
        if len(shape) > _fold.MAX_DIMS:
            raise ValueError(f"add_weight: at most {_fold.MAX_DIMS} dimensions, got {shape}")
        shape = tuple(int(d) for d in shape)
        if int(np.prod(shape)) > _MAX_WEIGHT_VALUES:
            raise ValueError(f"{self.name or type(self).__name__}: the weight of shape {shape} is too large "
                             f"(at most 2**30 values)")
        used = {v.name for v in self._variables}
        if name is None:
            k = len(self._variables)
            name = "variable" if k == 0 else f"variable_{k}"
        check_str("add_weight name", name)
        if not name or "\0" in name or len(name) > 200 or not name.isprintable():
            raise ValueError(f"add_weight: weight names are printable, 1 to 200 chars, got {name!r}")
        if name in used:
            # Keras keeps both (a subclass making its parent's weight again); names stay unique here
            # (they key get_weights and the saved tensors): the new one is numbered
            k = 1
            while f"{name}_{k}" in used:
                k += 1
            name = f"{name}_{k}"
        from pyggml import initializers
        initializers.get(initializer)              # an unknown name fails here, not at compile
        v = Variable.made(name, shape, initializer, trainable=trainable, layout=layout, layer=self, dtype=dtype)
        v.regularizer, v.constraint = regularizer, constraint
        self._variables.append(v)
        return v

    def __getattr__(self, name):
        # (only for names not found) a Sequential's layer whose input shape the model knows is
        # built when one of its weights is asked for (``model.layers[0].bias``), as Keras builds it
        # at once; anything else is the usual AttributeError
        d = self.__dict__
        if not name.startswith("_") and d.get("built") is False and BUILDERS and not d.get("_getattr_builds") \
                and self in BUILDERS:
            d["_getattr_builds"] = True
            try:
                built = build_through_owner(self) and d.get("built")
            except Exception:              # (a later layer's build failing: hasattr stays False)
                built = False
            finally:
                d.pop("_getattr_builds", None)
            if built:
                return object.__getattribute__(self, name)
        if hasattr(type(self), name):
            return object.__getattribute__(self, name)     # a property's own error ("... until it is built")
        # a weight by the name get_weights() gives it (an LSTM's ``weight_ih``, PyTorch's names)
        for v in d.get("_variables") or ():
            if v.name == name:
                return v
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _keras_list(self):
        """(to, back, length) where Keras's list of this layer's weights is not one array per weight
        (a recurrent layer's), known without reading the values; None here."""
        return None

    def named_variables(self):
        """[(name, Variable)]: this layer's weights, then its sublayers' (named
        ``<attribute>.<weight>``), in creation order."""
        if not self.built and BUILDERS:
            build_through_owner(self)   # a Sequential's layer: built as Keras builds it
        out = [(v.name, v) for v in self._variables]
        for attr, sub in self._sublayers.items():
            out.extend((f"{attr}.{n}", v) for n, v in sub.named_variables())
        return out

    # Keras's dtypes: pyggml keeps its weights and computes in float32 (pg.mixed_precision)
    @property
    def dtype(self):
        """The weights' dtype, ``"float32"`` (an InputLayer's: its input's)."""
        return self.__dict__.get("_dtype", "float32")

    @dtype.setter
    def dtype(self, value):
        self.__dict__["_dtype"] = value

    @property
    def compute_dtype(self):
        """What the layer computes in: ``"float32"`` (a mixed policy too)."""
        return "float32"

    @property
    def variable_dtype(self):
        return "float32"

    @property
    def dtype_policy(self):
        """The layer's DTypePolicy: the one given as ``dtype=``, else the global one (a quantized
        layer's: Keras's ``"int8_from_float32"``)."""
        from pyggml import mixed_precision
        if getattr(self, "quantization_mode", None):
            return QuantizedDTypePolicy(self.quantization_mode)
        policy = self.__dict__.get("_policy")
        return mixed_precision.Policy(policy) if policy else mixed_precision.global_policy()

    @property
    def variables(self):
        """Each variable once (a layer shared by two sublayers holds its weights once, as Keras's)."""
        seen = set()
        return [v for _, v in self.named_variables() if not (id(v) in seen or seen.add(id(v)))]

    weights = variables

    @property
    def trainable_variables(self):
        return [v for v in self.variables if v.trainable]

    @property
    def non_trainable_variables(self):
        return [v for v in self.variables if not v.trainable]

    @property
    def trainable_weights(self):
        return self.trainable_variables

    @property
    def non_trainable_weights(self):
        return self.non_trainable_variables

    def weight_names(self):
        return [n for n, _ in self.named_variables()]

    def count_params(self):
        return int(sum(v.size for v in self.variables))

    def stateless_call(self, trainable_variables, non_trainable_variables, *args, return_losses=False, **kwargs):
        """Keras's: the call on ``args`` with the given variable values (lists in the order and
        shapes of ``trainable_variables`` and ``non_trainable_variables``) in place of the
        layer's own, which it leaves as they were: ``(outputs, non_trainable_values)``, the
        latter what the call wrote to the non-trainable variables (``return_losses=True`` adds
        the losses the call added)."""
        from pyggml.layers._stateless import stateless_call
        return stateless_call(self, trainable_variables, non_trainable_variables, args, kwargs, return_losses)

    def get_weights(self):
        """{weight name: array} (copies); an int index gives the weights in order in Keras's
        layouts, as Keras's list (``layer.get_weights()[0]``: a Conv2D kernel (kh, kw, in, out))."""
        from pyggml.layers._keras_weights import LayerWeights
        return LayerWeights(self.named_variables())

    def set_weights(self, weights):
        """Set weights by name, as get_weights names them; or, as Keras, a list of arrays in the
        weights' order and Keras's layouts (a Dense kernel ``(in, units)``, a Conv kernel
        ``(k..., in, filters)``)."""
        weights = keras_list_by_name(self.named_variables(), weights, self.name or type(self).__name__,
                                     f" (built: {self.built})")
        if not isinstance(weights, dict):
            raise TypeError("set_weights takes a dict {name: array}, as get_weights returns, or a list of arrays "
                            "in the order of layer.weights")
        mine = dict(self.named_variables())
        for k in weights.keys():
            if k not in mine:
                raise ValueError(f"{self.name}: unknown weight {k!r}; it has {sorted(mine)}")
        for k, a in weights.items():
            mine[k].assign(a)

    # --- the contract -------------------------------------------------------------------------
    def build(self, input_shape):
        """Make the weights for inputs of this shape (Keras's: the batch is None)."""

    def call(self, inputs, training=None):
        """The computation, on tensors."""
        raise NotImplementedError(f"{type(self).__name__} must define call(self, inputs, training=None)")

    def _own_output_shape(self, shapes, spread):
        """The layer's own compute_output_shape for inputs given apart (``layer(x, lengths)``), as
        Keras 3 calls it: one parameter gets the first input's shape, several get one each."""
        if not spread:
            return self.compute_output_shape(shapes)
        try:
            params = [p for p in inspect.signature(self.compute_output_shape).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        if len(params) >= len(shapes):
            return self.compute_output_shape(*shapes)
        return self.compute_output_shape(shapes[0])

    def compute_output_shape(self, input_shape):
        """The output shape for an input shape; by default found by running call on shapes."""
        raise NotImplementedError

    # layers whose output keeps the input's steps set this: a padding mask passes through them
    supports_masking = False
    # layers whose compute_mask also works on arrays: their eager outputs carry ``_keras_mask``
    host_mask = False

    def compute_mask(self, inputs, mask=None):
        """The padding mask of the output (batch, steps; 1 for a real step), for a layer
        that makes or changes one; the default passes the input's through."""
        return mask

    def output_mask(self, inputs, mask, spread=False):
        """The mask of this layer's output: its compute_mask when it defines one, the
        input's when it supports masking (several inputs: the steps real in all), else None.
        ``spread``: called on several positional tensors (``layer(x, context)``), which Keras
        gives the first one's mask on, compute_mask seeing that input and its mask."""
        if spread and isinstance(inputs, list):
            inputs, mask = inputs[0], (mask[0] if isinstance(mask, list) else mask)
        if type(self).compute_mask is not Layer.compute_mask:
            return self.compute_mask(inputs, mask)
        if mask is None or not self.supports_masking:
            return None
        if isinstance(mask, list):
            present = [m for m in mask if m is not None]
            if not present:
                return None
            out = present[0]
            for m in present[1:]:
                out = out * m
            return out
        return mask

    # --- Keras 3's saving hooks (pyggml.saving.own_state asks the classes that define them) -------
    def save_own_variables(self, store):
        """Keras's: put this layer's state in ``store`` (a dict of arrays) when the model is
        saved; by default its weights, under "0", "1", ... in ``self.weights`` order."""
        for i, v in enumerate(self.weights):
            store[str(i)] = v.numpy()

    def load_own_variables(self, store):
        """Keras's: take back what ``save_own_variables`` stored, after the weights load."""
        weights = self.weights
        # (other keys are a subclass's own, which its override read before calling this one)
        if any(str(i) not in store for i in range(len(weights))):
            raise ValueError(f"{self.name}: load_own_variables expects {len(weights)} values '0'.."
                             f"'{len(weights) - 1}', got keys {sorted(store)}")
        for i, v in enumerate(weights):
            v.assign(np.asarray(store[str(i)]).reshape(v.shape))

    def save_assets(self, dir_path):
        """Keras's: write files (a vocabulary) into ``dir_path`` when the model is saved; they
        are kept in the model's file and given back to ``load_assets``."""

    def load_assets(self, dir_path):
        """Keras's: read back the files ``save_assets`` wrote, from ``dir_path``."""

    def get_build_config(self):
        """Keras's: what ``build_from_config`` needs to build the layer again (its input shape,
        or ``shapes_dict``: the arguments of a build called by hand with more than a shape), or
        None while it is not built."""
        given = self.__dict__.get("_build_arguments")
        if self.built and given is not None:
            if len(given) == 1:
                return {"input_shape": _json_shape(next(iter(given.values())))}
            return {"shapes_dict": {k: _json_shape(v) for k, v in given.items()}}
        shape = self.__dict__.get("_built_shape")
        if not self.built or shape is None:
            return None
        return {"input_shape": [list(s) if isinstance(s, tuple) else s for s in shape]
                if isinstance(shape, list) else list(shape)}

    def build_from_config(self, config):
        """Keras's: build from ``get_build_config``'s result."""
        if config and isinstance(config.get("shapes_dict"), dict):
            self.build(**{k: tuple(v) if isinstance(v, list) else v for k, v in config["shapes_dict"].items()})
            return
        if config and config.get("input_shape") is not None:
            shape = config["input_shape"]

            def dims_ok(s):
                return isinstance(s, (list, tuple)) and all(d is None or (is_int(d) and d >= 0) for d in s)
            if isinstance(shape, dict) and shape and all(dims_ok(s) for s in shape.values()):
                self.build({k: tuple(s) for k, s in shape.items()})        # a dict of inputs' shapes
                return
            if not (dims_ok(shape) or (isinstance(shape, (list, tuple)) and shape and
                                       all(dims_ok(s) for s in shape))):
                raise ValueError(f"build_from_config: input_shape must be a shape (a list of ints or None), a "
                                 f"list of shapes or a dict of them, got {shape!r}")
            self.build([tuple(s) for s in shape] if shape and isinstance(shape[0], (list, tuple)) else tuple(shape))

    def get_config(self):
        cfg = {"name": self.name, "trainable": self.trainable, "dtype": "float32"}
        if self._batch_input_shape is not None:
            cfg["batch_input_shape"] = (self._batch_size,) + tuple(self._batch_input_shape)
        if self.activity_regularizer is not None or self._config_activity_regularizer:
            from pyggml import regularizers
            cfg["activity_regularizer"] = None if self.activity_regularizer is None else \
                regularizers.serialize(self.activity_regularizer)
        if type(self).get_config is Layer.get_config and "_auto_config" in self.__dict__:
            auto = self.__dict__["_auto_config"]
            if auto is None:
                # as Keras 3: a config without the constructor's arguments would make another layer
                # (or none) when loaded or cloned
                raise NotImplementedError(
                    f"{type(self).__name__} has no get_config, and the arguments its constructor got cannot be "
                    f"kept automatically (only numbers, strings, None, lists and dicts of them, and "
                    f"regularizers, initializers and constraints can): define get_config() returning them "
                    f"(and from_config if they need rebuilding) to save, load or clone it")
            # as Keras 3: a layer of the user's without get_config saves its constructor's arguments
            cfg.update(_config_value(auto))
        return cfg

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        dtype = config.pop("dtype", None)
        if policy_mode(dtype) is not None:
            config["dtype"] = dtype            # a quantized layer's policy (Keras's "int8_from_float32")
        if cls.get_config is Layer.get_config and not cls.__module__.startswith("pyggml."):
            config = _from_config_value(config)          # an automatic config (see get_config)
        try:
            params = inspect.signature(cls.__init__).parameters
        except (TypeError, ValueError):
            params = None
        if params is None or any(p.kind == p.VAR_KEYWORD for p in params.values()):
            return cls(**config)
        # a constructor without **kwargs takes no name or trainable: set them after it
        extra = {k: config.pop(k) for k in list(config) if k not in params}
        extra = {k: v for k, v in extra.items() if k in ("name", "trainable", "batch_input_shape")}
        layer = cls(**config)
        if isinstance(extra.get("name"), str) and extra["name"]:
            layer.name = extra["name"]
        if isinstance(extra.get("trainable"), bool):
            layer.trainable = extra["trainable"]
        return layer

    # --- building ---------------------------------------------------------------------------
    @property
    def batch_input_shape(self):
        """The input shape given to the constructor (input_shape=...), without the batch."""
        return self._batch_input_shape

    @property
    def fixed_batch_size(self):
        """The batch size of the constructor's ``batch_input_shape`` (Keras's fixed batch), or None."""
        return self._batch_size

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and not cls.__module__.startswith("pyggml.") and not getattr(init, "_records", False):
            cls.__init__ = init = _recording_arguments(init)
        if init is not None and not getattr(init, "_formats", False) and \
                "data_format" in inspect.signature(init).parameters:
            cls.__init__ = _taking_image_data_format(init)
        own = cls.__dict__.get("build")
        if own is not None and not getattr(own, "_marks_built", False):
            ours = cls.__module__.startswith("pyggml.")

            # as Keras: a layer built by hand (``embedding.build((1,))`` before ``set_weights``, a
            # parent's build calling ``self.dense.build(shape)``) counts as built when first called;
            # a shape given as a list of ints (``RMSNormalization().build([5, 20, 30, 10])``) is one
            # shape, not several inputs, for pyggml's layers
            @functools.wraps(own)
            def build(self, *args, **kw):
                if ours and args and isinstance(args[0], list) and args[0] and all(
                        d is None or is_int(d) for d in args[0]):
                    args = (tuple(args[0]),) + args[1:]
                out = own(self, *args, **kw)
                if not self.__dict__.get("built"):
                    self.built = True
                if not self.__dict__.get("_in_build_once"):
                    _record_build_arguments(self, own, args, kw)      # (get_build_config's, as Keras's)
                return out
            build._marks_built = True
            cls.build = build

    # what a later call must share with the shape the layer was built for: None, every known
    # axis; "last", the rank and the last axis (weights made for the features, any length
    # between: Dense on sequences of another length, a convolution on larger images); "any",
    # nothing (Keras checks nothing; a custom layer's call checks what it needs)
    build_shape_rule = None

    def _fits_built(self, built, shape):
        rule = self.build_shape_rule
        if rule is None and not type(self).__module__.startswith("pyggml."):
            rule = "any"
        if rule == "any":
            return True
        if rule == "last":
            return _compatible(built, shape, last_only=True)
        return _compatible(built, shape)

    def _build_once(self, shape, spread=False):
        if self.built:
            built = self.__dict__.get("_built_shape")
            if isinstance(built, dict) and isinstance(shape, dict) and set(built) == set(shape):
                shape = {k: shape[k] for k in built}                  # a dict of inputs: by key
            if isinstance(built, dict) or isinstance(shape, dict):
                built = list(built.values()) if isinstance(built, dict) else built
                shape = list(shape.values()) if isinstance(shape, dict) else shape
            if built is not None and self.variables and not self._fits_built(built, shape):
                raise ValueError(f"layer {self.name or type(self).__name__} was built for inputs of shape "
                                 f"{built}, got {shape}")
            return
        self.__dict__["_in_build_once"] = True          # (the call's build: _built_shape records it)
        try:
            if self._build_takes_shape():
                if spread and isinstance(shape, list) and len(shape) > 1:
                    # call(self, x, other) given its inputs apart: Keras 3 gives build(input_shape) the
                    # first one's shape, and build(self, x_shape, other_shape) each one's
                    params = [p for p in inspect.signature(self.build).parameters.values()
                              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                    if len(params) == len(shape):
                        self.build(*shape)
                    else:
                        self.build(shape[0])
                else:
                    self.build(shape)
            else:
                self.build()                # as Keras 3: a build() of no arguments (keras-io's GRN)
        finally:
            self.__dict__.pop("_in_build_once", None)
        if getattr(_scope.current(), "shape_only", False):
            from pyggml.layers import tracing
            shape = tracing.generalized(shape)     # built while tracing: its variable lengths stay so
        self._built_shape = shape
        self.input_shape = shape
        self.built = True

    # a call of the user's code (a class outside pyggml, a Lambda's function, an op on symbolic
    # nodes): it gets volumes 5-D (pyggml._wide), and a result of batch * depth rows is 4-D there
    volumes_whole = False

    def sees_whole_volumes(self):
        return self.volumes_whole or not type(self).__module__.startswith("pyggml.")

    def _folds_5d(self, shapes):
        t = self.takes_5d
        if t is False and self.sees_whole_volumes():
            return True         # user code: its call gets the volume as a 5-D tensor (pyggml._wide)
        return bool(t(shapes) if callable(t) else t)

    def _training_default(self):
        """The default of ``training`` in this class's call signature when it is a bool (Keras
        uses it for a call given no training= and made outside any other layer's call), else None."""
        cache = type(self).__dict__.get("_training_default_cache")
        if cache is None:
            p = inspect.signature(type(self).call).parameters.get("training")
            cache = (p.default if p is not None and isinstance(p.default, bool) else None,)
            type.__setattr__(type(self), "_training_default_cache", cache)
        return cache[0]

    def _first_tensors(self, inputs):
        """The tensors of the first call in a graph, before the layer builds (a Sequential
        without an input takes their dtype)."""

    def _shapes_by_tracing(self, nodes):
        """Whether this call's output shapes come from running it on these nodes rather than from
        compute_output_shape (a model built on variable sizes, called on known ones)."""
        return False

    def _own_call_over_shapes(self):
        """A subclass of the user's overrides a built-in layer's call but not its output shape (a
        Dense whose call returns something else): the shape comes from running that call."""
        mro = type(self).__mro__
        call_owner = next(c for c in mro if "call" in c.__dict__)
        shape_owner = next(c for c in mro if "compute_output_shape" in c.__dict__)
        return not call_owner.__module__.startswith("pyggml.") and shape_owner is not call_owner and \
            issubclass(call_owner, shape_owner)

    def _build_takes_shape(self):
        try:
            params = list(inspect.signature(self.build).parameters.values())
        except (TypeError, ValueError):
            return True
        return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)

    def _accepts(self, param):
        cache = type(self).__dict__.get("_call_params")
        if cache is None:
            params = inspect.signature(type(self).call).parameters
            cache = (frozenset(params), any(p.kind == p.VAR_KEYWORD for p in params.values()))
            type.__setattr__(type(self), "_call_params", cache)
        return param in cache[0] or cache[1]

    def _mask_as_input(self, args, kwargs):
        """A mask given as a tensor (``layer(x, mask=m)``, or by position where call's parameter is
        ``mask``: gaugan's ``call(self, x, mask)``): one more input of the node, given back to call as
        ``mask`` (a graph's tensors are a node's inputs, never its options)."""
        m = kwargs.get("mask")
        if m is None and len(args) == 2 and not type(self).__module__.startswith("pyggml."):
            second = type(self).__dict__.get("_second_call_param")
            if second is None:                   # (worked out once per class)
                try:
                    params = [p.name for p in list(inspect.signature(type(self).call).parameters.values())[1:]
                              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                except (TypeError, ValueError):
                    params = []
                second = params[1] if len(params) >= 2 else ""
                type.__setattr__(type(self), "_second_call_param", second)
            if second == "mask":
                m, args = args[1], args[:1]
                kwargs = dict(kwargs, mask=m)
        if not isinstance(m, (Node, Tensor)) or len(args) != 1 or isinstance(args[0], (list, tuple, dict)):
            return args, kwargs
        kwargs = {k: v for k, v in kwargs.items() if k != "mask"}
        kwargs["_mask_input"] = True
        return (args[0], m), kwargs

    def _takes_positional(self, n):
        """Whether call() takes n inputs as separate positional arguments (a custom layer's
        ``call(self, inputs, encoder_outputs, mask=None)``)."""
        try:
            params = list(inspect.signature(type(self).call).parameters.values())[1:]
        except (TypeError, ValueError):
            return False
        if any(p.kind == p.VAR_POSITIONAL for p in params):
            return True
        # the inputs call() requires (no default): optional ones are options (Attention's flags);
        # a custom layer's call takes positional inputs as Keras 3 passes them, optional ones too
        custom = not type(self).__module__.startswith("pyggml.")
        required = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                    and (custom or p.default is p.empty) and p.name not in ("training", "mask")]
        return len(required) >= n > 1

    def _tensor_keywords_as_inputs(self, args, kwargs):
        """Keras 3's ``layer(logits, targets=t)`` or ``layer(logits=l, targets=t)`` on a custom
        layer: tensors given by the names of call's leading parameters join the positional inputs."""
        arrays = not args and any(isinstance(v, (np.ndarray, Variable)) for v in kwargs.values())
        if type(self).__module__.startswith("pyggml.") or \
                not (arrays or any(isinstance(v, (Node, Tensor)) for k, v in kwargs.items() if k != "mask")):
            return args, kwargs
        try:
            params = list(inspect.signature(type(self).call).parameters.values())[1:]
        except (TypeError, ValueError):
            return args, kwargs
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                 and p.name not in ("training", "mask")]
        args, kwargs = list(args), dict(kwargs)
        for name in names[len(args):]:
            # (an array by the first input's name too: Keras's eager ``patch_layer(images=x)``)
            if name not in kwargs or not (isinstance(kwargs[name], (Node, Tensor)) or
                                          (not args and isinstance(kwargs[name], (np.ndarray, Variable)))):
                break
            args.append(kwargs.pop(name))
        return tuple(args), kwargs

    def _bind_interleaved(self, args, kwargs):
        """A custom layer's tensors given in any of call's parameters, with options between
        them (keras-io hstu's ``encoder(emb, lengths, 50, num_targets=t)``): the tensors become
        the inputs, each given back to call() by its parameter's name (``_params``), and the
        options go by name too, as Keras binds a call's arguments."""
        if type(self).__module__.startswith("pyggml.") or "_params" in kwargs or "_spread" in kwargs:
            return args, kwargs
        try:
            sig = inspect.signature(type(self).call)
        except (TypeError, ValueError):
            return args, kwargs
        params = [p.name for p in list(sig.parameters.values())[1:]
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(args) > len(params):
            return args, kwargs
        bound = dict(zip(params, args))
        if any(k in bound for k in kwargs):
            return args, kwargs                  # (a parameter given twice: call() says so)
        bound.update((k, v) for k, v in kwargs.items() if k in params)

        def tensor(v):
            return isinstance(v, (Node, Tensor)) or type(v) is _wide.Wide
        names = [n for n in params if n in bound and tensor(bound[n]) and n not in ("training", "mask")]
        if len(names) < 2 or names == params[:len(names)] and \
                all(n not in bound or tensor(bound[n]) or params.index(n) >= len(names) for n in params):
            return args, kwargs                  # leading tensors, options after: the usual forms
        rest = {k: v for k, v in kwargs.items() if k not in bound}
        rest.update((n, bound[n]) for n in params if n in bound and n not in names)
        return tuple(bound[n] for n in names), dict(rest, _params=tuple(names), _spread=True)

    def _options_by_position(self, args, kwargs):
        """Keras 3 passes a call's arguments after the inputs as given: trailing numbers, flags,
        strings and None (``self.drop(x, training)``, focal modulation's ``block(x, h, w, c)``)
        go to call() by its parameters' names, not as more inputs."""
        if len(args) < 2 or not _is_option(args[-1]):
            return args, kwargs
        try:
            params = list(inspect.signature(type(self).call).parameters.values())[1:]
        except (TypeError, ValueError):
            return args, kwargs
        if any(p.kind == p.VAR_POSITIONAL for p in params):
            return args, kwargs
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        args, kwargs = list(args), dict(kwargs)
        while len(args) > 1 and _is_option(args[-1]) and len(args) - 1 < len(names) and \
                names[len(args) - 1] not in kwargs:
            name = names[len(args) - 1]
            kwargs[name] = args.pop()
        return tuple(args), kwargs

    def _first_by_keyword(self, args, kwargs):
        """``layer(inputs=x)``: the call's first parameter given by its name, as Keras binds it."""
        if args or not kwargs:
            return args, kwargs
        try:
            params = list(inspect.signature(type(self).call).parameters)
        except (TypeError, ValueError):
            return args, kwargs
        first = params[1] if len(params) > 1 else None
        if first is not None and first in kwargs:
            kwargs = dict(kwargs)
            return (kwargs.pop(first),), kwargs
        return args, kwargs

    def __call__(self, *args, **kwargs):
        args, kwargs = self._first_by_keyword(args, kwargs)
        args, kwargs = self._bind_interleaved(args, kwargs)
        args, kwargs = self._options_by_position(args, kwargs)
        args, kwargs = self._mask_as_input(args, kwargs)
        args, kwargs = self._tensor_keywords_as_inputs(args, kwargs)
        if not args:
            raise TypeError(f"{type(self).__name__} must be called on its inputs")
        inputs = args[0] if len(args) == 1 else list(args)
        if isinstance(inputs, tuple):
            inputs = list(inputs)            # Keras takes a tuple of inputs as it takes a list
        if len(args) > 1 and "_spread" not in kwargs and "_mask_input" not in kwargs and \
                self._takes_positional(len(args)):
            # Keras 3: layer(x, y) calls call(x, y) when call names that many inputs
            kwargs = dict(kwargs, _spread=True)
        if "_input_keys" in kwargs and not isinstance(inputs, list):
            raise TypeError(f"{type(self).__name__}: '_input_keys' is not a call argument")
        if isinstance(inputs, dict):
            # Keras passes a dict of inputs to call() as it is (nodes, tensors or arrays): it is
            # carried as a list and its keys, and call() gets the dict back
            if not inputs or not all(isinstance(k, str) for k in inputs):
                raise TypeError(f"{type(self).__name__}: a dict of inputs needs string keys and at least one "
                                f"input, got keys {list(inputs)!r}")
            if "_input_keys" in kwargs:
                raise TypeError(f"{type(self).__name__}: '_input_keys' is not a call argument")
            leaves = dict_leaves(inputs)           # a nested dict's inputs by their paths (Keras's tree)
            kwargs = dict(kwargs, _input_keys=[k for k, _ in leaves])
            inputs = [v for _, v in leaves]
        flat = flatten_inputs(inputs)
        if self.input_spec is not None:          # Keras's layer.input_spec, checked before every call
            from pyggml.layers.input_spec import assert_input_compatibility
            assert_input_compatibility(self.input_spec, flat, self.name)
        if all(isinstance(v, Node) for v in flat):
            return self._call_symbolic(inputs, flat, kwargs)
        tape = autodiff.active_tape()
        if tape is not None and not any(isinstance(v, Node) for v in flat):
            # recorded by a GradientTape: arrays become its constants, the result its tensors
            return self._call_on_tape(tape, inputs, kwargs)
        if all(isinstance(v, (Tensor, Variable)) for v in flat):
            return self._call_in_graph(inputs, kwargs)
        if any(type(v) is _wide.Wide for v in flat):
            return _call_on_wide(self, inputs, kwargs)
        if any(isinstance(v, Node) for v in flat):
            raise TypeError(f"{type(self).__name__}: inputs mix symbolic nodes, tensors and arrays")
        if _scope.current() is not None:
            # arrays in a graph being built (positions a custom layer made in build, given to its
            # Embedding in call): constants of this graph, and the layer's weights train
            return self._call_in_graph(_graph_constants(inputs), kwargs)
        if any(isinstance(v, Tensor) for v in flat):
            raise TypeError(f"{type(self).__name__}: inputs mix symbolic nodes, tensors and arrays")
        if any(isinstance(v, Variable) for v in flat):
            # weights among arrays (a stateful LSTM's states as another's initial_state): their values
            inputs = _variable_values(inputs)
        from pyggml.layers import eager
        # an array carrying Keras's eager mask (an Embedding(mask_zero=True)'s output): the mask
        # reaches call() and compute_mask(), and the outputs carry what compute_mask gives
        in_mask = getattr(inputs, "_keras_mask", None) if not isinstance(inputs, list) else None
        if isinstance(inputs, list) and any(getattr(x, "_keras_mask", None) is not None for x in inputs):
            # several inputs, some masked (merging a Masking output): one mask (or None) each
            in_mask = [None if getattr(x, "_keras_mask", None) is None else
                       np.asarray(x._keras_mask, dtype=np.float32) for x in inputs]
        if in_mask is not None and "mask" not in kwargs and self._accepts("mask"):
            kwargs = dict(kwargs, mask=in_mask if isinstance(in_mask, list) else np.asarray(in_mask))
        try:
            out = eager.run_layer(self, inputs, kwargs)
        except TypeError as e:
            out = _run_in_python(self, inputs, kwargs, e)
        if self.host_mask and isinstance(out, np.ndarray) and not isinstance(inputs, list):
            m = self.compute_mask(np.asarray(inputs))
            if m is not None:
                out._keras_mask = np.asarray(m, dtype=bool)      # Keras's eager output's mask
        elif isinstance(in_mask, list) and type(self).compute_mask is not Layer.compute_mask:
            m = self.compute_mask([np.asarray(x) for x in inputs], in_mask)
            if m is not None:
                _carry_masks(out, np.asarray(m) > 0.5)
        elif in_mask is not None and type(self).compute_mask is not Layer.compute_mask:
            _carry_masks(out, self.compute_mask(np.asarray(inputs), np.asarray(in_mask)))
        elif in_mask is not None and not isinstance(in_mask, list) and self.supports_masking:
            _carry_masks(out, np.asarray(in_mask) > 0.5)         # a layer the mask passes through
        elif type(self).compute_mask is not Layer.compute_mask and not isinstance(inputs, list):
            # a layer of the user's that makes a mask (a custom Embedding's compute_mask on the ids):
            # Keras's __call__ attaches it to the eager output; one written for graph tensors only
            # (not runnable on arrays) leaves the output without one, as before
            try:
                m = self.compute_mask(np.asarray(inputs), None)
            except Exception:
                m = None
            if m is not None:
                _carry_masks(out, m)
        return out

    def _call_on_tape(self, tape, inputs, kwargs):
        from pyggml.layers.weight_rules import record_call_losses
        inputs = autodiff.lift(tape, inputs)
        if any(type(v) is _wide.Wide for v in (inputs if isinstance(inputs, list) else [inputs])):
            return _call_on_wide(self, inputs, kwargs)       # a batch of volumes: folded for the model
        n_losses = len(tape.losses)
        out = self._call_in_graph(inputs, kwargs)
        # Keras's layer.losses after a call: this call's losses (tensors of the tape), by layer
        record_call_losses(self, tape.losses[n_losses:])
        return out

    def _call_in_graph(self, inputs, kwargs):
        builder = _scope.require(f"calling {type(self).__name__} on tensors")
        if kwargs.get("_mask_input") and isinstance(inputs, list) and len(inputs) == 2:
            kwargs = {k: v for k, v in kwargs.items() if k != "_mask_input"}
            inputs, kwargs["mask"] = inputs[0], inputs[1]           # (Layer._mask_as_input)
            if isinstance(kwargs["mask"], Variable):
                kwargs["mask"] = kwargs["mask"].graph_tensor()
            if isinstance(kwargs["mask"], Tensor) and kwargs["mask"].dtype == "i32":
                kwargs["mask"] = ops.cast(kwargs["mask"], "f32")       # a bool Input: 1 for a real step
        inputs = [v.graph_tensor() if isinstance(v, Variable) else v for v in inputs] \
            if isinstance(inputs, list) else (inputs.graph_tensor() if isinstance(inputs, Variable) else inputs)
        logical = _fold.take()       # the Keras shapes of 5-D (folded) inputs, where run_nodes gave them
        flat_in = inputs if isinstance(inputs, list) else [inputs]
        if logical is None:
            logical = _fold.noted(flat_in)            # volumes inside a custom layer's call
        volumes = logical is not None and any(_fold.folds(s) for s in logical)
        if volumes:
            if not self._folds_5d(logical):
                raise ValueError(_fold.refusal(self, logical))
            _fold.note(flat_in, logical)              # for the layers its call calls on them
        shapes = logical if logical is not None else \
            ([t.shape for t in inputs] if isinstance(inputs, list) else [inputs.shape])
        kwargs = dict(kwargs)
        keys = kwargs.pop("_input_keys", None)
        shapes = [(None,) + tuple(s[1:]) for s in shapes]
        shapes = shapes if isinstance(inputs, list) else shapes[0]
        if keys is not None:
            if not isinstance(inputs, list) or len(keys) != len(inputs):
                raise ValueError(f"{type(self).__name__}: {len(keys)} input names for the inputs given")
            inputs, shapes = nest_by_keys(keys, inputs), nest_by_keys(keys, shapes)
        if not self.built:
            self._first_tensors(inputs)
        if kwargs.get("_spread") and not type(self).__module__.startswith("pyggml."):
            self._build_once(shapes, True)       # inputs given apart: build gets the first's shape
        else:
            self._build_once(shapes)
        training = kwargs.pop("training", None)
        mask = kwargs.pop("mask", None)
        if keys is not None and isinstance(mask, list) and len(mask) == len(keys):
            mask = nest_by_keys(keys, mask)     # as Keras: the masks in the inputs' (nested) dict
        if self.float_inputs:
            inputs = [_as_float(t) for t in inputs] if isinstance(inputs, list) else _as_float(inputs)
        stack = _CALLS.__dict__.setdefault("training", [])
        if training is None:
            # Keras: the enclosing call's mode, else the call signature's default, else the graph's
            training = stack[-1] if stack else self._training_default()
            training = builder.training if training is None else training
        training = bool(training)
        if self._accepts("training"):
            kwargs["training"] = training
        spread = bool(kwargs.pop("_spread", False)) and isinstance(inputs, list)
        named = kwargs.pop("_params", None)       # the inputs' parameter names (_bind_interleaved)
        if spread and isinstance(mask, list):
            mask = mask[0]                    # as Keras: ``mask`` is the first input's
        if mask is not None and self._accepts("mask"):
            kwargs["mask"] = mask
        stack.append(training)
        custom = self.sees_whole_volumes()
        if custom and volumes:
            # a custom layer's (or subclassed model's) own ops see its volumes as 5-D (pyggml._wide):
            # a reshape, an index or a reduction on them is Keras's, not the folded tensor's
            inputs = _widened(inputs, logical)
        # a pyggml layer that user code calls: in a custom call, or in a GradientTape's block
        for_user = (_fold.caller_is_custom() and not custom) or _fold.called_from_a_tape()
        _fold.enter_call(custom)
        try:
            def run():
                if named is not None and spread:
                    return self.call(**dict(zip(named, inputs)), **kwargs)
                return self.call(*inputs, **kwargs) if spread else self.call(inputs, **kwargs)
            if logical is None and not _fold.active():
                out = run()
            else:
                with _fold.inputs(logical):       # (a sublayer of a layer given volumes gets None)
                    out = run()
                if volumes:
                    _fold.note_outputs(self, out, logical)
        finally:
            stack.pop()
            _fold.leave_call()
        out = _folded_volumes(self, out)
        _note_logits(self, inputs, out, training)
        if for_user and not volumes:
            # a volume it made from smaller inputs (a Reshape to 5-D) reaches that code 5-D, as the
            # volumes its own inputs hold do (pyggml._wide)
            out = _as_wide_volumes(out)
        if self.__dict__.get("_nested_outputs") is not None and isinstance(out, (list, tuple)):
            from pyggml.layers import tracing
            out = tracing.flat_leaves(out)          # a nest of outputs: its leaves, as its nodes are
        if isinstance(out, Variable) or (isinstance(out, (list, tuple)) and any(isinstance(o, Variable) for o in out)):
            # a call that returns a weight (Keras's ``return self.total``): its tensor here
            out = out.graph_tensor() if isinstance(out, Variable) else \
                type(out)(o.graph_tensor() if isinstance(o, Variable) else o for o in out)
        if isinstance(out, np.ndarray) or (isinstance(out, (list, tuple)) and
                                           any(isinstance(o, np.ndarray) for o in out)):
            # a call whose result is a value (ops on shapes and numbers compute at once): a constant
            out = _graph_constants(out if not isinstance(out, tuple) else list(out))
        if self.activity_regularizer is not None:
            self._add_activity_loss(builder, out)
        return out

    def _add_activity_loss(self, builder, out):
        """Keras 3: the activity regularizer's penalty of each output, divided by its batch size."""
        from pyggml.regularizers import penalty_tensor
        add = getattr(builder, "add_loss", None)
        if add is None:
            return
        for o in flatten_inputs(out):
            if isinstance(o, Tensor):
                p = penalty_tensor(self.activity_regularizer(o), f"{self.name}'s activity regularizer")
                add(ops_scale(p, 1.0 / o.shape[0]) if o.shape and o.shape[0] > 1 else p, self)

    def _call_symbolic(self, inputs, nodes, kwargs):
        kwargs = dict(kwargs)
        for k, v in kwargs.items():
            if isinstance(v, (Node, Tensor, Variable)):
                raise TypeError(f"{type(self).__name__}: tensor argument {k!r}: pass tensors as inputs")
        shapes = [n.shape for n in nodes] if isinstance(inputs, list) else inputs.shape
        if kwargs.get("_mask_input"):
            shapes = nodes[0].shape                     # built for the input, not its mask
        if isinstance(inputs, list) and len(nodes) != len(inputs):
            raise TypeError(f"{type(self).__name__}: nested lists of inputs are not supported")
        keys = kwargs.get("_input_keys")
        if keys is not None and (not isinstance(inputs, list) or len(keys) != len(inputs)):
            raise ValueError(f"{type(self).__name__}: {len(keys)} input names for the inputs given")
        shapes = nest_by_keys(keys, shapes) if keys is not None else shapes
        if any(n.ndim > 4 for n in nodes):
            if not self._folds_5d([n.shape for n in nodes]):
                raise ValueError(_fold.refusal(self, [n.shape for n in nodes]))
        if kwargs.get("_spread") and not type(self).__module__.startswith("pyggml."):
            self._build_once(shapes, True)       # inputs given apart: build gets the first's shape
        else:
            self._build_once(shapes)
        from pyggml.layers import tracing
        own_shapes = type(self).compute_output_shape is not Layer.compute_output_shape and \
            not self._own_call_over_shapes()
        traced = None
        if own_shapes and self._shapes_by_tracing(nodes):
            try:
                traced = tracing.output_shapes(self, inputs, kwargs, with_masks=True)
            except Exception:          # (the shapes it says, as before)
                traced = None
        if traced is not None:
            out_shapes, dtypes, flags = traced
        elif own_shapes:
            out_shapes = self._own_output_shape(shapes, kwargs.get("_spread") and isinstance(shapes, list))
            dtypes = None
            flags = tracing.output_mask_flags(self, inputs, kwargs,
                                              len(out_shapes) if isinstance(out_shapes, list) else 1)
        else:
            out_shapes, dtypes, flags = tracing.output_shapes(self, inputs, kwargs, with_masks=True)
        multi = isinstance(out_shapes, list)
        out_list = out_shapes if multi else [out_shapes]
        if any(isinstance(s, tuple) and _fold.folds(s) for s in out_list) and \
                not self._folds_5d([n.shape for n in nodes]):
            raise ValueError(f"{type(self).__name__} ({self.name}): an output of shape {out_shapes} has 5 dimensions "
                             f"or more, "
                             f"which only the layers that fold volumes make: {', '.join(_fold.FIVE_D_LAYERS)}")
        outs = []
        for i, s in enumerate(out_list):
            s = tuple(s)
            dt = dtypes[i] if dtypes else getattr(self, "output_dtype", "float32")
            node = Node(feature_shape_of(s[1:], "output shape", allow_none=True, allow_empty=True), self, nodes, index=i,
                        dtype=dt, call_kwargs=kwargs, list_input=isinstance(inputs, list))
            node.has_mask = bool(flags[i]) if flags and i < len(flags) else False   # its layer's output mask
            outs.append(node)
        # the model's fixed batch size (Keras's Input(batch_size=...)) goes on with the data
        batch = next((n.batch_size for n in nodes if n.batch_size is not None), None)
        for o in outs:
            o.batch_size = batch
        self.output_shape = out_shapes
        out = outs if multi else outs[0]
        keys = self.__dict__.get("_dict_output_keys") or getattr(self, "_output_keys", None)
        nest = self.__dict__.get("_nested_outputs")
        if multi and nest is not None:
            out = tracing.rebuild(nest, outs)       # a call that returns a nest gives its nodes so
        elif multi and keys is not None and len(keys) == len(outs):
            out = dict(zip(keys, outs))             # a call that returns a dict gives its nodes so
        elif multi and (self.__dict__.get("_output_structure") or {}).get("tuple") is True and \
                len(self._output_structure.get("list", ())) == len(outs):
            out = tuple(outs)                       # a model whose outputs were given as a tuple
        self.input, self.output = inputs, out
        return out

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"
