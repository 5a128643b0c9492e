"""Attention layers."""

from pyggml.layers.attention.attention import AdditiveAttention, Attention
from pyggml.layers.attention.multi_head_attention import MultiHeadAttention

__all__ = ["AdditiveAttention", "Attention", "MultiHeadAttention"]
