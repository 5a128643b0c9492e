"""Convolution layers (channels-last)."""

from pyggml.layers.convolutional.conv import Conv1D, Conv2D

__all__ = ["Conv1D", "Conv2D"]
