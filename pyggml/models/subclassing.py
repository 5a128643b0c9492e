"""Keras's model subclassing: a ``pg.Model`` subclass makes its layers in
``__init__`` and writes the forward pass in ``call``, with no inputs given.

Its graph is made on the first data (``fit``, ``evaluate``, ``predict``, calling
it on arrays or on ``pg.Input`` nodes) or by ``build(input_shape)``: one Input per
array (an int array gives an int32 Input, as Embedding indices need), then the
model's ``call`` as the one layer of the graph (its weights are the model's own,
named ``<model name>.<attribute>...``).  ``compile`` before that waits for the
graph.  The architecture is code, not config: ``save_weights``/``load_weights``
move the weights; ``save`` and ``get_config`` are refused, naming the class.

``install(Model)`` adds this to the Model class (it keeps pyggml/models/model.py
to the functional graph).
"""

import functools
import itertools

import numpy as np

from pyggml import optimizers as optimizers_mod
from pyggml.core import Tensor
from pyggml.layers.input_layer import Input
from pyggml.layers.layer import Layer, dict_leaves, flatten_inputs, nest_by_keys, snake_case, training_context
from pyggml.layers.node import Node
from pyggml.models import functional
from pyggml.variables import Variable

__all__ = ["install", "SubclassedCall", "finish_compile"]


class SubclassedCall(Layer):
    """A subclassed model's ``call`` as the one layer of its graph; its weights are the
    model's own (its sublayers' and add_weight's)."""

    takes_5d = True             # volumes reach the call folded; its layers know them (pyggml._fold)

    def __init__(self, model):
        super().__init__(name=model.name)
        object.__setattr__(self, "_sublayers", model.__dict__["_sublayers"])
        object.__setattr__(self, "_variables", model.__dict__["_variables"])
        object.__setattr__(self, "_owner", model)

    def _training_default(self):
        return self.__dict__["_owner"]._training_default()

    def call(self, inputs, training=None):
        model = self.__dict__["_owner"]
        user_call = type(model).call
        if model._accepts("training"):
            return user_call(model, inputs, training=training)
        return user_call(model, inputs)

    def get_config(self):
        _refuse_config(self.__dict__["_owner"])


def _defines_call(model):
    """Whether the model's call is its subclass's own."""
    return _defines(model, "call", "pyggml.models")


def _defines(model, method, ours="pyggml."):
    """Whether ``method`` of the model is its subclass's own (not from the modules ``ours``)."""
    owner = next((c for c in type(model).__mro__ if method in c.__dict__), None)
    return owner is not None and not owner.__module__.startswith(ours)


def _holder(model):
    """A user's model subclass with no call and no graph (a GAN of the models it holds, stepped
    by its own train_step): saved by its constructor's arguments and its weights."""
    return model.__dict__.get("_topology") is None and not model.__dict__.get("_subclassed") and \
        "_seq_input_shape" not in model.__dict__ and not _defines_call(model) and \
        not type(model).__module__.startswith("pyggml.")


def _is_pending(model):
    """A model whose graph waits for data: a subclassed one, or a Sequential without an input shape."""
    if model.__dict__.get("_subclassed", False):
        return model.__dict__.get("_topology") is None
    awaits = getattr(model, "_awaits_data", None)
    return awaits is not None and awaits()


def finish_compile(model):
    """The compile that waited for the graph: pyggml's own (a subclass's compile of another
    signature, a GAN's compile(d_optimizer, g_optimizer, loss_fn), called it through super())."""
    pending = model.__dict__.pop("_pending_compile", None)
    if pending is not None:
        args = model.__dict__.get("_compile_args")
        own = next(c.__dict__["compile"] for c in type(model).__mro__
                   if "compile" in c.__dict__ and c.__module__.startswith("pyggml."))
        own(model, **pending)
        if model.__dict__.pop("_loss_defaulted_pending", False) and model._compile_spec is not None:
            model._compile_spec.loss_defaulted = True        # compile() was given no loss
            model._compile_args = args


def _refuse_config(model):
    raise TypeError(f"{type(model).__name__} is a subclassed model whose constructor takes values a config cannot "
                    f"hold (or none were recorded): give it get_config/from_config as Keras asks, or save its "
                    f"weights (save_weights, then load_weights on a model made by the same code)")


def _subclassed_config(model, own):
    """A subclassed model's config, as Keras 3 saves one: its name and trainable flag, the
    arguments its constructor was given (basic values, recorded; unless the class has its own
    get_config, which extends this), and beside them the shapes its graph was built for."""
    cfg = {"name": model.name, "trainable": model.trainable}
    if not own:
        auto = model.__dict__.get("_auto_config")
        if auto is None and all("__init__" not in c.__dict__ for c in type(model).__mro__
                                if c.__module__.split(".")[0] != "pyggml" and c is not object):
            auto = {}                   # no constructor of its own: nothing to record (Keras's {} too)
        if auto is None:
            _refuse_config(model)
        from pyggml.layers.layer import _config_value
        cfg.update(_config_value(auto))         # numpy numbers as numbers, regularizers serialized
    build = build_config(model)
    if build is not None:
        cfg["pyggml_build"] = build
    return cfg


def build_config(model):
    """The shapes (and dtypes) a subclassed model's graph was built for, or None if not built."""
    topo = model.__dict__.get("_topology")
    if topo is None:
        return None
    return {"specs": [[list(n.feature_shape), n.dtype] for n in topo.inputs],
            "keys": model.__dict__.get("_dict_input_keys"), "many": bool(model._multi_in)}


def _constructor_arguments(klass, config):
    """config for klass(**config): Keras's own keys (name, trainable, dtype) left out where the
    constructor takes neither them nor **kwargs, as Keras 3's auto config leaves them out."""
    import inspect
    try:
        params = inspect.signature(klass.__init__).parameters
    except (TypeError, ValueError):
        return config
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return config
    return {k: v for k, v in config.items() if k in params or k not in ("name", "trainable", "dtype")}


def build_saved(model, build):
    """Make a loaded subclassed model's graph for the shapes it was saved with."""
    specs = [(tuple(s), d) for s, d in build["specs"]]
    keys = [tuple(k) if isinstance(k, list) else k for k in build.get("keys") or ()]     # (JSON's lists)
    build_graph(model, dict(zip(keys, specs)) if keys else specs, bool(build.get("many")))


def dict_keys(d):
    """[(key, value)] of a dict of inputs (Layer's ``dict_leaves``: a nested dict's input by the
    tuple of keys down to it), a top-level key as a string (the graph's input is named by it)."""
    return [(k if isinstance(k, tuple) else str(k), v) for k, v in dict_leaves(d)]


def _spec_of(a, what="x"):
    """(feature shape, dtype) of an Input for the array ``a`` (a batch of rows)."""
    a = np.asarray(a)
    if a.ndim < 1:
        raise ValueError(f"{what}: arrays with a batch axis expected, got a scalar")
    if a.dtype.kind not in "biufUSO":
        raise TypeError(f"{what}: expected numbers or strings, got dtype {a.dtype}")
    if a.dtype.kind in "biuUSO":
        # ids and strings (n,) reach the call as Keras gives them (a GNN's node indices to
        # ops.take, a recommender's user ids to its StringLookup)
        return a.shape[1:], "string" if a.dtype.kind in "USO" else "int32"
    return a.shape[1:] or (1,), "float32"   # a float column (n,) enters as (n, 1), as the data adapter takes it


def build_graph(model, specs, many, from_build=False):
    """Make the graph for inputs of these (feature shape, dtype); compile if it waited.
    ``specs`` is a list, or a dict by name for a call that takes a dict (its inputs named so).
    ``from_build``: the shapes are build(input_shape)'s, which in Keras makes weights only: a
    one-axis input's length is variable too where the layers allow (an LM built on (16, 32)
    and then called on one token at a time)."""
    if model._topology is not None:
        return
    keys = list(specs) if isinstance(specs, dict) else None
    if keys is not None:
        specs = list(specs.values())

    def given(items):                 # what the call receives: one, a list, or a dict (of dicts) by name
        return nest_by_keys(keys, items) if keys is not None else (list(items) if many else items[0])

    if _defines(model, "build") and not model.__dict__.get("_own_build_called"):
        # Keras calls a subclass's own build(input_shape) before its first call (layers made
        # there); its super().build() may make the graph itself
        model.__dict__["_own_build_called"] = True
        model.__dict__["_in_own_build"] = True
        try:
            model.build(given([(None,) + tuple(shape) for shape, _ in specs]))
        finally:
            model.__dict__.pop("_in_own_build", None)
        if model._topology is not None:
            return
    names = [("_".join(k) if isinstance(k, tuple) else k) for k in keys] if keys else [None] * len(specs)
    ins = [Input(shape=tuple(shape), dtype=dtype, name=n) for (shape, dtype), n in zip(specs, names)]
    # traced in inference mode: a call whose outputs differ in training (keras-io's DeiT gives two
    # heads then) has the structure predict and evaluate give
    with training_context(False):
        out = SubclassedCall(model)(given(ins))    # builds the layers for these shapes
    # Keras's subclassed model takes batches of other lengths later (padded text batches): the
    # lengths (every axis of token ids, the axes before the features of floats) are variable
    # when the layers, built above, take a variable length too; else the shapes stay
    loose = [(tuple(None for _ in shape) if dtype == "int32" or (from_build and len(shape) == 1)
              else (None,) * (len(shape) - 1) + tuple(shape[-1:]), dtype)
             if dtype != "string" and len(shape) >= (1 if dtype == "int32" or from_build else 2) else (tuple(shape), dtype)
             for shape, dtype in specs]
    if loose != [(tuple(shape), dtype) for shape, dtype in specs]:
        try:
            loose_ins = [Input(shape=shape, dtype=dtype, name=n) for (shape, dtype), n in zip(loose, names)]
            with training_context(False):
                loose_out = SubclassedCall(model)(given(loose_ins))
            ins, out = loose_ins, loose_out
        except (ValueError, TypeError, IndexError, MemoryError):
            pass              # (a host layer's probe of the stand-in lengths may not fit in memory)
    model._multi_in = bool(many) or keys is not None
    model._multi_out = isinstance(out, (list, tuple, dict))
    if isinstance(out, dict):            # a call returning a dict (keras-io's AdaIN): predict gives one
        model._output_keys = functional.output_keys(out)
        out = list(out.values())
    elif isinstance(out, (list, tuple)):
        out = functional.flat_outputs(model, out)     # a nest (CaiT's (logits, {name: attn})): kept
    model._topology = functional.Topology(ins, list(out) if model._multi_out else [out])
    if keys is not None and any(isinstance(k, tuple) for k in keys):
        # a nested dict of inputs: data is matched by each input's keys, as a functional model's
        model._topology.input_paths = [k if isinstance(k, tuple) else (k,) for k in keys]
    model.built = True
    finish_compile(model)


def build_for(model, x):
    """The graph from a first batch of data: arrays, a list of them, a dataset of (x, y)
    batches or a PyDataset (its first batch)."""
    if not _is_pending(model) or x is None:
        return x
    first = x
    if not isinstance(x, (np.ndarray, list, tuple, dict)) and not np.isscalar(x):
        if hasattr(x, "__array__") and not hasattr(x, "__next__"):
            first = np.asarray(x)           # a DataFrame, a Series, a torch tensor: an array (Keras's)
        elif hasattr(x, "__getitem__") and hasattr(x, "__len__"):
            first = x[0]
        elif hasattr(x, "__iter__") and not hasattr(x, "__next__"):
            first = next(iter(x))
        elif hasattr(x, "__next__"):
            # a generator: its first batch builds the model, then goes first again (Keras peeks too)
            try:
                item = next(x)
            except StopIteration:
                raise ValueError(f"{type(model).__name__} is not built yet and the generator yields no batch "
                                 f"to build it from") from None
            x = itertools.chain([item], x)
            first = item
        else:
            raise ValueError(f"{type(model).__name__} is not built yet and {type(x).__name__} cannot be looked "
                             f"at ahead: call model.build(input_shape) first")
        if isinstance(first, list) and any(c.__module__.startswith("torch.utils.data") for c in type(x).__mro__):
            first = tuple(first)            # a torch DataLoader's batch: [x, y] is (x, y), as Keras reads it
        if isinstance(first, tuple):
            first = first[0]
    many = isinstance(first, (list, tuple))
    if not model.__dict__.get("_subclassed", False):
        if many or isinstance(first, dict):
            raise TypeError(f"{model.name}: a Sequential takes one input array, got a list")
        model._build_from(first)                     # a Sequential built on its first data
        finish_compile(model)
        return x
    if isinstance(first, dict):         # a call on a dict of inputs: the graph's inputs named by its keys
        leaves = dict_keys(first)
        model.__dict__["_dict_input_keys"] = [k for k, _ in leaves]
        build_graph(model, {k: _spec_of(v, f"x[{k!r}]") for k, v in leaves}, True)
        return x
    build_graph(model, [_spec_of(a) for a in (list(first) if many else [first])], many)
    return x


def install(cls):
    """Add model subclassing to ``cls`` (pg.Model)."""
    init, ensure, compile_, call_, get_config = (cls.__init__, cls._ensure_graph, cls.compile, cls.__call__,
                                                 cls.get_config)

    @functools.wraps(init)
    def __init__(self, inputs=None, outputs=None, name=None, **kwargs):
        init(self, inputs, outputs, name=name, **kwargs)
        self._subclassed = inputs is None and outputs is None and _defines_call(self)
        if self._subclassed and name is None:
            self.name = snake_case(type(self).__name__)          # as Keras: "recommender_net"

    @functools.wraps(ensure)
    def _ensure_graph(self):
        if self.__dict__.get("_subclassed", False) and _is_pending(self):
            raise ValueError(f"{type(self).__name__} is not built yet: its graph is made on the first data "
                             f"(fit, predict, evaluate, calling it) or by build(input_shape)")
        return ensure(self)

    def build(self, input_shape):
        """A subclassed model's graph for float32 inputs of ``input_shape`` (the batch first;
        a list of shapes for several inputs)."""
        if not _is_pending(self) or self.__dict__.get("_in_own_build"):
            # (inside its own build(), which the first data called: the graph is made next, for the
            # data's shapes and dtypes)
            return
        if _defines(self, "build"):
            # reached through super().build() in the class's own build, which is running: not again
            self.__dict__["_own_build_called"] = True
        if isinstance(input_shape, dict):        # a call taking a dict: Keras's build of its shapes
            build_graph(self, {k: (tuple(s)[1:], "float32") for k, s in input_shape.items()}, True,
                        from_build=True)
            return
        many = isinstance(input_shape, list) and bool(input_shape) and isinstance(input_shape[0], (list, tuple))
        build_graph(self, [(tuple(s)[1:], "float32") for s in (input_shape if many else [input_shape])], many,
                    from_build=True)

    @functools.wraps(compile_)
    def compile(self, optimizer="adam", loss="categorical_crossentropy", metrics=None, loss_weights=None,
                backend="auto", seed=None, weighted_metrics=None, **kwargs):
        if _is_pending(self):
            self.check_alive()
            self.optimizer = optimizers_mod.get("adam" if optimizer is None else optimizer)   # compiled later
            self._pending_compile = dict(optimizer=self.optimizer, loss=loss, metrics=metrics,
                                         loss_weights=loss_weights, backend=backend, seed=seed,
                                         weighted_metrics=weighted_metrics, **kwargs)
            return self
        return compile_(self, optimizer, loss, metrics, loss_weights, backend, seed, weighted_metrics, **kwargs)

    @functools.wraps(call_)
    def __call__(self, *args, **kwargs):
        if _holder(self):
            raise NotImplementedError(f"{type(self).__name__} defines no call(self, inputs): a model called on data "
                                      "needs one (its train_step may use the models it holds without it)")
        args, kwargs = self._first_by_keyword(args, kwargs)      # model(inputs=x): as model(x)
        if args and isinstance(args[0], (list, tuple)) and args[0] and \
                all(isinstance(v, (int, float, np.number)) for v in args[0]):
            args = (np.asarray(args[0]),) + args[1:]   # model([1, 10, 100]), gnn_citations' node ids: one array
        if args and _is_pending(self):
            leaves = dict_keys(args[0]) if isinstance(args[0], dict) else None
            first = [v for _, v in leaves] if leaves is not None else args[0]
            flat = flatten_inputs(first)
            if all(isinstance(v, Node) for v in flat):              # model(pg.Input(...)): on its shape
                if self.__dict__.get("_subclassed", False) and leaves is not None:
                    # a dict of Inputs (a preprocessing model's): its call gets the dict, as Keras's
                    self.__dict__["_dict_input_keys"] = [k for k, _ in leaves]
                    build_graph(self, {k: (v.feature_shape, v.dtype) for k, v in leaves}, True)
                elif self.__dict__.get("_subclassed", False):
                    build_graph(self, [(v.feature_shape, v.dtype) for v in flat], isinstance(first, list))
                elif len(flat) == 1:                                  # a Sequential: that input's shape and dtype
                    self._set_features(flat[0].feature_shape)
                    self._seq_input_dtype = flat[0].dtype
            elif not any(isinstance(v, (Tensor, Variable)) for v in flat) and not \
                    (not self.__dict__.get("_subclassed", False) and self.host):
                build_for(self, args[0])      # (preprocessing alone runs on arrays of any shape: one image)
        return call_(self, *args, **kwargs)

    @functools.wraps(get_config)
    def _get_config(self):
        if self.__dict__.get("_subclassed") or _holder(self):
            own = next(c for c in type(self).__mro__ if "get_config" in c.__dict__) is not cls
            return _subclassed_config(self, own)
        return get_config(self)

    from_config_ = cls.from_config.__func__

    @classmethod
    def _from_config(klass, config, custom_objects=None):
        if "layers" not in config and klass is not cls:
            # a subclassed model: its constructor's arguments (Keras's), then the graph for the
            # shapes it was saved with (a model nested in a functional one is rebuilt so too)
            config = dict(config)
            build = config.pop("pyggml_build", None)
            # its serialized objects made again: the automatic config's, and the layers and models a
            # get_config of its own returned (saved serialized, as Keras 3 saves them)
            from pyggml.layers.layer import _from_config_value
            config = _from_config_value(config)
            model = klass(**_constructor_arguments(klass, config))
            if build is not None and model.__dict__.get("_subclassed") and model._topology is None:
                build_saved(model, build)
            return model
        return from_config_(klass, config, custom_objects)

    def with_build(method):
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            x = args[0] if args else kwargs.get("x")
            seen = build_for(self, x)
            if seen is not x:                   # a generator peeked at: its first batch put back
                if args:
                    args = (seen,) + args[1:]
                else:
                    kwargs["x"] = seen
            return method(self, *args, **kwargs)
        return run

    cls.__init__, cls._ensure_graph, cls.build, cls.compile, cls.__call__, cls.get_config = (
        __init__, _ensure_graph, build, compile, __call__, _get_config)
    cls.from_config = _from_config
    for name in ("fit", "evaluate", "predict", "train_on_batch", "test_on_batch", "predict_on_batch"):
        setattr(cls, name, with_build(getattr(cls, name)))
    return cls
