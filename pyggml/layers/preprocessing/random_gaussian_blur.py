"""RandomGaussianBlur (Keras's layer): in training, each image blurred with
probability drawn from ``factor``'s range, by a Gaussian kernel of
``kernel_size`` taps whose standard deviations (one across, one down) are drawn
from ``sigma``'s range (zero padding at the edges, as Keras), then clipped to
``value_range``.  The identity in inference."""

import numpy as np

from pyggml._validation import is_int, is_number
from pyggml.layers.preprocessing._color_base import bounded_factor, check_color_range
from pyggml.layers.preprocessing._color_ops import depthwise_filter, gaussian_kernel
from pyggml.layers.preprocessing.image_layer import RandomImageLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["RandomGaussianBlur"]


def _kernel_size(value):
    what = f"RandomGaussianBlur: kernel_size must be an odd positive int or a pair of them, got {value!r}"
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    if len(items) not in (1, 2):
        raise ValueError(what)
    for v in items:
        if not is_number(v):
            raise TypeError(what)
        if not (is_int(v) or float(v).is_integer()) or v < 1 or v % 2 == 0 or v > 1025:
            raise ValueError(what)
    items = [int(v) for v in items]
    return (items[0], items[0]) if len(items) == 1 else tuple(items)


def gaussian_blur(image, kernel_size, sigma):
    """One image (1, h, w, c) blurred; kernel_size and sigma are (across, down), as Keras's gaussian_blur."""
    # the 2-D kernel is the outer product of two 1-D ones: filter down, then across (the same sums, zero padded)
    down = depthwise_filter(image, gaussian_kernel(kernel_size[1], sigma[1])[:, None])
    return depthwise_filter(down, gaussian_kernel(kernel_size[0], sigma[0])[None, :])


@register_builtin
class RandomGaussianBlur(RandomImageLayer):
    """``RandomGaussianBlur(factor=1.0, kernel_size=3, sigma=1.0, value_range=(0, 255), data_format=None,
    seed=None)``; ``factor`` (the probability) and ``sigma`` in [0, 1] (a number f: draws from [0, f]) or
    (lower, upper) pairs; ``kernel_size`` an odd int or a pair (across, down) of them."""

    def __init__(self, factor=1.0, kernel_size=3, sigma=1.0, value_range=(0, 255), data_format=None, seed=None,
                 **kwargs):
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.factor = bounded_factor(factor, "factor", "RandomGaussianBlur")
        self.kernel_size = _kernel_size(kernel_size)
        self.sigma = bounded_factor(sigma, "sigma", "RandomGaussianBlur")
        self.value_range = check_color_range(value_range, "RandomGaussianBlur")

    def augment(self, images):
        rng = self.rng()
        n = len(images)
        probability = rng.uniform(self.factor[0], self.factor[1], size=n)
        apply = rng.uniform(size=n) < probability
        sigmas = rng.uniform(self.sigma[0], self.sigma[1], size=(n, 2)) + 1e-6
        out = images.copy()
        for i in np.nonzero(apply)[0]:
            out[i] = gaussian_blur(images[i:i + 1], self.kernel_size, sigmas[i])[0]
        return np.clip(out, self.value_range[0], self.value_range[1])

    def get_config(self):
        cfg = super().get_config()
        cfg.update(factor=list(self.factor), kernel_size=list(self.kernel_size), sigma=list(self.sigma),
                   value_range=list(self.value_range))
        return cfg
