"""Layers that wrap another layer."""

from pyggml.layers.wrappers.spectral_normalization import SpectralNormalization
from pyggml.layers.wrappers.time_distributed import TimeDistributed
from pyggml.layers.wrappers.wrapper import Wrapper

__all__ = ["SpectralNormalization", "TimeDistributed", "Wrapper"]
