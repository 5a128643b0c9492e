"""ContrastLimitedAdaptiveHistogramEqualization (Keras's CLAHE layer): each image's channels
equalised tile by tile, as Keras 3 defines it.  Values are mapped to [0, 255] (from
``value_range``) and the image padded symmetrically to a whole number of tiles
(``tile_grid_size``).  Each tile's histogram of ``int(clip(v, 0, 255))`` is clipped at
``clip_limit * tile_pixels / 256`` with the excess spread evenly over the 256 bins; its
normalised cumulative count ``(cdf - min cdf) * 255 / (tile_pixels - min cdf)`` maps a value,
and each pixel takes the bilinear blend of the mappings of the four tiles around it (the edge
tiles' repeated beyond the image).  Not random: it acts in training and inference alike."""

import numpy as np

from pyggml._validation import check_int, check_number
from pyggml.layers.preprocessing._color_base import check_color_range
from pyggml.layers.preprocessing._color_ops import from_unit, to_unit
from pyggml.layers.preprocessing.image_layer import ImagePreprocessingLayer
from pyggml.saving.object_registration import register_builtin

__all__ = ["ContrastLimitedAdaptiveHistogramEqualization", "clahe"]

_PAD_MODE = "symmetric"
_MAX_HIST = 1 << 27            # histogram bins a call may count (images x channels x tiles x 256)


def clahe(images, value_range, clip_limit, grid):
    """CLAHE of channels-last float32 images (n, h, w, c); see the module's docstring."""
    n, h, w, c = images.shape
    gh, gw = grid
    th, tw = -(-h // gh), -(-w // gw)
    if n * c * gh * gw * 256 > _MAX_HIST:
        raise ValueError(f"ContrastLimitedAdaptiveHistogramEqualization: {n} images of {c} channels in {gh} x {gw} "
                         f"tiles are too many histograms for one call")
    x = to_unit(images, value_range, 255.0).astype(np.float64)
    x = np.pad(x, ((0, 0), (0, th * gh - h), (0, tw * gw - w), (0, 0)), mode=_PAD_MODE)
    px = np.clip(x, 0, 255).astype(np.int64)
    tiles = px.reshape(n, gh, th, gw, tw, c).transpose(0, 1, 3, 5, 2, 4).reshape(n, gh, gw, c, th * tw)
    hist = np.zeros((n, gh, gw, c, 256))
    flat = hist.reshape(-1, 256)
    rows = np.repeat(np.arange(flat.shape[0]), th * tw)
    np.add.at(flat, (rows, tiles.reshape(-1)), 1.0)
    if clip_limit > 0:
        limit = clip_limit * th * tw / 256.0
        clipped = np.minimum(hist, limit)
        hist = clipped + (hist - clipped).sum(axis=-1, keepdims=True) / 256.0
    cdf = np.cumsum(hist, axis=-1)
    low = cdf.min(axis=-1, keepdims=True)
    den = th * tw - low
    den = np.where(den == 0, 1.0, den)
    table = np.clip((cdf - low) * 255.0 / den, 0, 255)                      # (n, gh, gw, c, 256)
    table = np.pad(table, ((0, 0), (1, 1), (1, 1), (0, 0), (0, 0)), mode="edge")
    yg = (np.arange(th * gh) - th / 2.0) / th + 1.0
    xg = (np.arange(tw * gw) - tw / 2.0) / tw + 1.0
    y0, x0 = np.floor(yg), np.floor(xg)
    wy, wx = (yg - y0)[None, :, None, None], (xg - x0)[None, None, :, None]
    y0, y1 = (np.clip(v, 0, gh + 1).astype(np.int64) for v in (y0, y0 + 1))
    x0, x1 = (np.clip(v, 0, gw + 1).astype(np.int64) for v in (x0, x0 + 1))
    b = np.arange(n)[:, None, None, None]
    ch = np.arange(c)[None, None, None, :]

    def at(ys, xs):
        return table[b, ys[None, :, None, None], xs[None, None, :, None], ch, px]
    top = at(y0, x0) * (1 - wx) + at(y0, x1) * wx
    bottom = at(y1, x0) * (1 - wx) + at(y1, x1) * wx
    out = (top * (1 - wy) + bottom * wy)[:, :h, :w, :]
    return from_unit(np.ascontiguousarray(out, dtype=np.float32), value_range, 255.0)


@register_builtin
class ContrastLimitedAdaptiveHistogramEqualization(ImagePreprocessingLayer):
    """``ContrastLimitedAdaptiveHistogramEqualization(value_range=(0, 255), clip_limit=4.0,
    tile_grid_size=(8, 8), data_format=None)``."""

    def __init__(self, value_range=(0, 255), clip_limit=4.0, tile_grid_size=(8, 8), data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        what = "ContrastLimitedAdaptiveHistogramEqualization"
        self.value_range = check_color_range(value_range, what)
        self.clip_limit = check_number(f"{what}: clip_limit", clip_limit, 0.0)
        grid = tuple(tile_grid_size) if isinstance(tile_grid_size, (list, tuple)) else None
        if grid is None or len(grid) != 2:
            raise ValueError(f"{what}: tile_grid_size must be 2 ints (height, width), got {tile_grid_size!r}")
        self.tile_grid_size = tuple(check_int(f"{what}: tile_grid_size", g, 1, 1 << 12) for g in grid)

    def transform(self, images, training):
        return clahe(images, self.value_range, self.clip_limit, self.tile_grid_size)

    def get_config(self):
        cfg = super().get_config()
        cfg.update(value_range=list(self.value_range), clip_limit=self.clip_limit,
                   tile_grid_size=list(self.tile_grid_size))
        return cfg
