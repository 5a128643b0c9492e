"""Weight initialisers, as Keras's ``keras.initializers``: names (``"glorot_uniform"``,
``"he_normal"``, ``"Ones"``, ...), classes (``HeNormal()``, ``RandomNormal(stddev=0.02)``,
``Constant(0.1)``), ``get``, ``serialize`` and ``deserialize``.

Internally an initializer is called ``init(shape, rng, layout)``: ``shape`` in the
weight's own layout (PyTorch's: (out, in) for Dense, (out, in, *kernel) for a
convolution; ``layout="in_out"`` for (in, out) weights such as Embedding's), ``rng`` a
numpy Generator.  A class instance may also be called as Keras's are, ``init(shape,
dtype=None)``, with ``shape`` in Keras's layout (the kernel's last two axes (in, out)).
"""

import math

import numpy as np

from pyggml import _windows
from pyggml._tensor_arrays import as_ops_result

__all__ = ["Initializer", "Constant", "Zeros", "Ones", "RandomNormal", "RandomUniform", "TruncatedNormal",
           "VarianceScaling", "GlorotUniform", "GlorotNormal", "HeNormal", "HeUniform", "LecunNormal",
           "LecunUniform", "Orthogonal", "Identity", "glorot_uniform", "glorot_normal", "he_normal", "he_uniform",
           "lecun_normal", "lecun_uniform", "orthogonal", "identity", "zeros", "ones", "constant", "random_normal",
           "random_uniform", "truncated_normal", "variance_scaling", "get", "serialize", "deserialize",
           "config_value", "OrthogonalInitializer", "IdentityInitializer", "STFT", "STFTInitializer", "stft"]


def _fans(shape, kind):
    shape = tuple(shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if kind == "keras":           # Keras's layouts: (in, out), (*kernel, in, out)
        receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        return shape[-2] * receptive, shape[-1] * receptive
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    if kind == "in_out":          # (in, out) layouts, e.g. Embedding
        return shape[0] * receptive, shape[1] * receptive
    return shape[1] * receptive, shape[0] * receptive


def _truncated(rng, mean, stddev, shape):
    """Normal draws, each beyond two standard deviations drawn again (Keras's truncated normal)."""
    out = rng.standard_normal(size=shape)
    bad = np.abs(out) > 2.0
    while bad.any():
        out[bad] = rng.standard_normal(size=int(bad.sum()))
        bad = np.abs(out) > 2.0
    return out * stddev + mean


# --- the functions (the names layers take) ------------------------------------------------------

def glorot_uniform(shape, rng, layout="out_in"):
    fan_in, fan_out = _fans(shape, layout)
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(np.float32)


def orthogonal(shape, rng, layout="out_in"):
    # PyTorch's flattening (out, the rest) here; Keras's (the rest, out) in Keras's layout
    rows, cols = (int(np.prod(shape[:-1])), shape[-1]) if layout == "keras" else (shape[0], int(np.prod(shape[1:])))
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return q[:rows, :cols].reshape(shape).astype(np.float32)


def uniform_embedding(shape, rng, layout="in_out"):
    return rng.uniform(-0.05, 0.05, size=shape).astype(np.float32)


def zeros(shape, rng=None, layout=None):
    return np.zeros(shape, dtype=np.float32)


def ones(shape, rng=None, layout=None):
    return np.ones(shape, dtype=np.float32)


def _variance_scaling(shape, rng, layout, scale, mode, distribution, fans=None):
    fan_in, fan_out = _fans(shape, layout) if fans is None else fans
    n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[mode]
    variance = scale / max(1.0, n)
    if distribution == "uniform":
        limit = math.sqrt(3.0 * variance)
        return rng.uniform(-limit, limit, size=shape).astype(np.float32)
    if distribution == "truncated_normal":
        # the standard deviation of a unit normal truncated at two deviations
        return _truncated(rng, 0.0, math.sqrt(variance) / 0.87962566103423978, shape).astype(np.float32)
    return (rng.standard_normal(size=shape) * math.sqrt(variance)).astype(np.float32)


def _scaling(scale, mode, distribution):
    def fn(shape, rng, layout="out_in"):
        return _variance_scaling(shape, rng, layout, scale, mode, distribution)
    return fn


glorot_normal = _scaling(1.0, "fan_avg", "truncated_normal")
he_normal = _scaling(2.0, "fan_in", "truncated_normal")
he_uniform = _scaling(2.0, "fan_in", "uniform")
lecun_normal = _scaling(1.0, "fan_in", "truncated_normal")
lecun_uniform = _scaling(1.0, "fan_in", "uniform")
variance_scaling = _scaling(1.0, "fan_in", "truncated_normal")


def random_normal(shape, rng, layout=None):
    return (rng.standard_normal(size=shape) * 0.05).astype(np.float32)


def random_uniform(shape, rng, layout=None):
    return rng.uniform(-0.05, 0.05, size=shape).astype(np.float32)


def truncated_normal(shape, rng, layout=None):
    return _truncated(rng, 0.0, 0.05, shape).astype(np.float32)


def identity(shape, rng=None, layout=None):
    if len(shape) != 2:
        raise ValueError(f"the identity initializer takes 2-D weights, got shape {tuple(shape)}")
    return np.eye(*shape, dtype=np.float32)


def constant(shape, rng=None, layout=None):
    return np.zeros(shape, dtype=np.float32)


# --- the classes -----------------------------------------------------------------------------------

def _number(v, name, cls, minimum=None, positive=False):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
        raise TypeError(f"{cls}: {name} must be a finite number, got {v!r}")
    if positive and not v > 0:
        raise ValueError(f"{cls}: {name} must be positive, got {v!r}")
    return float(v)


def _seed(seed, cls):
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TypeError(f"{cls}: seed must be None or an int >= 0, got {seed!r}")
    return int(seed)


class Initializer:
    """Keras's base class: ``__call__(shape, dtype=None)`` returns the values (float32), and
    ``get_config``/``from_config`` rebuild it.  Subclasses define ``draw(shape, rng, layout)``."""

    def draw(self, shape, rng, layout):
        raise NotImplementedError(f"{type(self).__name__} must define draw(shape, rng, layout)")

    def __call__(self, shape, rng=None, layout="keras", dtype=None):
        from pyggml import _random
        if isinstance(rng, str) or (rng is not None and not isinstance(rng, np.random.Generator)):
            dtype, rng = rng, None                       # Keras's __call__(shape, dtype)
        keras_call = rng is None
        if dtype not in (None, "float32"):
            raise ValueError(f"{type(self).__name__}: weights are float32, got dtype={dtype!r}")
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
        seed = getattr(self, "seed", None)
        if rng is None or seed is not None:
            # a seeded initializer draws the same values each call, as Keras's (stateless) do
            rng = np.random.default_rng(seed) if seed is not None else _random.rng()
        values = np.asarray(self.draw(shape, rng, layout), dtype=np.float32).reshape(shape)
        # Keras's call gives a tensor (its .numpy(); float() of a (1, 1) draw); a layer's draw stays numpy
        return as_ops_result(values) if keras_call else values

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_config().items())})"


class Constant(Initializer):
    def __init__(self, value=0.0):
        if isinstance(value, (list, tuple, np.ndarray)):
            a = np.asarray(value, dtype=np.float64)
            if not np.all(np.isfinite(a)):
                raise ValueError("Constant: value must be finite")
            self.value = a.tolist()
        else:
            self.value = _number(value, "value", "Constant")

    def draw(self, shape, rng, layout):
        return np.broadcast_to(np.asarray(self.value, dtype=np.float32), shape).copy()

    def get_config(self):
        return {"value": self.value}


class Zeros(Initializer):
    def draw(self, shape, rng, layout):
        return np.zeros(shape, np.float32)


class Ones(Initializer):
    def draw(self, shape, rng, layout):
        return np.ones(shape, np.float32)


class RandomNormal(Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean = _number(mean, "mean", "RandomNormal")
        self.stddev = _number(stddev, "stddev", "RandomNormal", positive=True)
        self.seed = _seed(seed, "RandomNormal")

    def draw(self, shape, rng, layout):
        return rng.standard_normal(size=shape) * self.stddev + self.mean

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}


class TruncatedNormal(RandomNormal):
    def draw(self, shape, rng, layout):
        return _truncated(rng, self.mean, self.stddev, shape)


class RandomUniform(Initializer):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval = _number(minval, "minval", "RandomUniform")
        self.maxval = _number(maxval, "maxval", "RandomUniform")
        if self.maxval < self.minval:
            raise ValueError(f"RandomUniform: maxval ({maxval}) must not be below minval ({minval})")
        self.seed = _seed(seed, "RandomUniform")

    def draw(self, shape, rng, layout):
        return rng.uniform(self.minval, self.maxval, size=shape)

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed}


class VarianceScaling(Initializer):
    _MODES = ("fan_in", "fan_out", "fan_avg")
    _DISTRIBUTIONS = ("truncated_normal", "untruncated_normal", "uniform")

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None, input_axes=None,
                 output_axes=None):
        cls = type(self).__name__
        # Keras 3.15's: the axes of the shape whose sizes make fan_in and fan_out (both or neither)
        for axes_name, axes in (("input_axes", input_axes), ("output_axes", output_axes)):
            if axes is not None and (not isinstance(axes, (list, tuple)) or
                                     not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                             for a in axes)):
                raise TypeError(f"{cls}: {axes_name} must be None or a list of ints, got {axes!r}")
        self.input_axes = None if input_axes is None else [int(a) for a in input_axes]
        self.output_axes = None if output_axes is None else [int(a) for a in output_axes]
        self.scale = _number(scale, "scale", cls, positive=True)
        if mode not in self._MODES:
            raise ValueError(f"{cls}: mode must be one of {self._MODES}, got {mode!r}")
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in self._DISTRIBUTIONS:
            raise ValueError(f"{cls}: distribution must be one of {self._DISTRIBUTIONS}, got {distribution!r}")
        self.mode, self.distribution = mode, distribution
        self.seed = _seed(seed, cls)

    def draw(self, shape, rng, layout):
        if self.input_axes is not None and self.output_axes is not None:
            try:
                fans = (int(np.prod([shape[a] for a in self.input_axes])),
                        int(np.prod([shape[a] for a in self.output_axes])))
            except IndexError:
                raise ValueError(f"{type(self).__name__}: input_axes {self.input_axes} / output_axes "
                                 f"{self.output_axes} do not fit a weight of shape {tuple(shape)}") from None
            return _variance_scaling(shape, rng, layout, self.scale, self.mode, self.distribution, fans)
        return _variance_scaling(shape, rng, layout, self.scale, self.mode, self.distribution)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution, "seed": self.seed,
                "input_axes": self.input_axes, "output_axes": self.output_axes}


def _preset(name, scale, mode, distribution):
    class Preset(VarianceScaling):
        def __init__(self, seed=None, input_axes=None, output_axes=None):
            super().__init__(scale, mode, distribution, seed, input_axes, output_axes)

        def get_config(self):
            return {"seed": self.seed, "input_axes": self.input_axes, "output_axes": self.output_axes}
    Preset.__name__ = Preset.__qualname__ = name
    Preset.__doc__ = f"Keras's {name}: VarianceScaling(scale={scale}, mode={mode!r}, distribution={distribution!r})."
    return Preset


GlorotUniform = _preset("GlorotUniform", 1.0, "fan_avg", "uniform")
GlorotNormal = _preset("GlorotNormal", 1.0, "fan_avg", "truncated_normal")
HeNormal = _preset("HeNormal", 2.0, "fan_in", "truncated_normal")
HeUniform = _preset("HeUniform", 2.0, "fan_in", "uniform")
LecunNormal = _preset("LecunNormal", 1.0, "fan_in", "truncated_normal")
LecunUniform = _preset("LecunUniform", 1.0, "fan_in", "uniform")


class Orthogonal(Initializer):
    def __init__(self, gain=1.0, seed=None):
        self.gain = _number(gain, "gain", "Orthogonal")
        self.seed = _seed(seed, "Orthogonal")

    def draw(self, shape, rng, layout):
        if len(shape) < 2:
            raise ValueError(f"Orthogonal takes weights of at least 2 dimensions, got shape {shape}")
        return orthogonal(shape, rng) * self.gain

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed}


class Identity(Initializer):
    def __init__(self, gain=1.0):
        self.gain = _number(gain, "gain", "Identity")

    def draw(self, shape, rng, layout):
        return identity(shape) * self.gain

    def get_config(self):
        return {"gain": self.gain}


class STFT(Initializer):
    """Keras's STFT initializer: the kernel ``(frame_length, channels, bins)`` of a short-time
    Fourier transform as a convolution, ``cos`` (``side="real"``) or ``sin`` (``"imag"``) of
    ``-2 pi t f / fft_length`` with ``fft_length = 2 (bins - 1)``, times the window (``"hann"``,
    ``"hamming"``, a scipy window name when scipy is installed, an array, or None) divided by
    its L2 (``scaling="density"``) or L1 (``"spectrum"``) norm."""

    def __init__(self, side="real", window="hann", scaling="density", periodic=False):
        if side not in ("real", "imag"):
            raise ValueError(f"STFT: side should be 'real' or 'imag', not {side!r}")
        if scaling is not None and scaling not in ("density", "spectrum"):
            raise ValueError(f"STFT: scaling must be None, 'density' or 'spectrum', got {scaling!r}")
        if not isinstance(periodic, (bool, np.bool_)):
            raise TypeError(f"STFT: periodic must be True or False, got {periodic!r}")
        if isinstance(window, str) and window not in _windows.WINDOWS:
            _scipy_window(window, 4, False)                      # an unknown name fails here, as Keras's
        elif not isinstance(window, str):
            window = _windows.check_window(window, "STFT")
        self.side, self.window, self.scaling, self.periodic = side, window, scaling, bool(periodic)

    def draw(self, shape, rng, layout):
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"STFT: the shape must be (frame_length, channels, fft_length // 2 + 1), got {shape}")
        frame_length, channels, bins = shape
        window = self.window
        if isinstance(window, str) and window not in _windows.WINDOWS:
            window = _scipy_window(window, frame_length, self.periodic)
        real, imag = _windows.stft_kernels(frame_length, 2 * (bins - 1), window, self.periodic, self.scaling,
                                           "STFT")
        kernel = real if self.side == "real" else imag
        if kernel.shape[2] != bins:                    # one bin: fft_length 0 gives the zero frequency alone
            kernel = kernel[:, :, :1]
        return np.broadcast_to(kernel, shape)

    def get_config(self):
        return {"side": self.side, "window": self.window, "periodic": self.periodic, "scaling": self.scaling}


def _scipy_window(name, length, periodic):
    try:
        from scipy import signal
    except ImportError:
        raise ValueError(f"STFT: window {name!r} needs scipy (installed, it provides every scipy.signal window); "
                         f"without it: {_windows.WINDOWS}, None or an array") from None
    try:
        return np.asarray(signal.get_window(name, length, fftbins=periodic), np.float64)
    except ValueError as e:
        raise ValueError(f"STFT: unknown window {name!r} ({e})") from None


def stft(shape, rng=None, layout=None):
    return STFT().draw(tuple(shape), rng, layout)


# --- lookup ------------------------------------------------------------------------------------------

# Keras's longer names of the same three
OrthogonalInitializer = Orthogonal
IdentityInitializer = Identity
STFTInitializer = STFT

_BY_NAME = {"glorot_uniform": glorot_uniform, "orthogonal": orthogonal, "zeros": zeros, "ones": ones,
            "uniform": uniform_embedding, "glorot_normal": glorot_normal, "he_normal": he_normal,
            "he_uniform": he_uniform, "lecun_normal": lecun_normal, "lecun_uniform": lecun_uniform,
            "random_normal": random_normal, "random_uniform": random_uniform, "truncated_normal": truncated_normal,
            "identity": identity, "constant": constant, "variance_scaling": variance_scaling, "normal": random_normal,
            "stft": stft}

_CLASSES = {c.__name__: c for c in (Constant, Zeros, Ones, RandomNormal, RandomUniform, TruncatedNormal,
                                    VarianceScaling, GlorotUniform, GlorotNormal, HeNormal, HeUniform, LecunNormal,
                                    LecunUniform, Orthogonal, Identity, STFT)}
# Keras's class names as strings stand for the same initializer as the snake-case names
_CLASS_ALIASES = {"GlorotUniform": "glorot_uniform", "GlorotNormal": "glorot_normal", "HeNormal": "he_normal",
                  "HeUniform": "he_uniform", "LecunNormal": "lecun_normal", "LecunUniform": "lecun_uniform",
                  "Zeros": "zeros", "Ones": "ones", "RandomNormal": "random_normal",
                  "RandomUniform": "random_uniform", "TruncatedNormal": "truncated_normal",
                  "Orthogonal": "orthogonal", "Identity": "identity", "Constant": "constant",
                  "VarianceScaling": "variance_scaling", "zero": "zeros", "one": "ones", "STFT": "stft",
                  "STFTInitializer": "stft"}


def serialize(initializer):
    """Keras's form: ``{"module", "class_name", "config", "registered_name"}`` for an
    instance; a name stays a name."""
    if isinstance(initializer, str) or initializer is None:
        return initializer
    named = next((k for k, v in _NAMED.items() if v is initializer), None)
    if named is not None:                 # what get("he_normal") gave: its name, as before
        return named
    if isinstance(initializer, Initializer):
        return {"module": "keras.initializers", "class_name": type(initializer).__name__,
                "config": initializer.get_config(), "registered_name": None}
    name = _name_of_function(initializer)
    if name is not None:                  # what get("he_normal") gave: its name
        return name
    raise TypeError(f"cannot serialize the initializer {initializer!r}: give a name or an Initializer instance")


def _name_of_function(initializer):
    """The name under which get() gives this very function, or None."""
    return next((k for k, v in _BY_NAME.items() if v is initializer), None)


def deserialize(config):
    if isinstance(config, str):
        return get(config)
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"an initializer's config is a name or a dict with 'class_name', got {config!r}")
    cls = _CLASSES.get(config["class_name"])
    if cls is None:
        raise ValueError(f"unknown initializer class {config['class_name']!r}; known: {sorted(_CLASSES)}")
    return cls.from_config(dict(config.get("config") or {}))


# the class each name stands for: get() gives an instance, as Keras's
_CLASS_OF_NAME = {"glorot_uniform": GlorotUniform, "glorot_normal": GlorotNormal, "he_normal": HeNormal,
                  "he_uniform": HeUniform, "lecun_normal": LecunNormal, "lecun_uniform": LecunUniform,
                  "orthogonal": Orthogonal, "zeros": Zeros, "ones": Ones, "uniform": RandomUniform,
                  "normal": RandomNormal, "random_normal": RandomNormal, "random_uniform": RandomUniform,
                  "truncated_normal": TruncatedNormal, "identity": Identity, "constant": Constant,
                  "variance_scaling": VarianceScaling, "stft": STFT}


def _keras_alias(fn, cls):
    """``fn`` (the draw of a name) that is also Keras's lowercase alias of its class:
    ``glorot_uniform(seed=1)`` (no shape) gives a GlorotUniform, as
    ``keras.initializers.glorot_uniform`` is that class; given a shape it draws, as before."""
    import functools

    @functools.wraps(fn)
    def alias(*args, **kwargs):
        if not args and "shape" not in kwargs:
            return cls(**kwargs)
        return fn(*args, **kwargs)
    alias.keras_class = cls
    return alias


for _name, _cls in _CLASS_OF_NAME.items():
    if _name in globals() and _name in _BY_NAME:
        globals()[_name] = _BY_NAME[_name] = _keras_alias(_BY_NAME[_name], _cls)
        if _BY_NAME.get("normal") is not None and _name == "random_normal":
            _BY_NAME["normal"] = _BY_NAME[_name]
del _name, _cls


class _FromArray(Constant):
    """Keras's initializer of an array given in its place (``kernel_initializer=array``): that
    array, for a weight of its shape only."""

    def draw(self, shape, rng, layout):
        a = np.asarray(self.value, dtype=np.float32)
        if tuple(int(d) for d in shape) != a.shape:
            raise ValueError(f"an initializer given as an array of shape {a.shape} cannot make a weight of shape "
                             f"{tuple(shape)}")
        return a.copy()


def get(name):
    """The initializer for a name (Keras's snake-case or class name: an instance of its class,
    callable as ``init(shape, dtype=None)``), a config dict (an instance), an instance or a
    callable (as it is), or an array (or tensor): that array, for a weight of its shape."""
    if callable(name):
        return name
    if isinstance(name, dict):
        return deserialize(name)
    if isinstance(name, np.ndarray) or (hasattr(name, "numpy") and hasattr(name, "shape")):
        a = np.asarray(name.numpy() if not isinstance(name, np.ndarray) else name)
        if a.dtype.kind not in "biuf" or a.ndim == 0:
            raise TypeError(f"an initializer given as an array must hold numbers in at least one axis, got "
                            f"dtype {a.dtype}, shape {a.shape}")
        return _FromArray(a)
    if not isinstance(name, str):
        raise TypeError(f"an initializer is a name, a config dict, a callable or an array, got {name!r}")
    key = _CLASS_ALIASES.get(name, name)
    if key not in _BY_NAME:
        raise ValueError(f"unknown initializer {name!r}; known: {sorted(_BY_NAME)} (or their class names: "
                         f"{sorted(_CLASSES)})")
    if key not in _NAMED:
        _NAMED[key] = _CLASS_OF_NAME[key]()
    return _NAMED[key]


# one instance per name (a named initializer is unseeded and holds no state): get() of a name and of
# its class name give the same object, as get() gave the same function before
_NAMED = {}


def drawer(name):
    """What a weight draws its initial values with: for a name, its function (the draws a seed
    gave before get() gave instances); else what get() gives."""
    if isinstance(name, str):
        key = _CLASS_ALIASES.get(name, name)
        if key in _BY_NAME:
            return _BY_NAME[key]
    return get(name)


def config_value(initializer):
    """What a layer's get_config keeps of an initializer argument: a name, an instance's
    serialized dict, or None for another callable (which a config cannot hold)."""
    if isinstance(initializer, str):
        return initializer
    if isinstance(initializer, Initializer):
        return serialize(initializer)
    if isinstance(initializer, dict):               # a config given back (from_config): kept as it is
        return dict(initializer)
    return _name_of_function(initializer)
