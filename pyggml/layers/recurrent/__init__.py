"""Recurrent layers and cells."""

from pyggml.layers.recurrent.bidirectional import Bidirectional
from pyggml.layers.recurrent.conv_lstm1d import ConvLSTM1D
from pyggml.layers.recurrent.conv_lstm2d import ConvLSTM2D
from pyggml.layers.recurrent.cells import GRUCell, LSTMCell, SimpleRNNCell, StackedRNNCells
from pyggml.layers.recurrent.gru import GRU
from pyggml.layers.recurrent.lstm import LSTM
from pyggml.layers.recurrent.rnn import RNN
from pyggml.layers.recurrent.simple_rnn import SimpleRNN

__all__ = ["LSTM", "GRU", "SimpleRNN", "Bidirectional", "RNN", "SimpleRNNCell", "LSTMCell", "GRUCell",
           "StackedRNNCells", "ConvLSTM1D", "ConvLSTM2D"]
