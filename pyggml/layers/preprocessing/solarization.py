"""Solarization (Keras's layer): in training, each image mapped to [0, 255]
(from ``value_range``), a random amount added (a draw from ``addition_factor``'s
range times 255), clipped to [0, 255], and every value at or above a random
threshold (a draw from ``threshold_factor``'s range times 255) inverted to
``255 - value``, then mapped back.  With the defaults (both 0) every value is
inverted.  The identity in inference."""

import numpy as np

from pyggml.layers.preprocessing._color_base import bounded_factor, check_color_range
from pyggml.layers.preprocessing._color_ops import from_unit, to_unit
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Solarization"]


@register_builtin
class Solarization(RandomImageLayer):
    """``Solarization(addition_factor=0.0, threshold_factor=0.0, value_range=(0, 255), seed=None,
    data_format=None)``; each factor in [0, 1] (a number f: draws from [0, f]) or a (lower, upper) pair."""

    def __init__(self, addition_factor=0.0, threshold_factor=0.0, value_range=(0, 255), seed=None, data_format=None,
                 **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.addition_factor = bounded_factor(addition_factor, "addition_factor", "Solarization")
        self.threshold_factor = bounded_factor(threshold_factor, "threshold_factor", "Solarization")
        self.value_range = check_color_range(value_range, "Solarization")

    def augment(self, images):
        rng = self.rng()
        n = len(images)
        add = rng.uniform(self.addition_factor[0], self.addition_factor[1], size=n) * 255.0
        threshold = rng.uniform(self.threshold_factor[0], self.threshold_factor[1], size=n) * 255.0
        x = np.clip(to_unit(images, self.value_range, 255.0) + add.astype(np.float32)[:, None, None, None], 0, 255)
        x = np.where(x < threshold.astype(np.float32)[:, None, None, None], x, 255.0 - x)
        return from_unit(x, self.value_range, 255.0)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(addition_factor=list(self.addition_factor), threshold_factor=list(self.threshold_factor),
                   value_range=list(self.value_range))
        return cfg
