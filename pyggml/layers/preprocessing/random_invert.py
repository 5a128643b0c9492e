"""RandomInvert (Keras's layer): in training, each image inverted (``low + high
- value`` for ``value_range=(low, high)``; ``255 - value`` by default) with a
probability drawn from ``factor``'s range.  The identity in inference."""

import numpy as np

from pyggml.layers.preprocessing._color_base import bounded_factor, check_color_range
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomInvert"]


@register_builtin
class RandomInvert(RandomImageLayer):
    """``RandomInvert(factor=1.0, value_range=(0, 255), seed=None, data_format=None)``; ``factor`` in [0, 1]
    (a number f: the probability is drawn from [0, f]) or a (lower, upper) pair."""

    def __init__(self, factor=1.0, value_range=(0, 255), seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = bounded_factor(factor, "factor", "RandomInvert")
        self.value_range = check_color_range(value_range, "RandomInvert")

    def augment(self, images):
        rng = self.rng()
        probability = rng.uniform(self.factor[0], self.factor[1], size=len(images))
        apply = rng.uniform(size=len(images)) < probability
        low, high = self.value_range
        return np.where(apply[:, None, None, None], np.float32(low + high) - images, images).astype(np.float32)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), value_range=list(self.value_range))
        return cfg
