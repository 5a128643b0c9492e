"""Pooling layers (channels-last)."""

from pyggml.layers.pooling.adaptive_pooling import (AdaptiveAveragePooling1D, AdaptiveAveragePooling2D,
                                                    AdaptiveAveragePooling3D, AdaptiveMaxPooling1D,
                                                    AdaptiveMaxPooling2D, AdaptiveMaxPooling3D)
from pyggml.layers.pooling.global_pooling import GlobalAveragePooling2D, GlobalMaxPooling2D
from pyggml.layers.pooling.global_pooling1d import GlobalAveragePooling1D, GlobalMaxPooling1D
from pyggml.layers.pooling.pooling1d import AveragePooling1D, MaxPooling1D
from pyggml.layers.pooling.pooling2d import AveragePooling2D, MaxPooling2D
from pyggml.layers.pooling.pooling3d import (AveragePooling3D, GlobalAveragePooling3D, GlobalMaxPooling3D,
                                             MaxPooling3D)

__all__ = ["MaxPooling1D", "AveragePooling1D", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling1D",
           "GlobalMaxPooling1D", "GlobalAveragePooling2D", "GlobalMaxPooling2D", "MaxPooling3D", "AveragePooling3D", "GlobalAveragePooling3D",
           "GlobalMaxPooling3D", "AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D", "AdaptiveAveragePooling3D",
           "AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D"]
