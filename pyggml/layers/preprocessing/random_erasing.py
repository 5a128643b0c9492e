"""RandomErasing (Keras's layer): in training, each image (with a probability drawn
per image uniformly from ``factor``: a number p means from 0 to p, so the
default 1.0 erases about half of them, as Keras; (1, 1): all) has a box filled
with ``fill_value`` (a number, one per channel, or ``None``: Gaussian noise
times the top of ``value_range``), clipped to ``value_range``. The box's sides
are the square roots of two fractions drawn uniformly from ``scale`` times the
image's width and height, at a uniform place inside the image. The identity in
inference."""

import numpy as np

from pyggml._validation import is_number
from pyggml.layers.preprocessing._augment_helpers import DictAugmentation, probability_range
from pyggml.layers.preprocessing.random_brightness import check_value_range
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomErasing"]


def _fill_value(value):
    if value is None:
        return None
    if isinstance(value, (tuple, list, np.ndarray)):
        values = list(np.asarray(value).reshape(-1)) if isinstance(value, np.ndarray) else list(value)
        if len(values) != 3 or not all(is_number(v) and np.isfinite(float(v)) for v in values):
            raise ValueError(f"RandomErasing: fill_value must be None, a number or 3 numbers (one per channel), "
                             f"got {value!r}")
        return [float(v) for v in values]
    if not is_number(value) or not np.isfinite(float(value)):
        raise ValueError(f"RandomErasing: fill_value must be None, a number or 3 numbers (one per channel), "
                         f"got {value!r}")
    return float(value)


@register_builtin
class RandomErasing(DictAugmentation):
    """``RandomErasing(factor=1.0, scale=(0.02, 0.33), fill_value=None, value_range=(0, 255), seed=None,
    data_format=None)``."""

    def __init__(self, factor=1.0, scale=(0.02, 0.33), fill_value=None, value_range=(0, 255), seed=None,
                 data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = probability_range(factor, "factor", "RandomErasing")
        self.scale = probability_range(scale, "scale", "RandomErasing")
        self.fill_value = _fill_value(fill_value)
        self.value_range = check_value_range(value_range, "RandomErasing")

    def boxes(self, n, height, width):
        """(x0, x1, y0, y1), each (n,): the erased box [x0, x1) x [y0, y1) of each image, in pixels."""
        rng = self.rng()
        sides = np.sqrt(rng.uniform(self.scale[0], self.scale[1], size=(n, 2)))
        cols, rows = sides[:, 0] * width, sides[:, 1] * height
        x0 = rng.uniform(0.0, 1.0, size=n) * (width - cols)
        y0 = rng.uniform(0.0, 1.0, size=n) * (height - rows)
        return x0, x0 + cols, y0, y0 + rows

    def augment(self, images):
        n, h, w, c = images.shape
        rng = self.rng()
        x0, x1, y0, y1 = self.boxes(n, h, w)
        apply = rng.uniform(0.0, 1.0, size=n) < rng.uniform(self.factor[0], self.factor[1], size=n)
        low, high = self.value_range
        if self.fill_value is None:
            fill = (rng.standard_normal(images.shape) * high).astype(np.float32)
        elif isinstance(self.fill_value, list):
            if c != 3:
                raise ValueError(f"RandomErasing: fill_value {self.fill_value} has one value per channel of 3, "
                                 f"but the images have {c} channels")
            fill = np.broadcast_to(np.asarray(self.fill_value, np.float32), images.shape)
        else:
            fill = np.full(images.shape, self.fill_value, np.float32)
        fill = np.clip(fill, low, high)
        xs, ys = np.arange(w)[None, None, :], np.arange(h)[None, :, None]
        box = (xs >= x0[:, None, None]) & (xs < x1[:, None, None]) & (ys >= y0[:, None, None]) & \
            (ys < y1[:, None, None]) & apply[:, None, None]
        return np.where(box[..., None], fill, images)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), scale=list(self.scale), fill_value=self.fill_value,
                   value_range=list(self.value_range))
        return cfg
