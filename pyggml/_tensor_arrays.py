"""Graph tensors and numpy arrays in one expression.

``OpsArray``: what pyggml.ops return when they compute at once on arrays (Keras's eager
tensors).  Such an array combined with a graph tensor by + - * / (``xxt - self.eye``
inside a layer's call, where ``self.eye = ops.eye(n)`` was made outside any graph) gives
the graph op, as Keras's tensors do.

A plain numpy array meets a graph tensor the same way: ``Tensor`` takes arrays in its
operators (as constants of the graph being built) and numpy hands its ufuncs with a
tensor operand to ``tensor_ufunc``.  ``refuse_tensor_array`` still names the fix when an
object array of tensors reaches an op (an array built elsewhere by numpy's own loops)."""

import numpy as np

__all__ = ["refuse_tensor_array", "OpsArray", "as_ops_result", "tensor_ufunc", "UFUNC_OPS", "UFUNC_NAMES",
           "no_rows_call"]


def refuse_tensor_array(a, what):
    """Raise TypeError when ``a`` is an object array holding graph tensors."""
    if isinstance(a, np.ndarray) and a.dtype == object and a.size:
        from pyggml.core import Tensor
        if any(isinstance(e, Tensor) for e in a.flat[:8]):
            raise TypeError(
                f"{what}: got a numpy array of graph tensors: a graph tensor was combined with a numpy array by "
                f"+, -, * or / (numpy then applies the operation element by element). Make the array a tensor "
                f"first: ops.convert_to_tensor(array) inside the layer's call (e.g. x - "
                f"ops.convert_to_tensor(self.eye)), or use ops.add/subtract/multiply/divide(x, array)")


# ufunc -> the Keras op doing it on graph tensors; pyggml.ops fills it in (this module imports no ops)
UFUNC_OPS = {}
UFUNC_NAMES = {np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.true_divide: "divide",
               np.power: "power", np.maximum: "maximum", np.minimum: "minimum", np.matmul: "matmul"}


class OpsArray(np.ndarray):
    """A numpy array from pyggml.ops; with a graph tensor in a ufunc (``+ - * / ** @``, maximum,
    minimum) it becomes a constant of that graph and the result a tensor."""

    # above torch's 1000: numpy does not hand ``pred - y`` (y a torch tensor) to torch, which
    # cannot take numpy arrays; the torch operand is read as an array (Keras's torch tensors mix)
    __array_priority__ = 1001.0

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from pyggml.core import Tensor
        if any(type(i).__module__.startswith("torch") for i in inputs):
            from pyggml._validation import host
            inputs = tuple(np.asarray(host(i)) if type(i).__module__.startswith("torch") else i for i in inputs)
        if any(isinstance(i, Tensor) for i in inputs):
            fn = UFUNC_OPS.get(ufunc)
            if method != "__call__" or kwargs or fn is None:
                return NotImplemented
            return fn(*[i.view(np.ndarray) if isinstance(i, OpsArray) else i for i in inputs])
        args = [i.view(np.ndarray) if isinstance(i, OpsArray) else i for i in inputs]
        if "out" in kwargs:
            outs = kwargs["out"]
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, OpsArray) else o for o in outs)
            result = getattr(ufunc, method)(*args, **kwargs)
            if method == "at":
                return result
            # numpy's answer is the out arrays themselves: ``y *= 255`` keeps y an OpsArray (its .numpy())
            return outs[0] if len(outs) == 1 else tuple(outs)
        # numpy on these arrays gives such arrays again (``ops.eye(3) ** 2`` still meets tensors), with
        # Keras's widths where no input is 64-bit (an int32 array / 2 is float32, not numpy's float64)
        out = as_ops_result(getattr(ufunc, method)(*args, **kwargs))
        return out if holds_64(args) or holds_64(kwargs) else keras_widths(out)

    def __getitem__(self, key):
        # an index down to one value gives a 0-d OpsArray, as TensorFlow's eager scalar (numpy gives a
        # numpy scalar): ``env.step(action[0].numpy())`` in keras-io's PPO; int(), float() and use as a
        # list index (``__index__``) still work
        value = np.ndarray.__getitem__(self, key)
        if isinstance(value, np.ndarray) or (isinstance(value, np.generic) and value.dtype.kind not in "biufc"):
            return value                  # a string stays numpy's (its repr inside an array's is plain)
        return np.asarray(value).view(OpsArray)

    def __iter__(self):
        # iteration stays numpy's: the values of a 1-d array are numpy scalars (rows of a larger one
        # are OpsArray, through __getitem__)
        if self.ndim == 1:
            return iter(self.view(np.ndarray))
        return np.ndarray.__iter__(self)

    def __float__(self):
        # any array of one value, as TensorFlow's ``float(model(x))`` on a (1, 1) output (numpy
        # takes only 0-d arrays)
        return float(self._one_value("float"))

    def __int__(self):
        return int(self._one_value("int"))

    def _one_value(self, what):
        if self.size != 1:
            raise TypeError(f"{what}() takes an array of one value, got one of shape {self.shape}")
        return self.view(np.ndarray).reshape(())

    def numpy(self):
        """A plain numpy copy (TensorFlow's eager ``tensor.numpy()``, which ported scripts call on
        what an op returned)."""
        return np.array(self.view(np.ndarray))

    # ``acc = ops.zeros((n, d)); acc += x`` with a graph tensor x: acc becomes the sum, a tensor
    # (numpy cannot write a tensor into an array in place)
    def __iadd__(self, other):
        return self + other if _is_tensor(other) else np.ndarray.__iadd__(self, other)

    def __isub__(self, other):
        return self - other if _is_tensor(other) else np.ndarray.__isub__(self, other)

    def __imul__(self, other):
        return self * other if _is_tensor(other) else np.ndarray.__imul__(self, other)

    def __itruediv__(self, other):
        return self / other if _is_tensor(other) else np.ndarray.__itruediv__(self, other)


def _is_tensor(value):
    from pyggml.core import Tensor
    return isinstance(value, Tensor)


def tensor_ufunc(ufunc, method, inputs, kwargs):
    """A ufunc called with a graph tensor among its operands: the Keras op of the same name on
    the operands (arrays become constants of the graph), or NotImplemented (numpy then says
    the ufunc does not apply)."""
    fn = UFUNC_OPS.get(ufunc)
    if method != "__call__" or kwargs or fn is None:
        return NotImplemented
    return fn(*[i.view(np.ndarray) if isinstance(i, OpsArray) else i for i in inputs])


def holds_64(value, depth=0):
    """True when an argument holds a float64 or int64 array (numpy's, or a Variable's), which
    Keras's eager ops keep; Python numbers and lists of them are Keras's 32-bit defaults."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype in (np.float64, np.int64, np.uint64, np.complex128)
    if isinstance(value, (list, tuple)) and depth < 4:
        return any(holds_64(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 4:
        return any(holds_64(v, depth + 1) for v in value.values())
    return False


def keras_widths(out):
    """float64 as float32 and int64 as int32 (Keras's defaults, floatx and int32) in an eager
    result computed from 32-bit or Python values (numpy promotes those to 64 bits)."""
    if isinstance(out, np.ndarray) and out.dtype in (np.float64, np.int64):
        return out.astype(np.float32 if out.dtype == np.float64 else np.int32)
    if isinstance(out, (list, tuple)) and any(isinstance(v, np.ndarray) for v in out):
        return type(out)(keras_widths(v) for v in out)
    return out


def _wrapped(v):
    """A numpy array or scalar as an OpsArray (a scalar 0-d, as Keras's eager ops give a 0-d
    tensor: ``ops.all(x).numpy()``); anything else as it is."""
    if type(v) is np.ndarray:
        return v.view(OpsArray)
    if isinstance(v, np.generic) and v.dtype.kind in "biufc":
        return np.asarray(v).view(OpsArray)
    return v


def _wrappable(v):
    return type(v) is np.ndarray or isinstance(v, np.generic)


def as_ops_result(value):
    """An eager op's result with its arrays (and numpy scalars) as OpsArray (tuples, lists and
    dicts kept)."""
    if _wrappable(value):
        return _wrapped(value)
    if isinstance(value, (tuple, list)) and any(_wrappable(v) for v in value):
        return type(value)(_wrapped(v) for v in value)
    if type(value) is dict and any(_wrappable(v) for v in value.values()):
        return {k: _wrapped(v) for k, v in value.items()}
    return value


def no_rows_call(x, call):
    """Keras's call on a batch of no rows (a filtered batch with no hits): ``call`` on one row of
    zeros of the same shapes, its results cut to no rows; None when ``x`` (an array, or a list,
    tuple or dict of them) has rows."""
    from pyggml._validation import host
    leaves = list(x.values()) if isinstance(x, dict) else list(x) if isinstance(x, (list, tuple)) else [x]
    try:
        arrays = [np.asarray(host(a)) for a in leaves]
    except Exception:
        return None
    if not arrays or not all(a.ndim >= 1 and a.shape[0] == 0 and a.dtype.kind in "biuf" for a in arrays):
        return None
    ones = [np.zeros((1,) + a.shape[1:], a.dtype) for a in arrays]
    one = dict(zip(x.keys(), ones)) if isinstance(x, dict) else type(x)(ones) if isinstance(x, (list, tuple)) \
        else ones[0]
    out = call(one)

    def cut(o):
        if isinstance(o, dict):
            return {k: cut(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return type(o)(cut(v) for v in o)
        return as_ops_result(np.asarray(o)[:0])
    return cut(out)
