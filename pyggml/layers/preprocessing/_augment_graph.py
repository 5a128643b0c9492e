"""Augmentations of tensors a graph computes (gan_ada augments its generator's images inside
the training step, and the generator trains through them).

The layer draws its transform on the host before each step, as it does for arrays, and turns
it into a plan: for every output pixel, the input pixels it reads and their weights.  The graph
gathers those pixels (``get_rows``, whose gradient reaches the images) and blends them, so the
result is the host path's sampling on the same draws, and it trains.  The pixel indices are
computed on the host, inside the images, so no gather can read outside them.
"""

import numpy as np

from pyggml import _scope, ops
from pyggml.layers.preprocessing import _image_ops

__all__ = ["resample", "sample_plan", "flip_plan"]

_MAX_ROWS = (1 << 31) - 1        # gathered rows are counted in int32


def sample_plan(sx, sy, h, w, interpolation, fill_mode, fill_value):
    """What ``_image_ops.sample_points`` computes, as a gather: images (n, h, w, c) read at source
    columns ``sx`` and rows ``sy`` (n, h, w).  Returns (rows (k, n*h*w) into the n*h*w pixels,
    weights (k, n*h*w), fill (n*h*w) the constant fill's part of each output, or None)."""
    n = sx.shape[0]
    base = (np.arange(n, dtype=np.int64) * (h * w))[:, None, None]
    sx, sy = np.asarray(sx, np.float32), np.asarray(sy, np.float32)
    if interpolation == "nearest":
        corners = [(np.floor(sx + 0.5).astype(np.int64), np.floor(sy + 0.5).astype(np.int64),
                    np.ones(sx.shape, np.float32))]
    else:
        x0, y0 = np.floor(sx), np.floor(sy)
        fx, fy = sx - x0, sy - y0
        x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
        corners = [(x0, y0, (1 - fx) * (1 - fy)), (x0 + 1, y0, fx * (1 - fy)),
                   (x0, y0 + 1, (1 - fx) * fy), (x0 + 1, y0 + 1, fx * fy)]
    rows, weights, outside = [], [], np.zeros(sx.shape, np.float32)
    for cx, cy, wt in corners:
        (jx, okx), (jy, oky) = _image_ops._extend(cx, w, fill_mode), _image_ops._extend(cy, h, fill_mode)
        rows.append((base + jy * w + jx).reshape(-1))
        if okx is not None:                      # "constant": outside points read the fill value
            inside = okx & oky
            outside += np.where(inside, 0.0, wt)
            wt = np.where(inside, wt, 0.0)
        weights.append(np.asarray(wt, np.float32).reshape(-1))
    fill = None
    if fill_mode == "constant" and fill_value != 0:
        fill = (outside * np.float32(fill_value)).reshape(-1)
    return np.stack(rows), np.stack(weights), fill


def flip_plan(n, h, w, flips, horizontal, vertical):
    """Rows (1, n*h*w) that mirror the images where ``flips`` (n,) is true."""
    ys, xs = np.arange(h)[None, :, None], np.arange(w)[None, None, :]
    f = np.asarray(flips, bool)[:, None, None]
    src_x = np.where(f & horizontal, w - 1 - xs, xs)
    src_y = np.where(f & vertical, h - 1 - ys, ys)
    base = (np.arange(n, dtype=np.int64) * (h * w))[:, None, None]
    return (base + src_y * w + src_x).reshape(1, -1)


def resample(layer, x, plan, corners, weighted, filled):
    """``x`` (n, h, w, c) channels-last, a tensor of the graph being built, sampled by
    ``plan(n, h, w)`` -> (rows (k, n*h*w), weights (k, n*h*w) or None, fill (n*h*w) or None),
    drawn again before each step: ``corners`` is k, ``weighted`` whether weights are given
    (bilinear sampling, or outside points of a constant fill), ``filled`` whether fill is."""
    b = _scope.require(type(layer).__name__)
    n, h, w, c = (int(d) for d in x.shape)
    pixels = n * h * w
    if pixels * corners > _MAX_ROWS:
        raise ValueError(f"{type(layer).__name__}: {n} images of {h} x {w} are too many pixels to augment in one "
                         f"graph (more than 2**31 gathered): give fewer images a step")
    drawn = []                                   # this step's plan, shared by the tensors below

    def weights_draw(rng, shape):
        drawn[:] = plan(n, h, w)
        return drawn[1]

    def rows_draw(rng, shape):
        return drawn[0].astype(np.int32)

    def fill_draw(rng, shape):
        return drawn[2].reshape(shape)

    # drawn in this order before each step (every builder draws in the order it was asked)
    if weighted:
        weights = b.random_values((corners, pixels, 1), weights_draw)
        rows = b.random_values((corners * pixels,), rows_draw, dtype="int32")
    else:
        rows = b.random_values((corners * pixels,), lambda rng, s: plan(n, h, w)[0].astype(np.int32),
                               dtype="int32")
    fill = b.random_values((pixels, 1), fill_draw) if filled else None
    got = ops.get_rows(ops.reshape(x, (pixels, c)), rows)              # (k * pixels, c)
    if weighted:
        got = ops.sum(ops.reshape(got, (corners, pixels, c)) * weights, axis=0)
    if fill is not None:
        got = got + fill
    return ops.reshape(got, (n, h, w, c))
