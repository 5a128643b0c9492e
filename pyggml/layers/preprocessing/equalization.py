"""Equalization (Keras's layer): the histogram of every channel of every image
equalised.  Values are mapped to [0, 255] (from ``value_range``) and counted in
``bins`` equal bins (bin ``int(v * (bins - 1) / 255)``); with ``cdf`` the
running count and ``cdf_min`` its first non-zero entry, a value in bin ``k``
becomes ``round((cdf[k] - cdf_min) * 255 / (cdf[-1] - cdf_min))``, mapped back to
``value_range``.  A channel whose values fall in one bin is left as it is.

As Keras 3's layer, it acts in training only (``fit``; a call on arrays without
``training``) and is the identity in ``predict``/``evaluate``.  Unlike Keras 3,
whose histogram is taken over the whole batch, each image is equalised on its
own (as PIL's ``ImageOps.equalize``), so an image's result does not depend on
the others in its batch."""

import numpy as np

from pyggml._validation import check_int
from pyggml.layers.preprocessing._color_base import check_color_range
from pyggml.layers.preprocessing._color_ops import from_unit, to_unit
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["Equalization", "equalize"]


def equalize(images, value_range, bins=256):
    n, h, w, c = images.shape
    x = to_unit(images, value_range, 255.0)
    channels = x.transpose(0, 3, 1, 2).reshape(n * c, h * w)
    index = np.clip((channels * np.float32((bins - 1) / 255.0)).astype(np.int64), 0, bins - 1)
    out = channels.copy()
    for i in range(n * c):
        hist = np.bincount(index[i], minlength=bins)
        if np.count_nonzero(hist) <= 1:
            continue
        cdf = np.cumsum(hist)
        cdf_min = cdf[np.nonzero(cdf)[0][0]]
        denominator = max(cdf[-1] - cdf_min, 1)
        table = np.clip(np.round((cdf - cdf_min) * 255.0 / denominator), 0, 255)
        out[i] = table[index[i]]
    out = out.reshape(n, c, h, w).transpose(0, 2, 3, 1)
    return from_unit(np.ascontiguousarray(out), value_range, 255.0)


@register_builtin
class Equalization(RandomImageLayer):
    """``Equalization(value_range=(0, 255), bins=256, data_format=None)``."""

    def __init__(self, value_range=(0, 255), bins=256, data_format=None, **kwargs):
        if "seed" in kwargs:
            raise TypeError("Equalization takes no seed: it draws nothing")
        super().__init__(data_format=data_format, **kwargs)
        self.value_range = check_color_range(value_range, "Equalization")
        self.bins = check_int("Equalization: bins", bins, 2, 1 << 16)

    def augment(self, images):
        return equalize(images, self.value_range, self.bins)

    def get_config(self):
        cfg = super().get_config()
        del cfg["seed"]
        cfg.update(value_range=list(self.value_range), bins=self.bins)
        return cfg
