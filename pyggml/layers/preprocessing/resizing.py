"""Resizing (Keras's layer): images resized to ``(height, width)``.

``interpolation``: "bilinear" (default), "nearest", "bicubic", "lanczos3",
"lanczos5", with pixel centres aligned as TF and JAX resize.
``crop_to_aspect_ratio=True`` first crops the largest centred window of the
target's aspect ratio (no distortion); ``pad_to_aspect_ratio=True`` instead pads
the short side evenly with ``fill_value``.  ``antialias`` widens the kernel
when downscaling."""

import numpy as np

from pyggml._validation import check_bool, check_number
from pyggml.layers.preprocessing import _image_ops
from pyggml.layers.preprocessing.image_layer import ImagePreprocessingLayer, check_size
from pyggml.saving.object_registration import register_builtin

__all__ = ["Resizing"]


@register_builtin
class Resizing(ImagePreprocessingLayer):
    """``Resizing(height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
    pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0, antialias=False,
    data_format=None)``."""

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
                 pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0, antialias=False, data_format=None,
                 **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.height = check_size("height", height, "Resizing")
        self.width = check_size("width", width, "Resizing")
        if interpolation not in _image_ops.RESIZE_METHODS:
            raise ValueError(f"Resizing: interpolation must be one of {_image_ops.RESIZE_METHODS}, got "
                             f"{interpolation!r}")
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = check_bool("crop_to_aspect_ratio", crop_to_aspect_ratio)
        self.pad_to_aspect_ratio = check_bool("pad_to_aspect_ratio", pad_to_aspect_ratio)
        if self.crop_to_aspect_ratio and self.pad_to_aspect_ratio:
            raise ValueError("Resizing: only one of crop_to_aspect_ratio and pad_to_aspect_ratio can be True")
        if fill_mode != "constant":
            raise ValueError(f"Resizing: fill_mode must be 'constant' (the padding of pad_to_aspect_ratio), got "
                             f"{fill_mode!r}")
        self.fill_mode = fill_mode
        self.fill_value = check_number("Resizing: fill_value", fill_value)
        self.antialias = check_bool("antialias", antialias)

    def output_size(self, height, width):
        return self.height, self.width

    def transform(self, images, training):
        n, h, w, c = images.shape
        if self.crop_to_aspect_ratio:
            top, left, rows, cols = _image_ops.aspect_crop_box(h, w, self.height, self.width)
            images = images[:, top:top + rows, left:left + cols]
        elif self.pad_to_aspect_ratio:
            # each side padded by half the difference to the target's aspect ratio (rounded down)
            dh = int(float(max(h, int(float(w * self.height) / self.width)) - h) / 2)
            dw = int(float(max(w, int(float(h * self.width) / self.height)) - w) / 2)
            if dh or dw:
                images = np.pad(images, ((0, 0), (dh, dh), (dw, dw), (0, 0)), constant_values=self.fill_value)
        return _image_ops.resize(np.ascontiguousarray(images), self.height, self.width, self.interpolation,
                                 self.antialias)

    def graph_call(self, inputs, training=None):
        """The same resize as graph ops (called on graph layers' outputs, e.g. after a Conv2D):
        two matrix products with the interpolation weights, which train."""
        from pyggml import ops
        return ops.image.resize(inputs, (self.height, self.width), interpolation=self.interpolation,
                                antialias=self.antialias, crop_to_aspect_ratio=self.crop_to_aspect_ratio,
                                pad_to_aspect_ratio=self.pad_to_aspect_ratio, fill_value=self.fill_value,
                                data_format=self.data_format)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(height=self.height, width=self.width, interpolation=self.interpolation,
                   crop_to_aspect_ratio=self.crop_to_aspect_ratio, pad_to_aspect_ratio=self.pad_to_aspect_ratio,
                   fill_mode=self.fill_mode, fill_value=self.fill_value, antialias=self.antialias)
        return cfg
