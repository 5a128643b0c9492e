"""RandomPosterization (Keras's layer): in training, each image mapped to [0, 255]
(from ``value_range``), cast to uint8 and kept to its ``b`` highest bits (``b``
an int drawn from ``factor``'s range: ``(v >> (8 - b)) << (8 - b)``), then mapped
back.  The identity in inference."""

import numpy as np

from pyggml._validation import is_int, is_number
from pyggml.layers.preprocessing._color_base import check_color_range
from pyggml.layers.preprocessing._color_ops import from_unit, to_unit
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomPosterization", "posterize"]


def _bits(value):
    what = f"RandomPosterization: factor must be an int in [1, 8] or a pair of them, got {value!r}"
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    if len(items) not in (1, 2):
        raise ValueError(what)
    for v in items:
        if not is_number(v):
            raise TypeError(what)
        if not (is_int(v) or float(v).is_integer()) or not 1 <= v <= 8:
            raise ValueError(what)
    items = sorted(int(v) for v in items)
    return (1, items[0]) if len(items) == 1 else tuple(items)


def posterize(images, bits, value_range):
    """Each image kept to ``bits[i]`` bits a channel."""
    shift = (8 - np.asarray(bits, np.uint8)).astype(np.uint8)[:, None, None, None]
    x = np.clip(to_unit(images, value_range, 255.0), 0.0, 255.0).astype(np.uint8)
    x = np.left_shift(np.right_shift(x, shift), shift)
    return from_unit(x.astype(np.float32), value_range, 255.0)


@register_builtin
class RandomPosterization(RandomImageLayer):
    """``RandomPosterization(factor, value_range=(0, 255), data_format=None, seed=None)``; ``factor``: the bits
    to keep, an int in [1, 8] (f: from 1 to f) or a (lower, upper) pair of them."""

    def __init__(self, factor, value_range=(0, 255), data_format=None, seed=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = _bits(factor)
        self.value_range = check_color_range(value_range, "RandomPosterization")

    def augment(self, images):
        bits = self.rng().integers(self.factor[0], self.factor[1] + 1, size=len(images))
        return posterize(images, bits, self.value_range)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), value_range=list(self.value_range))
        return cfg
