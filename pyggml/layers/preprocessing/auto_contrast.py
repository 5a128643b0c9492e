"""AutoContrast (Keras's layer): every channel of every image stretched so its
lowest value becomes ``value_range``'s low and its highest the high (a channel
of one value is left as it is).  Not random: it acts in training and inference
alike, as in Keras."""

import numpy as np

from pyggml.layers.preprocessing._color_base import check_color_range
from pyggml.layers.preprocessing.image_layer import ImagePreprocessingLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["AutoContrast", "auto_contrast"]


def auto_contrast(images, value_range):
    low, high = value_range
    lo = images.min(axis=(1, 2), keepdims=True)
    hi = images.max(axis=(1, 2), keepdims=True)
    flat = hi <= lo
    scale = np.where(flat, 1.0, (high - low) / np.where(flat, 1.0, hi - lo))
    out = np.clip((images - lo) * scale + low, low, high)
    return np.where(flat, images, out).astype(np.float32)


@register_builtin
class AutoContrast(ImagePreprocessingLayer):
    """``AutoContrast(value_range=(0, 255), data_format=None)``."""

    def __init__(self, value_range=(0, 255), data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.value_range = check_color_range(value_range, "AutoContrast")

    def transform(self, images, training):
        return auto_contrast(images, self.value_range)

    def get_config(self):
        cfg = super().get_config()
        cfg["value_range"] = list(self.value_range)
        return cfg
