"""MixUp (Keras's layer): in training, a batch mixed with a shuffle of itself,
``w * images + (1 - w) * images[perm]`` with one weight ``w`` a batch drawn
from Beta(alpha, alpha).  Called on ``{"images": ..., "labels": ...}`` it mixes
the labels with the same weight and permutation (labels one-hot, as Keras
needs them); in a model it mixes the images of each ``fit`` batch (the
model's targets are not its inputs).  The identity in inference."""

import numpy as np

from pyggml._validation import check_number
from pyggml.layers.preprocessing._augment_helpers import DictAugmentation
from pyggml.saving.object_registration import register_builtin

__all__ = ["MixUp"]


def mix_labels(labels, weight, permutation):
    """``weight * labels + (1 - weight) * labels[permutation]``, a weight per row (or one)."""
    y = labels.astype(np.float32) if labels.dtype.kind != "f" else labels
    w = np.asarray(weight, np.float32).reshape((-1,) + (1,) * (y.ndim - 1))
    return (w * y + (1.0 - w) * y[permutation]).astype(np.float32)


@register_builtin
class MixUp(DictAugmentation):
    """``MixUp(alpha=0.2, data_format=None, seed=None)``."""

    def __init__(self, alpha=0.2, data_format=None, seed=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.alpha = check_number("MixUp: alpha", alpha, 0.0, low_open=True)

    def augment(self, images):
        rng = self.rng()
        permutation = rng.permutation(len(images))
        weight = np.float32(rng.beta(self.alpha, self.alpha))
        self._labels_draw = (weight, permutation)
        return weight * images + (np.float32(1.0) - weight) * images[permutation]

    def augment_labels(self, labels):
        weight, permutation = self._labels_draw
        if labels.ndim == 0:
            return labels.astype(np.float32)
        return mix_labels(labels, weight, permutation)

    def get_config(self):
        cfg = super().get_config()
        cfg["alpha"] = self.alpha
        return cfg
