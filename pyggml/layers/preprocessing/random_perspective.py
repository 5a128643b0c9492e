"""RandomPerspective (Keras's layer): in training, each image (with a probability
drawn per image uniformly from ``factor``: a number p means from 0 to p, so the
default 1.0 warps about half of them, as Keras; (1, 1): all) warped by a
perspective transform that moves its corners: the corner at (x, y) goes to (x +
x dx, y + y dy), dx and dy drawn per corner uniformly in [-scale/2, scale/2] (so
the top-left corner stays, as in Keras). Points from outside the image take
``fill_value``. The identity in inference."""

import numpy as np

from pyggml._validation import check_number
from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing._augment_helpers import DictAugmentation, probability_range
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomPerspective"]


@register_builtin
class RandomPerspective(DictAugmentation):
    """``RandomPerspective(factor=1.0, scale=1.0, interpolation="bilinear", fill_value=0.0, seed=None,
    data_format=None)``."""

    def __init__(self, factor=1.0, scale=1.0, interpolation="bilinear", fill_value=0.0, seed=None,
                 data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = probability_range(factor, "factor", "RandomPerspective")
        self.scale = check_number("RandomPerspective: scale", scale, 0.0, 1.0)
        if interpolation not in _image_ops.AFFINE_INTERPOLATIONS:
            raise ValueError(f"RandomPerspective: interpolation must be one of {_image_ops.AFFINE_INTERPOLATIONS}, "
                             f"got {interpolation!r}")
        self.interpolation = interpolation
        self.fill_value = check_number("RandomPerspective: fill_value", fill_value)

    def corners(self, height, width):
        """(4, 2): the image's corners (x, y), in Keras's order."""
        return np.array([[0.0, 0.0], [width - 1.0, 0.0], [0.0, height - 1.0], [width - 1.0, height - 1.0]])

    def augment(self, images):
        n, h, w, _ = images.shape
        rng = self.rng()
        apply = rng.uniform(0.0, 1.0, size=n) < rng.uniform(self.factor[0], self.factor[1], size=n)
        shift = rng.uniform(-0.5 * self.scale, 0.5 * self.scale, size=(n, 4, 2))
        start = np.broadcast_to(self.corners(h, w), (n, 4, 2))
        end = start + start * shift
        if not apply.any():
            return images
        warped = _image_ops.projective_sample(images[apply], _image_ops.homographies(start[apply], end[apply]),
                                              self.interpolation, "constant", self.fill_value)
        out = images.copy()
        out[apply] = warped
        return out

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), scale=self.scale, interpolation=self.interpolation,
                   fill_value=self.fill_value)
        return cfg
