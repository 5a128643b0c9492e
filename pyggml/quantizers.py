"""Keras's ``keras.quantizers``: the abs-max quantizer (and a base class for quantizers of your
own), the configs ``model.quantize(config=...)`` takes, and int4 packing.

A weight quantizer given in a config quantizes each weight in Keras's layout (a Dense kernel as
(in, units)); what it gives back must be integers in the mode's range ([-128, 127] for int8,
[-8, 7] for int4) and a scale with one value per output (the layer computes with
``q / scale``), as pyggml keeps one scale per output.  pyggml computes a quantized layer's
inputs in float32: an ``activation_quantizer`` is kept in the config and not applied (Keras
quantizes the inputs of an int8 layer too, so its results differ from pyggml's by that rounding).
GPTQ, AWQ and float8 modes (and float8's ``quantize_and_dequantize``) are not offered."""

import numpy as np

__all__ = ["Quantizer", "AbsMaxQuantizer", "abs_max_quantize", "pack_int4", "unpack_int4",
           "QuantizationConfig", "Int8QuantizationConfig", "Int4QuantizationConfig", "serialize", "deserialize",
           "get"]

EPSILON = 1e-7
_RANGES = {"int8": (-128, 127), "int4": (-8, 7)}          # the integers each mode's weights may hold


def _host(x, what):
    """An array of real numbers from ``x`` (an array, a Variable, a tensor with a value)."""
    from pyggml.variables import Variable
    a = x.numpy() if isinstance(x, Variable) or hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x
    try:
        a = np.asarray(a)
    except Exception as e:
        raise TypeError(f"{what}: expected an array of numbers, got {type(x).__name__} ({e})") from None
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected an array of real numbers, got dtype {a.dtype}")
    return a


def _axes(axis, ndim, what):
    axes = (axis,) if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) else axis
    if not isinstance(axes, (tuple, list)) or not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                                      for a in axes):
        raise TypeError(f"{what}: axis must be an int or a tuple of ints, got {axis!r}")
    if any(not -ndim <= a < ndim for a in axes):
        raise ValueError(f"{what}: axis {axis!r} is out of range for an array of {ndim} dimensions")
    return tuple(sorted({int(a) % ndim for a in axes}))


def _value_range(value_range, what):
    if not isinstance(value_range, (tuple, list)) or len(value_range) != 2 or \
            not all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and np.isfinite(v)
                    for v in value_range) or not value_range[0] < 0 < value_range[1]:
        raise ValueError(f"{what}: value_range must be (low, high) with low < 0 < high, got {value_range!r}")
    return tuple(value_range)


def abs_max_quantize(inputs, axis, value_range=(-127, 127), dtype="int8", epsilon=EPSILON, to_numpy=False):
    """Keras's: ``(q, scale)`` with ``scale = high / (max|x| over axis + epsilon)`` (kept
    dimensions) and ``q = clip(round(x * scale), low, high)`` as ``dtype``; on the host (numpy),
    whatever ``to_numpy`` says."""
    a = _host(inputs, "abs_max_quantize").astype(np.float64)
    axes = _axes(axis, max(a.ndim, 1), "abs_max_quantize")
    low, high = _value_range(value_range, "abs_max_quantize")
    if dtype not in ("int8", "uint8", "int16", "int32", "float32"):
        raise ValueError(f"abs_max_quantize: dtype must be 'int8' (or another integer dtype, or 'float32'), got "
                         f"{dtype!r}")
    if not isinstance(epsilon, (int, float)) or isinstance(epsilon, bool) or not 0 <= epsilon < 1:
        raise ValueError(f"abs_max_quantize: epsilon must be a small number >= 0, got {epsilon!r}")
    scale = high / (np.max(np.abs(a), axis=axes, keepdims=True) + epsilon)
    q = np.clip(np.round(a * scale), low, high)
    return q.astype(dtype), scale.astype(np.float32)


def _bytes_along(arr, axis, dtype, who):
    """(the int8/uint8 array with ``axis`` moved first, that axis), checked."""
    if dtype not in ("int8", "uint8"):
        raise ValueError(f"{who}: dtype must be 'int8' or 'uint8', got {dtype!r}")
    a = _host(arr, who)
    if a.dtype != np.dtype(dtype):
        raise TypeError(f"{who}: expected a {dtype} array, got {a.dtype}")
    if a.ndim == 0:
        raise ValueError(f"{who}: expected an array with at least one axis")
    ax = _axes(axis, a.ndim, who)[0]
    return np.moveaxis(a, ax, 0), ax


def pack_int4(arr, axis=0, dtype="int8"):
    """Keras's: int4 values (int8 in [-8, 7]) two to a byte along ``axis`` (the first of each
    pair in the low nibble; an odd count padded with 0): ``(packed, packed_shape, original_count)``."""
    a, ax = _bytes_along(arr, axis, dtype, "pack_int4")
    n = a.shape[0]
    if n % 2:
        a = np.concatenate([a, np.zeros((1,) + a.shape[1:], a.dtype)])
    nib = a.astype(np.int16) & 0x0F
    packed = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).view(np.dtype(dtype))
    packed = np.moveaxis(packed, 0, ax)
    return packed, tuple(packed.shape), n


def unpack_int4(packed, orig_len, axis=0, dtype="int8"):
    """Keras's: ``pack_int4`` undone, the int4 values as int8 in [-8, 7] (``orig_len`` of them
    along ``axis``)."""
    p, ax = _bytes_along(packed, axis, dtype, "unpack_int4")
    p = p.view(np.uint8).astype(np.int16)
    if not isinstance(orig_len, (int, np.integer)) or isinstance(orig_len, bool) or \
            not 0 <= orig_len <= 2 * p.shape[0]:
        raise ValueError(f"unpack_int4: orig_len must be an int in [0, {2 * p.shape[0]}], got {orig_len!r}")
    low, high = p & 0x0F, (p >> 4) & 0x0F
    both = np.empty((2 * p.shape[0],) + p.shape[1:], np.int16)
    both[0::2], both[1::2] = low, high
    both = np.where(both > 7, both - 16, both)[:int(orig_len)]     # the nibbles' sign
    return np.moveaxis(both.astype(np.int8), 0, ax)


class Quantizer:
    """Keras's base class of quantizers: ``__call__(x)`` gives ``(quantized, scale)``; one of
    your own defines it (and ``get_config`` to be saved)."""

    def __init__(self, output_dtype="int8"):
        self.output_dtype = output_dtype

    def __call__(self, x):
        return x

    def get_config(self):
        raise NotImplementedError(f"{type(self).__name__} defines no get_config(): define it to save or copy "
                                  f"the quantizer")

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class AbsMaxQuantizer(Quantizer):
    """Keras's: ``abs_max_quantize`` over ``axis`` (the call's, else the constructor's, else
    the last) into ``value_range``."""

    def __init__(self, axis=None, value_range=(-127, 127), epsilon=EPSILON, output_dtype="int8"):
        super().__init__(output_dtype)
        self.axis = None if axis is None else (
            (int(axis),) if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool) else tuple(axis))
        self.value_range = _value_range(value_range, "AbsMaxQuantizer")
        if output_dtype == "int8" and (self.value_range[0] < -128 or self.value_range[1] > 127):
            raise ValueError(f"AbsMaxQuantizer: an int8 output needs value_range within [-128, 127], got "
                             f"{value_range!r}")
        self.epsilon = epsilon

    def __call__(self, x, axis=None, to_numpy=False):
        axis = axis if axis is not None else (self.axis if self.axis is not None else -1)
        return abs_max_quantize(x, axis, self.value_range, self.output_dtype, self.epsilon, to_numpy)

    def get_config(self):
        return {"axis": None if self.axis is None else list(self.axis), "value_range": list(self.value_range),
                "epsilon": self.epsilon, "output_dtype": self.output_dtype}


class QuantizationConfig:
    """Keras's base of quantization configs: a ``weight_quantizer`` (None: the mode's abs-max)
    and an ``activation_quantizer``; a subclass names its ``mode``."""

    def __init__(self, weight_quantizer=None, activation_quantizer=None):
        for what, q in (("weight_quantizer", weight_quantizer), ("activation_quantizer", activation_quantizer)):
            if q is not None and not callable(q):
                raise TypeError(f"{type(self).__name__}: {what} must be a Quantizer (or None), got {q!r}")
        self.weight_quantizer = weight_quantizer
        self.activation_quantizer = activation_quantizer

    @property
    def mode(self):
        raise NotImplementedError("QuantizationConfig is a base class: use Int8QuantizationConfig or "
                                  "Int4QuantizationConfig (or a subclass naming its mode)")

    def get_config(self):
        return {"weight_quantizer": serialize(self.weight_quantizer),
                "activation_quantizer": serialize(self.activation_quantizer)}

    @classmethod
    def from_config(cls, config):
        if not isinstance(config, dict):
            raise TypeError(f"{cls.__name__}.from_config takes a dict, got {type(config).__name__}")
        config = dict(config)
        for k in ("weight_quantizer", "activation_quantizer"):
            if isinstance(config.get(k), dict):
                config[k] = deserialize(config[k])
        return cls(**config)


def _check_output_dtype(config, quantizer):
    dtype = getattr(quantizer, "output_dtype", "int8")
    if dtype != "int8":
        raise ValueError(f"{type(config).__name__} needs a weight_quantizer with output_dtype='int8', got {dtype!r}")


class Int8QuantizationConfig(QuantizationConfig):
    """Keras's int8 config (``activation_quantizer="default"``: Keras's abs-max over the last axis)."""

    def __init__(self, weight_quantizer=None, activation_quantizer="default"):
        if isinstance(activation_quantizer, str) and activation_quantizer == "default":
            activation_quantizer = AbsMaxQuantizer()
        super().__init__(weight_quantizer, activation_quantizer)
        if weight_quantizer is not None:
            _check_output_dtype(self, weight_quantizer)

    @property
    def mode(self):
        return "int8"


class Int4QuantizationConfig(QuantizationConfig):
    """Keras's int4 config.  ``block_size``: Keras's groups of that many inputs, each with its
    own scale; pyggml keeps one scale per output (Keras's ``block_size=None``) whatever it says."""

    def __init__(self, weight_quantizer=None, activation_quantizer="default", block_size=128):
        if isinstance(activation_quantizer, str) and activation_quantizer == "default":
            activation_quantizer = None                   # (weights only, as Keras's int4)
        super().__init__(weight_quantizer, activation_quantizer)
        if block_size is not None and (not isinstance(block_size, (int, np.integer)) or isinstance(block_size, bool)
                                       or (block_size != -1 and block_size <= 0)):
            raise ValueError(f"Int4QuantizationConfig: block_size must be None, -1 or a positive int, got "
                             f"{block_size!r}")
        self.block_size = block_size
        if block_size is not None and block_size > 0 and (weight_quantizer is not None or
                                                          activation_quantizer is not None):
            raise ValueError("Int4QuantizationConfig: a quantizer of your own needs block_size=None (or -1), one "
                             "scale per output, as Keras's")
        if weight_quantizer is not None:
            if tuple(getattr(weight_quantizer, "value_range", (-8, 7))) != (-8, 7):
                raise ValueError(f"Int4QuantizationConfig needs a weight_quantizer with value_range=(-8, 7), got "
                                 f"{getattr(weight_quantizer, 'value_range', None)!r}")
            _check_output_dtype(self, weight_quantizer)

    @property
    def mode(self):
        return "int4"

    def get_config(self):
        return dict(super().get_config(), block_size=self.block_size)


def resolve(mode, config):
    """``model.quantize(mode, config)``'s (mode, config): either may be given; they must agree."""
    if isinstance(config, str):
        mode, config = config, None
    if config is not None:
        if not isinstance(config, QuantizationConfig):
            raise ValueError(f"quantize: config must be a QuantizationConfig (Int8QuantizationConfig, "
                             f"Int4QuantizationConfig), got {type(config).__name__}")
        if mode is not None and mode != config.mode:
            raise ValueError(f"quantize: mode={mode!r} contradicts config.mode={config.mode!r}")
        mode = config.mode
    if mode is None:
        raise ValueError("quantize: give a mode ('int8' or 'int4') or a config")
    return mode, config


def quantize_weight(quantizer, kernel, reduce_axes, mode, who):
    """A config's weight quantizer applied to a weight in Keras's layout: ``(q, scale)``, ``q``
    integers in the mode's range of the kernel's shape, ``scale`` one value per output (the
    axes other than ``reduce_axes``), checked."""
    if isinstance(quantizer, AbsMaxQuantizer) and quantizer.axis is None:
        q, scale = quantizer(kernel, axis=reduce_axes)         # (Keras's layers give theirs)
    else:
        out = quantizer(kernel)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ValueError(f"{who}: the weight quantizer must give (quantized, scale), got {type(out).__name__}")
        q, scale = out
    q = _host(q, who).astype(np.float64)
    scale = _host(scale, who).astype(np.float64)
    low, high = _RANGES[mode]
    if q.shape != kernel.shape or not np.all(np.isfinite(q)) or np.any(q != np.round(q)) or \
            np.any(q < low) or np.any(q > high):
        raise ValueError(f"{who}: the weight quantizer must give integers in [{low}, {high}] of the weight's shape "
                         f"{kernel.shape} ({mode})")
    want = tuple(1 if i in reduce_axes else d for i, d in enumerate(kernel.shape))
    if scale.size != int(np.prod(want)) or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise ValueError(f"{who}: the weight quantizer's scale must hold one positive value per output (shape "
                         f"{want}: pyggml keeps a scale per output, over axes {list(reduce_axes)}), got shape "
                         f"{scale.shape}")
    return q, scale.reshape(want)


_OBJECTS = {"Quantizer": Quantizer, "AbsMaxQuantizer": AbsMaxQuantizer, "QuantizationConfig": QuantizationConfig,
            "Int8QuantizationConfig": Int8QuantizationConfig, "Int4QuantizationConfig": Int4QuantizationConfig}


def serialize(quantizer):
    """Keras's serialized form of a quantizer (or a config), None as None."""
    if quantizer is None:
        return None
    from pyggml.saving.serialization_lib import serialize_keras_object
    return serialize_keras_object(quantizer)


def deserialize(config, custom_objects=None):
    """The quantizer (or config) of ``serialize``'s form."""
    from pyggml.saving.serialization_lib import deserialize_keras_object
    return deserialize_keras_object(config, custom_objects=dict(_OBJECTS, **(custom_objects or {})))


def get(identifier, **kwargs):
    """Keras's: a quantizer from a name, a config dict or a callable (None stays None)."""
    if identifier is None:
        return None
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        cls = _OBJECTS.get(identifier)
        if cls is None:
            raise ValueError(f"unknown quantizer {identifier!r}; known: {sorted(_OBJECTS)}")
        return cls(**kwargs)
    if callable(identifier):
        return identifier
    raise ValueError(f"could not interpret quantizer identifier {identifier!r}")
