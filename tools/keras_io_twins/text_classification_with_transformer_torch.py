#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/text_classification_with_transformer.py: the same
reviews, padded the same way; token + position embeddings (32), one Transformer block
(2-head self-attention with key_dim 32 per head, dropout 0.1, residual + LayerNorm
eps 1e-6, feed-forward 32 relu -> 32), global average pooling, dropout 0.1, Dense 20
relu, dropout 0.1, Dense 2 (softmax in the loss); Adam (Keras's lr 1e-3, eps 1e-7),
batch 32, 2 epochs, validated on the held-out reviews after each epoch."""

import math

import numpy as np
import torch
from torch import nn

from common import fit, keras_init, offline_data, pad_sequences, setup

QUICK, SEED = offline_data.parse_flags("Text classification with a Transformer, PyTorch twin")
setup(SEED)
vocab_size = 20000
maxlen = 200 if not QUICK else 64
if QUICK:
    (x_train, y_train), (x_val, y_val) = offline_data.imdb_like(num_words=vocab_size,
                                                                **offline_data.IMDB_QUICK_TRANSFORMER)
else:
    (x_train, y_train), (x_val, y_val) = offline_data.imdb_like(num_words=vocab_size)
pad = pad_sequences
x_train, x_val = pad(x_train, maxlen).astype(np.int64), pad(x_val, maxlen).astype(np.int64)
embed_dim, num_heads, ff_dim = 32, 2, 32


class MultiHeadAttention(nn.Module):
    """Keras's MultiHeadAttention(num_heads, key_dim): per-head projections of key_dim
    (with biases), softmax(q k^T / sqrt(key_dim)) v, an output projection back to the
    query's width."""

    def __init__(self, dim, heads, key_dim):
        super().__init__()
        self.h, self.k = heads, key_dim
        self.q, self.kk, self.v = (nn.Linear(dim, heads * key_dim) for _ in range(3))
        self.o = nn.Linear(heads * key_dim, dim)

    def forward(self, x):
        b, t, _ = x.shape
        split = lambda z: z.view(b, t, self.h, self.k).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.kk(x)), split(self.v(x))
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.k), dim=-1)
        return self.o((a @ v).transpose(1, 2).reshape(b, t, self.h * self.k))


class TransformerBlock(nn.Module):
    def __init__(self, dim, heads, ff, rate=0.1):
        super().__init__()
        self.att = MultiHeadAttention(dim, heads, dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ff), nn.ReLU(), nn.Linear(ff, dim))
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.d1, self.d2 = nn.Dropout(rate), nn.Dropout(rate)

    def forward(self, x):
        out1 = self.ln1(x + self.d1(self.att(x)))
        return self.ln2(out1 + self.d2(self.ffn(out1)))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab_size, embed_dim), nn.Embedding(maxlen, embed_dim)
        self.block = TransformerBlock(embed_dim, num_heads, ff_dim)
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(embed_dim, 20), nn.ReLU(), nn.Dropout(0.1),
                                  nn.Linear(20, 2))

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        return self.head(self.block(h).mean(1))


model = keras_init(Classifier())
accuracy = lambda out, y: (out.argmax(1) == y).float().mean()
hist = fit(model, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7), x_train,
           y_train, batch_size=32, epochs=2, validation_data=(x_val, y_val), metric=accuracy)
print("Validation accuracy:", hist["val_accuracy"][-1])
