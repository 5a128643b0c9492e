"""RandomElasticTransform (Keras's layer): in training, each image (with a
probability drawn per image uniformly from ``factor``: a number p means from 0
to p, as Keras; (1, 1): every image) resampled along a smooth random
displacement field: uniform noise in [-1, 1] per pixel and axis, blurred by a
Gaussian of ``sigma = 0.05 s min(h, w)`` pixels and scaled by ``alpha = 0.1 s
max(h, w)``, ``s`` drawn once a batch uniformly from ``scale``; then clipped to
``value_range``. The identity in inference."""

from pyggml._validation import check_number
from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing._augment_helpers import DictAugmentation, probability_range
from pyggml.layers.preprocessing.random_brightness import check_value_range
from pyggml.saving.object_registration import register_builtin

import numpy as np

__all__ = ["RandomElasticTransform"]


@register_builtin
class RandomElasticTransform(DictAugmentation):
    """``RandomElasticTransform(factor=1.0, scale=1.0, interpolation="bilinear", fill_mode="reflect",
    fill_value=0.0, value_range=(0, 255), seed=None, data_format=None)``."""

    def __init__(self, factor=1.0, scale=1.0, interpolation="bilinear", fill_mode="reflect", fill_value=0.0,
                 value_range=(0, 255), seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        owner = "RandomElasticTransform"
        self.factor = probability_range(factor, "factor", owner)
        self.scale = probability_range(scale, "scale", owner)
        if interpolation not in _image_ops.AFFINE_INTERPOLATIONS:
            raise ValueError(f"{owner}: interpolation must be one of {_image_ops.AFFINE_INTERPOLATIONS}, got "
                             f"{interpolation!r}")
        if fill_mode not in _image_ops.FILL_MODES:
            raise ValueError(f"{owner}: fill_mode must be one of {_image_ops.FILL_MODES}, got {fill_mode!r}")
        self.interpolation = interpolation
        self.fill_mode = fill_mode
        self.fill_value = check_number(f"{owner}: fill_value", fill_value)
        self.value_range = check_value_range(value_range, owner)

    @staticmethod
    def strength(height, width, s):
        """(alpha, sigma) in pixels for the distortion ``s``."""
        return max(height, width) * 0.1 * s, min(height, width) * 0.05 * s

    def augment(self, images):
        n, h, w, _ = images.shape
        rng = self.rng()
        if self.scale[1] == 0 or self.factor[1] == 0:
            return images
        apply = rng.uniform(0.0, 1.0, size=n) < rng.uniform(self.factor[0], self.factor[1], size=n)
        alpha, sigma = self.strength(h, w, rng.uniform(self.scale[0], self.scale[1]))
        noise = rng.uniform(-1.0, 1.0, size=(2, n, h, w))
        dx = _image_ops.gaussian_blur_2d(noise[0], sigma) * alpha
        dy = _image_ops.gaussian_blur_2d(noise[1], sigma) * alpha
        warped = _image_ops.elastic_sample(images, dx, dy, self.interpolation, self.fill_mode, self.fill_value)
        low, high = self.value_range
        return np.clip(np.where(apply[:, None, None, None], warped, images), low, high)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), scale=list(self.scale), interpolation=self.interpolation,
                   fill_mode=self.fill_mode, fill_value=self.fill_value, value_range=list(self.value_range))
        return cfg
