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
"""

import numpy as np

from pyggml import _ops_numpy as _k
from pyggml import _scope
from pyggml._validation import is_int, is_number
from pyggml.core import Tensor
from pyggml.core import ops as _c
from pyggml.variables import Variable

__all__ = ["resize", "extract_patches"]

_INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "lanczos3", "lanczos5")


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


def _data_format(data_format, what):
    if data_format is None:
        return "channels_last"
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"{what}: data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
    return data_format


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
        out = np.einsum("ih,nhwc,jw->nijc", mh, a, mw) + pad_term[None, :, :, None]
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


def extract_patches(images, size, strides=None, dilation_rate=1, padding="valid", data_format=None):
    """Keras's ``ops.image.extract_patches``: (n, h, w, c) -> (n, out_h, out_w, kh * kw * c), each
    patch's values in (row, column, channel) order; ``strides`` default to ``size``."""
    what = "ops.image.extract_patches"
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
