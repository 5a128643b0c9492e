"""Embedding: integer indices to vectors (get_rows, which trains)."""

from pyggml.core import ops
from pyggml.layers.base import Layer
from pyggml.layers.core import _positive_int

__all__ = ["Embedding"]


class Embedding(Layer):
    input_dtype = "int32"

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", **kwargs):
        super().__init__(**kwargs)
        self.input_dim = _positive_int("input_dim", input_dim)
        self.output_dim = _positive_int("output_dim", output_dim)
        self.embeddings_initializer = embeddings_initializer

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)

    def build(self, input_shape):
        self.add_weight("weight", (self.input_dim, self.output_dim), self.embeddings_initializer, layout="in_out")

    def call(self, g, x, training):
        g.index_limit(x, self.input_dim)
        n = x.nelements
        rows = ops.get_rows(g.weight(self, "weight"), ops.reshape(x, (n,), ctx=g.ctx), ctx=g.ctx)
        return ops.reshape(rows, (g.batch,) + tuple(self.output_shape), ctx=g.ctx)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(input_dim=self.input_dim, output_dim=self.output_dim)
        return cfg
