"""RandAugment (Keras's layer): in training, ``num_ops`` augmentations applied
one after another to each image, each chosen at random (with repeats) from
shear, translation, rotation, brightness, colour degeneration, contrast,
sharpness, posterization, solarization, auto-contrast and equalization, all at
the strength ``factor`` (a number f: (0, f); or a (lower, upper) pair in [0,
1]).  The identity in inference.

Keras 3 draws one list of operations for the whole batch; here every image
draws its own (as in the RandAugment paper), so images of one batch differ."""

from pyggml._validation import check_int
from pyggml.layers.preprocessing._augment_policies import (ALL_OPS, apply_per_image, check_policy_args,
                                                          check_policy_images, policy_ops)
from pyggml.layers.preprocessing._color_base import ColorChannels
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandAugment"]

_ORDER = ("random_shear", "random_translation", "random_rotation", "random_brightness", "random_color_degeneration",
          "random_contrast", "random_sharpness", "random_posterization", "solarization", "auto_contrast",
          "equalization")
assert set(_ORDER) == set(ALL_OPS)


@register_builtin
class RandAugment(ColorChannels, RandomImageLayer):
    """``RandAugment(value_range=(0, 255), num_ops=2, factor=0.5, interpolation="bilinear", seed=None,
    data_format=None)``."""

    def __init__(self, value_range=(0, 255), num_ops=2, factor=0.5, interpolation="bilinear", seed=None,
                 data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range, self.factor = check_policy_args("RandAugment", value_range, factor, interpolation)
        self.num_ops = check_int("RandAugment: num_ops", num_ops, 0, 64)
        self.interpolation = interpolation
        self._ops = list(policy_ops(self, _ORDER, self.factor, self.value_range, interpolation).values())

    def augment(self, images):
        check_policy_images(images, "RandAugment")
        rng = self.rng()
        for _ in range(self.num_ops):
            images = apply_per_image(images, self._ops, rng.integers(0, len(self._ops), size=len(images)))
        return images

    def get_config(self):
        cfg = super().get_config()
        cfg.update(value_range=list(self.value_range), num_ops=self.num_ops, factor=list(self.factor),
                   interpolation=self.interpolation)
        return cfg
