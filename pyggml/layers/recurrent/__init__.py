"""Recurrent layers."""

from pyggml.layers.recurrent.bidirectional import Bidirectional
from pyggml.layers.recurrent.gru import GRU
from pyggml.layers.recurrent.lstm import LSTM

__all__ = ["LSTM", "GRU", "Bidirectional"]
