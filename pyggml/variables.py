"""Variable: one weight of a layer, wherever its values live.

A layer makes its weights with ``add_weight``, which returns a Variable.  Its
values are drawn by its initializer on first use and kept in numpy until a
model that holds the layer is compiled; then they live in that model's
device memory (``bind``), and ``numpy()``/``assign()`` read and write them
there.  Inside ``Layer.call`` a Variable stands for its tensor in the graph
being built: pass it to ``pyggml.ops`` or use it in arithmetic
(``x @ self.kernel + self.bias``).
"""

import threading

import numpy as np

from pyggml import _random, _scope, initializers
from pyggml._tensor_arrays import as_ops_result
from pyggml._validation import host
from pyggml.errors import GGMLError

# Held while a variable's values are read from or written to its device tensor, and while a
# weight store moves them back and frees that tensor (another thread re-compiling the model: a
# read of a freed buffer would crash the interpreter)
binding_lock = threading.RLock()

__all__ = ["Variable", "WeightName", "unwrap_name"]


_VARIABLE_KEYWORDS = ("initializer", "shape", "dtype", "trainable", "name", "autocast", "aggregation",
                      "synchronization", "layout")


def _is_initializer_name(s):
    try:
        initializers.get(s)
    except (ValueError, TypeError):
        return False
    return True


def _variable_arguments(args, kwargs):
    """Variable's arguments, Keras's or pyggml's order, as _setup's."""
    unknown = set(kwargs) - set(_VARIABLE_KEYWORDS)
    if unknown:
        raise TypeError(f"Variable() got unexpected keyword arguments {sorted(unknown)}")
    if args and isinstance(args[0], str) and not _is_initializer_name(args[0]) and \
            (len(args) > 1 or "shape" in kwargs):
        # pyggml's order: Variable(name, shape, initializer="glorot_uniform", trainable=True)
        if len(args) > 4:
            raise TypeError("Variable(name, shape, initializer, trainable) takes at most 4 positional arguments")
        names = ("name", "shape", "initializer", "trainable")
        for k, a in zip(names, args):
            if k in kwargs:
                raise TypeError(f"Variable() got multiple values for argument {k!r}")
            kwargs[k] = a
        init = kwargs.get("initializer", "glorot_uniform")
    else:
        if len(args) > 4:
            raise TypeError("Variable(initializer, shape, dtype, trainable) takes at most 4 positional arguments")
        for k, a in zip(("initializer", "shape", "dtype", "trainable"), args):
            if k in kwargs:
                raise TypeError(f"Variable() got multiple values for argument {k!r}")
            kwargs[k] = a
        if "initializer" not in kwargs:
            raise TypeError("Variable() needs an initializer: a value (an array) or an initializer with shape=")
        init = kwargs["initializer"]
    shape, value = kwargs.get("shape"), None
    if isinstance(init, Variable):
        init = init.numpy()
    if not (isinstance(init, (str, dict)) or callable(init)):
        value = np.asarray(host(init))
        if value.dtype == object or value.dtype.kind not in "biuf":
            raise TypeError(f"Variable(): a value must hold real numbers, got dtype {value.dtype}")
        if shape is not None and tuple(shape) != value.shape:
            raise ValueError(f"Variable(): shape {tuple(shape)} does not fit the value's shape {value.shape}")
        shape, init = value.shape, "zeros"
    elif shape is None:
        raise ValueError("Variable(): an initializer needs shape= (or give a value, an array)")
    else:
        initializers.get(init)              # an unknown name fails here
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(not isinstance(d, (int, np.integer)) or d < 1 for d in shape) or len(shape) > _MAX_DIMS:
        raise ValueError(f"Variable(): shape must be at most {_MAX_DIMS} positive ints, got {shape}")
    dtype = kwargs.get("dtype")
    dtype = "float32" if dtype is None or str(getattr(dtype, "name", dtype)).startswith(("float", "bfloat")) \
        else str(getattr(dtype, "name", dtype))
    if dtype != "float32" and not dtype.startswith(("int", "uint")):
        raise ValueError(f"Variable(): dtype must be a float or an integer type, got {kwargs.get('dtype')!r}")
    # an integer variable (a step counter) is not trainable unless asked: no gradient reaches one
    trainable = bool(kwargs.get("trainable", dtype == "float32"))
    if trainable and dtype != "float32":
        raise ValueError(f"Variable(): a trainable variable must be a float, got dtype {dtype!r} with "
                         f"trainable=True")
    return (kwargs.get("name") or "variable", shape, init, trainable, kwargs.get("layout", "out_in"), None, dtype,
            value)


_MAX_DIMS = 8           # pyggml._fold.MAX_DIMS: a weight's dimensions at most


class Variable:
    """A named weight: ``shape``, ``initializer``, ``trainable``, values in
    numpy or on a device."""

    def __init__(self, *args, **kwargs):
        """Keras's ``Variable(initializer, shape=None, dtype=None, trainable=True, name=None)``:
        ``initializer`` is a value (an array: its shape is the variable's) or an initializer
        (a name, an object or a callable, with ``shape``).  pyggml's own order also works:
        ``Variable(name, shape, initializer="glorot_uniform", trainable=True)``."""
        self._setup(*_variable_arguments(args, kwargs))

    @classmethod
    def made(cls, name, shape, initializer="glorot_uniform", trainable=True, layout="out_in", layer=None,
             dtype="float32"):
        """A variable made by pyggml itself (a layer's weight, a state), named first."""
        v = cls.__new__(cls)
        v._setup(name, shape, initializer, trainable, layout, layer, dtype)
        return v

    def _setup(self, name, shape, initializer="glorot_uniform", trainable=True, layout="out_in", layer=None,
               dtype="float32", value=None):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        # a scalar (Keras's shape ()) is kept in ggml as one value of shape (1,); a weight of more
        # than four dimensions with its leading axes merged into one (in a graph it is a Wide of its
        # own shape, pyggml._wide)
        self.store_shape = self.shape or (1,)
        if len(self.shape) > 4:
            self.store_shape = (int(np.prod(self.shape[:-3])),) + self.shape[-3:]
        # Keras's integer weights (counters; not trainable) are kept as float32, exact to 2**24
        self._dtype = dtype
        self.initializer = initializer
        self.layout = layout
        self._trainable = bool(trainable)
        self._layer = layer
        self._value = None           # numpy values while not bound to a device tensor
        self._tensor = None          # the device tensor holding the values, when bound
        self._home = None            # the object that owns that tensor (a weight store)
        self._lost = None            # why the values are gone (their device failed), or None
        # made while a graph was being built (a layer made in a call): no graph can read it as data
        self._made_in_graph = _scope.current() is not None
        # Keras's weight options (pyggml.regularizers, pyggml.constraints), set by add_weight
        self.regularizer = None      # a penalty added to the training loss
        self.constraint = None       # a projection applied after every optimizer update
        # Keras's layout of this weight: reshaped to keras_shape (None: as it is), then Keras's
        # axis k is axis keras_axes[k] of that (a Dense weight (units, in) is Keras's kernel
        # (in, units): (1, 0)); both None: the same layout
        self.keras_shape = None
        self.keras_axes = None
        if value is not None:
            self._value = np.ascontiguousarray(value, dtype=np.float32).reshape(self.shape)

    @property
    def path(self):
        """Keras's variable path: ``"<layer name>/<weight name>"`` (the name alone for a Variable
        no layer holds)."""
        layer_name = getattr(self._layer, "name", None)
        return f"{layer_name}/{self.name}" if layer_name else str(self.name)

    # --- flags ---------------------------------------------------------------------
    @property
    def trainable(self):
        """Trained by fit and Trainer: the variable's own flag and its layer's."""
        return self._trainable and (self._layer is None or self._layer.trainable)

    @trainable.setter
    def trainable(self, value):
        self._trainable = bool(value)

    @property
    def dtype(self):
        return self._dtype

    @property
    def size(self):
        return int(np.prod(self.shape)) if self.shape else 1

    # --- values --------------------------------------------------------------------
    def _check_values(self):
        if self._lost is not None:
            raise GGMLError(f"the values of weight {self.name!r} were lost: {self._lost}")

    def initialize(self, rng=None):
        """Draw the initial values (once; a bound variable keeps its values)."""
        self._check_values()
        if self._value is None and self._tensor is None:
            init = initializers.drawer(self.initializer)
            if isinstance(init, initializers.Initializer) and (self.keras_axes is not None or
                                                                self.keras_shape is not None):
                # an Initializer instance draws in Keras's layout (its fans and, seeded, its values
                # are those of a direct call on Keras's shape), then goes to this weight's layout
                base = tuple(self.keras_shape) if self.keras_shape is not None else self.shape
                axes = tuple(self.keras_axes) if self.keras_axes is not None else tuple(range(len(base)))
                k = np.asarray(init(tuple(base[a] for a in axes), rng or _random.rng(), "keras"), np.float32)
                values = k.transpose(np.argsort(axes)).reshape(self.shape)
            else:
                # a 5-D weight kept in 4 dimensions (Conv3D's) counts its fans on its whole shape
                full = self.keras_shape if self.keras_shape is not None and len(self.keras_shape) > 4 else \
                    self.shape if len(self.shape) > 4 else self.store_shape
                values = init(tuple(full), rng or _random.rng(), self.layout)
            self._value = np.ascontiguousarray(values, dtype=np.float32).reshape(self.shape)
        return self

    def numpy(self):
        """A copy of the current values (of the weight's dtype)."""
        with binding_lock:
            if self._tensor is not None:
                values = self._tensor.numpy().reshape(self.shape)
            else:
                self.initialize()
                values = self._value.copy()
        return values if self._dtype == "float32" else np.asarray(np.rint(values).astype(self._dtype))

    @property
    def lost(self):
        """Why the values are gone (their device failed before they came back), or None."""
        return self._lost

    def assign(self, value):
        """Set the values (any real array of this shape); inside a layer's call, a tensor is
        assigned when the graph runs (Keras's ``self.v.assign(...)`` in ``call``)."""
        from pyggml import _wide
        from pyggml.core import Tensor
        if isinstance(value, (Tensor, _wide.Wide)) and _scope.current() is not None:
            return self._assign_in_graph(value)
        a = np.asarray(host(value))          # (an nn.Parameter's values: detached)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"variable {self.name!r}: values must be real numbers, got dtype {a.dtype}")
        if a.shape != self.shape and not (self.shape == () and a.size == 1):
            raise ValueError(f"variable {self.name!r} has shape {self.shape}, got {a.shape}")
        mode = getattr(self, "quantized", None)
        if mode:
            # a quantized weight (model.quantize) holds integers the layer divides by its scale: a
            # float weight from before quantizing would be read as integers, silently wrong
            from pyggml.dtype_policies import QUANTIZATION_MODES
            q = QUANTIZATION_MODES[mode]
            if not (np.all(np.isfinite(a)) and np.all(a == np.round(a)) and np.all(a >= -q - 1) and np.all(a <= q)):
                raise ValueError(f"variable {self.name!r} is quantized ({mode}): it takes integers in [-{q + 1}, {q}] "
                                 f"(the layer computes with them divided by its kernel_scale); a float weight from "
                                 f"before quantizing goes into a model not quantized")
        a = np.ascontiguousarray(a, dtype=np.float32).reshape(self.shape)
        with binding_lock:
            if self._tensor is not None:
                self._tensor.set(a.reshape(self.store_shape))
            else:
                self._value = a.copy()
                self._lost = None
        return self

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    # --- one value as a number (Keras's float(v), int(v)); no truth value, as Keras's ----------
    def _one(self, what):
        a = self.numpy()
        if a.size != 1:
            raise TypeError(f"only a Variable of one value converts to {what}, this one has shape {a.shape}")
        return a.reshape(-1)[0]

    def __float__(self):
        return float(self._one("a float"))

    def __int__(self):
        return int(self._one("an int"))

    def __bool__(self):
        raise TypeError("a Variable has no truth value (as in Keras): compare its value, e.g. bool(v.numpy()) "
                        "or `if v.numpy():`")

    # --- where the values live (the models layer moves them) ------------------------
    @property
    def home(self):
        """The owner of the device tensor this variable is bound to, or None."""
        return self._home

    @property
    def device_tensor(self):
        """The device tensor holding the values, or None while they are in numpy."""
        return self._tensor

    def bind(self, tensor, home):
        """Move the values into ``tensor`` (owned by ``home``) and keep them there."""
        with binding_lock:
            values = self.numpy()
            tensor.set(np.asarray(values, np.float32).reshape(self.store_shape))
            self._tensor, self._home, self._value = tensor, home, None

    def unbind(self):
        """Bring the values back to numpy (the device tensor is going away).  If the
        device cannot give them back (a remote device that died), the variable
        remembers that its values are lost instead of raising."""
        with binding_lock:
            if self._tensor is not None:
                try:
                    values = self._tensor.numpy().reshape(self.shape)
                except Exception as e:
                    values, self._lost = None, f"{type(e).__name__}: {e}"
                self._tensor, self._home, self._value = None, None, values

    # --- in a graph being built --------------------------------------------------------
    def graph_tensor(self):
        """This variable's tensor in the graph being built (its new value once assigned there)."""
        b = _scope.require(f"variable {self.name!r} as a tensor")
        cache = getattr(b, "cache", None)
        assigned = None if cache is None else cache.get(("assigned", id(self)))
        t = assigned if assigned is not None else b.tensor_of(self)
        if len(self.shape) > 4:
            from pyggml import _wide
            return _wide.wrap(t, self.shape)
        if self._integer() and t.dtype == "f32":
            # Keras's integer variable (Swin's relative-position index for ops.take): int32 in the graph
            from pyggml.core import ops as core_ops
            t = core_ops.cast(t if t.is_contiguous else core_ops.cont(t), "i32")
        return t

    def _integer(self):
        try:
            return np.dtype(self._dtype).kind in "iu"
        except TypeError:
            return False

    def _value_here(self):
        """The graph tensor inside a graph, the numpy values outside one (Keras's eager variable)."""
        return self.numpy() if _scope.current() is None else self.graph_tensor()

    def _assign_in_graph(self, new):
        """Keras's assign inside a call: later reads in this graph see ``new``, and the variable
        holds it once the graph has run (a state update)."""
        from pyggml.core import Tensor
        from pyggml.core import ops as core_ops
        from pyggml import _wide
        b = _scope.current()
        if isinstance(new, _wide.Wide):
            if tuple(new.shape) != self.shape:
                raise ValueError(f"variable {self.name!r} has shape {self.shape}, got a tensor of shape "
                                 f"{tuple(new.shape)}")
            new = _wide.reshape(new, self.store_shape)
        if not isinstance(new, Tensor):
            raise TypeError(f"variable {self.name!r}: a graph assign takes a tensor, got {type(new).__name__}")
        if new.dtype == "i32":
            new = core_ops.cast(new, "f32")            # the variable is held in float32 (exact to 2**24)
        if tuple(new.shape) != self.store_shape and int(np.prod(new.shape)) == self.size:
            new = core_ops.reshape(new if new.is_contiguous else core_ops.cont(new), self.store_shape)
        if tuple(new.shape) != self.store_shape:
            raise ValueError(f"variable {self.name!r} has shape {self.shape}, got a tensor of shape {tuple(new.shape)}")
        b.cache[("assigned", id(self))] = new
        (getattr(b, "add_state_update", None) or b.add_update)(self, new)
        return new

    def assign_add(self, delta):
        """``variable += delta``: at once outside a graph, as a state update in a layer's call."""
        if _scope.current() is not None:
            return self._assign_in_graph(self.graph_tensor() + _as_tensor(delta))
        self.assign(self.numpy() + np.asarray(host(delta), dtype=np.float32))
        return self

    def assign_sub(self, delta):
        """``variable -= delta``: at once outside a graph, as a state update in a layer's call."""
        if _scope.current() is not None:
            return self._assign_in_graph(self.graph_tensor() - _as_tensor(delta))
        self.assign(self.numpy() - np.asarray(host(delta), dtype=np.float32))
        return self

    @property
    def value(self):
        """Keras's ``variable.value``: the tensor in a graph, the values outside one (settable:
        ``assign``)."""
        return self._value_here()

    @value.setter
    def value(self, new):
        self.assign(new)

    def __add__(self, other):
        return _eager_result(self._value_here() + _as_tensor(other))

    def __radd__(self, other):
        return _eager_result(_as_tensor(other) + self._value_here())

    def __sub__(self, other):
        return _eager_result(self._value_here() - _as_tensor(other))

    def __rsub__(self, other):
        return _eager_result(_as_tensor(other) - self._value_here())

    def __mul__(self, other):
        return _eager_result(self._value_here() * _as_tensor(other))

    def __rmul__(self, other):
        return _eager_result(_as_tensor(other) * self._value_here())

    def __truediv__(self, other):
        return _eager_result(self._value_here() / _as_tensor(other))

    def __neg__(self):
        return _eager_result(-self._value_here())

    def __matmul__(self, other):
        return _eager_result(self._value_here() @ _as_tensor(other))

    def __rmatmul__(self, other):
        return _eager_result(_as_tensor(other) @ self._value_here())

    def __rtruediv__(self, other):
        return _eager_result(_as_tensor(other) / self._value_here())

    def __pow__(self, other):
        return _eager_result(self._value_here() ** _as_tensor(other))

    def __rpow__(self, other):
        base = _as_tensor(other)
        base = np.asarray(base, dtype=np.float32) if isinstance(base, (list, tuple)) else base
        return _eager_result(base ** self._value_here())

    # numpy's binary ops with a Variable (``array ** v``, ``array * v``) give way to the
    # Variable's own, so that on a GradientTape they are recorded (TensorFlow's variables do so)
    __array_ufunc__ = None

    def __abs__(self):
        return _eager_result(abs(self._value_here()))

    def __getitem__(self, key):
        """numpy's basic indexing of the variable's tensor (pyggml._indexing), or of its values
        outside a graph."""
        return self._value_here()[key]

    def __getstate__(self):
        """A copy (``copy.deepcopy``, ``pickle``) holds the values in numpy, not the device
        tensor (which belongs to a compiled model): a copied layer is an unbound twin."""
        if self.__dict__.get("_tensor") is None and self.__dict__.get("_value") is None and \
                not self.__dict__.get("_lost"):
            self.initialize()            # drawn now, once: the copy holds the same values
        state = dict(self.__dict__)
        if state.get("_tensor") is not None:
            state["_value"] = self.numpy()
        state["_tensor"] = state["_home"] = None
        return state

    def __repr__(self):
        where = "device" if self._tensor is not None else "host"
        return f"<pyggml.Variable {self.name!r} shape={self.shape} trainable={self.trainable} ({where})>"


def _eager_result(r):
    """Arithmetic on a Variable outside a graph: an array with TensorFlow's ``.numpy()``."""
    if _scope.current() is None and isinstance(r, (np.ndarray, np.generic)):
        return as_ops_result(np.asarray(r))
    return r


def _as_tensor(v):
    v = unwrap_name(v)
    return v._value_here() if isinstance(v, Variable) else v


def unwrap_name(x):
    """The Variable a model's weight name (``model.trainable_weights``'s) stands for; anything
    else as it is (the ops take a name as its Variable: an L2 penalty over the weights)."""
    return x.variable if isinstance(x, WeightName) else x


class WeightName(str):
    """A model's weight name (``model.trainable_weights`` lists these: ``"dense.weight"``)
    that also stands for its Variable where Keras code expects one: ``.variable``, the
    Variable's attributes (``shape``, ``numpy()``, ``assign``, ...), and as a source of
    ``GradientTape.gradient`` or a target of ``optimizer.apply_gradients``."""

    def __new__(cls, name, variable):
        s = super().__new__(cls, name)
        s.variable = variable
        return s

    def __getattr__(self, name):
        if name == "variable":
            raise AttributeError(name)
        return getattr(self.variable, name)

    def __array__(self, dtype=None, copy=None):
        a = self.variable.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __reduce__(self):
        return (str, (str(self),))              # pickles (and copies) as the plain name


def _as_variable_op(op):
    """WeightName's arithmetic: the Variable's (Keras's ``0.999 * ema_w + 0.001 * w`` on
    ``model.weights``); a str operand keeps str's own (``name + "_ema"``)."""
    base = getattr(str, op, None)

    def method(self, *other):
        if base is not None and other and isinstance(other[0], str) and not isinstance(other[0], WeightName):
            return base(self, *other)
        return getattr(self.variable, op)(*other)
    method.__name__ = op
    return method


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
            "__neg__", "__pow__", "__matmul__", "__rmatmul__", "__abs__"):
    setattr(WeightName, _op, _as_variable_op(_op))
del _op
