# pyggml port of keras-io's examples/nlp/text_classification_with_transformer.py
# (a Transformer block written as custom layers, on IMDB sentiment).
#
# Data: the original loads IMDB's 25,000 + 25,000 reviews as word indices with
# keras.datasets.imdb.load_data(num_words=20000), a download.  This port makes
# reviews in the same form (lists of word indices, 1 to start, 2 for a word past
# the vocabulary, Zipf-distributed words, about one word in twelve telling the
# sentiment) with offline_data.imdb_like(), because this machine and CI reach
# no data host.  --quick (CI; or KERAS_IO_QUICK=1) makes 3,000 + 2,000 reviews
# of about 80 words (offline_data.IMDB_QUICK_TRANSFORMER: one in four a sentiment
# word from 10 per class, nine in ten of them the review's own class), padded to
# 64.  Everything else is the original's code, with `import pyggml as keras` and
# `from pyggml import ops, layers`.
# The port's own lines are the flags (offline_data.parse_flags: --quick, --seed,
# --threads), keras.utils.set_random_seed(SEED), the quick sizes, and a last line
# printing the metric tests/test_keras_io.py reads (marked "ours").
#
#     python examples/keras_io/text_classification_with_transformer.py        # the original's sizes
#     python examples/keras_io/text_classification_with_transformer.py --quick

import pyggml as keras
from pyggml import ops
from pyggml import layers

import offline_data

QUICK, SEED = offline_data.parse_flags("Text classification with a Transformer (keras-io) on pyggml")
keras.utils.set_random_seed(SEED)


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential(
            [
                layers.Dense(ff_dim, activation="relu"),
                layers.Dense(embed_dim),
            ]
        )
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = ops.shape(x)[-1]
        positions = ops.arange(start=0, stop=maxlen, step=1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


vocab_size = 20000  # Only consider the top 20k words
maxlen = 200 if not QUICK else 64  # Only consider the first 200 words of each movie review
if QUICK:
    (x_train, y_train), (x_val, y_val) = offline_data.imdb_like(
        num_words=vocab_size, **offline_data.IMDB_QUICK_TRANSFORMER
    )
else:
    (x_train, y_train), (x_val, y_val) = offline_data.imdb_like(num_words=vocab_size)
print(len(x_train), "Training sequences")
print(len(x_val), "Validation sequences")
x_train = keras.utils.pad_sequences(x_train, maxlen=maxlen)
x_val = keras.utils.pad_sequences(x_val, maxlen=maxlen)


embed_dim = 32  # Embedding size for each token
num_heads = 2  # Number of attention heads
ff_dim = 32  # Hidden layer size in feed forward network inside transformer

inputs = layers.Input(shape=(maxlen,))
embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
x = embedding_layer(inputs)
transformer_block = TransformerBlock(embed_dim, num_heads, ff_dim)
x = transformer_block(x)
x = layers.GlobalAveragePooling1D()(x)
x = layers.Dropout(0.1)(x)
x = layers.Dense(20, activation="relu")(x)
x = layers.Dropout(0.1)(x)
outputs = layers.Dense(2, activation="softmax")(x)

model = keras.Model(inputs=inputs, outputs=outputs)


model.compile(
    optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
)
history = model.fit(
    x_train, y_train, batch_size=32, epochs=2, validation_data=(x_val, y_val)
)

# (ours: the number the test compares with the PyTorch twin's)
print("Validation accuracy:", history.history["val_accuracy"][-1])
