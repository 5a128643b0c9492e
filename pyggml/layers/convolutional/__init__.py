"""Convolution layers (channels-last)."""

from pyggml.layers.convolutional.conv import Conv1D, Conv2D
from pyggml.layers.convolutional.conv3d import Conv3D, Conv3DTranspose
from pyggml.layers.convolutional.conv_transpose import Conv1DTranspose, Conv2DTranspose
from pyggml.layers.convolutional.depthwise_conv import DepthwiseConv1D, DepthwiseConv2D
from pyggml.layers.convolutional.separable_conv import SeparableConv1D, SeparableConv2D

__all__ = ["Conv1D", "Conv2D", "Conv1DTranspose", "Conv2DTranspose", "DepthwiseConv1D", "DepthwiseConv2D",
           "SeparableConv1D", "SeparableConv2D", "Conv3D", "Conv3DTranspose"]
