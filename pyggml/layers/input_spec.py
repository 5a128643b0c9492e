"""``InputSpec``: what a layer accepts (Keras's ``layer.input_spec``).

A layer that sets ``self.input_spec`` (one spec, or a list with one per input;
None entries accept anything) has every call checked against it before it runs:
symbolic, on tensors in a graph, on a tape or on arrays.  A mismatch raises
ValueError naming the layer, the input, what the spec expects and the full shape
received, as Keras does.  Shapes include the batch axis (None while symbolic).
"""

import numpy as np

from pyggml._ops_math import dtype as _dtype_name

__all__ = ["InputSpec", "assert_input_compatibility"]


def _opt_int(name, v, low=0):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"InputSpec: {name} must be an int >= {low} or None, got {v!r}")
    return v


class InputSpec:
    """``InputSpec(dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None, axes=None,
    allow_last_axis_squeeze=False, name=None, optional=False)``.

    ``shape`` includes the batch axis (None for any size); ``axes`` maps an axis (negative
    counts from the end) to the size it must have; ``allow_last_axis_squeeze`` accepts a
    shape with or without trailing axes of size 1 for ``ndim``/``shape``; ``optional``
    accepts a missing (None) input."""

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None, axes=None,
                 allow_last_axis_squeeze=False, name=None, optional=False):
        self.dtype = None if dtype is None else str(dtype)
        if shape is not None:
            shape = tuple(shape)
            for d in shape:
                if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 0):
                    raise ValueError(f"InputSpec: shape entries must be ints >= 0 or None, got {shape!r}")
            if ndim is not None and ndim != len(shape):
                raise ValueError(f"InputSpec: ndim={ndim} disagrees with shape={shape}")
            ndim = len(shape)
        self.shape = shape
        self.ndim = _opt_int("ndim", ndim)
        self.max_ndim = _opt_int("max_ndim", max_ndim)
        self.min_ndim = _opt_int("min_ndim", min_ndim)
        axes = dict(axes or {})
        for k, v in axes.items():
            if isinstance(k, bool) or not isinstance(k, int):
                raise ValueError(f"InputSpec: axes keys must be ints (axes), got {k!r}")
            _opt_int(f"axes[{k}]", v)
        if axes and (self.ndim is not None or self.max_ndim is not None):
            top = max(axes) if max(axes) >= 0 else None
            limit = self.ndim if self.ndim is not None else self.max_ndim
            if top is not None and top >= limit:
                raise ValueError(f"InputSpec: axis {top} is outside ndim {limit}")
        self.axes = axes
        self.allow_last_axis_squeeze = bool(allow_last_axis_squeeze)
        self.name = name
        self.optional = bool(optional)

    def __repr__(self):
        parts = [f"{k}={getattr(self, k)!r}" for k in ("dtype", "shape", "ndim", "max_ndim", "min_ndim", "axes")
                 if getattr(self, k)]
        return f"InputSpec({', '.join(parts)})"

    def get_config(self):
        return {"dtype": self.dtype, "shape": self.shape, "ndim": self.ndim, "max_ndim": self.max_ndim,
                "min_ndim": self.min_ndim, "axes": dict(self.axes)}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _squeezed(shape):
    shape = tuple(shape)
    while shape and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def _check_one(spec, i, shape, dtype, layer_name):
    where = f"Input {i} of layer '{layer_name}' is incompatible with the layer"
    ndim = len(shape)
    if spec.ndim is not None and not spec.allow_last_axis_squeeze and ndim != spec.ndim:
        raise ValueError(f"{where}: expected ndim={spec.ndim}, found ndim={ndim}. Full shape received: {shape}")
    if spec.max_ndim is not None and ndim > spec.max_ndim:
        raise ValueError(f"{where}: expected max_ndim={spec.max_ndim}, found ndim={ndim}. "
                         f"Full shape received: {shape}")
    if spec.min_ndim is not None and ndim < spec.min_ndim:
        raise ValueError(f"{where}: expected min_ndim={spec.min_ndim}, found ndim={ndim}. "
                         f"Full shape received: {shape}")
    if spec.dtype is not None and dtype is not None and dtype != spec.dtype:
        raise ValueError(f"{where}: expected dtype={spec.dtype}, found dtype={dtype}")
    for axis, value in spec.axes.items():
        if value is None:
            continue
        if not -ndim <= axis < ndim:
            raise ValueError(f"{where}: expected axis {axis} of the input shape to have value {value}, but the "
                             f"input has only {ndim} axes. Full shape received: {shape}")
        if shape[axis] is not None and shape[axis] != value:
            raise ValueError(f"{where}: expected axis {axis} of the input shape to have value {value}, "
                             f"but received input with shape {shape}")
    if spec.shape is not None:
        got, want = (_squeezed(shape), _squeezed(spec.shape)) if spec.allow_last_axis_squeeze else (shape, spec.shape)
        if len(got) != len(want) or any(w is not None and g is not None and w != g for w, g in zip(want, got)):
            raise ValueError(f"{where}: expected shape={spec.shape}, found shape={shape}")


def assert_input_compatibility(input_spec, inputs, layer_name):
    """Check inputs (symbolic nodes, tensors, Variables or arrays; None for a missing one)
    against a spec or a list of specs; ValueError when one does not fit."""
    if input_spec is None:
        return
    specs = list(input_spec) if isinstance(input_spec, (list, tuple)) else [input_spec]
    for s in specs:
        if s is not None and not isinstance(s, InputSpec):
            raise TypeError(f"layer '{layer_name}': input_spec must be an InputSpec or a list of them, "
                            f"got {type(s).__name__}")
    if len(specs) != len(inputs):
        raise ValueError(f"Layer '{layer_name}' expects {len(specs)} input(s), but it received {len(inputs)} "
                         f"input tensors")
    for i, (spec, x) in enumerate(zip(specs, inputs)):
        if spec is None:
            continue
        if x is None:
            if spec.optional:
                continue
            raise ValueError(f"Input {i} of layer '{layer_name}' is missing (None) and its InputSpec is not "
                             f"optional")
        shape, dtype = _shape_dtype(x)
        if shape is not None:
            _check_one(spec, i, shape, dtype, layer_name)


def _shape_dtype(x):
    """(full shape, dtype name) of a symbolic node, tensor, Variable or array; arrays as
    the layer takes them (floats as float32, integers as int32)."""
    shape = getattr(x, "shape", None)
    if isinstance(x, np.ndarray) or shape is None:
        try:
            a = np.asarray(x)
        except (TypeError, ValueError):
            return None, None
        kind = a.dtype.kind
        return a.shape, "float32" if kind == "f" else ("int32" if kind in "iub" else None)
    return tuple(shape), _dtype_name(x)
