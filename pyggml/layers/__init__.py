"""Layers with Keras's names, arguments and defaults.

Write your own by subclassing ``Layer`` (see ``pyggml.layers.layer`` for the
contract); register it with ``@pyggml.saving.register_serializable()`` so
that saved models holding it load.
"""

from pyggml.layers.attention import MultiHeadAttention
from pyggml.layers.convolutional import Conv1D, Conv2D
from pyggml.layers.core import (ELU, Activation, Dense, Dropout, Embedding, Flatten, LeakyReLU, Permute, ReLU,
                                Reshape, Softmax)
from pyggml.layers.input_layer import Input, InputLayer
from pyggml.layers.layer import Layer
from pyggml.layers.merging import (Add, Average, Concatenate, Multiply, Subtract, add, average, concatenate,
                                   multiply, subtract)
from pyggml.layers.node import Node
from pyggml.layers.normalization import BatchNormalization, LayerNormalization
from pyggml.layers.pooling import AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D, MaxPooling2D
from pyggml.layers.preprocessing import (CategoryEncoding, Discretization, HostLayer, IntegerLookup,
                                         Normalization, Rescaling, StringLookup)
from pyggml.layers.recurrent import GRU, LSTM

__all__ = ["Layer", "InputLayer", "Input", "Node", "Dense", "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax",
           "Dropout", "Flatten", "Reshape", "Permute", "Embedding", "Add", "Subtract", "Multiply", "Average",
           "Concatenate", "add", "subtract", "multiply", "average", "concatenate", "Conv1D", "Conv2D",
           "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D",
           "BatchNormalization", "LayerNormalization", "LSTM", "GRU", "MultiHeadAttention", "HostLayer",
           "Normalization", "Rescaling", "CategoryEncoding", "StringLookup", "IntegerLookup", "Discretization"]
