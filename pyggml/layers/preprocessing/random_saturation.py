"""RandomSaturation (Keras's layer): in training, each image's saturation (in
HSV) multiplied by ``f / (1 - f)`` for a draw ``f`` from ``factor``'s range, then
clipped to [0, 1]: ``f = 0.5`` keeps the image, 0 makes it grey (every channel
its brightest one's value), 1 fully saturated.  The identity in inference."""

import numpy as np

from pyggml.layers.preprocessing._color_base import ColorChannels, bounded_factor, check_color_range
from pyggml.layers.preprocessing._color_ops import check_channels, from_unit, hsv_to_rgb, rgb_to_hsv, to_unit
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomSaturation"]

_EPSILON = 1e-7                     # Keras's backend epsilon: f = 1 multiplies by 1e7


@register_builtin
class RandomSaturation(ColorChannels, RandomImageLayer):
    """``RandomSaturation(factor, value_range=(0, 255), data_format=None, seed=None)``; ``factor`` in [0, 1]
    (a number f: draws from [0, f]) or a (lower, upper) pair."""

    color_channels = (3,)

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = bounded_factor(factor, "factor", "RandomSaturation")
        self.value_range = check_color_range(value_range, "RandomSaturation")

    def augment(self, images):
        check_channels(images, "RandomSaturation", (3,))
        f = self.rng().uniform(self.factor[0], self.factor[1], size=len(images))
        scale = (f / (1.0 - f + _EPSILON)).astype(np.float32)[:, None, None]
        hsv = rgb_to_hsv(np.clip(to_unit(images, self.value_range), 0.0, 1.0))
        hsv[..., 1] = np.clip(hsv[..., 1] * scale, 0.0, 1.0)
        return from_unit(hsv_to_rgb(hsv), self.value_range)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), value_range=list(self.value_range))
        return cfg
