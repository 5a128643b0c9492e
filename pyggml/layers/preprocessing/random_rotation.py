"""RandomRotation (Keras's layer): in training, each image rotated about its
centre by a random angle drawn uniformly from ``factor`` turns (``factor=0.1``:
from -36 to +36 degrees; positive is counter-clockwise).  The identity in
inference."""

from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing.image_layer import AffineAugmentation, factor_range
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomRotation"]


@register_builtin
class RandomRotation(AffineAugmentation):
    """``RandomRotation(factor, fill_mode="reflect", interpolation="bilinear", seed=None,
    fill_value=0.0, data_format=None)``; ``factor``: a fraction of a full turn in [-1, 1], or a
    (lower, upper) pair of them."""

    def __init__(self, factor, fill_mode="reflect", interpolation="bilinear", seed=None, fill_value=0.0,
                 data_format=None, **kwargs):
        super().__init__(fill_mode=fill_mode, interpolation=interpolation, seed=seed, fill_value=fill_value,
                         data_format=data_format, **kwargs)
        self.factor = factor_range(factor, "factor", "RandomRotation", -1.0, 1.0)

    def matrices(self, n, height, width):
        degrees = self.rng().uniform(self.factor[0] * 360.0, self.factor[1] * 360.0, size=n)
        return _image_ops.rotation_matrices(degrees, height, width)

    def get_config(self):
        cfg = super().get_config()
        cfg["factor"] = list(self.factor)
        return cfg
