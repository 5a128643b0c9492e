"""ReversibleEmbedding (Keras's): an Embedding that also maps vectors back to scores over its
vocabulary, ``layer(x, reverse=True)`` = ``x @ embeddings^T`` (a language model's output
head sharing the input table), or ``x @ reverse_embeddings`` with ``tie_weights=False`` (a
table of its own, (output_dim, input_dim) in Keras's layout); ``logit_soft_cap`` c bounds the
scores as ``c tanh(s / c)``."""

import numpy as np

from pyggml import ops
from pyggml._validation import check_number
from pyggml.layers.core.embedding import Embedding
from pyggml.saving.object_registration import register_builtin

__all__ = ["ReversibleEmbedding"]


@register_builtin
class ReversibleEmbedding(Embedding):
    def __init__(self, input_dim, output_dim, tie_weights=True, embeddings_initializer="uniform",
                 embeddings_regularizer=None, embeddings_constraint=None, mask_zero=False, reverse_dtype=None,
                 logit_soft_cap=None, **kwargs):
        super().__init__(input_dim, output_dim, embeddings_initializer=embeddings_initializer,
                         embeddings_regularizer=embeddings_regularizer, embeddings_constraint=embeddings_constraint,
                         mask_zero=mask_zero, **kwargs)
        if not isinstance(tie_weights, (bool, np.bool_)):
            raise TypeError(f"ReversibleEmbedding: tie_weights must be True or False, got {tie_weights!r}")
        self.tie_weights = bool(tie_weights)
        self.logit_soft_cap = None if logit_soft_cap is None else \
            check_number("ReversibleEmbedding: logit_soft_cap", logit_soft_cap, 0.0, low_open=True)
        self.reverse_dtype = reverse_dtype         # (computed in float32 here, as every layer)

    def build(self, input_shape=None):
        super().build(input_shape)
        if not self.tie_weights:
            self.reverse_embeddings = self.add_weight("reverse_embeddings", (self.output_dim, self.input_dim),
                                                      self.embeddings_initializer, layout="in_out",
                                                      regularizer=self.embeddings_regularizer,
                                                      constraint=self.embeddings_constraint)

    def _shapes_by_tracing(self, nodes):
        return True            # (a call's shape depends on ``reverse``: traced with the call's arguments)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape)[:-1] + (self.input_dim,)
        return super().compute_output_shape(input_shape)

    def call(self, inputs, training=None, reverse=False):
        if not isinstance(reverse, (bool, np.bool_)):
            raise TypeError(f"ReversibleEmbedding: reverse must be True or False, got {reverse!r}")
        if not reverse:
            return super().call(inputs, training)
        x = inputs if inputs.dtype == "f32" else ops.cast(inputs, "float32")
        if self.tie_weights:
            # the table as the forward pass reads it: dequantized once quantized, with a LoRA's update
            w = self._weight_tensor()
            if self.lora_enabled:
                a, b = self._lora_factors()
                w = ops.add(w, ops.multiply(ops.matmul(a, b), self._lora_scale))
            table = ops.transpose(w)
        else:
            table = self.reverse_embeddings
        logits = ops.matmul(x, table)
        if self.logit_soft_cap is not None:
            c = self.logit_soft_cap
            logits = ops.multiply(ops.tanh(ops.divide(logits, c)), c)
        return logits

    def compute_mask(self, inputs, mask=None):
        return super().compute_mask(inputs, mask) if inputs is not None and \
            getattr(inputs, "dtype", None) not in ("f32", "float32") else None

    def get_config(self):
        c = super().get_config()
        c.update(tie_weights=self.tie_weights, logit_soft_cap=self.logit_soft_cap, reverse_dtype=self.reverse_dtype)
        return c
