"""CutMix (Keras's layer): in training, each image of a batch gets a box cut
from another image of the batch (one shuffle a batch).  The box's sides are
``sqrt(1 - lam)`` of the image's, ``lam`` drawn per image from Beta(a, a), ``a``
drawn once a batch uniformly from ``factor``; the box is rounded to whole
pixels, and called on ``{"images": ..., "labels": ...}`` the labels mix as
``(1 - area) * labels + area * labels[perm]``, ``area`` the box's exact share of
the image.  A single image is left as it is (there is no other to cut from).
The identity in inference."""

import numpy as np

from pyggml.layers.preprocessing._augment_helpers import DictAugmentation, probability_range
from pyggml.layers.preprocessing.mix_up import mix_labels
from pyggml.saving.object_registration import register_builtin

__all__ = ["CutMix"]


@register_builtin
class CutMix(DictAugmentation):
    """``CutMix(factor=1.0, seed=None, data_format=None)``."""

    def __init__(self, factor=1.0, seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = probability_range(factor, "factor", "CutMix")
        self._single = False

    def boxes(self, n, height, width):
        """(top, left, rows, cols), each (n,) ints: the pasted box of each image."""
        rng = self.rng()
        a = rng.uniform(self.factor[0], self.factor[1]) + 1e-6
        ratio = np.sqrt(1.0 - rng.beta(a, a, size=n))
        rows = np.minimum(np.round(ratio * height).astype(np.int64), height)
        cols = np.minimum(np.round(ratio * width).astype(np.int64), width)
        top = np.minimum((rng.uniform(0.0, 1.0, size=n) * (height - rows + 1)).astype(np.int64), height - rows)
        left = np.minimum((rng.uniform(0.0, 1.0, size=n) * (width - cols + 1)).astype(np.int64), width - cols)
        return top, left, rows, cols

    def augment(self, images):
        n, h, w, _ = images.shape
        if self._single:
            return images
        top, left, rows, cols = self.boxes(n, h, w)
        permutation = self.rng().permutation(n)
        ys, xs = np.arange(h)[None, :, None], np.arange(w)[None, None, :]
        box = (ys >= top[:, None, None]) & (ys < (top + rows)[:, None, None]) & \
            (xs >= left[:, None, None]) & (xs < (left + cols)[:, None, None])
        self._labels_draw = (1.0 - rows * cols / float(h * w), permutation)
        return np.where(box[..., None], images[permutation], images)

    def host_call(self, inputs, training=None):
        self._single = np.ndim(inputs) == 3
        return super().host_call(inputs, training)

    def augment_labels(self, labels):
        weight, permutation = self._labels_draw
        return mix_labels(labels, weight, permutation)

    def get_config(self):
        cfg = super().get_config()
        cfg["factor"] = list(self.factor)
        return cfg
