"""RandomColorDegeneration (Keras's layer): in training, each image moved
towards its grey version (the luma, ``0.2989 R + 0.5870 G + 0.1140 B``) by a
fraction ``f`` drawn from ``factor``'s range: ``image + f * (grey - image)``,
clipped to ``value_range`` (``f = 1``: grey).  The identity in inference."""

import numpy as np

from pyggml.layers.preprocessing._color_base import ColorChannels, bounded_factor, check_color_range
from pyggml.layers.preprocessing._color_ops import check_channels, rgb_to_grayscale
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomColorDegeneration"]


@register_builtin
class RandomColorDegeneration(ColorChannels, RandomImageLayer):
    """``RandomColorDegeneration(factor, value_range=(0, 255), data_format=None, seed=None)``; ``factor`` in
    [0, 1] (a number f: draws from [0, f]) or a (lower, upper) pair."""

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = bounded_factor(factor, "factor", "RandomColorDegeneration")
        self.value_range = check_color_range(value_range, "RandomColorDegeneration")

    def augment(self, images):
        check_channels(images, "RandomColorDegeneration")
        f = self.rng().uniform(self.factor[0], self.factor[1], size=len(images)).astype(np.float32)
        out = images + f[:, None, None, None] * (rgb_to_grayscale(images) - images)
        return np.clip(out, self.value_range[0], self.value_range[1])

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), value_range=list(self.value_range))
        return cfg
