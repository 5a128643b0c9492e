#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/bidirectional_lstm_imdb.py: the same reviews, padded
the same way (no mask: padding zeros are words, as in the example); Embedding(20000,
128), a bidirectional LSTM(64) returning sequences, a bidirectional LSTM(64) whose two
final states are joined (Keras's Bidirectional: the forward last step and the backward
pass's last step), Dense 1 sigmoid; Keras's initialisation, Adam (lr 1e-3, eps 1e-7),
binary cross-entropy, batch 32, 2 epochs."""

import numpy as np
import torch
from torch import nn

from common import fit, keras_init, offline_data, pad_sequences, setup

QUICK, SEED = offline_data.parse_flags("Bidirectional LSTM on IMDB, PyTorch twin")
setup(SEED)
max_features = 20000
maxlen = 200 if not QUICK else 32
if QUICK:
    (x_train, y_train), (x_val, y_val) = offline_data.imdb_like(num_words=max_features,
                                                                **offline_data.IMDB_QUICK_LSTM)
else:
    (x_train, y_train), (x_val, y_val) = offline_data.imdb_like(num_words=max_features)
x_train, x_val = pad_sequences(x_train, maxlen), pad_sequences(x_val, maxlen)
y_train, y_val = y_train.astype(np.float32)[:, None], y_val.astype(np.float32)[:, None]


class BiLSTMClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(max_features, 128)
        self.lstm1 = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
        self.lstm2 = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
        self.out = nn.Linear(128, 1)

    def forward(self, x):
        h, _ = self.lstm1(self.emb(x))
        _, (hn, _) = self.lstm2(h)
        return torch.sigmoid(self.out(torch.cat([hn[0], hn[1]], dim=1)))


model = keras_init(BiLSTMClassifier())
accuracy = lambda out, y: ((out > 0.5).float() == y).float().mean()
hist = fit(model, nn.BCELoss(), torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7), x_train, y_train,
           batch_size=32, epochs=2, validation_data=(x_val, y_val), metric=accuracy)
print("Validation accuracy:", hist["val_accuracy"][-1])
