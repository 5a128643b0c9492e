"""A layer's ``get_weights()``: pyggml's ``{name: array}`` that also answers Keras's list
use by position (``layer.get_weights()[0]``: the first weight in Keras's layout, e.g. a
Conv2D kernel as (kh, kw, in, out)); and Keras's list form of ``set_weights``."""

import numpy as np

__all__ = ["LayerWeights", "keras_value", "from_keras_value"]


def keras_value(variable, value):
    """``value`` (pyggml's layout) in Keras's layout (``Variable.keras_shape``/``keras_axes``)."""
    a = np.asarray(value)
    if variable.keras_shape is not None:
        a = a.reshape(tuple(variable.keras_shape))
    if variable.keras_axes is not None:
        a = a.transpose(tuple(variable.keras_axes))
    return np.ascontiguousarray(a)


def from_keras_value(variable, value, what):
    """An array in Keras's layout back in pyggml's; a wrong shape is refused, naming the weight."""
    a = np.asarray(value)
    base = tuple(variable.keras_shape) if variable.keras_shape is not None else tuple(variable.shape)
    axes = tuple(variable.keras_axes) if variable.keras_axes is not None else tuple(range(len(base)))
    want = tuple(base[i] for i in axes)
    if a.shape != want:
        raise ValueError(f"{what}: weight {variable.name!r} takes an array of shape {want} (Keras's layout), got "
                         f"{a.shape}")
    return np.ascontiguousarray(a.transpose(tuple(int(i) for i in np.argsort(axes))).reshape(variable.shape))


class LayerWeights(dict):
    """``{name: array}`` in pyggml's layouts; an int or a slice indexes the weights in order,
    in Keras's layouts, as Keras's list does."""

    def __init__(self, named):
        super().__init__((n, v.numpy()) for n, v in named)
        self._variables = [v for _, v in named]

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool) or isinstance(key, slice):
            values = [keras_value(v, dict.__getitem__(self, n)) for n, v in zip(self.keys(), self._variables)]
            try:
                return values[key]
            except IndexError:
                raise IndexError(f"the layer has {len(values)} weights, no index {key}") from None
        return dict.__getitem__(self, key)
