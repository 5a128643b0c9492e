"""RandomHue (Keras's layer): in training, each image's hue turned by a random
amount: a draw ``f`` from ``factor``'s range, a random sign, and a turn of
``f / 2`` (``factor=1`` reaches half a turn: red to cyan).  Computed in HSV
with the values mapped from ``value_range`` to [0, 1] and back.  The identity
in inference."""

import numpy as np

from pyggml.layers.preprocessing._color_base import ColorChannels, bounded_factor, check_color_range
from pyggml.layers.preprocessing._color_ops import check_channels, from_unit, hsv_to_rgb, rgb_to_hsv, to_unit
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomHue", "shift_hue"]


def shift_hue(images, turns, value_range):
    """Each image's hue turned by ``turns[i]`` (a fraction of the colour circle)."""
    check_channels(images, "RandomHue", (3,))
    hsv = rgb_to_hsv(np.clip(to_unit(images, value_range), 0.0, 1.0))
    hsv[..., 0] = np.mod(hsv[..., 0] + np.asarray(turns, np.float32)[:, None, None], 1.0)
    return from_unit(np.clip(hsv_to_rgb(hsv), 0.0, 1.0), value_range)


@register_builtin
class RandomHue(ColorChannels, RandomImageLayer):
    """``RandomHue(factor, value_range=(0, 255), data_format=None, seed=None)``; ``factor`` in [0, 1] (a number
    f: draws from [0, f]) or a (lower, upper) pair."""

    color_channels = (3,)

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = bounded_factor(factor, "factor", "RandomHue")
        self.value_range = check_color_range(value_range, "RandomHue")

    def augment(self, images):
        check_channels(images, "RandomHue", (3,))
        rng = self.rng()
        sign = np.where(rng.uniform(size=len(images)) > 0.5, -1.0, 1.0)
        amount = rng.uniform(self.factor[0], self.factor[1], size=len(images))
        return shift_hue(images, sign * amount * 0.5, self.value_range)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), value_range=list(self.value_range))
        return cfg
