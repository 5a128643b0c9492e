"""Normalization layers."""

from pyggml.layers.normalization.batch_normalization import BatchNormalization
from pyggml.layers.normalization.group_normalization import GroupNormalization
from pyggml.layers.normalization.layer_normalization import LayerNormalization
from pyggml.layers.normalization.rms_normalization import RMSNormalization
from pyggml.layers.normalization.unit_normalization import UnitNormalization

__all__ = ["BatchNormalization", "GroupNormalization", "LayerNormalization", "RMSNormalization", "UnitNormalization"]
