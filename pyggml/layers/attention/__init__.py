"""Attention layers."""

from pyggml.layers.attention.multi_head_attention import MultiHeadAttention

__all__ = ["MultiHeadAttention"]
