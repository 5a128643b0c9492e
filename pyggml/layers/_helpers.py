"""Helpers the built-in layers share (not part of the layer contract)."""

from pyggml import _scope, activations, ops
from pyggml.layers.layer import Layer, layer_changed

__all__ = ["Activated", "contiguous", "rows_2d", "fused", "fusable", "cached", "set_weight_options",
           "weight_options_config"]

# the activations the fused ops apply themselves: {name: (the op's name, alpha)}
_FUSABLE = {"linear": ("linear", 0.0), "relu": ("relu", 0.0), "tanh": ("tanh", 0.0),
            "sigmoid": ("sigmoid", 0.0), "elu": ("elu", 1.0), "leaky_relu": ("leaky_relu", 0.2)}


def fused():
    """True while a graph computed on the CPU is being built: pyggml's fused CPU ops may
    be used (pyggml._scope.fused); otherwise the layers build their composed forms."""
    return _scope.fused()


def contiguous(x):
    return x if x.is_contiguous else ops.cont(x)


def rows_2d(x):
    """(d0, ..., dk, c) -> (d0 * ... * dk, c): ggml's mul_mat trains only with a 2-D weight."""
    return ops.flatten_rows(x)


def cached(key, variable, make):
    """``make()``, once per graph for this (key, variable): a weight in another layout,
    shared by every call of a layer in one graph."""
    cache = _scope.require("a layer").cache.setdefault(key, {})
    hit = cache.get(id(variable))
    if hit is None or hit[0] is not variable:
        hit = cache[id(variable)] = (variable, make())
    return hit[1]


class Activated(Layer):
    """A layer whose output goes through ``activation``.  ``pre_activation``
    is its output before it: a loss that can take logits (cross-entropy after
    softmax or sigmoid) trains on those, which is stabler."""

    def __init__(self, activation=None, **kwargs):
        super().__init__(**kwargs)
        self._act = activations.get(activation)
        self._activation_name = activations.name_of(activation)

    @property
    def activation(self):
        """The activation function, as Keras gives it (``layer.activation.__name__`` is its
        name; ``activation_name`` is the name the config keeps).  Settable, as in Keras:
        grad_cam's ``model.layers[-1].activation = None`` makes the model give logits (the
        graphs of the models holding the layer are made again)."""
        return self._act

    @property
    def activation_name(self):
        """The activation's name, as saved in the config ('linear' for none)."""
        return self._activation_name

    @activation.setter
    def activation(self, value):
        act, name = activations.get(value), activations.name_of(value)
        if "_activation_name" in self.__dict__ and (act is not self._act or name != self._activation_name):
            self._act, self._activation_name = act, name
            layer_changed(self)
        self._act, self._activation_name = act, name

    def pre_activation(self, inputs, training=None):
        raise NotImplementedError

    def call(self, inputs, training=None):
        return self._act(self.pre_activation(inputs, training))

    def fusable_activation(self):
        """(name, alpha) of this layer's activation for a fused op (bias_act, conv_2d_cl),
        or None when it must be applied on its own (gelu, softmax, a custom function)."""
        return fusable(self._act, self._activation_name)


def fusable(fn, name):
    """(op name, alpha) when ``fn`` is pyggml's own activation ``name`` and a fused op
    applies it; None otherwise."""
    spec = _FUSABLE.get(name)
    if spec is None:
        return None
    try:
        if activations.get(name) is not fn:
            return None
    except ValueError:
        return None
    return spec


def set_weight_options(layer, **options):
    """Keras's per-weight options as attributes of the layer: ``*_regularizer`` through
    ``pyggml.regularizers.get``, ``*_constraint`` through ``pyggml.constraints.get``
    (a wrong one fails here, naming the argument)."""
    from pyggml import constraints, regularizers
    for name, value in options.items():
        getter = regularizers.get if name.endswith("_regularizer") else constraints.get
        try:
            setattr(layer, name, getter(value))
        except (TypeError, ValueError) as e:
            raise type(e)(f"{type(layer).__name__}: {name}: {e}") from None


def weight_options_config(layer, names):
    """{name: serialized option or None} for a layer's get_config (Keras's keys)."""
    from pyggml import constraints, regularizers
    return {n: (regularizers.serialize if n.endswith("_regularizer") else constraints.serialize)(getattr(layer, n))
            for n in names}
