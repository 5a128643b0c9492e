"""Keras's ``keras.backend`` configuration functions that keras-io scripts call:
``epsilon()`` (the fuzz factor of ``ops.sqrt(ops.maximum(x, keras.backend.epsilon()))``),
``floatx()``, ``image_data_format()``, ``backend()`` and ``clear_session()``.

pyggml computes in float32 and keeps images channels-last by default, so ``set_floatx``
takes "float32" only and ``image_data_format`` is "channels_last" unless set; layers that
take ``data_format=`` choose it themselves."""

__all__ = ["epsilon", "set_epsilon", "floatx", "set_floatx", "image_data_format", "set_image_data_format",
           "backend", "clear_session", "is_keras_tensor"]

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
    """Resets the layer-name counters' global state, as Keras's does: nothing to reset in pyggml,
    whose layer names are numbered within each model."""
    return None


def is_keras_tensor(x):
    """Keras's: whether ``x`` is a symbolic tensor of a functional model (a ``pg.Input`` or a
    layer's output on one), not an array or a computed tensor."""
    from pyggml.layers.node import Node
    return isinstance(x, Node)
