"""Keras's ``keras.backend`` configuration functions that keras-io scripts call:
``epsilon()`` (the fuzz factor of ``ops.sqrt(ops.maximum(x, keras.backend.epsilon()))``),
``floatx()``, ``image_data_format()``, ``backend()`` and ``clear_session()``.

pyggml computes in float32 and keeps images channels-last by default, so ``set_floatx``
takes "float32" only and ``image_data_format`` is "channels_last" unless set; layers that
take ``data_format=`` choose it themselves."""

__all__ = ["epsilon", "set_epsilon", "floatx", "set_floatx", "image_data_format", "set_image_data_format",
           "backend", "clear_session", "is_keras_tensor", "standardize_dtype", "is_float_dtype", "is_int_dtype",
           "result_type", "get_uid", "name_scope", "device"]

_EPSILON = [1e-7]
_DATA_FORMAT = ["channels_last"]


def epsilon():
    """The fuzz factor used in numeric expressions (Keras's default 1e-7)."""
    return _EPSILON[0]


def set_epsilon(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"set_epsilon: expected a number >= 0, got {value!r}")
    _EPSILON[0] = float(value)


def floatx():
    """The float type of weights and computations: always "float32" in pyggml."""
    return "float32"


def set_floatx(value):
    if value != "float32":
        raise ValueError(f"set_floatx: pyggml computes in 'float32' only, got {value!r}")


def image_data_format():
    return _DATA_FORMAT[0]


def set_image_data_format(data_format):
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"set_image_data_format: expected 'channels_last' or 'channels_first', got {data_format!r}")
    _DATA_FORMAT[0] = data_format


def backend():
    """The name of the computation backend: "ggml"."""
    return "ggml"


def clear_session(free_memory=True):
    """Resets the global name counters (``get_uid``), as Keras's does (pyggml's layer names are
    numbered within each model: nothing else to reset)."""
    _UIDS.clear()
    return None


def is_keras_tensor(x):
    """Keras's: whether ``x`` is a symbolic tensor of a functional model (a ``pg.Input`` or a
    layer's output on one), not an array or a computed tensor."""
    from pyggml.layers.node import Node
    return isinstance(x, Node)


# --- dtypes (Keras's names: "float32", "int64", "bool", "string", ...) ---------------------------

_PYTHON_DTYPES = {bool: "bool", int: "int64", float: "float32", str: "string"}
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_GGML_SHORT = {"f32": "float32", "f16": "float16", "i32": "int32"}


def standardize_dtype(dtype):
    """Keras's name of a dtype: None is floatx(), Python's types and numpy's dtypes by their
    names (``int`` is "int64", ``float`` "float32", ``str`` "string")."""
    import numpy as np
    if dtype is None:
        return floatx()
    if isinstance(dtype, type) and dtype in _PYTHON_DTYPES:
        return _PYTHON_DTYPES[dtype]
    if isinstance(dtype, str) and dtype in ("bfloat16", "string"):
        return str(dtype)
    if isinstance(dtype, str) and str(dtype) in _GGML_SHORT:
        return _GGML_SHORT[str(dtype)]              # ggml's short names, as pyggml.core takes them
    name = getattr(dtype, "name", None)
    if isinstance(name, str) and not isinstance(dtype, (str, np.dtype)):
        return standardize_dtype(name)               # a torch dtype's name, a DTypePolicy's
    if isinstance(dtype, (list, tuple, dict, set)) or isinstance(dtype, bool):
        raise ValueError(f"invalid dtype: {dtype!r}")
    try:
        d = np.dtype(dtype)
    except (TypeError, ValueError):
        raise ValueError(f"invalid dtype: {dtype!r}") from None
    if d.kind in "USO":
        return "string"
    return d.name


def is_float_dtype(dtype):
    dtype = standardize_dtype(dtype)
    return dtype.startswith("float") or dtype.startswith("bfloat")


def is_int_dtype(dtype):
    dtype = standardize_dtype(dtype)
    return dtype.startswith("int") or dtype.startswith("uint")


def result_type(*dtypes):
    """The dtype Keras's ops give for operands of these dtypes: the widest float among them
    when there is one (an integer does not widen a float: int64 with float32 is float32),
    else numpy's promotion of the integers and bools; no dtypes: floatx()."""
    import numpy as np
    names = [standardize_dtype(d) for d in dtypes]
    if not names:
        return floatx()
    if any(n.startswith("complex") for n in names):
        return "complex64"                  # Keras's, whatever the other operands (complex128 too)
    floats = [n for n in names if n in _FLOATS]
    if floats:
        if "bfloat16" in floats and "float16" in floats:
            floats.append("float32")                 # neither holds the other
        return max(floats, key=lambda n: (_FLOATS.index(n) if n != "bfloat16" else _FLOATS.index("float16")))
    if "string" in names:
        if any(n != "string" for n in names):
            raise ValueError(f"result_type: strings do not combine with numbers, got {names}")
        return "string"
    return np.result_type(*[np.dtype(n) for n in names]).name


_UIDS = {}


def get_uid(prefix=""):
    """1, 2, 3, ... for each call with the same prefix (Keras's name counter)."""
    _UIDS[prefix] = _UIDS.get(prefix, 0) + 1
    return _UIDS[prefix]


class _Scope:
    """A ``with`` block that keeps its name and changes nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class name_scope(_Scope):
    """Keras's ``with keras.name_scope("block"):``: names nothing here (pyggml names layers within
    their model) and keeps the name for code that reads it (``scope.name``)."""

    def __init__(self, name, **kwargs):
        if not isinstance(name, str):
            raise TypeError(f"name_scope: name must be a str, got {name!r}")
        self.name = name


class device(_Scope):
    """Keras's ``with keras.device("cpu:0"):``: a model's device is the one its ``compile(backend=)``
    picks (pyggml.backends() lists them), so this scope places nothing; the name is checked."""

    def __init__(self, device_name):
        if not isinstance(device_name, str) or not device_name.split(":")[0].strip().lower() in \
                ("cpu", "gpu", "cuda", "vulkan", "metal", "tpu"):
            raise ValueError(f"device: expected a name such as 'cpu:0' or 'gpu:0', got {device_name!r}")
        self.name = device_name
