"""RandomZoom (Keras's layer): in training, each image zoomed about its centre
by a random amount: ``height_factor=0.2`` draws a vertical zoom in [-20%, +20%]
(positive zooms out, negative zooms in); ``width_factor`` the horizontal one,
or ``None`` to keep the aspect ratio (the vertical draw for both).  The
identity in inference."""

from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing.image_layer import AffineAugmentation, factor_range
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomZoom"]


def _as_config(value):
    return list(value) if isinstance(value, (tuple, list)) else value


@register_builtin
class RandomZoom(AffineAugmentation):
    """``RandomZoom(height_factor, width_factor=None, fill_mode="reflect", interpolation="bilinear",
    seed=None, fill_value=0.0, data_format=None)``; factors in (-1, 1] or (lower, upper) pairs."""

    def __init__(self, height_factor, width_factor=None, fill_mode="reflect", interpolation="bilinear", seed=None,
                 fill_value=0.0, data_format=None, **kwargs):
        super().__init__(fill_mode=fill_mode, interpolation=interpolation, seed=seed, fill_value=fill_value,
                         data_format=data_format, **kwargs)
        self.height_range = factor_range(height_factor, "height_factor", "RandomZoom", -1.0, 1.0, low_open=True)
        self.width_range = None if width_factor is None else \
            factor_range(width_factor, "width_factor", "RandomZoom", -1.0, 1.0, low_open=True)
        self.height_factor = _as_config(height_factor)
        self.width_factor = _as_config(width_factor)

    def matrices(self, n, height, width):
        rng = self.rng()
        zy = rng.uniform(1.0 + self.height_range[0], 1.0 + self.height_range[1], size=n)
        zx = zy if self.width_range is None else rng.uniform(1.0 + self.width_range[0],
                                                             1.0 + self.width_range[1], size=n)
        return _image_ops.zoom_matrices(zy, zx, height, width)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(height_factor=self.height_factor, width_factor=self.width_factor)
        return cfg
