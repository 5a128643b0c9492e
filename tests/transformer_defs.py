"""A transformer block and a token-and-position embedding written as a Keras user
writes them (keras-io's text classification with a transformer), as pyggml layers.
Imported by tests/test_custom_layers.py and by the fresh process that loads the model."""

import pyggml as pg
from pyggml import ops

L = pg.layers


@pg.saving.register_serializable(package="tests")
class TransformerBlock(L.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.num_heads, self.ff_dim, self.rate = embed_dim, num_heads, ff_dim, rate
        self.att = L.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = pg.Sequential([L.Dense(ff_dim, activation="relu"), L.Dense(embed_dim)])
        self.layernorm1 = L.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = L.LayerNormalization(epsilon=1e-6)
        self.dropout1 = L.Dropout(rate)
        self.dropout2 = L.Dropout(rate)

    def call(self, inputs):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)

    def get_config(self):
        config = super().get_config()
        config.update(embed_dim=self.embed_dim, num_heads=self.num_heads, ff_dim=self.ff_dim, rate=self.rate)
        return config


@pg.saving.register_serializable(package="tests")
class TokenAndPositionEmbedding(L.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.maxlen, self.vocab_size, self.embed_dim = maxlen, vocab_size, embed_dim
        self.token_emb = L.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = L.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = x.shape[-1]
        positions = ops.arange(start=0, stop=maxlen, step=1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions

    def get_config(self):
        config = super().get_config()
        config.update(maxlen=self.maxlen, vocab_size=self.vocab_size, embed_dim=self.embed_dim)
        return config


def build(maxlen, vocab_size, embed_dim=16, num_heads=2, ff_dim=32, classes=2):
    inputs = pg.Input(shape=(maxlen,), dtype="int32")
    x = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)(inputs)
    x = TransformerBlock(embed_dim, num_heads, ff_dim)(x)
    x = L.Flatten()(x)
    x = L.Dropout(0.1)(x)
    x = L.Dense(20, activation="relu")(x)
    outputs = L.Dense(classes, activation="softmax")(x)
    return pg.Model(inputs=inputs, outputs=outputs)
