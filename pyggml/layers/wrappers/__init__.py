"""Layers that wrap another layer."""

from pyggml.layers.wrappers.time_distributed import TimeDistributed

__all__ = ["TimeDistributed"]
