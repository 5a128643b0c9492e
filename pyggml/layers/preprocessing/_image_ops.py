"""Image resampling in numpy for the image preprocessing layers (channels-last
batches ``(n, height, width, channels)``, float32).

Two kinds of resampling:

- ``resize``: separable, one weight matrix per axis.  Output pixel ``j`` of
  ``n_out`` sits at source coordinate ``(j + 0.5) * n_in / n_out - 0.5`` (pixel
  centres aligned, as TF and JAX resize); its weights are a kernel of the
  distance to each source pixel, normalised to sum to one (so the edges clamp).
  With ``antialias`` a downscaling kernel is widened by the scale.
- ``affine_sample``: each output pixel ``(x=column, y=row)`` reads the input at
  ``(a0*x + a1*y + a2, b0*x + b1*y + b2)``, by bilinear or nearest sampling;
  points outside the image come from the image extended by ``fill_mode``:
  reflect ``(d c b a | a b c d | d c b a)``, wrap ``(a b c d | a b c d)``,
  nearest ``(a a | a b c d | d d)`` or constant (``fill_value``).
"""

import numpy as np

__all__ = ["RESIZE_METHODS", "FILL_MODES", "AFFINE_INTERPOLATIONS", "resize", "aspect_crop_box", "affine_sample",
           "sample_points", "rotation_matrices", "zoom_matrices", "translation_matrices", "shear_matrices",
           "homographies", "projective_sample", "gaussian_blur_2d", "elastic_sample"]

RESIZE_METHODS = ("bilinear", "nearest", "bicubic", "lanczos3", "lanczos5", "area")
FILL_MODES = ("reflect", "wrap", "constant", "nearest")
AFFINE_INTERPOLATIONS = ("nearest", "bilinear")


# --- resize ------------------------------------------------------------------------------------

def _triangle(d):
    return np.maximum(0.0, 1.0 - d)


def _keys_cubic(d):
    # Keys' cubic convolution kernel with a = -0.5 (what "bicubic" means in TF and JAX)
    near = (1.5 * d - 2.5) * d * d + 1.0
    far = ((-0.5 * d + 2.5) * d - 4.0) * d + 2.0
    return np.where(d < 1.0, near, np.where(d < 2.0, far, 0.0))


def _lanczos(radius):
    def kernel(d):
        safe = np.where(d == 0, 1.0, d)
        v = radius * np.sin(np.pi * safe) * np.sin(np.pi * safe / radius) / (np.pi * np.pi * safe * safe)
        return np.where(d < 1e-3, 1.0, np.where(d > radius, 0.0, v))
    return kernel


_KERNELS = {"bilinear": _triangle, "bicubic": _keys_cubic, "lanczos3": _lanczos(3.0), "lanczos5": _lanczos(5.0)}


def _axis_weights(n_in, n_out, method, antialias):
    """(n_out, n_in) float32: row j mixes the source pixels of output pixel j."""
    ratio = n_in / n_out
    if method == "area":
        # the mean of the input an output pixel covers, [j * ratio, (j + 1) * ratio): the pixels at
        # its ends weighted by their part inside
        lo = np.arange(n_out, dtype=np.float64)[:, None] * ratio
        i = np.arange(n_in, dtype=np.float64)[None, :]
        return (np.clip(np.minimum(lo + ratio, i + 1) - np.maximum(lo, i), 0.0, None) / ratio).astype(np.float32)
    centre = (np.arange(n_out, dtype=np.float64) + 0.5) * ratio - 0.5
    width = max(ratio, 1.0) if antialias else 1.0
    dist = np.abs(centre[:, None] - np.arange(n_in, dtype=np.float64)[None, :]) / width
    w = _KERNELS[method](dist)
    total = w.sum(axis=1, keepdims=True)
    ok = np.abs(total) > 1e-4
    w = np.where(ok, w / np.where(ok, total, 1.0), 0.0)
    inside = (centre >= -0.5) & (centre <= n_in - 0.5)
    return np.where(inside[:, None], w, 0.0).astype(np.float32)


def resize(images, height, width, method="bilinear", antialias=False):
    """(n, h, w, c) float32 -> (n, height, width, c) float32."""
    n, h, w, c = images.shape
    out = images
    if method == "nearest":
        if h != height:
            rows = np.minimum(np.floor((np.arange(height) + 0.5) * (h / height)).astype(np.int64), h - 1)
            out = out[:, rows]
        if w != width:
            cols = np.minimum(np.floor((np.arange(width) + 0.5) * (w / width)).astype(np.int64), w - 1)
            out = out[:, :, cols]
        return np.ascontiguousarray(out, dtype=np.float32)
    if h != height:
        wh = _axis_weights(h, height, method, antialias)                     # (height, h)
        out = np.matmul(wh, out.reshape(n, h, w * c)).reshape(n, height, w, c)
    if w != width:
        ww = _axis_weights(w, width, method, antialias)                      # (width, w)
        rows = out.shape[1]
        out = np.matmul(ww, out.transpose(0, 2, 1, 3).reshape(n, w, rows * c))
        out = out.reshape(n, width, rows, c).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(out, dtype=np.float32)


def aspect_crop_box(h, w, height, width):
    """(top, left, rows, cols): the largest centred window of the target's aspect ratio."""
    rows = max(min(h, int(float(w * height) / width)), 1)
    cols = max(min(w, int(float(h * width) / height)), 1)
    return int(float(h - rows) / 2), int(float(w - cols) / 2), rows, cols


# --- affine sampling -------------------------------------------------------------------------------

def _extend(i, n, fill_mode):
    """Integer source indices -> (indices inside [0, n), inside mask or None)."""
    if fill_mode == "reflect":
        m = np.mod(i, 2 * n)
        return np.where(m >= n, 2 * n - 1 - m, m), None
    if fill_mode == "wrap":
        return np.mod(i, n), None
    if fill_mode == "nearest":
        return np.clip(i, 0, n - 1), None
    inside = (i >= 0) & (i < n)
    return np.clip(i, 0, n - 1), inside


def affine_points(matrices, h, w):
    """The source (columns, rows), each (n, h, w), that output pixels read under ``matrices``
    (n, 6) rows [a0, a1, a2, b0, b1, b2]."""
    m = np.asarray(matrices, dtype=np.float32)
    ys = np.arange(h, dtype=np.float32)[None, :, None]
    xs = np.arange(w, dtype=np.float32)[None, None, :]
    sx = m[:, 0, None, None] * xs + m[:, 1, None, None] * ys + m[:, 2, None, None]      # (n, h, w)
    sy = m[:, 3, None, None] * xs + m[:, 4, None, None] * ys + m[:, 5, None, None]
    return sx, sy


def affine_sample(images, matrices, interpolation, fill_mode, fill_value):
    """images (n, h, w, c) float32; matrices (n, 6) rows [a0, a1, a2, b0, b1, b2]."""
    sx, sy = affine_points(matrices, images.shape[1], images.shape[2])
    return sample_points(images, sx, sy, interpolation, fill_mode, fill_value)


def sample_points(images, sx, sy, interpolation, fill_mode, fill_value):
    """images (n, h, w, c) float32 read at source columns ``sx`` and rows ``sy`` (n, h, w) per output
    pixel, by bilinear or nearest sampling, outside points by ``fill_mode``."""
    n, h, w, c = images.shape
    sx, sy = np.asarray(sx, np.float32), np.asarray(sy, np.float32)
    flat = images.reshape(n * h * w, c)
    base = (np.arange(n, dtype=np.int64) * (h * w))[:, None, None]
    fill = np.float32(fill_value)

    def read(col, row):
        """The pixels at these extended (column, row) indices."""
        (jx, okx), (jy, oky) = col, row
        vals = np.take(flat, (base + jy * w + jx).reshape(-1), axis=0).reshape(n, h, w, c)
        if okx is not None:
            vals = np.where((okx & oky)[..., None], vals, fill)
        return vals

    if interpolation == "nearest":
        return read(_extend(np.floor(sx + 0.5).astype(np.int64), w, fill_mode),
                    _extend(np.floor(sy + 0.5).astype(np.int64), h, fill_mode))
    x0, y0 = np.floor(sx), np.floor(sy)
    fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    c0, c1 = _extend(x0, w, fill_mode), _extend(x0 + 1, w, fill_mode)
    r0, r1 = _extend(y0, h, fill_mode), _extend(y0 + 1, h, fill_mode)
    top = read(c0, r0)
    top += (read(c1, r0) - top) * fx
    bottom = read(c0, r1)
    bottom += (read(c1, r1) - bottom) * fx
    top += (bottom - top) * fy
    return top


def rotation_matrices(degrees, h, w):
    """Counter-clockwise rotations about the image centre, one per angle (degrees)."""
    t = np.deg2rad(np.asarray(degrees, dtype=np.float64))
    cos, sin = np.cos(t), np.sin(t)
    cx, cy = (w - 1) / 2.0, (h - 1) / 2.0
    return np.stack([cos, -sin, cx - cx * cos + cy * sin, sin, cos, cy - cx * sin - cy * cos], axis=1)


def zoom_matrices(height_zoom, width_zoom, h, w):
    """Sampling (zoom - 1) of the image size further out about the centre: > 1 zooms out."""
    zy, zx = np.asarray(height_zoom, np.float64), np.asarray(width_zoom, np.float64)
    zero = np.zeros_like(zx)
    return np.stack([zx, zero, (w - 1) / 2.0 * (1 - zx), zero, zy, (h - 1) / 2.0 * (1 - zy)], axis=1)


def translation_matrices(dy, dx):
    """The image moved down by dy and right by dx pixels."""
    dy, dx = np.asarray(dy, np.float64), np.asarray(dx, np.float64)
    one, zero = np.ones_like(dx), np.zeros_like(dx)
    return np.stack([one, zero, -dx, zero, one, -dy], axis=1)


# --- shear, perspective and elastic warps (RandomShear, RandomPerspective, RandomElasticTransform) ----------------

def shear_matrices(sx, sy, h, w):
    """Shears about the top-left corner (as Keras's RandomShear): output pixel (x, y) reads the input at
    (x + sx * y, y + sy * x).  ``h`` and ``w`` (the image size) do not change a shear about the corner;
    they are taken so that every matrix helper here has the image's size in the same place."""
    sx, sy = np.asarray(sx, np.float64), np.asarray(sy, np.float64)
    one, zero = np.ones_like(sx), np.zeros_like(sx)
    return np.stack([one, sx, zero, sy, one, zero], axis=1)


def homographies(source, target):
    """(n, 8) projective maps [a0, a1, a2, b0, b1, b2, c0, c1] taking each of 4 ``target`` points (x, y) to
    its ``source`` point: (x, y) -> ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1.
    ``source``, ``target``: (n, 4, 2)."""
    src, dst = np.asarray(source, np.float64), np.asarray(target, np.float64)
    n = len(src)
    a = np.zeros((n, 8, 8))
    b = np.zeros((n, 8))
    x, y, u, v = dst[..., 0], dst[..., 1], src[..., 0], src[..., 1]
    for i in range(4):                     # u (c0 x + c1 y + 1) = a0 x + a1 y + a2, and the same for v
        a[:, 2 * i, 0], a[:, 2 * i, 1], a[:, 2 * i, 2] = x[:, i], y[:, i], 1.0
        a[:, 2 * i, 6], a[:, 2 * i, 7] = -u[:, i] * x[:, i], -u[:, i] * y[:, i]
        a[:, 2 * i + 1, 3], a[:, 2 * i + 1, 4], a[:, 2 * i + 1, 5] = x[:, i], y[:, i], 1.0
        a[:, 2 * i + 1, 6], a[:, 2 * i + 1, 7] = -v[:, i] * x[:, i], -v[:, i] * y[:, i]
        b[:, 2 * i], b[:, 2 * i + 1] = u[:, i], v[:, i]
    return np.linalg.solve(a, b[..., None])[..., 0]


def projective_sample(images, matrices, interpolation, fill_mode, fill_value):
    """images (n, h, w, c) float32; matrices (n, 8): output pixel (x, y) reads the input at
    ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1."""
    n, h, w, c = images.shape
    m = np.asarray(matrices, np.float64)[:, :, None, None]
    ys = np.arange(h, dtype=np.float64)[None, :, None]
    xs = np.arange(w, dtype=np.float64)[None, None, :]
    k = m[:, 6] * xs + m[:, 7] * ys + 1.0
    k = np.where(np.abs(k) < 1e-12, 1e-12, k)          # a point sent to infinity reads the fill
    sx = (m[:, 0] * xs + m[:, 1] * ys + m[:, 2]) / k
    sy = (m[:, 3] * xs + m[:, 4] * ys + m[:, 5]) / k
    far = 4.0 * (h + w)                                   # keep the indices finite and in int64's range
    return sample_points(images, np.clip(sx, -far, w + far), np.clip(sy, -far, h + far), interpolation,
                         fill_mode, fill_value)


def gaussian_blur_2d(fields, sigma):
    """(n, h, w) float64 blurred by a Gaussian of ``sigma`` pixels along both axes (edges mirrored)."""
    if sigma <= 0:
        return fields
    radius = max(1, int(np.ceil(3.0 * sigma)))
    t = np.arange(-radius, radius + 1, dtype=np.float64)
    kernel = np.exp(-0.5 * (t / sigma) ** 2)
    kernel /= kernel.sum()
    out = fields
    for axis in (1, 2):
        pad = [(0, 0)] * 3
        pad[axis] = (radius, radius)
        padded = np.pad(out, pad, mode="symmetric")
        size = out.shape[axis]
        out = sum(kernel[i] * np.take(padded, np.arange(i, i + size), axis=axis) for i in range(2 * radius + 1))
    return out


def elastic_sample(images, dx, dy, interpolation, fill_mode, fill_value):
    """images (n, h, w, c) float32: output pixel (x, y) reads the input at (x + dx, y + dy), dx and dy
    (n, h, w) displacement fields in pixels."""
    n, h, w, c = images.shape
    ys = np.arange(h, dtype=np.float64)[None, :, None]
    xs = np.arange(w, dtype=np.float64)[None, None, :]
    return sample_points(images, xs + dx, ys + dy, interpolation, fill_mode, fill_value)
