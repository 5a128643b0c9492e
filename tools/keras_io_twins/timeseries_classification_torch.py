#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/timeseries_classification.py: the same series,
the same fully convolutional network (3 x [Conv1D 64 k3 same -> BatchNorm
(Keras's momentum 0.99, epsilon 1e-3) -> ReLU] -> global average pooling -> Dense
softmax), Adam, batch 32, validation split 0.2, and the example's callbacks: the
best val_loss weights kept (ModelCheckpoint save_best_only), ReduceLROnPlateau(0.5,
patience 20, min_lr 1e-4), EarlyStopping(patience 50)."""

import copy

import numpy as np
import torch
from sklearn.metrics import accuracy_score
from torch import nn

from common import fit, keras_init, offline_data, predict, setup

QUICK, SEED = offline_data.parse_flags("Timeseries classification, PyTorch twin")
setup(SEED)
if QUICK:
    (x_train, y_train), (x_test, y_test) = offline_data.forda_like(n_train=1200, n_test=600, length=64)
else:
    (x_train, y_train), (x_test, y_test) = offline_data.forda_like()
x_train, x_test = x_train[:, None, :].astype(np.float32), x_test[:, None, :].astype(np.float32)
num_classes = len(np.unique(y_train))
idx = np.random.permutation(len(x_train))
x_train, y_train = x_train[idx], y_train[idx]
y_train[y_train == -1] = 0
y_test[y_test == -1] = 0
y_train, y_test = y_train.astype(np.int64), y_test.astype(np.int64)


def block(cin):
    return [nn.Conv1d(cin, 64, 3, padding=1), nn.BatchNorm1d(64, eps=1e-3, momentum=0.01), nn.ReLU()]


model = keras_init(nn.Sequential(*block(1), *block(64), *block(64), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                                 nn.Linear(64, num_classes)))
epochs = 500 if not QUICK else 15
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
best = {"val": np.inf, "state": None, "wait": 0, "plateau": 0, "plateau_best": np.inf}


def callbacks(epoch, logs, model, optimizer):
    v = logs["val_loss"]
    if v < best["val"]:                                  # ModelCheckpoint(save_best_only) + EarlyStopping
        best.update(val=v, state=copy.deepcopy(model.state_dict()), wait=0)
    else:
        best["wait"] += 1
    if v < best["plateau_best"] - 1e-4:                  # ReduceLROnPlateau(min_delta 1e-4)
        best.update(plateau_best=v, plateau=0)
    else:
        best["plateau"] += 1
        if best["plateau"] >= 20:
            for g in optimizer.param_groups:
                g["lr"] = max(g["lr"] * 0.5, 1e-4)
            best["plateau"] = 0
    return best["wait"] >= 50


accuracy = lambda out, y: (out.argmax(1) == y).float().mean()
fit(model, nn.CrossEntropyLoss(), opt, x_train, y_train, batch_size=32, epochs=epochs, validation_split=0.2,
    metric=accuracy, callbacks=[callbacks])
model.load_state_dict(best["state"])
y_pred = predict(model, x_test).argmax(axis=1)
print("Test accuracy", accuracy_score(y_pred, y_test))
