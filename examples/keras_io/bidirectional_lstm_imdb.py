# pyggml port of keras-io's examples/nlp/bidirectional_lstm_imdb.py (two stacked
# bidirectional LSTMs over variable-length input, on IMDB sentiment).
#
# Data: the original loads IMDB's 25,000 + 25,000 reviews as word indices with
# keras.datasets.imdb.load_data(num_words=20000), a download.  This port makes
# reviews in the same form with offline_data.imdb_like() (see
# text_classification_with_transformer.py), because this machine and CI reach no
# data host.  --quick (CI; or KERAS_IO_QUICK=1) makes 3,000 + 1,200 reviews of
# about 40 words (offline_data.IMDB_QUICK_LSTM: one in four a sentiment word from
# 10 per class, nine in ten of them the review's own class), padded to 32, and
# trains 2 epochs as the original does.  Everything else is the original's code,
# with `import pyggml as keras` and `from pyggml import layers`.
# The port's own lines are the flags (offline_data.parse_flags: --quick, --seed,
# --threads), keras.utils.set_random_seed(SEED), the quick sizes, and a last line
# printing the metric tests/test_keras_io.py reads (marked "ours").
#
#     python examples/keras_io/bidirectional_lstm_imdb.py           # the original's sizes
#     python examples/keras_io/bidirectional_lstm_imdb.py --quick

import numpy as np
import pyggml as keras
from pyggml import layers

import offline_data

QUICK, SEED = offline_data.parse_flags("Bidirectional LSTM on IMDB (keras-io) on pyggml")
keras.utils.set_random_seed(SEED)

max_features = 20000  # Only consider the top 20k words
maxlen = 200 if not QUICK else 32  # Only consider the first 200 words of each movie review

# Input for variable-length sequences of integers
inputs = keras.Input(shape=(None,), dtype="int32")
# Embed each integer in a 128-dimensional vector
x = layers.Embedding(max_features, 128)(inputs)
# Add 2 bidirectional LSTMs
x = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(x)
x = layers.Bidirectional(layers.LSTM(64))(x)
# Add a classifier
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)
model.summary()

if QUICK:
    (x_train, y_train), (x_val, y_val) = offline_data.imdb_like(
        num_words=max_features, **offline_data.IMDB_QUICK_LSTM
    )
else:
    (x_train, y_train), (x_val, y_val) = offline_data.imdb_like(num_words=max_features)
print(len(x_train), "Training sequences")
print(len(x_val), "Validation sequences")
# Use pad_sequence to standardize sequence length:
# this will truncate sequences longer than 200 words and zero-pad sequences shorter than 200 words.
x_train = keras.utils.pad_sequences(x_train, maxlen=maxlen)
x_val = keras.utils.pad_sequences(x_val, maxlen=maxlen)

model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=2, validation_data=(x_val, y_val))

# (ours: the number the test compares with the PyTorch twin's)
print("Validation accuracy:", model.evaluate(x_val, y_val, verbose=0)[1])
