#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/structured_data_classification_2020.py: the same
table and split (pandas' sample(frac=0.2, random_state=1337)), the same features (the
six numeric columns normalised with the training rows' mean and variance, as
Normalization.adapt; the seven categorical ones one-hot over the values seen in training
plus one out-of-vocabulary slot, as the lookups' adapt with output_mode="binary" give
them), Dense 32 relu, dropout 0.5, Dense 1 sigmoid; Adam (lr 1e-3, eps 1e-7), binary
cross-entropy, batch 32, the same epochs."""

import numpy as np
import pandas as pd
import torch
from torch import nn

from common import fit, keras_init, offline_data, setup

QUICK, SEED = offline_data.parse_flags("Structured data classification (2020), PyTorch twin")
setup(SEED)
dataframe = pd.DataFrame(offline_data.heart_like(n=3000, sharpness=2.0) if QUICK else offline_data.heart_like())
val_dataframe = dataframe.sample(frac=0.2, random_state=1337)
train_dataframe = dataframe.drop(val_dataframe.index)

NUMERIC = ["age", "trestbps", "thalach", "oldpeak", "slope", "chol"]
CATEGORICAL = ["sex", "cp", "fbs", "restecg", "exang", "ca", "thal"]
vocab = {c: sorted(train_dataframe[c].unique().tolist()) for c in CATEGORICAL}
mean = {c: train_dataframe[c].to_numpy(np.float64).mean() for c in NUMERIC}
std = {c: train_dataframe[c].to_numpy(np.float64).std() for c in NUMERIC}


def features(df):
    cols = [((df[c].to_numpy(np.float64) - mean[c]) / std[c])[:, None] for c in NUMERIC]
    for c in CATEGORICAL:
        v = df[c].to_numpy()
        known = np.stack([(v == k) for k in vocab[c]], axis=1)
        cols.append(np.concatenate([~known.any(1, keepdims=True), known], axis=1).astype(np.float64))
    return np.concatenate(cols, axis=1).astype(np.float32)


def dataset(df):
    x, y = features(df), df["target"].to_numpy(np.float32)[:, None]
    order = np.random.permutation(len(df))                 # the port's one shuffle
    return x[order], y[order]


x_train, y_train = dataset(train_dataframe)
x_val, y_val = dataset(val_dataframe)
model = keras_init(nn.Sequential(nn.Linear(x_train.shape[1], 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 1),
                                 nn.Sigmoid()))
accuracy = lambda out, y: ((out > 0.5).float() == y).float().mean()
hist = fit(model, nn.BCELoss(), torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7), x_train, y_train,
           batch_size=32, epochs=50 if not QUICK else 15, validation_data=(x_val, y_val), metric=accuracy)
print("Validation accuracy:", hist["val_accuracy"][-1])
