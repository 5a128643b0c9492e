"""The augmentations RandAugment and AugMix choose from (Keras 3's lists), each
built at the policy's strength ``factor`` (a (lower, upper) pair in [0, 1]) and
drawing from the policy layer's generator."""

import numpy as np

from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing._color_base import bounded_factor, check_color_range, draw_from
from pyggml.layers.preprocessing._color_ops import check_channels
from pyggml.layers.preprocessing.auto_contrast import AutoContrast
from pyggml.layers.preprocessing.equalization import Equalization
from pyggml.layers.preprocessing.image_layer import AffineAugmentation
from pyggml.layers.preprocessing.random_brightness import RandomBrightness
from pyggml.layers.preprocessing.random_color_degeneration import RandomColorDegeneration
from pyggml.layers.preprocessing.random_contrast import RandomContrast
from pyggml.layers.preprocessing.random_posterization import RandomPosterization
from pyggml.layers.preprocessing.random_rotation import RandomRotation
from pyggml.layers.preprocessing.random_sharpness import RandomSharpness
from pyggml.layers.preprocessing.random_translation import RandomTranslation
from pyggml.layers.preprocessing.solarization import Solarization

__all__ = ["GEOMETRIC_AND_TONE_OPS", "ALL_OPS", "policy_ops", "check_policy_args", "check_policy_images",
           "apply_per_image"]

# Keras 3's lists (AugMix without all_ops takes the first seven)
GEOMETRIC_AND_TONE_OPS = ("random_shear", "random_translation", "random_rotation", "random_posterization",
                          "solarization", "auto_contrast", "equalization")
ALL_OPS = GEOMETRIC_AND_TONE_OPS + ("random_brightness", "random_color_degeneration", "random_contrast",
                                    "random_sharpness")


class _Shear(AffineAugmentation):
    """A shear about the centre by amounts drawn from ``factor`` (both axes), with one random sign per image."""

    def __init__(self, factor, interpolation):
        super().__init__(interpolation=interpolation)
        self.factor = factor

    def matrices(self, n, height, width):
        rng = self.rng()
        sign = np.where(rng.uniform(size=n) > 0.5, -1.0, 1.0)
        sx = rng.uniform(self.factor[0], self.factor[1], size=n) * sign
        sy = rng.uniform(self.factor[0], self.factor[1], size=n) * sign
        return _image_ops.shear_matrices(sx, sy, height, width)


def check_policy_args(owner, value_range, factor, interpolation):
    value_range = check_color_range(value_range, owner)
    factor = bounded_factor(factor, "factor", owner)
    if interpolation not in _image_ops.AFFINE_INTERPOLATIONS:
        raise ValueError(f"{owner}: interpolation must be one of {_image_ops.AFFINE_INTERPOLATIONS}, got "
                         f"{interpolation!r}")
    return value_range, factor


def policy_ops(owner, names, factor, value_range, interpolation):
    """{name: augmentation layer} for ``names``, drawing from ``owner``'s generator."""
    make = {
        "random_shear": lambda: _Shear(factor, interpolation),
        "random_translation": lambda: RandomTranslation(factor, factor, interpolation=interpolation),
        "random_rotation": lambda: RandomRotation(factor, interpolation=interpolation),
        "random_posterization": lambda: RandomPosterization(max(1, int(8 * factor[1])), value_range=value_range),
        "solarization": lambda: Solarization(factor, factor, value_range=value_range),
        "auto_contrast": lambda: AutoContrast(value_range=value_range),
        "equalization": lambda: Equalization(value_range=value_range),
        "random_brightness": lambda: RandomBrightness(factor, value_range=value_range),
        "random_color_degeneration": lambda: RandomColorDegeneration(factor, value_range=value_range),
        "random_contrast": lambda: RandomContrast(factor, value_range=value_range),
        "random_sharpness": lambda: RandomSharpness(factor, value_range=value_range),
    }
    return {name: draw_from(make[name](), owner) for name in names}


def apply_per_image(images, ops, choice):
    """images[i] through ops[choice[i]] (choice -1: left as it is), each op once on all the images it got."""
    out = images.copy()
    for j, op in enumerate(ops):
        picked = np.nonzero(choice == j)[0]
        if len(picked):
            out[picked] = op.transform(np.ascontiguousarray(images[picked]), True)
    return out


def check_policy_images(images, owner):
    check_channels(images, owner)
