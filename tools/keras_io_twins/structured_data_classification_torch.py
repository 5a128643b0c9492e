#!/usr/bin/env python3
"""PyTorch twin of examples/keras_io/structured_data_classification.py: the same table
and split (pandas' sample(frac=0.2, random_state=1337)), the same features (the six
numeric columns as they are: the port's model, as Keras's, takes them in place of the
Normalization layers' outputs; the seven categorical ones one-hot over their sorted
values, as the lookups with output_mode="binary" and no OOV index give them), Dense 32 relu, dropout
0.5, Dense 1 sigmoid; Adam (lr 1e-3, eps 1e-7), binary cross-entropy, batch 32, the same
epochs."""

import numpy as np
import pandas as pd
import torch
from torch import nn

from common import fit, keras_init, offline_data, setup

QUICK, SEED = offline_data.parse_flags("Structured data classification, PyTorch twin")
setup(SEED)
dataframe = pd.DataFrame(offline_data.heart_like(n=1500 if QUICK else 303))
val_dataframe = dataframe.sample(frac=0.2, random_state=1337)
train_dataframe = dataframe.drop(val_dataframe.index)

NUMERIC = ["age", "trestbps", "thalach", "oldpeak", "slope", "chol"]
CATEGORICAL = ["sex", "cp", "fbs", "restecg", "exang", "ca", "thal"]
vocab = {c: sorted(dataframe[c].unique().tolist()) for c in CATEGORICAL}


def features(df):
    # as in the port (and in Keras): the model's numeric inputs are new Inputs put in place of the
    # Normalization layers' outputs, so the features enter unnormalised
    cols = [df[c].to_numpy(np.float64)[:, None] for c in NUMERIC]
    for c in CATEGORICAL:
        v = df[c].to_numpy()
        cols.append(np.stack([(v == k) for k in vocab[c]], axis=1).astype(np.float64))
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
