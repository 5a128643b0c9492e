"""Layers with Keras's names, arguments and defaults."""

from pyggml.layers.base import Input, InputLayer, Layer
from pyggml.layers.core import Activation, Add, Concatenate, Dense, Dropout, Flatten, Permute, Reshape
from pyggml.layers.convolutional import (AveragePooling2D, Conv1D, Conv2D, GlobalAveragePooling2D,
                                         GlobalMaxPooling2D, MaxPooling2D)
from pyggml.layers.embedding import Embedding
from pyggml.layers.normalization import BatchNormalization, LayerNormalization
from pyggml.layers.recurrent import GRU, LSTM
from pyggml.layers.attention import MultiHeadAttention

__all__ = ["Layer", "InputLayer", "Input", "Dense", "Activation", "Dropout", "Flatten", "Reshape", "Permute",
           "Add", "Concatenate", "Conv1D", "Conv2D", "MaxPooling2D", "AveragePooling2D",
           "GlobalAveragePooling2D", "GlobalMaxPooling2D", "BatchNormalization", "LayerNormalization",
           "Embedding", "LSTM", "GRU", "MultiHeadAttention"]

_REGISTRY = {}


def register(cls):
    """Make a layer class known to model loading (by its class name)."""
    _REGISTRY[cls.__name__] = cls
    return cls


for _n in __all__:
    _c = globals()[_n]
    if isinstance(_c, type):
        register(_c)


def get_class(name):
    if name not in _REGISTRY:
        raise ValueError(f"unknown layer class {name!r}")
    return _REGISTRY[name]
