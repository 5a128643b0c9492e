"""Convolution layers (channels-last)."""

from pyggml.layers.convolutional.conv import Conv1D, Conv2D
from pyggml.layers.convolutional.conv_transpose import Conv1DTranspose, Conv2DTranspose

__all__ = ["Conv1D", "Conv2D", "Conv1DTranspose", "Conv2DTranspose"]
