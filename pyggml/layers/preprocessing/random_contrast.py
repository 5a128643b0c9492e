"""RandomContrast (Keras's layer): in training, each image's contrast scaled by
a random factor c: every channel becomes ``(x - mean) * c + mean`` (``mean``: the
channel's mean over the image), clipped to ``value_range``.  ``factor=f`` draws
c in [1 - f, 1 + f] (as Keras documents it; Keras 3's code makes a single number
(0, f), i.e. [1, 1 + f]); ``factor=(lower, upper)`` in [1 - lower, 1 + upper], as
Keras.  The identity in inference."""

import numpy as np

from pyggml.layers.preprocessing.image_layer import RandomImageLayer, factor_range
from pyggml.layers.preprocessing.random_brightness import check_value_range
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomContrast"]


@register_builtin
class RandomContrast(RandomImageLayer):
    """``RandomContrast(factor, value_range=(0, 255), seed=None)``; factor in [0, 1] or a pair."""

    def __init__(self, factor, value_range=(0, 255), seed=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.factor = factor_range(factor, "factor", "RandomContrast", 0.0, 1.0, symmetric=False)
        self.value_range = check_value_range(value_range, "RandomContrast")

    def augment(self, images):
        c = self.rng().uniform(1.0 - self.factor[0], 1.0 + self.factor[1], size=len(images))
        c = c.astype(np.float32)[:, None, None, None]
        mean = images.mean(axis=(1, 2), keepdims=True)
        return np.clip((images - mean) * c + mean, self.value_range[0], self.value_range[1])

    def graph_augment(self, images):
        from pyggml import ops
        n = images.shape[0]
        c = self.graph_draw((n, 1, 1, 1), lambda rng: rng.uniform(1.0 - self.factor[0], 1.0 + self.factor[1], size=n))
        mean = ops.mean(images, axis=(1, 2), keepdims=True)
        return ops.clip((images - mean) * c + mean, self.value_range[0], self.value_range[1])

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), value_range=list(self.value_range))
        return cfg
