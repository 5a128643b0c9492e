"""RandomShear (Keras's layer): in training, each image sheared about its
top-left corner: output pixel (x, y) shows the input at (x + sx y, y + sy x),
``sx`` drawn uniformly from ``x_factor`` and ``sy`` from ``y_factor`` (a number f:
from -f to f; a pair: between them), both negated together on half of the
images (as Keras).  The identity in inference."""

from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing._augment_helpers import DictAugmentation
from pyggml.layers.preprocessing.image_layer import AffineAugmentation, factor_range
from pyggml.layers.preprocessing.random_zoom import _as_config
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomShear"]


@register_builtin
class RandomShear(DictAugmentation, AffineAugmentation):
    """``RandomShear(x_factor=0.0, y_factor=0.0, interpolation="bilinear", fill_mode="reflect",
    fill_value=0.0, data_format=None, seed=None)``; factors in [0, 1] or pairs of them."""

    def __init__(self, x_factor=0.0, y_factor=0.0, interpolation="bilinear", fill_mode="reflect", fill_value=0.0,
                 data_format=None, seed=None, **kwargs):
        super().__init__(fill_mode=fill_mode, interpolation=interpolation, seed=seed, fill_value=fill_value,
                         data_format=data_format, **kwargs)
        self.x_range = factor_range(x_factor, "x_factor", "RandomShear", 0.0, 1.0)      # a number f: (-f, f)
        self.y_range = factor_range(y_factor, "y_factor", "RandomShear", 0.0, 1.0)
        self.x_factor, self.y_factor = _as_config(x_factor), _as_config(y_factor)

    def matrices(self, n, height, width):
        rng = self.rng()
        sign = rng.uniform(0.0, 1.0, size=n)
        sign = (sign <= 0.5) * 2.0 - 1.0
        sx = rng.uniform(self.x_range[0], self.x_range[1], size=n) * sign
        sy = rng.uniform(self.y_range[0], self.y_range[1], size=n) * sign
        return _image_ops.shear_matrices(sx, sy, height, width)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(x_factor=self.x_factor, y_factor=self.y_factor)
        return cfg
