"""RandomColorJitter (Keras's layer): in training, each image's brightness,
contrast, saturation and hue changed at random, in that order, by the layers
``RandomBrightness``, ``RandomContrast``, ``RandomSaturation`` and ``RandomHue``
with the factors given (a factor left None skips its step).  The identity in
inference."""

from pyggml.layers.preprocessing._color_base import ColorChannels, check_color_range, draw_from
from pyggml.layers.preprocessing._color_ops import check_channels
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.layers.preprocessing.random_brightness import RandomBrightness
from pyggml.layers.preprocessing.random_contrast import RandomContrast
from pyggml.layers.preprocessing.random_hue import RandomHue
from pyggml.layers.preprocessing.random_saturation import RandomSaturation
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomColorJitter"]


def _plain(value):
    """A factor as JSON keeps it: tuples as lists, numpy numbers as floats."""
    if isinstance(value, (tuple, list)):
        return [float(v) for v in value]
    return value if value is None else float(value)


@register_builtin
class RandomColorJitter(ColorChannels, RandomImageLayer):
    """``RandomColorJitter(value_range=(0, 255), brightness_factor=None, contrast_factor=None,
    saturation_factor=None, hue_factor=None, seed=None, data_format=None)``; each factor takes the form of
    the layer it drives."""

    def __init__(self, value_range=(0, 255), brightness_factor=None, contrast_factor=None, saturation_factor=None,
                 hue_factor=None, seed=None, data_format=None, **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = check_color_range(value_range, "RandomColorJitter")
        steps = []
        for name, factor, cls in (("brightness_factor", brightness_factor, RandomBrightness),
                                  ("contrast_factor", contrast_factor, RandomContrast),
                                  ("saturation_factor", saturation_factor, RandomSaturation),
                                  ("hue_factor", hue_factor, RandomHue)):
            if factor is None:
                continue
            try:
                step = cls(factor, value_range=self.value_range)
            except (TypeError, ValueError) as e:
                raise type(e)(f"RandomColorJitter: {name}: {e}") from None
            steps.append(draw_from(step, self))
        self._steps = steps
        # saturation and hue need RGB; brightness and contrast take any channels
        self.color_channels = (3,) if saturation_factor is not None or hue_factor is not None else None
        self.brightness_factor = _plain(brightness_factor)
        self.contrast_factor = _plain(contrast_factor)
        self.saturation_factor = _plain(saturation_factor)
        self.hue_factor = _plain(hue_factor)

    def augment(self, images):
        if self.color_channels:
            check_channels(images, "RandomColorJitter (saturation_factor, hue_factor)", self.color_channels)
        for step in self._steps:
            images = step.augment(images)
        return images

    def get_config(self):
        cfg = super().get_config()
        cfg.update(value_range=list(self.value_range), brightness_factor=self.brightness_factor,
                   contrast_factor=self.contrast_factor, saturation_factor=self.saturation_factor,
                   hue_factor=self.hue_factor)
        return cfg
