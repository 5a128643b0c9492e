"""RandomSharpness (Keras's layer): in training, each image blended with a
smoothed copy of itself (the 3x3 kernel ``[[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13``
on every channel, zero padding at the edges): ``image + (1 - 2 f) * (smoothed -
image)`` for a draw ``f`` from ``factor``'s range, clipped to ``value_range``:
``f = 0.5`` keeps the image, 0 gives the smoothed one, 1 sharpens.  The
identity in inference."""

import numpy as np

from pyggml.layers.preprocessing._color_base import bounded_factor, check_color_range
from pyggml.layers.preprocessing._color_ops import depthwise_filter
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomSharpness", "SMOOTHING_KERNEL"]

SMOOTHING_KERNEL = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float64) / 13.0


@register_builtin
class RandomSharpness(RandomImageLayer):
    """``RandomSharpness(factor, value_range=(0, 255), data_format=None, seed=None)``; ``factor`` in [0, 1]
    (a number f: draws from [0, f]) or a (lower, upper) pair."""

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = bounded_factor(factor, "factor", "RandomSharpness")
        self.value_range = check_color_range(value_range, "RandomSharpness")

    def augment(self, images):
        f = self.rng().uniform(self.factor[0], self.factor[1], size=len(images))
        keep = (1.0 - 2.0 * f).astype(np.float32)[:, None, None, None]
        smoothed = depthwise_filter(images, SMOOTHING_KERNEL)
        return np.clip(images + keep * (smoothed - images), self.value_range[0], self.value_range[1])

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), value_range=list(self.value_range))
        return cfg
