"""Pooling layers (channels-last)."""

from pyggml.layers.pooling.global_pooling import GlobalAveragePooling2D, GlobalMaxPooling2D
from pyggml.layers.pooling.pooling2d import AveragePooling2D, MaxPooling2D

__all__ = ["MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D"]
