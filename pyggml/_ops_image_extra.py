"""More of Keras's ``keras.ops.image``: ``extract_patches_3d``, ``sobel_edges``, ``ssim`` and
``scale_and_translate`` (``pyggml.ops.image``).  On arrays outside a graph they compute at once
in numpy (float64 inside, float32 out); inside a layer's ``call`` they are built from
pyggml.ops (gathers, convolutions and products with constant matrices) and train.
- ``sobel_edges`` pads with zeros, as Keras's torch and JAX backends (TensorFlow's reflects).
- ``ssim`` follows Keras: a Gaussian window (``filter_size``, ``filter_sigma``) over the valid
  region, the mean over pixels and channels, one value per image.
- ``scale_and_translate`` is JAX's: each output pixel's centre ``(i + 0.5 - t) / s - 0.5`` in
  the input, weighed by the kernel (``linear``, ``cubic`` (Keys, a = -0.5), ``lanczos3``,
  ``lanczos5``), stretched by 1 / scale when downsampling with ``antialias``; rows normalised
  to sum to 1, outputs whose centre falls outside the input are 0."""

import sys

import numpy as np

from pyggml.core import Tensor
from pyggml.variables import Variable
from pyggml._validation import is_int, is_number

__all__ = ["extract_patches_3d", "sobel_edges", "ssim", "scale_and_translate"]

_MAX_PLAN = 1 << 26          # entries of a gather plan or a weight matrix


def _k():
    """pyggml.ops (loaded before its image ops are called): its public ops take volumes too."""
    return sys.modules["pyggml.ops"]


def _in_graph(*xs):
    from pyggml import _scope
    return _scope.current() is not None or any(isinstance(x, (Tensor, Variable)) for x in xs)


def _array(x, what):
    a = np.asarray(x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else x)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected real numbers, got dtype {a.dtype}")
    return a.astype(np.float64)


def _shape(x):
    return tuple(int(d) for d in x.shape)


def _data_format(data_format, what):
    if data_format is None:
        return "channels_last"
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"{what}: data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
    return data_format


def _ints(value, n, name, what, minimum=1):
    v = (value,) * n if is_int(value) else value
    if not (isinstance(v, (tuple, list)) and len(v) == n and all(is_int(e) for e in v)):
        raise TypeError(f"{what}: {name} must be an int or a tuple of {n} ints, got {value!r}")
    v = tuple(int(e) for e in v)
    if min(v) < minimum:
        raise ValueError(f"{what}: {name} must be at least {minimum}, got {value!r}")
    return v


# --- extract_patches_3d ----------------------------------------------------------------------------

def _axis_starts(n, k, s, d, padding):
    """(output length, the first input index of each window, counting the leading padding)."""
    span = (k - 1) * d + 1
    if padding == "valid":
        out = (n - span) // s + 1 if n >= span else 0
        return out, np.arange(max(out, 0)) * s
    out = -(-n // s)
    pad = max((out - 1) * s + span - n, 0)
    return out, np.arange(out) * s - pad // 2


def _patch_index_3d(dims, size, strides, dilation, padding):
    """The gather plan: for each (output voxel, kernel tap), the flat input voxel, or the index
    one past the end (a zero) where the window reads padding."""
    axes = [_axis_starts(n, k, s, d, padding) for n, k, s, d in zip(dims, size, strides, dilation)]
    if any(out < 1 for out, _ in axes):
        return None, None
    outs = tuple(out for out, _ in axes)
    pos = []
    for (out, starts), k, d, n in zip(axes, size, dilation, dims):
        p = starts[:, None] + np.arange(k)[None, :] * d                    # (out, k)
        pos.append(p)
    zd, zh, zw = pos
    valid = ((zd >= 0) & (zd < dims[0]))[:, None, None, :, None, None] & \
        ((zh >= 0) & (zh < dims[1]))[None, :, None, None, :, None] & \
        ((zw >= 0) & (zw < dims[2]))[None, None, :, None, None, :]
    flat = zd[:, None, None, :, None, None] * (dims[1] * dims[2]) + zh[None, :, None, None, :, None] * dims[2] + \
        zw[None, None, :, None, None, :]
    idx = np.where(valid, flat, dims[0] * dims[1] * dims[2])
    return outs, idx.reshape(-1).astype(np.int32)


def extract_patches_3d(volumes, size, strides=None, dilation_rate=1, padding="valid", data_format=None):
    """Keras's ``ops.image.extract_patches_3d``: volumes (n, d, h, w, c) (or one (d, h, w, c))
    -> (n, out_d, out_h, out_w, kd * kh * kw * c), each patch's values in (depth, row, column,
    channel) order; ``strides`` default to ``size``; "same" pads with zeros as TensorFlow."""
    what = "ops.image.extract_patches_3d"
    size = _ints(size, 3, "size", what)
    strides = size if strides is None else _ints(strides, 3, "strides", what)
    dilation = _ints(dilation_rate, 3, "dilation_rate", what)
    if dilation != (1, 1, 1) and strides != (1, 1, 1):
        raise ValueError(f"{what}: dilation_rate > 1 needs strides of 1, got strides {strides} with dilation_rate "
                         f"{dilation}")
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(f"{what}: padding must be 'valid' or 'same', got {padding!r}")
    padding = padding.lower()
    data_format = _data_format(data_format, what)
    graph = _in_graph(volumes)
    x = volumes if graph else _array(volumes, what)
    shape = _shape(x)
    if len(shape) not in (4, 5) or min(shape) < 1:
        raise ValueError(f"{what}: expected volumes of shape (batch, depth, height, width, channels) or one volume "
                         f"(depth, height, width, channels), got shape {shape}")
    unbatched = len(shape) == 4
    dims = shape[-4:-1] if data_format == "channels_last" else shape[-3:]
    c = shape[-1] if data_format == "channels_last" else shape[-4]
    n = 1 if unbatched else shape[0]
    if np.prod(dims, dtype=np.int64) * np.prod(size, dtype=np.int64) > _MAX_PLAN:
        raise ValueError(f"{what}: volumes of {dims} with patches of {size} are too large")
    outs, idx = _patch_index_3d(dims, size, strides, dilation, padding)
    if idx is None:
        raise ValueError(f"{what}: patches of size {size} (dilation {dilation}) do not fit in volumes of {dims} "
                         f"with padding 'valid'")
    depth = int(np.prod(size)) * c
    voxels = int(np.prod(dims))
    ops = _k()
    if data_format == "channels_first":
        x = ops.moveaxis(x, -4, -1) if graph else np.moveaxis(x, -4, -1)
    if not graph:
        flat = np.concatenate([x.reshape(n, voxels, c), np.zeros((n, 1, c))], axis=1)
        out = flat[:, idx].reshape((n,) + outs + (depth,))
        out = out[0] if unbatched else out
        return np.ascontiguousarray(np.moveaxis(out, -1, -4) if data_format == "channels_first" else out,
                                    dtype=np.float32)
    flat = ops.reshape(x, (n, voxels, c))
    if np.any(idx == voxels):
        flat = ops.concatenate([flat, ops.zeros((n, 1, c))], axis=1)
    y = ops.reshape(ops.take(flat, idx, axis=1), (n,) + outs + (depth,))
    if unbatched:
        y = ops.squeeze(y, 0)
    return ops.moveaxis(y, -1, -4) if data_format == "channels_first" else y


# --- sobel_edges -----------------------------------------------------------------------------------

_SOBEL_Y = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float64)
_SOBEL_X = _SOBEL_Y.T.copy()


def _images_nhwc(images, data_format, what, graph):
    x = images if graph else _array(images, what)
    shape = _shape(x)
    if len(shape) != 4 or min(shape) < 1:
        raise ValueError(f"{what}: expected images of shape (batch, height, width, channels), got shape {shape}")
    if data_format == "channels_first":
        x = _k().transpose(x, (0, 2, 3, 1)) if graph else x.transpose(0, 2, 3, 1)
    return x


def sobel_edges(images, data_format=None):
    """Keras's ``ops.image.sobel_edges``: (batch, h, w, c) -> (batch, h, w, c, 2), the Sobel
    gradients ``[dy, dx]`` of each channel (zero padding); channels first gives (batch, c, h,
    w, 2)."""
    what = "ops.image.sobel_edges"
    data_format = _data_format(data_format, what)
    graph = _in_graph(images)
    x = _images_nhwc(images, data_format, what, graph)
    b, h, w, c = _shape(x)
    if not graph:
        p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        out = np.zeros((b, h, w, c, 2))
        for i in range(3):
            for j in range(3):
                win = p[:, i:i + h, j:j + w, :]
                out[..., 0] += _SOBEL_Y[i, j] * win
                out[..., 1] += _SOBEL_X[i, j] * win
        out = out.transpose(0, 3, 1, 2, 4) if data_format == "channels_first" else out
        return np.ascontiguousarray(out, dtype=np.float32)
    ops = _k()
    kernel = np.zeros((3, 3, c, 2), np.float32)
    kernel[:, :, :, 0] = _SOBEL_Y[:, :, None]
    kernel[:, :, :, 1] = _SOBEL_X[:, :, None]
    y = ops.depthwise_conv(x, ops.convert_to_tensor(kernel), strides=1, padding="same")     # (b, h, w, c * 2)
    y = ops.reshape(y, (b, h, w, c, 2))
    return ops.transpose(y, (0, 3, 1, 2, 4)) if data_format == "channels_first" else y


# --- ssim ------------------------------------------------------------------------------------------

def _gaussian(size, sigma):
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = np.exp(-(x ** 2) / (2.0 * sigma ** 2))
    return g / g.sum()


def _valid_blur(a, g):
    """(m, h, w) blurred by the separable window g x g over the valid region."""
    k = len(g)
    rows = sum(g[i] * a[:, i:a.shape[1] - k + 1 + i, :] for i in range(k))
    return sum(g[j] * rows[:, :, j:a.shape[2] - k + 1 + j] for j in range(k))


def ssim(image1, image2, max_val=1.0, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03, data_format=None):
    """Keras's ``ops.image.ssim``: the structural similarity of two images or batches (one value
    per image pair, a scalar for one image), a Gaussian window over the valid region averaged
    over pixels and channels."""
    what = "ops.image.ssim"
    for name, v in (("max_val", max_val), ("filter_sigma", filter_sigma), ("k1", k1), ("k2", k2)):
        if not is_number(v) or not np.isfinite(float(v)) or float(v) <= 0:
            raise ValueError(f"{what}: {name} must be a positive number, got {v!r}")
    if not is_int(filter_size) or filter_size < 1 or filter_size % 2 == 0:
        raise ValueError(f"{what}: filter_size must be an odd int >= 1, got {filter_size!r}")
    data_format = _data_format(data_format, what)
    graph = _in_graph(image1, image2)
    s1, s2 = _shape(image1 if graph else _array(image1, what)), _shape(image2 if graph else _array(image2, what))
    if s1 != s2 or len(s1) not in (3, 4):
        raise ValueError(f"{what}: expected two images (or batches) of one shape, rank 3 or 4, got {s1} and {s2}")
    unbatched = len(s1) == 3
    hw = (s1[-3:-1] if data_format == "channels_last" else s1[-2:])
    if min(hw) < filter_size:
        raise ValueError(f"{what}: images of {hw} are smaller than the filter ({filter_size})")
    g = _gaussian(int(filter_size), float(filter_sigma))
    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    if not graph:
        a, b = (_array(v, what) for v in (image1, image2))
        a, b = (v[None] if unbatched else v for v in (a, b))
        if data_format == "channels_last":
            a, b = a.transpose(0, 3, 1, 2), b.transpose(0, 3, 1, 2)
        n, c, h, w = a.shape
        a, b = a.reshape(n * c, h, w), b.reshape(n * c, h, w)
        mu1, mu2 = _valid_blur(a, g), _valid_blur(b, g)
        s11 = _valid_blur(a * a, g) - mu1 * mu1
        s22 = _valid_blur(b * b, g) - mu2 * mu2
        s12 = _valid_blur(a * b, g) - mu1 * mu2
        m = ((2 * mu1 * mu2 + c1) * (2 * s12 + c2)) / ((mu1 * mu1 + mu2 * mu2 + c1) * (s11 + s22 + c2))
        out = m.mean(axis=(1, 2)).reshape(n, c).mean(axis=1)
        return np.asarray(out[0] if unbatched else out, dtype=np.float32)
    ops = _k()
    x1, x2 = (ops.expand_dims(v, 0) if unbatched else v for v in (image1, image2))
    if data_format == "channels_last":
        x1, x2 = ops.transpose(x1, (0, 3, 1, 2)), ops.transpose(x2, (0, 3, 1, 2))
    full = (1,) + s1 if unbatched else s1
    n, c, h, w = (full[0], full[3], full[1], full[2]) if data_format == "channels_last" else full
    x1, x2 = ops.reshape(x1, (n * c, h, w, 1)), ops.reshape(x2, (n * c, h, w, 1))
    kernel = ops.convert_to_tensor(np.outer(g, g).astype(np.float32).reshape(len(g), len(g), 1, 1))

    def blur(v):
        return ops.conv(v, kernel, strides=1, padding="valid")
    mu1, mu2 = blur(x1), blur(x2)
    s11 = blur(x1 * x1) - mu1 * mu1
    s22 = blur(x2 * x2) - mu2 * mu2
    s12 = blur(x1 * x2) - mu1 * mu2
    m = ((2.0 * mu1 * mu2 + c1) * (2.0 * s12 + c2)) / ((mu1 * mu1 + mu2 * mu2 + c1) * (s11 + s22 + c2))
    out = ops.mean(ops.reshape(ops.mean(m, axis=[1, 2, 3]), (n, c)), axis=-1)
    return ops.squeeze(out, 0) if unbatched else out


# --- scale_and_translate ---------------------------------------------------------------------------

def _kernel(method):
    def linear(x):
        return np.maximum(0.0, 1.0 - x)

    def cubic(x, a=-0.5):
        return np.where(x <= 1.0, ((a + 2) * x - (a + 3)) * x * x + 1,
                        np.where(x < 2.0, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))

    def lanczos(r):
        return lambda x: np.where(x < r, np.sinc(x) * np.sinc(x / r), 0.0)
    table = {"linear": linear, "bilinear": linear, "trilinear": linear, "triangle": linear, "cubic": cubic,
             "bicubic": cubic, "tricubic": cubic, "keyscubic": cubic, "lanczos3": lanczos(3.0),
             "lanczos5": lanczos(5.0)}
    if method not in table:
        raise ValueError(f"ops.image.scale_and_translate: method must be one of {sorted(table)}, got {method!r}")
    return table[method]


def _weights(n_in, n_out, scale, translation, kernel, antialias):
    """(n_in, n_out) weights: output j reads sum_i x[i] * W[i, j]."""
    inv = 1.0 / scale
    stretch = max(inv, 1.0) if antialias else 1.0
    centre = (np.arange(n_out) + 0.5 - translation) * inv - 0.5
    w = kernel(np.abs(centre[None, :] - np.arange(n_in)[:, None]) / stretch)
    total = w.sum(axis=0, keepdims=True)
    w = np.where(np.abs(total) > 1000.0 * np.finfo(np.float32).eps, w / np.where(total != 0, total, 1.0), 0.0)
    inside = (centre >= -0.5) & (centre <= n_in - 0.5)
    return np.where(inside[None, :], w, 0.0)


def scale_and_translate(images, output_shape, scale, translation, spatial_dims, method, antialias=True):
    """Keras's (JAX's) ``ops.image.scale_and_translate``: ``images`` resampled on the axes
    ``spatial_dims`` to ``output_shape`` (the whole result's shape), output = input * scale +
    translation along each of them; a weighted sum of input pixels per output pixel (see the
    module's docstring)."""
    what = "ops.image.scale_and_translate"
    kernel = _kernel(method)
    graph = _in_graph(images)
    x = images if graph else _array(images, what)
    shape = _shape(x)
    if not isinstance(output_shape, (tuple, list)) or len(output_shape) != len(shape) or \
            not all(is_int(d) and d >= 1 for d in output_shape):
        raise ValueError(f"{what}: output_shape must give each of the {len(shape)} axes a positive length, got "
                         f"{output_shape!r}")
    dims = [spatial_dims] if is_int(spatial_dims) else list(spatial_dims) if isinstance(spatial_dims, (tuple, list)) \
        else None
    if not dims or not all(is_int(d) and -len(shape) <= d < len(shape) for d in dims) or \
            len({d % len(shape) for d in dims}) != len(dims):
        raise ValueError(f"{what}: spatial_dims must be distinct axes of the images, got {spatial_dims!r}")
    dims = [d % len(shape) for d in dims]
    others = [i for i in range(len(shape)) if i not in dims and output_shape[i] != shape[i]]
    if others and not (graph and others == [0]):       # (in a graph, the batch axis is the graph's own)
        raise ValueError(f"{what}: output_shape changes axes {others}, which are not in spatial_dims")
    if any(isinstance(v, (Tensor, Variable)) for v in (scale, translation)):
        raise TypeError(f"{what}: scale and translation must be known values (arrays or numbers), not tensors")
    try:
        sc, tr = (np.broadcast_to(_array(v, what).reshape(-1), (len(dims),)) for v in (scale, translation))
    except ValueError:
        raise ValueError(f"{what}: scale and translation need one value per spatial dim ({len(dims)}), got "
                         f"{scale!r} and {translation!r}") from None
    if not np.all(np.isfinite(sc)) or np.any(sc <= 0) or not np.all(np.isfinite(tr)):
        raise ValueError(f"{what}: scale must be positive and finite and translation finite, got {scale!r}, "
                         f"{translation!r}")
    if sum(shape[d] * output_shape[d] for d in dims) > _MAX_PLAN:
        raise ValueError(f"{what}: the weight matrices of {shape} -> {tuple(output_shape)} are too large")
    ops = _k()
    y = x
    for d, s, t in zip(dims, sc, tr):
        m = _weights(shape[d], int(output_shape[d]), float(s), float(t), kernel, bool(antialias))
        if graph:
            moved = ops.moveaxis(y, d, -1)
            y = ops.moveaxis(ops.matmul(moved, ops.convert_to_tensor(m.astype(np.float32))), -1, d)
        else:
            y = np.moveaxis(np.moveaxis(y, d, -1) @ m, -1, d)
    return y if graph else np.ascontiguousarray(y, dtype=np.float32)
