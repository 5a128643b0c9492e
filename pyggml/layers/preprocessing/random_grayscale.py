"""RandomGrayscale (Keras's layer): in training, each image turned grey with
probability ``factor``: every channel becomes the luma ``0.2989 R + 0.5870 G +
0.1140 B`` (the channel count stays 3).  One-channel images are already grey.
The identity in inference."""

import numpy as np

from pyggml._validation import check_fraction
from pyggml.layers.preprocessing._color_base import ColorChannels
from pyggml.layers.preprocessing._color_ops import check_channels, rgb_to_grayscale
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomGrayscale"]


@register_builtin
class RandomGrayscale(ColorChannels, RandomImageLayer):
    """``RandomGrayscale(factor=0.5, data_format=None, seed=None)``; ``factor``: the probability, in [0, 1]."""

    def __init__(self, factor=0.5, data_format=None, seed=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = check_fraction("RandomGrayscale: factor", factor)

    def augment(self, images):
        check_channels(images, "RandomGrayscale")
        apply = self.rng().uniform(size=len(images)) < self.factor
        return np.where(apply[:, None, None, None], rgb_to_grayscale(images), images).astype(np.float32)

    def get_config(self):
        cfg = super().get_config()
        cfg["factor"] = self.factor
        return cfg
