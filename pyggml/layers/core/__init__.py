"""Core layers: Dense, activations, Dropout, reshaping, Embedding."""

from pyggml.layers.core.activation import ELU, Activation, LeakyReLU, ReLU, Softmax
from pyggml.layers.core.dense import Dense
from pyggml.layers.core.dropout import Dropout
from pyggml.layers.core.embedding import Embedding
from pyggml.layers.core.reshaping import Flatten, Permute, Reshape

__all__ = ["Dense", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "Dropout", "Flatten", "Reshape",
           "Permute", "Embedding"]
