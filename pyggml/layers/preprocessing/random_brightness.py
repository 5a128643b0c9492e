"""RandomBrightness (Keras's layer): in training, a random amount added to each
image, a fraction of ``value_range``'s width drawn uniformly from ``factor``
(``factor=0.2``: from -20% to +20%; -1 makes the image black, 1 white), then
clipped to ``value_range``.  The identity in inference."""

import numpy as np

from pyggml._validation import is_number
from pyggml.layers.preprocessing.image_layer import RandomImageLayer, factor_range
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomBrightness"]


def check_value_range(value, owner):
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(is_number(v) for v in value) or \
            not all(np.isfinite(float(v)) for v in value):
        raise ValueError(f"{owner}: value_range must be a pair of finite numbers (low, high), got {value!r}")
    low, high = sorted(float(v) for v in value)
    return low, high


@register_builtin
class RandomBrightness(RandomImageLayer):
    """``RandomBrightness(factor, value_range=(0, 255), seed=None)``; factor in [-1, 1] or a pair."""

    def __init__(self, factor, value_range=(0, 255), seed=None, **kwargs):
        super().__init__(seed=seed, **kwargs)
        self.factor = factor_range(factor, "factor", "RandomBrightness", -1.0, 1.0)
        self.value_range = check_value_range(value_range, "RandomBrightness")

    def augment(self, images):
        low, high = self.value_range
        delta = self.rng().uniform(self.factor[0], self.factor[1], size=len(images)) * (high - low)
        return np.clip(images + delta.astype(np.float32)[:, None, None, None], low, high)

    def graph_augment(self, images):
        from pyggml import ops
        low, high = self.value_range
        n = images.shape[0]
        delta = self.graph_draw((n, 1, 1, 1),
                                lambda rng: rng.uniform(self.factor[0], self.factor[1], size=n) * (high - low))
        return ops.clip(images + delta, low, high)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), value_range=list(self.value_range))
        return cfg
