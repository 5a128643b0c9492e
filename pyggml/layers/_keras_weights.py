"""A layer's (and a model's) ``get_weights()``: pyggml's ``{name: array}`` that also answers
Keras's list use by position (``layer.get_weights()[0]``: the first weight in Keras's layout,
e.g. a Conv2D kernel as (kh, kw, in, out)); Keras's list form of ``set_weights``; and Keras's
names of weights kept in another layout (``Dense.kernel``: ``KerasKernel``, a
``KerasLayoutView`` of the weight)."""

import weakref

import numpy as np

from pyggml import _scope
from pyggml._validation import host
from pyggml.variables import Variable

__all__ = ["LayerWeights", "keras_value", "from_keras_value", "KerasLayoutView", "KerasKernel", "BUILDERS",
           "build_through_owner", "keras_list_by_name", "layered_keras_list"]


def keras_value(variable, value):
    """``value`` (pyggml's layout) in Keras's layout (``Variable.keras_shape``/``keras_axes``)."""
    a = np.asarray(value)
    if variable.keras_shape is not None:
        a = a.reshape(tuple(variable.keras_shape))
    if variable.keras_axes is not None:
        a = a.transpose(tuple(variable.keras_axes))
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)       # (a scalar stays 0-d)


def from_keras_value(variable, value, what):
    """An array in Keras's layout back in pyggml's; a wrong shape is refused, naming the weight."""
    a = np.asarray(value)
    base = tuple(variable.keras_shape) if variable.keras_shape is not None else tuple(variable.shape)
    axes = tuple(variable.keras_axes) if variable.keras_axes is not None else tuple(range(len(base)))
    want = tuple(base[i] for i in axes)
    if a.shape != want:
        raise ValueError(f"{what}: weight {variable.name!r} takes an array of shape {want} (Keras's layout), got "
                         f"{a.shape}")
    a = a.transpose(tuple(int(i) for i in np.argsort(axes))).reshape(variable.shape)
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def layered_keras_list(layers, named):
    """A model's Keras list where one of its ``layers`` keeps its weights otherwise than one array
    per weight (a recurrent layer's three arrays for pyggml's four, a GRU's gate order): ``(to,
    back, length)`` for LayerWeights, each layer's list in turn; None when every layer's list is its
    weights (or the model's weights are not its layers' in order).  No value is read."""
    specs = [(layer, layer._keras_list()) for layer in layers if hasattr(layer, "_keras_list")]
    if not any(spec is not None for _, spec in specs):
        return None
    names = [n for n, _ in named]
    parts, pos = [], 0
    for layer, spec in specs:
        local = [n for n, _ in layer.named_variables()]
        if not local:
            continue
        prefix = f"{layer.name}."
        if names[pos:pos + len(local)] != [prefix + k for k in local]:
            return None
        parts.append((prefix, local, spec, named[pos:pos + len(local)]))
        pos += len(local)
    if pos != len(names):
        return None
    sizes = [len(local) if spec is None else spec[2] for _, local, spec, _ in parts]

    def to_list(weights):
        out = []
        for prefix, local, spec, nv in parts:
            sub = {k: weights[prefix + k] for k in local}
            out += [keras_value(v, sub[k]) for k, (_, v) in zip(local, nv)] if spec is None else spec[0](sub)
        return out

    def from_list(arrays):
        arrays, out, i = list(arrays), {}, 0
        for (prefix, local, spec, nv), n in zip(parts, sizes):
            chunk = arrays[i:i + n]
            i += n
            sub = spec[1](chunk) if spec is not None else \
                {k: from_keras_value(v, np.asarray(host(a)), "set_weights") for k, (_, v), a in zip(local, nv, chunk)}
            out.update({prefix + k: a for k, a in sub.items()})
        return out
    return to_list, from_list, sum(sizes)


def keras_list_by_name(named, weights, who, note="", owner="layer", layers=None):
    """Keras's ``set_weights`` list (arrays in the weights' order, Keras's layouts) as
    ``{name: array}`` in pyggml's layouts; a wrong count, type or shape is refused.  Anything
    but a list or tuple (pyggml's dict) comes back as it is, except another model's
    ``get_weights()`` whose names are not these: taken in order, as Keras's list (a functional
    model's weights into its subclassed twin, whose layers are named otherwise)."""
    if isinstance(weights, LayerWeights) and len(weights) == len(named) and \
            set(weights.keys()) != {n for n, _ in named}:
        weights = weights[:]
    if not isinstance(weights, (list, tuple)):
        return weights
    if layers is not None:
        # Keras's list of a model of recurrent layers (an LSTM's three arrays for four weights, a
        # GRU's gate blocks in Keras's order)
        layered = layered_keras_list(layers, named)
        if layered is not None and len(weights) == layered[2]:
            return layered[1](weights)
    if len(weights) != len(named):
        raise ValueError(f"{who}: set_weights got a list of {len(weights)} arrays; the {owner} has {len(named)} "
                         f"weights ({', '.join(n for n, _ in named)}), in Keras's layouts{note}")
    values = {}
    for (n, v), a in zip(named, weights):
        a = np.asarray(host(a))
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"{who}: weight {n!r} must be an array of numbers, got dtype {a.dtype}")
        values[n] = from_keras_value(v, a, f"{who}.set_weights")
    return values


class _Layout:
    """What ``keras_value`` needs of a weight (plain data: the dict below pickles and copies)."""

    def __init__(self, v):
        self.name, self.shape, self.keras_shape, self.keras_axes = v.name, v.shape, v.keras_shape, v.keras_axes


def _rebuilt(items, state):
    w = LayerWeights.__new__(LayerWeights)
    dict.update(w, items)
    w.__dict__.setdefault("_keras", None)
    w.__dict__.update(state)
    return w


class _FrozenList:
    """A pickled LayerWeights's Keras list: the arrays it had (read only)."""

    def __init__(self, arrays):
        self.arrays = [np.asarray(a) for a in arrays]

    def __call__(self, weights):
        return [a.copy() for a in self.arrays]


def _is_index(key):
    return isinstance(key, (int, np.integer)) and not isinstance(key, bool)


class LayerWeights(dict):
    """``{name: array}`` in pyggml's layouts; an int or a slice indexes the weights in order,
    in Keras's layouts, as Keras's list does, and an int sets one so (Keras's
    ``w = model.get_weights(); w[i] = ...; model.set_weights(w)``: a target network's update).
    A layer's (not a model's, which API.md makes a dict) iterates as Keras's list: its arrays
    in Keras's layouts (``kernel, bias = dense.get_weights()``); names stay in ``keys()``."""

    def __init__(self, named, owner="layer", keras_list=None):
        super().__init__((n, v.numpy()) for n, v in named)
        self._layouts = [_Layout(v) for _, v in named]
        self._owner = owner
        # (to, back): a layer whose Keras list is not one array per weight (a recurrent layer's
        # kernel, recurrent kernel and bias, where pyggml keeps PyTorch's two biases): the list
        # from {name: array}, and {name: array} from the list
        self._keras = keras_list

    def _list(self):
        return self._keras[0](dict(self.items()))

    def __len__(self):
        # (a model's stays a dict of its names: API.md's; its int indexes are Keras's list)
        return len(self._list()) if getattr(self, "_keras", None) is not None and self._owner == "layer" else \
            dict.__len__(self)

    def __copy__(self):
        new = LayerWeights.__new__(LayerWeights)
        dict.update(new, self)
        new.__dict__.update(self.__dict__)
        return new

    def __deepcopy__(self, memo):
        import copy
        new = LayerWeights.__new__(LayerWeights)
        dict.update(new, {k: copy.deepcopy(v, memo) for k, v in dict.items(self)})
        new.__dict__.update(self.__dict__)       # (the layouts are plain data; the list's functions shared)
        return new

    def __reduce__(self):
        # the Keras-list functions are closures: pickled as the list itself (a layer's recurrent
        # three arrays stay three), which then reads as it was (set such weights by name)
        state = {k: v for k, v in self.__dict__.items() if k != "_keras"}
        if getattr(self, "_keras", None) is not None:
            state["_keras"] = (_FrozenList(self._list()), None)
        return (_rebuilt, (dict(self), state))

    def _position(self, key):
        n = len(self._list()) if getattr(self, "_keras", None) is not None else dict.__len__(self)
        if not -n <= key < n:
            raise IndexError(f"the {self._owner} has {n} weights, no index {key}")
        return int(key) % n

    def __getitem__(self, key):
        if getattr(self, "_keras", None) is not None and (_is_index(key) or isinstance(key, slice)):
            return self._list()[self._position(key)] if _is_index(key) else self._list()[key]
        if _is_index(key):
            i = self._position(key)
            return keras_value(self._layouts[i], dict.__getitem__(self, list(self.keys())[i]))
        if isinstance(key, slice):
            return [keras_value(lay, dict.__getitem__(self, n)) for n, lay in
                    list(zip(self.keys(), self._layouts))[key]]
        return dict.__getitem__(self, key)

    def __iter__(self):
        if getattr(self, "_keras", None) is not None and self._owner == "layer":
            return iter(self._list())
        if self._owner == "layer":
            return iter([self[i] for i in range(len(self))])
        return dict.__iter__(self)

    def __add__(self, other):
        """A layer's weights joined to another's or to a list, as Keras's lists join
        (``a.get_weights() + b.get_weights()``): a list of arrays in Keras's layouts."""
        if self._owner != "layer" or not _list_like(other):
            return NotImplemented
        return list(self) + list(other)

    def __radd__(self, other):
        if self._owner != "layer" or not _list_like(other):
            return NotImplemented
        return list(other) + list(self)

    def __setitem__(self, key, value):
        if getattr(self, "_keras", None) is not None and _is_index(key):
            if self._keras[1] is None:
                raise TypeError("these weights came back from pickle: set them by name (w[name] = array)")
            i = self._position(key)
            arrays = self._list()
            a = np.asarray(value)
            if a.shape != arrays[i].shape or a.dtype == object or a.dtype.kind not in "biuf":
                raise ValueError(f"get_weights()[{i}] takes an array of numbers of shape {arrays[i].shape} (Keras's "
                                 f"layout), got {a.dtype} {a.shape}")
            arrays[i] = a
            dict.update(self, self._keras[1](arrays))
            return
        if _is_index(key):
            i = self._position(key)
            a = np.asarray(value)
            if a.dtype == object or a.dtype.kind not in "biuf":
                raise TypeError(f"weight {i} must be an array of numbers, got dtype {a.dtype}")
            name = list(self.keys())[i]
            dict.__setitem__(self, name, from_keras_value(self._layouts[i], a, f"get_weights()[{i}]"))
            return
        if getattr(self, "_keras", None) is not None and self._keras[1] is None:
            self._keras = None           # (a pickled list set by name: by index, the weights one by one now)
        dict.__setitem__(self, key, value)


def _list_like(other):
    """A list or tuple, or a layer's weights (which iterate as Keras's list; a model's are a dict)."""
    return isinstance(other, (list, tuple)) or (isinstance(other, LayerWeights) and other._owner == "layer")


class KerasLayoutView(Variable):
    """A weight seen in Keras's layout: a Dense layer's ``kernel`` (in, units) over its
    ``weight`` (units, in), a Conv2D's ``kernel`` (kh, kw, in, out) over (out, in, kh, kw).
    The values are the weight's own, read and written through the change of layout:
    ``shape``, ``numpy()`` and ``assign`` are Keras's; in a layer's call, a graph or on a
    GradientTape it is the weight's tensor moved to Keras's layout (gradients reach the
    weight); as a source of ``GradientTape.gradient`` or a target of
    ``optimizer.apply_gradients`` its gradient is in Keras's layout too.  The weight stays
    the model's variable (``trainable_variables`` lists the weight, not the view).

    ``gates`` (a recurrent layer's ``keras_gates``) also reorders the blocks of the last
    axis: a GRU's ``kernel`` has Keras's gate order (z, r, h) over pyggml's (r, z, n)."""

    def __init__(self, base, name, gates=None):
        self.view_base = base
        self.name = name
        gates = tuple(int(g) for g in gates) if gates is not None else None
        self._gates = gates if gates is not None and gates != tuple(range(len(gates))) else None
        base_shape = tuple(base.keras_shape) if base.keras_shape is not None else tuple(base.shape)
        self._axes = tuple(base.keras_axes) if base.keras_axes is not None else tuple(range(len(base_shape)))
        self.shape = tuple(base_shape[a] for a in self._axes)
        self.store_shape = self.shape or (1,)
        self._dtype = base.dtype
        self.initializer = base.initializer
        self.layout = "keras"
        self._layer = base._layer
        self._value = self._tensor = self._home = None
        self.regularizer = self.constraint = None
        self.keras_shape = self.keras_axes = None

    # --- flags and values: the weight's -----------------------------------------------------
    @property
    def dtype(self):
        """The weight's; "int8" once ``quantize`` made it integers (held as exact float32 here)."""
        return "int8" if getattr(self.view_base, "quantized", None) else self.view_base.dtype

    @property
    def trainable(self):
        return self.view_base.trainable

    @trainable.setter
    def trainable(self, value):
        self.view_base.trainable = value

    @property
    def _lost(self):                # Variable's ``lost`` and value checks read the weight's
        return self.view_base.lost

    @property
    def home(self):
        return self.view_base.home

    @property
    def device_tensor(self):
        return None                 # the weight's tensor is in pyggml's layout, not this one's

    def initialize(self, rng=None):
        self.view_base.initialize(rng)
        return self

    def _blocks(self, a, order):
        """An array in Keras's layout with the blocks of its last axis in ``order``."""
        if self._gates is None:
            return a
        parts = np.split(a, len(order), axis=-1)
        return np.ascontiguousarray(np.concatenate([parts[g] for g in order], axis=-1))

    def _keras_gates(self, a):
        return self._blocks(a, self._gates)

    def _own_gates(self, a):
        return self._blocks(a, tuple(int(g) for g in np.argsort(self._gates))) if self._gates else a

    def numpy(self):
        a = self._keras_gates(keras_value(self.view_base, self.view_base.numpy()))
        return a.astype(np.int8) if getattr(self.view_base, "quantized", None) else a

    def assign(self, value):
        from pyggml.core import Tensor
        if isinstance(value, Tensor) and _scope.current() is not None:
            return self._assign_in_graph(value)
        a = np.asarray(host(value))
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"variable {self.name!r}: values must be real numbers, got dtype {a.dtype}")
        if a.shape != self.shape:
            raise ValueError(f"{self.name}.assign: weight {self.view_base.name!r} takes an array of shape "
                             f"{self.shape} (Keras's layout), got {a.shape}")
        self.view_base.assign(from_keras_value(self.view_base, self._own_gates(a), f"{self.name}.assign"))
        return self

    def bind(self, tensor, home):
        raise TypeError(f"{self.name!r} is a view of weight {self.view_base.name!r} in Keras's layout; "
                        f"the weight itself is what a model holds")

    def unbind(self):
        pass

    # --- in a graph: the weight's tensor, moved ------------------------------------------------
    def graph_tensor(self):
        from pyggml import ops
        from pyggml.core import ops as core_ops
        base = self.view_base
        t = base.graph_tensor()
        if base.keras_shape is not None:
            t = ops.reshape(t if t.is_contiguous else core_ops.cont(t), tuple(base.keras_shape))
        t = ops.transpose(t, self._axes) if self._axes != tuple(range(len(self._axes))) else t
        return self._graph_blocks(t, self._gates)

    def _graph_blocks(self, t, order):
        if order is None:
            return t
        from pyggml import ops
        parts = ops.split(t, len(order), axis=-1)
        return ops.concatenate([parts[g] for g in order], axis=-1)

    def _assign_in_graph(self, new):
        from pyggml import ops
        from pyggml.core import Tensor
        if not isinstance(new, Tensor):
            raise TypeError(f"variable {self.name!r}: a graph assign takes a tensor, got {type(new).__name__}")
        if tuple(new.shape) != self.shape:
            raise ValueError(f"variable {self.name!r} has shape {self.shape}, got a tensor of shape "
                             f"{tuple(new.shape)}")
        if self._gates is not None:
            new = self._graph_blocks(new, tuple(int(g) for g in np.argsort(self._gates)))
        t = ops.transpose(new, tuple(int(i) for i in np.argsort(self._axes)))
        self.view_base._assign_in_graph(t if self.view_base.keras_shape is None else
                                        ops.reshape(t, self.view_base.shape))
        return new

    # --- gradients: Keras's layout ----------------------------------------------------------------
    def gradient_from_base(self, g):
        """The weight's gradient (pyggml's layout) in this view's (Keras's)."""
        return self._keras_gates(keras_value(self.view_base, np.asarray(g).reshape(self.view_base.shape)))

    def gradient_to_base(self, g):
        """A gradient in this view's layout in the weight's (a wrong shape is refused)."""
        g = np.asarray(g)
        if g.shape != self.shape:
            raise ValueError(f"the gradient of {self.name!r}: weight {self.view_base.name!r} takes an array of "
                             f"shape {self.shape} (Keras's layout), got {g.shape}")
        return from_keras_value(self.view_base, self._own_gates(g), f"the gradient of {self.name!r}")

    def __repr__(self):
        return (f"<pyggml.Variable {self.name!r} shape={self.shape} trainable={self.trainable} "
                f"(Keras's layout of weight {self.view_base.name!r})>")


# layer -> (a weak reference to) the Sequential it was added to: Keras builds a Sequential's
# layers as they are added once it knows its input shape; pyggml builds its graph when first
# needed, and a layer's weights (``layer.weights``, ``layer.kernel``) are such a need
BUILDERS = weakref.WeakKeyDictionary()


def build_through_owner(layer):
    """Build ``layer`` through its Sequential's graph, if it has one that knows its input
    shape; True when that ran.  (A layer that does not fit the shape stays unbuilt here: the
    model's own build, at compile or fit, says why.)"""
    ref = BUILDERS.get(layer)
    model = ref() if ref is not None else None
    if model is None or getattr(model, "_building_graph", False):
        return False
    try:
        model._ensure_graph()
    except (ValueError, TypeError):
        return False
    return True


class KerasKernel:
    """A layer's Keras-named weight in Keras's layout (``Dense.kernel``): a view of the
    weight pyggml keeps under ``attr`` (one view object per weight: ``layer.kernel is
    layer.kernel``).  A value the layer sets under the same name (a subclass's own
    ``self.kernel = ...``) is the layer's, as any attribute."""

    def __init__(self, attr):
        self.attr = attr

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        base = obj.__dict__.get(self.attr)
        if not isinstance(base, Variable) and build_through_owner(obj):
            base = obj.__dict__.get(self.attr)
        if not isinstance(base, Variable):
            who = type(obj).__name__ + (f" {obj.name!r}" if obj.name else "")
            raise AttributeError(f"{who} has no {self.name!r} until it is built (call it on an input, or "
                                 f"build(input_shape))")
        views = obj.__dict__.setdefault("_keras_views", {})
        v = views.get(self.name)
        if v is None or v.view_base is not base:
            v = views[self.name] = KerasLayoutView(base, self.name, getattr(obj, "keras_gates", None))
        return v
