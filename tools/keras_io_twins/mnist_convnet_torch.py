#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/mnist_convnet.py: the same data, architecture
(Conv2D 32 -> MaxPool -> Conv2D 64 -> MaxPool -> Flatten -> Dropout 0.5 -> Dense
10 softmax), Keras's initialisation, Adam (lr 1e-3), batch 128, the same epochs
and validation split."""

import numpy as np
import torch
from torch import nn

from common import fit, evaluate, keras_init, offline_data, setup

QUICK, SEED = offline_data.parse_flags("MNIST convnet, PyTorch twin")
setup(SEED)
num_classes = 10
(x_train, y_train), (x_test, y_test) = offline_data.mnist_from_digits()
x_train = (x_train.astype("float32") / 255)[:, None]         # channels first
x_test = (x_test.astype("float32") / 255)[:, None]
y_train, y_test = y_train.astype(np.int64), y_test.astype(np.int64)

model = keras_init(nn.Sequential(
    nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Dropout(0.5), nn.Linear(1600, num_classes)))
batch_size = 128
epochs = 15 if not QUICK else 8
accuracy = lambda out, y: (out.argmax(1) == y).float().mean()
fit(model, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), lr=1e-3), x_train, y_train,
    batch_size=batch_size, epochs=epochs, validation_split=0.1, metric=accuracy)
score = evaluate(model, nn.CrossEntropyLoss(), x_test, y_test, metric=accuracy)
print("Test loss:", score["loss"])
print("Test accuracy:", score["accuracy"])
