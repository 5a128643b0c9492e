"""Colour maths in numpy for the colour augmentation layers (channels-last
batches ``(n, height, width, channels)``, float32 in, float32 out).

- ``rgb_to_grayscale``: the luma ``0.2989 R + 0.5870 G + 0.1140 B`` (Keras's
  weights), one channel; a one-channel image is already grey.
- ``rgb_to_hsv`` / ``hsv_to_rgb``: hue, saturation and value each in [0, 1]
  for RGB in [0, 1] (hue in turns: 0 red, 1/3 green, 2/3 blue).
- ``depthwise_filter``: a 2-D kernel applied to every channel with "same"
  zero padding (what Keras's depthwise convolution and gaussian_blur do).
- ``gaussian_kernel``: normalised Gaussian weights of a given odd size.
- ``to_unit`` / ``from_unit``: a value range mapped to [0, 1] and back.
"""

import numpy as np

__all__ = ["LUMA", "check_channels", "rgb_to_grayscale", "rgb_to_hsv", "hsv_to_rgb", "depthwise_filter",
           "gaussian_kernel", "to_unit", "from_unit"]

LUMA = np.array([0.2989, 0.5870, 0.1140], np.float32)


def check_channels(images, owner, allowed=(1, 3)):
    c = images.shape[-1]
    if c not in allowed:
        raise ValueError(f"{owner} takes RGB images (3 channels){' or grey ones (1 channel)' if 1 in allowed else ''}"
                         f", got images with {c} channels")


def rgb_to_grayscale(images):
    """(n, h, w, 3) -> (n, h, w, 1); (n, h, w, 1) is returned as it is."""
    if images.shape[-1] == 1:
        return images
    return np.tensordot(images, LUMA, axes=([-1], [0]))[..., None].astype(np.float32)


def rgb_to_hsv(images):
    r, g, b = images[..., 0], images[..., 1], images[..., 2]
    v = images.max(axis=-1)
    delta = v - images.min(axis=-1)
    has_colour = delta > 0
    safe = np.where(has_colour, delta, 1.0)
    s = np.where(v > 0, delta / np.where(v > 0, v, 1.0), 0.0)
    h = np.where(r == v, (g - b) / safe, np.where(g == v, (b - r) / safe + 2.0, (r - g) / safe + 4.0))
    h = np.where(has_colour, np.mod(h / 6.0, 1.0), 0.0)
    return np.stack([h, s, v], axis=-1).astype(np.float32)


def hsv_to_rgb(images):
    h, s, v = images[..., 0:1], images[..., 1:2], images[..., 2:3]
    n = np.array([5.0, 3.0, 1.0], np.float32)             # r, g, b
    k = np.mod(n + h * 6.0, 6.0)
    ramp = np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)
    return (v - v * s * ramp).astype(np.float32)


def depthwise_filter(images, kernel):
    """Every channel of every image filtered by ``kernel`` (kh, kw), zero padding, "same" size."""
    kernel = np.asarray(kernel, np.float64)
    kh, kw = kernel.shape
    n, h, w, c = images.shape
    top, left = (kh - 1) // 2, (kw - 1) // 2
    padded = np.pad(images, ((0, 0), (top, kh - 1 - top), (left, kw - 1 - left), (0, 0)))
    out = np.zeros(images.shape, np.float64)
    for i in range(kh):
        for j in range(kw):
            if kernel[i, j] != 0.0:
                out += kernel[i, j] * padded[:, i:i + h, j:j + w]
    return out.astype(np.float32)


def gaussian_kernel(size, sigma):
    """(size,) weights exp(-x^2 / (2 sigma^2)) for x centred on the middle tap, summing to one."""
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    k = np.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


def to_unit(images, value_range, scale=1.0):
    """value_range -> [0, scale]."""
    low, high = value_range
    return ((images - np.float32(low)) * np.float32(scale / (high - low))).astype(np.float32)


def from_unit(images, value_range, scale=1.0):
    """[0, scale] -> value_range."""
    low, high = value_range
    return (images * np.float32((high - low) / scale) + np.float32(low)).astype(np.float32)
