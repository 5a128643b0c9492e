#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/addition_rnn.py: the same questions (drawn with
numpy's generator seeded as the port seeds it, in the same order), one-hot encoded,
reversed, split 90/10; LSTM(128) encoder, its last output repeated DIGITS + 1 times,
LSTM(128) decoder returning sequences, Dense(12) softmax per step; Keras's
initialisation, Adam (lr 1e-3, eps 1e-7), categorical cross-entropy, batch 32, one
epoch per iteration for the same iterations; accuracy per character, as Keras's."""

import numpy as np
import torch
from torch import nn

from common import evaluate, fit, keras_init, offline_data, setup

QUICK, SEED = offline_data.parse_flags("Sequence to sequence addition, PyTorch twin")
setup(SEED)
TRAINING_SIZE = 50000 if not QUICK else 10000
DIGITS, REVERSE = 3, True
MAXLEN = DIGITS + 1 + DIGITS
chars = sorted(set("0123456789+ "))
index = {c: i for i, c in enumerate(chars)}

questions, expected, seen = [], [], set()
while len(questions) < TRAINING_SIZE:
    f = lambda: int("".join(np.random.choice(list("0123456789")) for i in range(np.random.randint(1, DIGITS + 1))))
    a, b = f(), f()
    key = tuple(sorted((a, b)))
    if key in seen:
        continue
    seen.add(key)
    q = "{}+{}".format(a, b)
    query = q + " " * (MAXLEN - len(q))
    ans = str(a + b)
    ans += " " * (DIGITS + 1 - len(ans))
    questions.append(query[::-1] if REVERSE else query)
    expected.append(ans)


def encode(strings, rows):
    out = np.zeros((len(strings), rows, len(chars)), dtype=np.float32)
    for i, s in enumerate(strings):
        for j, c in enumerate(s):
            out[i, j, index[c]] = 1
    return out


x, y = encode(questions, MAXLEN), encode(expected, DIGITS + 1)
indices = np.arange(len(y))
np.random.shuffle(indices)
x, y = x[indices], y[indices]
split_at = len(x) - len(x) // 10
x_train, x_val, y_train, y_val = x[:split_at], x[split_at:], y[:split_at], y[split_at:]


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.LSTM(len(chars), 128, batch_first=True)
        self.dec = nn.LSTM(128, 128, batch_first=True)
        self.out = nn.Linear(128, len(chars))

    def forward(self, x):
        _, (h, _) = self.enc(x)
        seq, _ = self.dec(h[-1][:, None, :].repeat(1, DIGITS + 1, 1))
        return self.out(seq)                            # logits; the softmax is in the loss


def loss_fn(out, y):
    return -(y * torch.log_softmax(out, dim=-1)).sum(-1).mean()


accuracy = lambda out, y: (out.argmax(-1) == y.argmax(-1)).float().mean()
model = keras_init(Seq2Seq())
opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
epochs = 30 if not QUICK else 6
for epoch in range(1, epochs):
    print("Iteration", epoch)
    fit(model, loss_fn, opt, x_train, y_train, batch_size=32, epochs=1, validation_data=(x_val, y_val),
        metric=accuracy)
    for i in range(10):                      # the port's ten random samples shown per iteration
        np.random.randint(0, len(x_val))
print("Validation accuracy:", evaluate(model, loss_fn, x_val, y_val, metric=accuracy)["accuracy"])
