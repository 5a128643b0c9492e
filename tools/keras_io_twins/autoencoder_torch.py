#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/autoencoder.py: the same images and noise (numpy's
generator seeded as the port seeds it); encoder Conv2D 32 3x3 same relu -> MaxPool 2 ->
Conv2D 32 -> MaxPool 2, decoder Conv2D 32 -> UpSampling 2 (nearest) -> Conv2D 32 ->
UpSampling 2 -> Conv2D 1 sigmoid; Keras's initialisation, Adam (lr 1e-3, eps 1e-7),
binary cross-entropy, batch 128; trained to reconstruct, then to denoise, for the same
epochs, validated on the test images."""

import numpy as np
import torch
from torch import nn

from common import evaluate, fit, keras_init, offline_data, setup

QUICK, SEED = offline_data.parse_flags("Convolutional autoencoder, PyTorch twin")
setup(SEED)


def preprocess(a):
    return (a.astype("float32") / 255.0).reshape(len(a), 1, 28, 28)


def noise(a):
    return np.clip(a + 0.4 * np.random.normal(loc=0.0, scale=1.0, size=a.shape), 0.0, 1.0).astype(np.float32)


(train, _), (test, _) = offline_data.mnist_from_digits()
train, test = preprocess(train), preprocess(test)
noisy_train, noisy_test = noise(train), noise(test)
np.random.randint(len(train), size=10)          # the port's display() draws ten indices here


def conv(cin, cout, act):
    return [nn.Conv2d(cin, cout, 3, padding=1), act]


model = keras_init(nn.Sequential(
    *conv(1, 32, nn.ReLU()), nn.MaxPool2d(2), *conv(32, 32, nn.ReLU()), nn.MaxPool2d(2),
    *conv(32, 32, nn.ReLU()), nn.Upsample(scale_factor=2), *conv(32, 32, nn.ReLU()), nn.Upsample(scale_factor=2),
    *conv(32, 1, nn.Sigmoid())))
opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
loss = nn.BCELoss()
fit(model, loss, opt, train, train, batch_size=128, epochs=50 if not QUICK else 3, validation_data=(test, test))
print("Reconstruction val_loss:", evaluate(model, loss, test, test)["loss"])
np.random.randint(len(test), size=10)           # display() again
fit(model, loss, opt, noisy_train, train, batch_size=128, epochs=100 if not QUICK else 3,
    validation_data=(noisy_test, test))
print("Denoising val_loss:", evaluate(model, loss, noisy_test, test)["loss"])
