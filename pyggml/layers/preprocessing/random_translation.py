"""RandomTranslation (Keras's layer): in training, each image shifted by a
random fraction of its size: ``height_factor=0.2`` draws a vertical shift in
[-20%, +20%] of the height (positive moves the content down),
``width_factor`` a horizontal one (positive moves it right).  The identity in
inference."""

from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing.image_layer import AffineAugmentation, factor_range
from pyggml.layers.preprocessing.random_zoom import _as_config
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomTranslation"]


@register_builtin
class RandomTranslation(AffineAugmentation):
    """``RandomTranslation(height_factor, width_factor, fill_mode="reflect", interpolation="bilinear",
    seed=None, fill_value=0.0, data_format=None)``; factors in [-1, 1] or (lower, upper) pairs."""

    def __init__(self, height_factor, width_factor, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, data_format=None, **kwargs):
        super().__init__(fill_mode=fill_mode, interpolation=interpolation, seed=seed, fill_value=fill_value,
                         data_format=data_format, **kwargs)
        self.height_range = factor_range(height_factor, "height_factor", "RandomTranslation", -1.0, 1.0)
        self.width_range = factor_range(width_factor, "width_factor", "RandomTranslation", -1.0, 1.0)
        self.height_factor = _as_config(height_factor)
        self.width_factor = _as_config(width_factor)

    def matrices(self, n, height, width):
        rng = self.rng()
        dy = rng.uniform(self.height_range[0], self.height_range[1], size=n) * height
        dx = rng.uniform(self.width_range[0], self.width_range[1], size=n) * width
        return _image_ops.translation_matrices(dy, dx)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(height_factor=self.height_factor, width_factor=self.width_factor)
        return cfg
