#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/vae.py: the same images; encoder Conv2D 32 and 64
(3x3, stride 2, Keras's "same": the extra padding row and column after the image) with
relu, Dense 16 relu, Dense 2 for z_mean and for z_log_var, z = z_mean + exp(z_log_var / 2)
* normal noise; decoder Dense 7*7*64 relu, Conv2DTranspose 64 and 32 (3x3, stride 2,
"same": the full transposed output less its last row and column, as Keras's) relu,
Conv2DTranspose 1 sigmoid; Keras's initialisation, Adam (lr 1e-3, eps 1e-7), batch 128,
the loss the port's train_step writes (binary cross-entropy summed over the pixels, the
mean over the batch, plus the KL term); the same metric on the held-out images."""

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from common import keras_init, offline_data, setup

QUICK, SEED = offline_data.parse_flags("Variational autoencoder, PyTorch twin")
setup(SEED)


class SameConv(nn.Conv2d):
    def forward(self, x):                       # Keras's "same" at stride 2: pad after
        return super().forward(F.pad(x, (0, 1, 0, 1)))


class SameConvT(nn.ConvTranspose2d):
    def forward(self, x):                       # Keras's "same": 2 * in, the last row/column cut
        y = super().forward(x)
        return y[:, :, :2 * x.shape[2], :2 * x.shape[3]] if self.stride[0] == 2 else y


class VAE(nn.Module):
    def __init__(self, latent_dim=2):
        super().__init__()
        self.enc = nn.Sequential(SameConv(1, 32, 3, stride=2), nn.ReLU(), SameConv(32, 64, 3, stride=2), nn.ReLU())
        self.fc = nn.Linear(7 * 7 * 64, 16)
        self.mean, self.log_var = nn.Linear(16, latent_dim), nn.Linear(16, latent_dim)
        self.dec_fc = nn.Linear(latent_dim, 7 * 7 * 64)
        self.dec = nn.Sequential(SameConvT(64, 64, 3, stride=2), nn.ReLU(), SameConvT(64, 32, 3, stride=2), nn.ReLU(),
                                 nn.ConvTranspose2d(32, 1, 3, padding=1), nn.Sigmoid())

    def encode(self, x):
        h = self.enc(x).permute(0, 2, 3, 1).reshape(len(x), -1)        # Flatten of channels-last
        h = F.relu(self.fc(h))
        return self.mean(h), self.log_var(h)

    def decode(self, z):
        h = F.relu(self.dec_fc(z)).reshape(len(z), 7, 7, 64).permute(0, 3, 1, 2)
        return self.dec(h)


(x_train, _), (x_test, _) = offline_data.mnist_from_digits()
digits = x_train[:512] if QUICK else np.concatenate([x_train, x_test], axis=0)
digits = torch.tensor((digits.astype("float32") / 255)[:, None])
model = keras_init(VAE())
opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
for epoch in range(3 if QUICK else 30):
    order = torch.randperm(len(digits))
    for s in range(0, len(digits), 128):
        batch = digits[order[s:s + 128]]
        z_mean, z_log_var = model.encode(batch)
        z = z_mean + torch.exp(0.5 * z_log_var) * torch.randn_like(z_mean)
        rec = model.decode(z).clamp(1e-7, 1 - 1e-7)
        rec_loss = F.binary_cross_entropy(rec, batch, reduction="none").sum(dim=(1, 2, 3)).mean()
        kl = (-0.5 * (1 + z_log_var - z_mean ** 2 - torch.exp(z_log_var))).sum(dim=1).mean()
        opt.zero_grad()
        (rec_loss + kl).backward()
        opt.step()
    print(f"epoch {epoch + 1}: loss {float(rec_loss + kl):.2f}")

test = torch.tensor((x_test.astype("float32") / 255)[:, None])
with torch.no_grad():
    decoded = model.decode(model.encode(test)[0]).clamp(1e-7, 1 - 1e-7)
    bce = F.binary_cross_entropy(decoded, test, reduction="none").sum(dim=(1, 2, 3)).mean()
print("Test reconstruction loss:", float(bce))
