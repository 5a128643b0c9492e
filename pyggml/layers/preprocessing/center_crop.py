"""CenterCrop (Keras's layer): the centred ``(height, width)`` window of each
image.  An image smaller than that on either side is first cropped to the
largest centred window of the target's aspect ratio, then resized (bilinear)
to the target, as Keras does."""

from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing.image_layer import ImagePreprocessingLayer, check_size
from pyggml.saving.object_registration import register_builtin

__all__ = ["CenterCrop"]


def crop_or_resize(images, height, width):
    """The centred window of that size, or the aspect-ratio window resized to it."""
    n, h, w, c = images.shape
    if h >= height and w >= width:
        top, left = (h - height) // 2, (w - width) // 2
        return images[:, top:top + height, left:left + width]
    top, left, rows, cols = _image_ops.aspect_crop_box(h, w, height, width)
    window = images[:, top:top + rows, left:left + cols]
    return _image_ops.resize(window.copy(), height, width, "bilinear")


@register_builtin
class CenterCrop(ImagePreprocessingLayer):
    """``CenterCrop(height, width, data_format=None)``."""

    def __init__(self, height, width, data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.height = check_size("height", height, "CenterCrop")
        self.width = check_size("width", width, "CenterCrop")

    def output_size(self, height, width):
        return self.height, self.width

    def transform(self, images, training):
        return crop_or_resize(images, self.height, self.width)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(height=self.height, width=self.width)
        return cfg
