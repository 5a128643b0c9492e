"""Keras's ``keras.ops.image`` functions: ``pyggml.ops.image``.

``resize`` and ``extract_patches`` take a batch of images ``(n, height, width,
channels)`` or one image ``(height, width, channels)`` (channels first with
``data_format="channels_first"``).  Called on arrays outside a model's graph
they compute at once in numpy and return arrays; inside a layer's ``call`` they
add graph operations that train:

- ``resize`` is separable and linear, so it is two matrix products, one per
  axis, with the interpolation weights of the Resizing layer (pixel centres
  aligned, as TF and JAX resize); a crop or pad to the target's aspect ratio is
  folded into those matrices.
- ``extract_patches`` gathers every patch's pixels with one ``take`` (a
  ``get_rows``); "same" padding reads zeros from an extra row.

Patch values are ordered (row, column, channel), as Keras's (an identity
kernel convolution) and TF's ``extract_patches`` order them.

The other functions follow Keras's numpy backend (its argument checks, its
conventions) and train in a graph the same way, from Keras-level ops:

- ``rgb_to_grayscale`` is a weighted sum of the channel planes; ``rgb_to_hsv``
  and ``hsv_to_rgb`` are element-wise formulas (max, min, where, clip).
- ``crop_images`` slices, ``pad_images`` pads with zeros.
- ``gaussian_blur`` is separable with zero padding: one matrix product per axis.
- ``map_coordinates``, ``affine_transform``, ``perspective_transform`` and
  ``elastic_transform`` sample at points known when the graph is built (the
  coordinates, transforms, points or a seeded displacement field are arrays),
  so each output value is a fixed weighted sum of at most 2**rank input values:
  the graph gathers them (``take``) and weighs them with constants.  Points
  computed in the graph (a transform that is a graph tensor) are refused.
  Outside the input, "constant" reads ``fill_value``, "nearest" the edge,
  "wrap" the other side, "mirror" reflects about the edge pixel's centre
  (``c b | a b c | b a``) and "reflect" about its outer edge
  (``b a | a b c | c b``), each neighbour of an interpolation on its own (as
  Keras's numpy and JAX backends, and ``scipy.ndimage`` with the grid modes).
  Nearest sampling rounds halves up (as scipy).

Called on arrays these return float32 arrays (``crop_images`` and
``pad_images`` keep integer and bool dtypes); inside a graph, on values known
there (arrays, constants), they compute at once and give a constant.
"""

import itertools

import numpy as np

from pyggml import _ops_math as _m
from pyggml import _ops_nn as _nn
from pyggml import _ops_numpy as _k
from pyggml import _scope
from pyggml._ops_image_extra import _data_format
from pyggml._validation import is_int, is_number
from pyggml.core import Tensor
from pyggml.core import ops as _c
from pyggml.variables import Variable

__all__ = ["resize", "extract_patches", "rgb_to_grayscale", "rgb_to_hsv", "hsv_to_rgb", "crop_images", "pad_images",
           "gaussian_blur", "map_coordinates", "affine_transform", "perspective_transform", "elastic_transform"]

_INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "lanczos3", "lanczos5", "area")


def _graph_value(x):
    return isinstance(x, (Tensor, Variable))


def _in_graph(x):
    return _graph_value(x) or _scope.current() is not None


def _as_array(images, what):
    a = np.asarray(images)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected images of real numbers, got dtype {a.dtype}")
    return a


def _shape_of(images):
    if _graph_value(images):
        t = images.graph_tensor() if isinstance(images, Variable) else images
        return tuple(int(d) for d in t.shape)
    return tuple(np.shape(images))


def _check_images(shape, what):
    if len(shape) not in (3, 4):
        raise ValueError(f"{what}: expected images of shape (batch, height, width, channels) or one image "
                         f"(height, width, channels), got shape {shape}")
    if any(d < 1 for d in shape):
        raise ValueError(f"{what}: images need a positive size in every dimension, got shape {shape}")


def _pair(value, name, what, minimum=1):
    v = (value, value) if is_int(value) else value
    if not (isinstance(v, (tuple, list)) and len(v) == 2 and all(is_int(e) for e in v)):
        raise TypeError(f"{what}: {name} must be an int or a tuple of 2 ints, got {value!r}")
    v = (int(v[0]), int(v[1]))
    if min(v) < minimum:
        raise ValueError(f"{what}: {name} must be at least {minimum}, got {value!r}")
    return v


def _to_nhwc(x, data_format, ndim):
    if data_format == "channels_first":
        return _k.transpose(x, (0, 2, 3, 1) if ndim == 4 else (1, 2, 0))
    return x


def _from_nhwc(x, data_format, ndim):
    if data_format == "channels_first":
        return _k.transpose(x, (0, 3, 1, 2) if ndim == 4 else (2, 0, 1))
    return x


def _constant(a):
    """A float32 constant in the graph being built."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    return _scope.require("pyggml.ops").constant(a.reshape(a.shape or (1,)), "float32")


# --- resize ----------------------------------------------------------------------------------------

def _resize_plan(h, w, height, width, crop, pad):
    """(rows kept, cols kept, offsets) of the aspect-ratio crop, or the pad sizes."""
    if crop:
        rows = max(min(h, int(float(w * height) / width)), 1)
        cols = max(min(w, int(float(h * width) / height)), 1)
        return ("crop", int(float(h - rows) / 2), int(float(w - cols) / 2), rows, cols)
    if pad:
        dh = int(float(max(h, int(float(w * height) / width)) - h) / 2)
        dw = int(float(max(w, int(float(h * width) / height)) - w) / 2)
        return ("pad", dh, dw, h + 2 * dh, w + 2 * dw)
    return ("none", 0, 0, h, w)


def _axis_matrix(n_in, n_out, interpolation, antialias, kind, offset, span):
    """(n_out, n_in) weights over the original axis and (n_out,) the weight that falls on padding."""
    from pyggml.layers.preprocessing import _image_ops
    if interpolation == "nearest":
        src = np.minimum(np.floor((np.arange(n_out) + 0.5) * (span / n_out)).astype(np.int64), span - 1)
        m = np.zeros((n_out, span), np.float64)
        m[np.arange(n_out), src] = 1.0
    else:
        m = _image_ops._axis_weights(span, n_out, interpolation, antialias).astype(np.float64)
    full = np.zeros((n_out, n_in), np.float64)
    if kind == "crop":
        full[:, offset:offset + span] = m
        return full, np.zeros(n_out)
    if kind == "pad":
        full[:, :] = m[:, offset:offset + n_in]
        return full, m.sum(axis=1) - full.sum(axis=1)
    return m, np.zeros(n_out)


def _images(images, what):
    """(in a graph?, the images as a tensor or an array, their shape), the shape checked."""
    graph = _in_graph(images)
    x = images if graph else _as_array(images, what)
    shape = _shape_of(x)
    _check_images(shape, what)
    return graph, x, shape


def resize(images, size, interpolation="bilinear", antialias=False, crop_to_aspect_ratio=False,
           pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0, data_format=None):
    """Keras's ``ops.image.resize``: images resized to ``size = (height, width)``."""
    what = "ops.image.resize"
    height, width = _pair(size, "size", what)
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{what}: interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}")
    if not isinstance(antialias, (bool, np.bool_)):
        raise TypeError(f"{what}: antialias must be True or False, got {antialias!r}")
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError(f"{what}: only one of crop_to_aspect_ratio and pad_to_aspect_ratio can be True")
    if fill_mode != "constant":
        raise ValueError(f"{what}: fill_mode must be 'constant' (the padding of pad_to_aspect_ratio), got "
                         f"{fill_mode!r}")
    if not is_number(fill_value):
        raise TypeError(f"{what}: fill_value must be a number, got {fill_value!r}")
    data_format = _data_format(data_format, what)
    graph, x, shape = _images(images, what)
    ndim = len(shape)
    hw = shape[-3:-1] if data_format == "channels_last" else shape[-2:]
    h, w = int(hw[0]), int(hw[1])
    kind, top, left, rows, cols = _resize_plan(h, w, height, width, bool(crop_to_aspect_ratio),
                                               bool(pad_to_aspect_ratio))
    mh, ph = _axis_matrix(h, height, interpolation, antialias, kind, top, rows)
    mw, pw = _axis_matrix(w, width, interpolation, antialias, kind, left, cols)
    # the padding's share: fill_value times (all weight - weight on the image), per output pixel
    pad_term = float(fill_value) * (np.outer(mh.sum(1) + ph, mw.sum(1) + pw) - np.outer(mh.sum(1), mw.sum(1)))
    if not graph:
        a = x.astype(np.float64)
        a = a if ndim == 4 else a[None]
        if data_format == "channels_first":
            a = a.transpose(0, 2, 3, 1)
        # two products (rows, then columns), not einsum's naive loop over all four axes at once
        out = np.einsum("jw,niwc->nijc", mw, np.einsum("ih,nhwc->niwc", mh, a, optimize=True), optimize=True) + \
            pad_term[None, :, :, None]
        if data_format == "channels_first":
            out = out.transpose(0, 3, 1, 2)
        return np.ascontiguousarray(out if ndim == 4 else out[0], dtype=np.float32)
    t = _k.convert_to_tensor(x) if not isinstance(x, Tensor) else x
    if t.dtype != "f32":
        t = _c.cast(t, "f32")
    t = _to_nhwc(t, data_format, ndim)
    if ndim == 3:
        t = _k.expand_dims(t, 0)
    n, c = int(t.shape[0]), int(t.shape[3])
    # height: (n, w, c, h) @ (h, height)
    y = _k.reshape(_k.transpose(t, (0, 2, 3, 1)), (n * w * c, h)) @ _constant(mh.T.astype(np.float32))
    y = _k.reshape(y, (n, w, c, height))
    # width: (n, height, c, w) @ (w, width)
    y = _k.reshape(_k.transpose(y, (0, 3, 2, 1)), (n * height * c, w)) @ _constant(mw.T.astype(np.float32))
    y = _k.transpose(_k.reshape(y, (n, height, c, width)), (0, 1, 3, 2))
    if np.any(pad_term != 0):
        y = y + _constant(pad_term[:, :, None].astype(np.float32))
    if ndim == 3:
        y = _k.squeeze(y, 0)
    return _from_nhwc(y, data_format, ndim)


# --- extract_patches -------------------------------------------------------------------------------

def _patch_plan(h, w, size, strides, dilation, padding):
    """(out_h, out_w, index array (out_h*out_w*kh*kw,) into the (h*w + 1) pixels; h*w is a zero)."""
    (kh, kw), (sh, sw), (dh, dw) = size, strides, dilation
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if padding == "valid":
        oh, ow = (h - eh) // sh + 1, (w - ew) // sw + 1
        top = left = 0
    else:
        oh, ow = -(-h // sh), -(-w // sw)
        top = max((oh - 1) * sh + eh - h, 0) // 2
        left = max((ow - 1) * sw + ew - w, 0) // 2
    if oh < 1 or ow < 1:
        return oh, ow, None
    r = (np.arange(oh) * sh)[:, None] + (np.arange(kh) * dh)[None, :] - top       # (oh, kh)
    q = (np.arange(ow) * sw)[:, None] + (np.arange(kw) * dw)[None, :] - left      # (ow, kw)
    rr = r[:, None, :, None]
    cc = q[None, :, None, :]
    inside = (rr >= 0) & (rr < h) & (cc >= 0) & (cc < w)
    idx = np.where(inside, rr * w + cc, h * w)                                    # (oh, ow, kh, kw)
    return oh, ow, idx.reshape(-1).astype(np.int64)


def extract_patches(images=None, size=None, strides=None, dilation_rate=1, padding="valid", data_format=None,
                    image=None):
    """Keras's ``ops.image.extract_patches``: (n, h, w, c) -> (n, out_h, out_w, kh * kw * c), each
    patch's values in (row, column, channel) order; ``strides`` default to ``size``.  ``image=``
    is the name earlier Keras 3 releases gave ``images``."""
    what = "ops.image.extract_patches"
    if (images is None) == (image is None):
        raise TypeError(f"{what}: give the images once, as images= (or image=, the earlier name)")
    images = image if images is None else images
    if size is None:
        raise TypeError(f"{what}: missing the patch size (size=)")
    if isinstance(size, (tuple, list)) and len(size) == 3:
        # Keras's: a 3-D size takes volumes (extract_patches_3d)
        from pyggml._ops_image_extra import extract_patches_3d
        return extract_patches_3d(images, size, strides, dilation_rate, padding, data_format)
    size = _pair(size, "size", what)
    strides = size if strides is None else _pair(strides, "strides", what)
    dilation = _pair(dilation_rate, "dilation_rate", what)
    if dilation != (1, 1) and strides != (1, 1):
        raise ValueError(f"{what}: dilation_rate > 1 needs strides of 1 (as Keras's convolution), got strides "
                         f"{strides} with dilation_rate {dilation}")
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(f"{what}: padding must be 'valid' or 'same', got {padding!r}")
    padding = padding.lower()
    data_format = _data_format(data_format, what)
    graph, x, shape = _images(images, what)
    ndim = len(shape)
    if data_format == "channels_last":
        h, w, c = (int(d) for d in shape[-3:])
    else:
        c, h, w = (int(d) for d in shape[-3:])
    oh, ow, idx = _patch_plan(h, w, size, strides, dilation, padding)
    if idx is None:
        raise ValueError(f"{what}: patches of size {size} (dilation {dilation}) do not fit in images of "
                         f"{h} x {w} with padding 'valid'")
    depth = size[0] * size[1] * c
    if not graph:
        a = x.astype(np.float32)
        a = a if ndim == 4 else a[None]
        if data_format == "channels_first":
            a = a.transpose(0, 2, 3, 1)
        n = a.shape[0]
        flat = np.concatenate([a.reshape(n, h * w, c), np.zeros((n, 1, c), np.float32)], axis=1)
        out = flat[:, idx].reshape(n, oh, ow, depth)
        if data_format == "channels_first":
            out = out.transpose(0, 3, 1, 2)
        return np.ascontiguousarray(out if ndim == 4 else out[0])
    t = _k.convert_to_tensor(x) if not isinstance(x, Tensor) else x
    if t.dtype != "f32":
        t = _c.cast(t, "f32")
    t = _to_nhwc(t, data_format, ndim)
    if ndim == 3:
        t = _k.expand_dims(t, 0)
    n = int(t.shape[0])
    flat = _k.reshape(t, (n, h * w, c))
    if padding == "same" and np.any(idx == h * w):
        flat = _k.concatenate([flat, _k.zeros((n, 1, c))], axis=1)
    y = _k.take(flat, idx, axis=1)                                  # (n, oh*ow*kh*kw, c)
    y = _k.reshape(y, (n, oh, ow, depth))
    if ndim == 3:
        y = _k.squeeze(y, 0)
    return _from_nhwc(y, data_format, ndim)


# --- shared by the functions below -------------------------------------------------------------------

_GRAY_WEIGHTS = (0.2989, 0.5870, 0.1140)
_SAMPLE_ORDERS = {"nearest": 0, "bilinear": 1}
_FILL_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")
_MAX_GATHER = 2 ** 24          # values a sampling graph gathers (its index and weight constants)
_MAX_AXIS_MATRIX = 2 ** 24     # entries of gaussian_blur's per-axis matrix in a graph
_MAX_KERNEL = 2 ** 16 - 1      # Gaussian taps (gaussian_blur's kernel_size, elastic_transform's 6 * sigma)


def _operand(images, what, graph_dims=(3, 4)):
    """(kind, value, shape): kind "array" (computed at once, value a numpy array), "host" (inside
    a graph but known there: computed at once, the result becomes a constant) or "graph" (value
    a float32 graph tensor).  The dtype and the shape's rank are checked."""
    in_graph = _scope.current() is not None
    if isinstance(images, Tensor) and not in_graph:
        raise TypeError(f"{what}: a graph tensor is only usable inside a model's graph (a layer's call or a Lambda)")
    if isinstance(images, Variable) and not in_graph:
        images = images.numpy()
    if not _graph_value(images):
        images = _as_array(images, what)
    known = _k.host_value(images) if in_graph else images
    if known is not None and not _graph_value(known):
        a = np.asarray(known)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise TypeError(f"{what}: expected real numbers, got dtype {a.dtype}")
        if a.ndim not in graph_dims:
            _rank_error(a.shape, what, graph_dims)
        return ("host" if in_graph else "array"), a, tuple(a.shape)
    t = images if isinstance(images, Tensor) else _k.convert_to_tensor(images)
    shape = tuple(int(d) for d in t.shape)
    if len(shape) not in graph_dims:
        _rank_error(shape, what, graph_dims)
    if t.dtype != "f32":
        t = _c.cast(t, "f32")
    return "graph", t, shape


def _rank_error(shape, what, dims):
    if tuple(dims) == (3, 4):
        _check_images(shape, what)
    raise ValueError(f"{what}: expected an array of {min(dims)} to {max(dims)} dimensions, got shape {tuple(shape)}")


def _image_dims(shape, data_format, what):
    """(height, width, channels) of an images shape, each checked positive."""
    _check_images(shape, what)
    if data_format == "channels_last":
        return int(shape[-3]), int(shape[-2]), int(shape[-1])
    return int(shape[-2]), int(shape[-1]), int(shape[-3])


def _done(out, kind):
    """An array result as the caller gets it: the array, or a constant of the graph being built."""
    return _k.host_constant(out) if kind == "host" else out


def _nhwc_array(a, data_format):
    """(n, h, w, c) float64 copy of an images array."""
    a = np.asarray(a, dtype=np.float64)
    a = a if a.ndim == 4 else a[None]
    return a.transpose(0, 2, 3, 1) if data_format == "channels_first" else a


def _from_nhwc_array(out, data_format, ndim):
    if data_format == "channels_first":
        out = out.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(out if ndim == 4 else out[0], dtype=np.float32)


def _nhwc_tensor(t, data_format, ndim):
    t = _to_nhwc(t, data_format, ndim)
    return _k.expand_dims(t, 0) if ndim == 3 else t


def _from_nhwc_tensor(y, data_format, ndim):
    if ndim == 3:
        y = _k.squeeze(y, 0)
    return _from_nhwc(y, data_format, ndim)


def _channel_axis(data_format, ndim):
    return ndim - 1 if data_format == "channels_last" else ndim - 3


def _plane(t, axis, i):
    """Channel i of tensor t, the channel axis kept (size 1)."""
    return t[(slice(None),) * axis + (slice(i, i + 1),)]


def _number(value, name, what, positive=False):
    if not is_number(value):
        raise TypeError(f"{what}: {name} must be a number, got {value!r}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{what}: {name} must be a finite number, got {value!r}")
    if positive and v <= 0:
        raise ValueError(f"{what}: {name} must be > 0, got {value!r}")
    return v


def _choice(value, choices, name, what):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{what}: {name} must be one of {choices}, got {value!r}")
    return value


def _known_array(value, name, what):
    """An argument that must be known when a graph is built (an array, a list, a constant
    tensor), as a float64 array; a tensor computed in the graph is refused."""
    if isinstance(value, Variable):
        if _scope.current() is not None:
            raise TypeError(f"{what}: {name} must be an array known when the graph is built, not a Variable (its "
                            f"value changes; gradients do not flow into {name})")
        value = value.numpy()
    if isinstance(value, Tensor):
        known = _k.host_value(value) if _scope.current() is not None else None
        if known is None:
            raise TypeError(f"{what}: {name} must be an array known when the graph is built, not a tensor computed "
                            f"in the graph (the sampling would depend on the data, which this op cannot build; "
                            f"gradients do not flow into {name})")
        value = known
    a = np.asarray(value)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: {name} must be real numbers, got {type(value).__name__} of dtype {a.dtype}")
    a = a.astype(np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: {name} must be finite numbers")
    return a


# --- rgb_to_grayscale, rgb_to_hsv, hsv_to_rgb -----------------------------------------------------------

def rgb_to_grayscale(images, data_format=None):
    """Keras's ``ops.image.rgb_to_grayscale``: 3 channels (RGB) weighed 0.2989, 0.5870, 0.1140 into
    one (the channel axis kept, of size 1); images of 1 channel come back unchanged."""
    what = "ops.image.rgb_to_grayscale"
    data_format = _data_format(data_format, what)
    kind, x, shape = _operand(images, what)
    _, _, channels = _image_dims(shape, data_format, what)
    if channels not in (1, 3):
        raise ValueError(f"{what}: expected 3 channels (RGB) or 1 (grayscale), got images of shape {shape}")
    axis = _channel_axis(data_format, len(shape))
    if kind != "graph":
        a = np.asarray(x, dtype=np.float64)
        if channels == 3:
            a = np.tensordot(a, np.asarray(_GRAY_WEIGHTS), axes=([axis], [0]))
            a = np.expand_dims(a, axis)
        return _done(np.ascontiguousarray(a, dtype=np.float32), kind)
    if channels == 1:
        return x
    y = _plane(x, axis, 0) * _GRAY_WEIGHTS[0]
    for i in (1, 2):
        y = y + _plane(x, axis, i) * _GRAY_WEIGHTS[i]
    return y


def _color_operand(images, data_format, what):
    data_format = _data_format(data_format, what)
    kind, x, shape = _operand(images, what)
    _, _, channels = _image_dims(shape, data_format, what)
    if channels != 3:
        raise ValueError(f"{what}: expected images of 3 channels, got shape {shape}")
    if kind != "graph" and x.dtype.kind != "f":
        raise ValueError(f"{what}: expected images of a float dtype (values in [0, 1]), got dtype {x.dtype}")
    return kind, x, _channel_axis(data_format, len(shape))


_NP_FUNCS = {"max": np.maximum, "min": np.minimum, "where": np.where, "div": np.divide,
             "gt": lambda a, b: a > b, "lt": lambda a, b: (a < b).astype(np.float64), "eq": lambda a, b: a == b}
_GRAPH_FUNCS = {"max": _k.maximum, "min": _k.minimum, "where": _k.where, "div": _k.divide, "gt": _k.greater,
                "lt": _k.less, "eq": _k.equal}


def _hsv_planes(r, g, b, f):
    """Hue, saturation, value of the planes r, g, b (TF's formulas), with the functions ``f``
    (numpy's or the graph's)."""
    value = f["max"](f["max"](r, g), b)
    spread = value - f["min"](f["min"](r, g), b)
    value_pos, spread_pos = f["gt"](value, 0.0), f["gt"](spread, 0.0)
    saturation = f["where"](value_pos, f["div"](spread, f["where"](value_pos, value, 1.0)), 0.0)
    norm = f["div"](1.0 / 6.0, f["where"](spread_pos, spread, 1.0))
    hue = f["where"](f["eq"](value, g), norm * (b - r) + 2.0 / 6.0, norm * (r - g) + 4.0 / 6.0)
    hue = f["where"](f["eq"](value, r), norm * (g - b), hue)
    return f["where"](spread_pos, hue, 0.0) + f["lt"](hue, 0.0), saturation, value


def rgb_to_hsv(images, data_format=None):
    """Keras's ``ops.image.rgb_to_hsv``: RGB values in [0, 1] to hue, saturation, value, each in
    [0, 1] (hue 0 is red, 1/3 green, 2/3 blue); float images only."""
    what = "ops.image.rgb_to_hsv"
    kind, x, axis = _color_operand(images, data_format, what)
    eps = float(np.finfo(np.float32).eps)
    if kind != "graph":
        a = np.asarray(x, dtype=np.float64)
        a = np.where(np.abs(a) < eps, 0.0, a)
        r, g, b = (np.take(a, i, axis=axis) for i in range(3))
        planes = _hsv_planes(r, g, b, _NP_FUNCS)
        return _done(np.ascontiguousarray(np.stack(planes, axis=axis), dtype=np.float32), kind)
    x = _k.where(_k.less(_m.absolute(x), eps), 0.0, x)
    r, g, b = (_plane(x, axis, i) for i in range(3))
    planes = _hsv_planes(r, g, b, _GRAPH_FUNCS)
    return _k.concatenate(list(planes), axis=axis)


def _rgb_planes(h, s, v, clip, absolute, frac):
    dh = frac(h) * 6.0
    dr = clip(absolute(dh - 3.0) - 1.0, 0.0, 1.0)
    dg = clip(2.0 - absolute(dh - 2.0), 0.0, 1.0)
    db = clip(2.0 - absolute(dh - 4.0), 0.0, 1.0)
    return tuple(v * (1.0 - s + s * d) for d in (dr, dg, db))


def hsv_to_rgb(images, data_format=None):
    """Keras's ``ops.image.hsv_to_rgb``: hue, saturation, value in [0, 1] to RGB in [0, 1] (the hue
    taken modulo 1); float images only."""
    what = "ops.image.hsv_to_rgb"
    kind, x, axis = _color_operand(images, data_format, what)
    if kind != "graph":
        a = np.asarray(x, dtype=np.float64)
        h, s, v = (np.take(a, i, axis=axis) for i in range(3))
        planes = _rgb_planes(h, s, v, np.clip, np.abs, lambda u: np.mod(u, 1.0))
        return _done(np.ascontiguousarray(np.stack(planes, axis=axis), dtype=np.float32), kind)
    h, s, v = (_plane(x, axis, i) for i in range(3))
    planes = _rgb_planes(h, s, v, _k.clip, _m.absolute, lambda u: u - _m.floor(u))
    return _k.concatenate(list(planes), axis=axis)


# --- crop_images, pad_images ---------------------------------------------------------------------------

def _two_of_three(values, names, what):
    """Keras's rule: exactly two of (start, end, target) given, each an int >= 0."""
    if sum(v is None for v in values) != 1:
        given = ", ".join(f"{n}={v!r}" for n, v in zip(names, values))
        raise ValueError(f"{what}: give exactly two of {', '.join(names)}; got {given}")
    values = [v.item() if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iu" else v
              for v in values]          # a 0-d int array: what ops.minimum(h, w) gives
    for n, v in zip(names, values):
        if v is None:
            continue
        if not is_int(v):
            raise TypeError(f"{what}: {n} must be an int, got {v!r}")
        if v < 0:
            raise ValueError(f"{what}: {n} must be >= 0, got {v}")
    return [None if v is None else int(v) for v in values]


def _spans(size, values, names, what, kind):
    """(before, after, target) along an axis of ``size``, the missing one inferred and checked."""
    before, after, target = values
    if kind == "crop":
        if target is None:
            target = size - before - after
        elif before is None:
            before = size - target - after
        else:
            after = size - target - before
    else:
        if target is None:
            target = before + size + after
        elif before is None:
            before = target - size - after
        else:
            after = target - size - before
    for n, v in zip(names, (before, after, target)):
        if v < 0:
            verb = "crop" if kind == "crop" else "pad"
            raise ValueError(f"{what}: {n} must be >= 0, got {v} (the {verb} does not fit an axis of size {size})")
    return before, after, target


def _crop_or_pad(images, args, data_format, kind, what):
    data_format = _data_format(data_format, what)
    top, left, bottom, right, target_height, target_width = args
    word = "cropping" if kind == "crop" else "padding"
    hnames = (f"top_{word}", f"bottom_{word}", "target_height")
    wnames = (f"left_{word}", f"right_{word}", "target_width")
    hv = _two_of_three((top, bottom, target_height), hnames, what)
    wv = _two_of_three((left, right, target_width), wnames, what)
    mode, x, shape = _operand(images, what)
    h, w, _ = _image_dims(shape, data_format, what)
    top, bottom, height = _spans(h, hv, hnames, what, kind)
    left, right, width = _spans(w, wv, wnames, what, kind)
    ndim = len(shape)
    hax, wax = (ndim - 3, ndim - 2) if data_format == "channels_last" else (ndim - 2, ndim - 1)
    if mode == "graph" and (height == 0 or width == 0):
        raise ValueError(f"{what}: the result would be empty ({height} x {width}); a graph tensor needs a positive "
                         f"size in every dimension")
    new = list(shape)
    new[hax], new[wax] = height, width
    _k._check_size(new, what)
    if kind == "crop":
        key = [slice(None)] * ndim
        key[hax], key[wax] = slice(top, top + height), slice(left, left + width)
        if mode == "graph":
            return x if (height, width) == (h, w) else x[tuple(key)]
        out = np.asarray(x)[tuple(key)]
    else:
        widths = [(0, 0)] * ndim
        widths[hax], widths[wax] = (top, bottom), (left, right)
        if mode == "graph":
            return _nn.pad(x, widths)
        out = np.pad(np.asarray(x), widths)
    out = np.ascontiguousarray(out, dtype=np.float32 if out.dtype.kind == "f" else out.dtype)
    return _done(out, mode)


def crop_images(images, top_cropping=None, left_cropping=None, bottom_cropping=None, right_cropping=None,
                target_height=None, target_width=None, data_format=None):
    """Keras's ``ops.image.crop_images``: images cut to a box; give exactly two of top_cropping,
    bottom_cropping, target_height and two of left_cropping, right_cropping, target_width."""
    return _crop_or_pad(images, (top_cropping, left_cropping, bottom_cropping, right_cropping, target_height,
                                 target_width), data_format, "crop", "ops.image.crop_images")


def pad_images(images, top_padding=None, left_padding=None, bottom_padding=None, right_padding=None,
               target_height=None, target_width=None, data_format=None):
    """Keras's ``ops.image.pad_images``: images padded with zeros; give exactly two of top_padding,
    bottom_padding, target_height and two of left_padding, right_padding, target_width."""
    return _crop_or_pad(images, (top_padding, left_padding, bottom_padding, right_padding, target_height,
                                 target_width), data_format, "pad", "ops.image.pad_images")


# --- gaussian_blur ---------------------------------------------------------------------------------------

def _gaussian_1d(size, sigma):
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    k = np.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


def _blur_array(a, axis, kernel):
    """a blurred along ``axis`` by a 1-D kernel, zeros outside, the kernel's centre at (size - 1) // 2."""
    size, n = kernel.size, a.shape[axis]
    before = (size - 1) // 2
    out = np.zeros_like(a)
    for m in range(max(0, before - n + 1), min(size, before + n)):
        off = m - before                    # out[i] += kernel[m] * a[i + off]
        dst = [slice(None)] * a.ndim
        src = [slice(None)] * a.ndim
        dst[axis] = slice(max(0, -off), min(n, n - off))
        src[axis] = slice(max(0, off), min(n, n + off))
        out[tuple(dst)] += kernel[m] * a[tuple(src)]
    return out


def _blur_matrix(n, kernel):
    """(n, n): row i holds the kernel's weights on the inputs (zeros outside)."""
    size = kernel.size
    off = np.arange(n)[None, :] - np.arange(n)[:, None] + (size - 1) // 2
    inside = (off >= 0) & (off < size)
    return np.where(inside, kernel[np.clip(off, 0, size - 1)], 0.0)


def _separable_graph(t, mh, mw):
    """(n, h, w, c) tensor times (h2, h) along the height and (w2, w) along the width."""
    n, h, w, c = (int(d) for d in t.shape)
    h2, w2 = mh.shape[0], mw.shape[0]
    y = _k.reshape(_k.transpose(t, (0, 2, 3, 1)), (n * w * c, h)) @ _constant(mh.T)
    y = _k.reshape(y, (n, w, c, h2))
    y = _k.reshape(_k.transpose(y, (0, 3, 2, 1)), (n * h2 * c, w)) @ _constant(mw.T)
    return _k.transpose(_k.reshape(y, (n, h2, c, w2)), (0, 1, 3, 2))


def _pair_of_numbers(value, name, what):
    v = (value, value) if is_number(value) else value
    if not (isinstance(v, (tuple, list, np.ndarray)) and len(v) == 2 and all(is_number(e) for e in v)):
        raise TypeError(f"{what}: {name} must be a number or a tuple of 2 numbers, got {value!r}")
    return tuple(_number(e, name, what, positive=True) for e in v)


def gaussian_blur(images, kernel_size=(3, 3), sigma=(1.0, 1.0), data_format=None):
    """Keras's ``ops.image.gaussian_blur``: each channel convolved with a normalised Gaussian
    kernel, zeros outside the image.  As Keras's kernel is built, ``kernel_size`` and ``sigma``
    are read (x, y): the width's kernel has kernel_size[0] taps of sigma[0], the height's
    kernel_size[1] taps of sigma[1]; an even size centres at (size - 1) // 2."""
    what = "ops.image.gaussian_blur"
    kw, kh = _pair(kernel_size, "kernel_size", what)
    if max(kw, kh) > _MAX_KERNEL:
        raise ValueError(f"{what}: kernel_size must be at most {_MAX_KERNEL}, got {kernel_size!r}")
    sw, sh = _pair_of_numbers(sigma, "sigma", what)
    data_format = _data_format(data_format, what)
    kind, x, shape = _operand(images, what)
    h, w, _ = _image_dims(shape, data_format, what)
    ky, kx = _gaussian_1d(kh, sh), _gaussian_1d(kw, sw)
    ndim = len(shape)
    if kind != "graph":
        a = _nhwc_array(x, data_format)
        out = _blur_array(_blur_array(a, 1, ky), 2, kx)
        return _done(_from_nhwc_array(out, data_format, ndim), kind)
    if max(h, w) ** 2 > _MAX_AXIS_MATRIX:
        raise ValueError(f"{what}: in a graph the blur is a matrix per axis, and images of {h} x {w} would need "
                         f"more than 2**24 entries; blur smaller images")
    t = _nhwc_tensor(x, data_format, ndim)
    y = _separable_graph(t, _blur_matrix(h, ky).astype(np.float32), _blur_matrix(w, kx).astype(np.float32))
    return _from_nhwc_tensor(y, data_format, ndim)


# --- sampling: map_coordinates, affine_transform, perspective_transform, elastic_transform ---------------

def _taps(coord, n, order, fill_mode):
    """[(index, weight, inside)] of the points ``coord`` along an axis of ``n``: one tap (order 0,
    halves rounded up) or two (order 1), each index mapped into [0, n) by the fill mode."""
    if fill_mode == "wrap":
        c = np.mod(coord, n)
    elif fill_mode == "mirror" and n > 1:
        c = np.mod(coord, 2 * n - 2)
    elif fill_mode == "reflect":
        c = np.mod(coord, 2 * n)
    else:                                   # far points: the same taps as at the border's next pixels
        c = np.clip(coord, -2.0, n + 1.0)
    if order == 0:
        pairs = [(np.floor(c + 0.5), np.ones_like(c))]
    else:
        low = np.floor(c)
        frac = c - low
        pairs = [(low, 1.0 - frac), (low + 1.0, frac)]
    out = []
    for i, wt in pairs:
        i = i.astype(np.int64)
        inside = np.ones(i.shape, bool)
        if fill_mode == "constant":
            inside = (i >= 0) & (i < n)
            i = np.clip(i, 0, n - 1)
        elif fill_mode == "nearest":
            i = np.clip(i, 0, n - 1)
        elif fill_mode == "wrap":
            i = np.mod(i, n)
        elif fill_mode == "mirror":
            if n == 1:
                i = np.zeros_like(i)
            else:
                i = np.mod(i, 2 * n - 2)
                i = np.where(i < n, i, 2 * n - 2 - i)
        else:
            i = np.mod(i, 2 * n)
            i = np.where(i < n, i, 2 * n - 1 - i)
        out.append((i, wt, inside))
    return out


def _sample_plan(coords, shape, order, fill_mode, valid=None):
    """The sampling of an array of ``shape`` at points (``coords``: one flat float array per
    axis) as a fixed linear map: (index (P, K) into the flattened array, weight (P, K), the
    weight of fill_value (P,)).  Points not ``valid`` read fill_value alone."""
    p = coords[0].size
    bad = np.zeros(p, bool) if valid is None else ~valid
    per_axis = [_taps(np.where(bad, 0.0, c), int(n), order, fill_mode) for c, n in zip(coords, shape)]
    strides = np.cumprod((1,) + tuple(int(d) for d in shape[:0:-1]))[::-1]
    idx, wts = [], []
    fill = np.zeros(p, np.float64)
    for combo in itertools.product(*per_axis):
        index = np.zeros(p, np.int64)
        weight = np.ones(p, np.float64)
        inside = ~bad
        for (i, wt, ins), s in zip(combo, strides):
            index += i * int(s)
            weight = weight * wt
            inside = inside & ins
        idx.append(index)
        wts.append(np.where(inside, weight, 0.0))
        fill += np.where(inside, 0.0, weight)
    fill = np.where(bad, 1.0, fill)
    return np.stack(idx, axis=1), np.stack(wts, axis=1), fill


def _apply_plan_array(flat, plan, fill_value):
    """flat (rows, C) float64, the plan's indices into its rows: (P, C)."""
    idx, wts, fill = plan
    out = np.zeros((idx.shape[0], flat.shape[1]), np.float64)
    for k in range(idx.shape[1]):
        out += flat[idx[:, k]] * wts[:, k:k + 1]
    return out + float(fill_value) * fill[:, None]


def _apply_plan_graph(flat, plan, fill_value, what):
    """flat (rows, C) tensor: (P, C), a gather per tap weighed by constants."""
    idx, wts, fill = plan
    if idx.size > _MAX_GATHER:
        raise ValueError(f"{what}: the sampling would gather {idx.size} values (more than 2**24) in the graph; "
                         f"use smaller images or batches")
    out = None
    for k in range(idx.shape[1]):
        if k and not np.any(wts[:, k]):
            continue
        term = _k.take(flat, idx[:, k].astype(np.int32), axis=0) * _constant(wts[:, k:k + 1])
        out = term if out is None else out + term
    extra = float(fill_value) * fill
    if np.any(extra != 0):
        out = out + _constant(extra[:, None])
    return out


def _resample_images(kind, x, shape, data_format, plans, fill_value, what):
    """images sampled by one plan for every image (``plans`` of length 1) or one per image; each
    plan indexes the h * w pixels of an image and gives its h * w output pixels."""
    ndim = len(shape)
    h, w, c = _image_dims(shape, data_format, what)
    if kind != "graph":
        a = _nhwc_array(x, data_format)
        n = a.shape[0]
        out = np.empty_like(a)
        for b in range(n):
            plan = plans[b if len(plans) > 1 else 0]
            out[b] = _apply_plan_array(a[b].reshape(h * w, c), plan, fill_value).reshape(h, w, c)
        return _done(_from_nhwc_array(out, data_format, ndim), kind)
    t = _nhwc_tensor(x, data_format, ndim)
    n = int(t.shape[0])
    if len(plans) == 1:                     # one sampling for all: rows are pixels, (n * c) values each
        flat = _k.reshape(_k.transpose(t, (1, 2, 0, 3)), (h * w, n * c))
        y = _apply_plan_graph(flat, plans[0], fill_value, what)
        y = _k.transpose(_k.reshape(y, (h, w, n, c)), (2, 0, 1, 3))
    else:
        if len(plans) != n:
            raise ValueError(f"{what}: {len(plans)} transforms for a batch of {n} images (in a model, whose batch "
                             f"size varies, give one transform for every image)")
        idx = np.concatenate([p[0] + b * h * w for b, p in enumerate(plans)])
        plan = (idx, np.concatenate([p[1] for p in plans]), np.concatenate([p[2] for p in plans]))
        y = _apply_plan_graph(_k.reshape(t, (n * h * w, c)), plan, fill_value, what)
        y = _k.reshape(y, (n, h, w, c))
    return _from_nhwc_tensor(y, data_format, ndim)


def map_coordinates(inputs, coordinates, order, fill_mode="constant", fill_value=0):
    """Keras's ``ops.image.map_coordinates``: ``inputs`` (any rank up to 4) read at the points
    ``coordinates`` (shape (inputs.ndim, ...): one array of positions per axis), by the nearest
    value (``order`` 0) or linear interpolation (``order`` 1); the result has the shape
    coordinates.shape[1:].  In a graph the coordinates must be known (an array)."""
    what = "ops.image.map_coordinates"
    if not is_int(order) or order not in (0, 1):
        raise ValueError(f"{what}: order must be 0 (nearest) or 1 (linear), got {order!r}")
    _choice(fill_mode, _FILL_MODES, "fill_mode", what)
    fill_value = _number(fill_value, "fill_value", what)
    coords = _known_array(coordinates, "coordinates", what)
    kind, x, shape = _operand(inputs, what, graph_dims=(1, 2, 3, 4))
    if any(d < 1 for d in shape):
        raise ValueError(f"{what}: inputs need a positive size in every dimension, got shape {shape}")
    if coords.ndim < 2 or coords.shape[0] != len(shape):
        raise ValueError(f"{what}: coordinates must have shape ({len(shape)}, ...) (one array of positions per axis "
                         f"of inputs, at least 2 dimensions), got shape {coords.shape} for inputs of shape {shape}")
    out_shape = coords.shape[1:]
    if len(out_shape) > 4:
        raise ValueError(f"{what}: the result would have shape {out_shape}; ggml tensors have at most 4 dimensions")
    if kind == "graph" and (coords[0].size == 0):
        raise ValueError(f"{what}: no coordinates (shape {coords.shape}); a graph tensor needs a positive size")
    plan = _sample_plan([c.reshape(-1) for c in coords], shape, int(order), fill_mode)
    if kind != "graph":
        flat = np.asarray(x, dtype=np.float64).reshape(-1, 1)
        out = _apply_plan_array(flat, plan, fill_value).reshape(out_shape)
        return _done(np.ascontiguousarray(out, dtype=np.float32), kind)
    flat = _k.reshape(x, (int(np.prod(shape)), 1))
    return _k.reshape(_apply_plan_graph(flat, plan, fill_value, what), out_shape)


def _projective_plans(transforms, h, w, order, fill_mode):
    """One plan per row [a0, a1, a2, b0, b1, b2, c0, c1] of ``transforms``: output pixel (x, y)
    reads the input at ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1
    (TF's convention); where k is 0 the pixel is fill_value (as TF)."""
    y, x = np.meshgrid(np.arange(h, dtype=np.float64), np.arange(w, dtype=np.float64), indexing="ij")
    x, y = x.reshape(-1), y.reshape(-1)
    plans = []
    for a0, a1, a2, b0, b1, b2, c0, c1 in transforms:
        k = c0 * x + c1 * y + 1.0
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            xin = (a0 * x + a1 * y + a2) / k
            yin = (b0 * x + b1 * y + b2) / k
        valid = (k != 0) & np.isfinite(xin) & np.isfinite(yin)
        plans.append(_sample_plan([np.where(valid, yin, 0.0), np.where(valid, xin, 0.0)], (h, w), order,
                                  fill_mode, valid))
    return plans


def _batch_of(rows, shape, name, what):
    """rows of per-image parameters (m, ...) checked against the images: 1 for all, or one each."""
    n = shape[0] if len(shape) == 4 else 1
    m = rows.shape[0]
    if m != 1 and m != n:
        raise ValueError(f"{what}: {m} {name} for {'one image' if len(shape) == 3 else f'a batch of {n} images'} "
                         f"(give one for all images, or one per image)")
    if m > 1 and np.all(rows == rows[:1]):
        rows = rows[:1]
    return rows


def affine_transform(images, transform, interpolation="bilinear", fill_mode="constant", fill_value=0,
                     data_format=None):
    """Keras's ``ops.image.affine_transform``: each image resampled by a transform (8,) or (batch,
    8) ``[a0, a1, a2, b0, b1, b2, c0, c1]`` that maps output points (x, y) to input points
    ``((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)``, k = c0 x + c1 y + 1 (TF's convention; with
    c0 = c1 = 0, as Keras's other backends take them, an affine map).  In a graph the transform
    must be known (an array); gradients flow to the images, not the transform."""
    what = "ops.image.affine_transform"
    order = _SAMPLE_ORDERS[_choice(interpolation, tuple(_SAMPLE_ORDERS), "interpolation", what)]
    _choice(fill_mode, _FILL_MODES, "fill_mode", what)
    fill_value = _number(fill_value, "fill_value", what)
    data_format = _data_format(data_format, what)
    t = _known_array(transform, "transform", what)
    if t.ndim not in (1, 2) or t.shape[-1] != 8:
        raise ValueError(f"{what}: transform must have shape (8,) or (batch, 8), got {t.shape}")
    kind, x, shape = _operand(images, what)
    h, w, _ = _image_dims(shape, data_format, what)
    rows = _batch_of(t.reshape(-1, 8), shape, "transforms", what)
    plans = _projective_plans(rows, h, w, order, fill_mode)
    return _resample_images(kind, x, shape, data_format, plans, fill_value, what)


def _homographies(start, end, what):
    """(m, 8) transforms mapping each end point to its start point (output to input)."""
    m = start.shape[0]
    a = np.zeros((m, 8, 8), np.float64)
    rhs = np.zeros((m, 8), np.float64)
    for i in range(4):
        sx, sy = start[:, i, 0], start[:, i, 1]
        ex, ey = end[:, i, 0], end[:, i, 1]
        a[:, 2 * i, 0:3] = np.stack([ex, ey, np.ones(m)], axis=1)
        a[:, 2 * i, 6:8] = np.stack([-sx * ex, -sx * ey], axis=1)
        a[:, 2 * i + 1, 3:6] = np.stack([ex, ey, np.ones(m)], axis=1)
        a[:, 2 * i + 1, 6:8] = np.stack([-sy * ex, -sy * ey], axis=1)
        rhs[:, 2 * i], rhs[:, 2 * i + 1] = sx, sy
    sol = None
    if np.all(np.linalg.cond(a) < 1e12):
        try:
            sol = np.linalg.solve(a, rhs[..., None])[..., 0]
        except np.linalg.LinAlgError:
            sol = None
    if sol is None or not np.all(np.isfinite(sol)):
        raise ValueError(f"{what}: start_points and end_points do not define a perspective transform (three of the "
                         f"four points on a line, or repeated points)")
    return sol


def perspective_transform(images, start_points, end_points, interpolation="bilinear", fill_value=0,
                          data_format=None):
    """Keras's ``ops.image.perspective_transform``: each image resampled so that its four
    ``start_points`` (x, y) land on ``end_points``, shapes (4, 2) or (batch, 4, 2); outside the
    image, fill_value.  In a graph the points must be known (arrays)."""
    what = "ops.image.perspective_transform"
    order = _SAMPLE_ORDERS[_choice(interpolation, tuple(_SAMPLE_ORDERS), "interpolation", what)]
    fill_value = _number(fill_value, "fill_value", what)
    data_format = _data_format(data_format, what)
    start = _known_array(start_points, "start_points", what)
    end = _known_array(end_points, "end_points", what)
    for name, pts in (("start_points", start), ("end_points", end)):
        if pts.ndim not in (2, 3) or pts.shape[-2:] != (4, 2):
            raise ValueError(f"{what}: {name} must have shape (4, 2) or (batch, 4, 2), got {pts.shape}")
    if start.shape != end.shape:
        raise ValueError(f"{what}: start_points and end_points must have the same shape, got {start.shape} and "
                         f"{end.shape}")
    kind, x, shape = _operand(images, what)
    h, w, _ = _image_dims(shape, data_format, what)
    pts = _batch_of(np.concatenate([start.reshape(-1, 8), end.reshape(-1, 8)], axis=1), shape, "sets of points",
                    what)
    rows = _homographies(pts[:, :8].reshape(-1, 4, 2), pts[:, 8:].reshape(-1, 4, 2), what)
    plans = _projective_plans(rows, h, w, order, "constant")
    return _resample_images(kind, x, shape, data_format, plans, fill_value, what)


def _elastic_generator(seed, in_graph, what):
    from pyggml import _random
    # a SeedGenerator (pyggml.random's, which imports the ops: known by what it does, not imported)
    generator = type(seed).__name__ == "SeedGenerator" and callable(getattr(seed, "next", None))
    if not (seed is None or generator or (is_int(seed) and seed >= 0)):
        raise ValueError(f"{what}: seed must be None, a non-negative int or a SeedGenerator, got {seed!r}")
    if is_int(seed):
        return np.random.default_rng(int(seed))
    if in_graph:
        raise ValueError(f"{what}: in a model's graph the displacement field is drawn once, when the graph is built, "
                         f"so give an int seed (the same field every call, as Keras with an int seed); got "
                         f"seed={seed!r}.  A new field per step would make the sampling depend on the data, which "
                         f"this op cannot build")
    return _random.rng() if seed is None else seed.next()


def elastic_transform(images, alpha=20.0, sigma=5.0, interpolation="bilinear", fill_mode="reflect", fill_value=0.0,
                      seed=None, data_format=None):
    """Keras's ``ops.image.elastic_transform``: each image resampled at its pixels displaced by
    ``alpha`` times a random field (normal values times ``sigma`` per pixel, one field per image
    and axis, shared by its channels) smoothed by a Gaussian blur of ``sigma`` and
    ``int(6 * sigma) | 1`` taps.  The field is drawn with numpy from ``seed`` (None: pyggml's
    generator).  In a graph it needs an int seed: the field is drawn when the graph is built."""
    what = "ops.image.elastic_transform"
    order = _SAMPLE_ORDERS[_choice(interpolation, tuple(_SAMPLE_ORDERS), "interpolation", what)]
    _choice(fill_mode, _FILL_MODES, "fill_mode", what)
    fill_value = _number(fill_value, "fill_value", what)
    alpha = _number(alpha, "alpha", what)
    sigma = _number(sigma, "sigma", what, positive=True)
    data_format = _data_format(data_format, what)
    kind, x, shape = _operand(images, what)
    h, w, _ = _image_dims(shape, data_format, what)
    size = int(6 * sigma) | 1
    if size > _MAX_KERNEL:
        raise ValueError(f"{what}: sigma={sigma} would need a blur of {size} taps (at most {_MAX_KERNEL})")
    gen = _elastic_generator(seed, kind == "graph", what)
    n = shape[0] if len(shape) == 4 else 1
    kernel = _gaussian_1d(size, sigma)
    fields = []
    for _ in range(2):
        f = gen.normal(size=(n, h, w)) * sigma
        fields.append(_blur_array(_blur_array(f, 1, kernel), 2, kernel) * alpha)
    dx, dy = fields
    y, xg = np.meshgrid(np.arange(h, dtype=np.float64), np.arange(w, dtype=np.float64), indexing="ij")
    plans = [_sample_plan([(y + dy[b]).reshape(-1), (xg + dx[b]).reshape(-1)], (h, w), order, fill_mode)
             for b in range(n)]
    return _resample_images(kind, x, shape, data_format, plans, fill_value, what)
