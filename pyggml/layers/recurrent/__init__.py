"""Recurrent layers."""

from pyggml.layers.recurrent.bidirectional import Bidirectional
from pyggml.layers.recurrent.gru import GRU
from pyggml.layers.recurrent.lstm import LSTM
from pyggml.layers.recurrent.simple_rnn import SimpleRNN

__all__ = ["LSTM", "GRU", "SimpleRNN", "Bidirectional"]
