"""Shared pieces of the augmentation layers RandomShear, RandomPerspective,
RandomErasing, RandomElasticTransform, MixUp and CutMix: Keras's probability
``factor``, and calls on Keras's dict form ``{"images": ..., "labels": ...}``
(what keras-io passes inside a dataset's ``map``)."""

import numpy as np

from pyggml.layers.node import Node
from pyggml.layers.preprocessing.image_layer import RandomImageLayer, factor_range

__all__ = ["probability_range", "DictAugmentation"]


def probability_range(value, name, owner):
    """Keras's ``factor`` of the layers that apply to each image with a probability: each image draws its
    probability uniformly from (low, high); a number p gives (0, p), so ``factor=1.0`` (the default)
    applies to about half of the images, as Keras's code does, and ``(1.0, 1.0)`` to every image."""
    low, high = factor_range(value, name, owner, 0.0, 1.0)
    return max(low, 0.0), high


class DictAugmentation(RandomImageLayer):
    """A random image layer that also takes ``{"images": ..., "labels": ...}`` on arrays and gives a dict
    of the same keys: the images augmented, the labels through ``augment_labels`` (unchanged unless the
    layer mixes them)."""

    _DICT_KEYS = ("images", "labels")

    def augment_labels(self, labels):
        """The labels of the images last augmented (the same draws)."""
        return labels

    def __call__(self, *args, **kwargs):
        if args and isinstance(args[0], dict):
            if any(isinstance(v, Node) for v in args[0].values()):
                raise TypeError(f"{type(self).__name__}: a dict of images and labels is for arrays (a dataset's "
                                f"map); in a model, call it on the images' node alone")
            return self._call_on_dict(args[0], kwargs.get("training"))
        return super().__call__(*args, **kwargs)

    def _call_on_dict(self, data, training):
        owner = type(self).__name__
        unknown = sorted(set(data) - set(self._DICT_KEYS))
        if "images" not in data or unknown:
            raise ValueError(f"{owner} takes a dict with the keys 'images' and optionally 'labels', got the keys "
                             f"{sorted(data)}" + (f" ({unknown} not supported)" if unknown else ""))
        images = np.asarray(data["images"])
        self._labels_draw = None
        out = dict(data)
        out["images"] = self.host_apply(images, training)
        if "labels" in data:
            labels = np.asarray(data["labels"])
            if labels.dtype == object or labels.dtype.kind not in "biuf":
                raise TypeError(f"{owner}: labels must be numbers, got an array of dtype {labels.dtype}")
            batch = 1 if images.ndim == 3 else len(images)
            if images.ndim == 4 and (labels.ndim == 0 or len(labels) != batch):
                raise ValueError(f"{owner}: labels must have one row per image ({batch}), got an array of shape "
                                 f"{labels.shape}")
            applied = training is None or bool(training)
            out["labels"] = self.augment_labels(labels) if applied and self._labels_draw is not None else labels
        return out
