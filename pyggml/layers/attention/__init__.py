"""Attention layers."""

from pyggml.layers.attention.attention import AdditiveAttention, Attention
from pyggml.layers.attention.grouped_query_attention import GroupedQueryAttention
from pyggml.layers.attention.multi_head_attention import MultiHeadAttention

GroupQueryAttention = GroupedQueryAttention          # Keras exports it under this name

__all__ = ["AdditiveAttention", "Attention", "GroupedQueryAttention", "GroupQueryAttention", "MultiHeadAttention"]
