"""RandomCrop (Keras's layer): in training, a ``(height, width)`` window at a
random place, the same place for the whole batch (as Keras).  In inference, and
in training when the images are not larger than the target on both sides, the
largest centred window of the target's aspect ratio, resized (bilinear) to the
target, so the output always has the target size."""

from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing.image_layer import RandomImageLayer, check_size
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomCrop"]


@register_builtin
class RandomCrop(RandomImageLayer):
    """``RandomCrop(height, width, seed=None, data_format=None)``."""

    def __init__(self, height, width, seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.height = check_size("height", height, "RandomCrop")
        self.width = check_size("width", width, "RandomCrop")

    def output_size(self, height, width):
        return self.height, self.width

    def _fitted(self, images):
        n, h, w, c = images.shape
        top, left, rows, cols = _image_ops.aspect_crop_box(h, w, self.height, self.width)
        window = images[:, top:top + rows, left:left + cols]
        return _image_ops.resize(window.copy(), self.height, self.width, "bilinear")

    def transform(self, images, training):
        n, h, w, c = images.shape
        if not training or h <= self.height or w <= self.width:
            return self._fitted(images)
        rng = self.rng()
        top = min(int(rng.uniform(0, h - self.height + 1)), h - self.height)
        left = min(int(rng.uniform(0, w - self.width + 1)), w - self.width)
        return images[:, top:top + self.height, left:left + self.width]

    def get_config(self):
        cfg = super().get_config()
        cfg.update(height=self.height, width=self.width)
        return cfg
