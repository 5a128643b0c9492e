"""Images to arrays and back (Keras's ``load_img``, ``img_to_array``,
``array_to_img``, ``save_img``), and the resizing ``image_dataset_from_directory``
does.  Decoding and encoding image files takes Pillow (``pip install pillow``),
as in Keras; arrays are channels-last float32 unless ``data_format`` says
otherwise."""

import os
import stat

import numpy as np

from pyggml._validation import is_int

__all__ = ["load_img", "img_to_array", "array_to_img", "save_img", "resize_images"]

_COLOR_MODES = {"grayscale": "L", "rgb": "RGB", "rgba": "RGBA"}
# Keras's resize methods but "gaussian" and "mitchellcubic": numpy's, "area" Pillow's box filter
INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "lanczos3", "lanczos5", "area")


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("reading and writing image files needs Pillow: pip install pillow") from None
    return Image


def _data_format(data_format):
    if data_format is None:
        return "channels_last"
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"data_format must be 'channels_last' or 'channels_first', got {data_format!r}")
    return data_format


MAX_PIXELS = 1 << 26       # per image: (10**5, 10**5) asked numpy for 112 GiB


def _size(name, value):
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(is_int(v) and v > 0 for v in value):
        raise ValueError(f"{name} must be (height, width), two positive ints, got {value!r}")
    if int(value[0]) * int(value[1]) > MAX_PIXELS:
        raise ValueError(f"{name} {tuple(value)} is too large (at most {MAX_PIXELS} pixels, e.g. 8192 x 8192)")
    return int(value[0]), int(value[1])


def _interpolation(interpolation):
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {', '.join(INTERPOLATIONS)}, got {interpolation!r}")
    return interpolation


def load_img(path, color_mode="rgb", target_size=None, interpolation="nearest", keep_aspect_ratio=False):
    """An image file as a Pillow image, converted to ``color_mode`` ("grayscale", "rgb",
    "rgba") and resized to ``target_size`` (height, width) when given (center-cropped to
    the target's aspect ratio first with ``keep_aspect_ratio``)."""
    Image = _pil()
    if not isinstance(color_mode, str) or color_mode not in _COLOR_MODES:
        raise ValueError(f"color_mode must be one of {', '.join(_COLOR_MODES)}, got {color_mode!r}")
    size = _size("target_size", target_size)
    _interpolation(interpolation)
    if isinstance(path, np.ndarray) and path.ndim == 0 and path.dtype.kind in "US":
        path = path.item()                      # one element of a dataset of paths (a 0-d string array)
    if isinstance(path, bytes):
        path = path.decode()
    if isinstance(path, (str, os.PathLike)):
        try:
            st = os.stat(path)
        except OSError as e:
            raise FileNotFoundError(f"load_img: cannot read {path!r}: {e.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"load_img: {path!r} is not a regular file (a folder, a pipe or a device)")
    if hasattr(path, "read"):                   # a file object (io.BytesIO), as Keras takes
        img = Image.open(path)
        img.load()
    else:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"load_img: path must be a file path (str, bytes, os.PathLike, a 0-d string array) or "
                            f"a file object, got {type(path).__name__}")
        with open(path, "rb") as f:
            img = Image.open(f)
            img.load()
    if img.mode != _COLOR_MODES[color_mode]:
        img = img.convert(_COLOR_MODES[color_mode])
    if size is not None and (img.height, img.width) != size:
        if keep_aspect_ratio:
            img = img.crop(_center_box(img.height, img.width, *size))
        arr = resize_images(np.asarray(img, dtype=np.float32).reshape(img.height, img.width, -1), size,
                            interpolation)
        img = array_to_img(arr, scale=False)
    return img


def _center_box(h, w, th, tw):
    """The largest centered box of the target's aspect ratio, as Pillow's (left, top, right, bottom)."""
    ch, cw = min(h, int(round(w * th / tw))), min(w, int(round(h * tw / th)))
    top, left = (h - ch) // 2, (w - cw) // 2
    return left, top, left + cw, top + ch


def img_to_array(img, data_format=None, dtype="float32"):
    """A Pillow image as an array (height, width, channels), or channels first."""
    fmt = _data_format(data_format)
    a = np.array(img, dtype=dtype)           # a writable copy (Pillow hands out read-only views)
    if a.ndim == 2:
        a = a[:, :, None]
    elif a.ndim != 3:
        raise ValueError(f"img_to_array: an image has 2 or 3 axes, got an array of shape {a.shape}")
    return np.ascontiguousarray(a.transpose(2, 0, 1)) if fmt == "channels_first" else a


def array_to_img(x, data_format=None, scale=True, dtype=None):
    """An array (height, width, channels: 1, 3 or 4) as a Pillow image; with ``scale`` its
    values are first stretched to 0-255."""
    Image = _pil()
    fmt = _data_format(data_format)
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 3:
        raise ValueError(f"array_to_img takes an image of 3 axes, got shape {a.shape}")
    if fmt == "channels_first":
        a = a.transpose(1, 2, 0)
    if a.shape[2] not in (1, 3, 4):
        raise ValueError(f"array_to_img takes 1, 3 or 4 channels, got {a.shape[2]}")
    if a.size == 0:
        raise ValueError(f"array_to_img: an image of shape {a.shape} has no pixels")
    if scale:
        a = a - a.min()
        top = a.max()
        if top > 0:
            a = a / top * 255.0
    a = np.clip(np.rint(a), 0, 255).astype(np.uint8)
    mode = {1: "L", 3: "RGB", 4: "RGBA"}[a.shape[2]]
    return Image.fromarray(a[:, :, 0] if mode == "L" else a, mode=mode)


def save_img(path, x, data_format=None, file_format=None, scale=True, **kwargs):
    """An array saved as an image file (the format from the file's extension unless
    ``file_format`` says)."""
    img = array_to_img(x, data_format=data_format, scale=scale)
    if img.mode == "RGBA" and (file_format or str(path).rsplit(".", 1)[-1]).lower() in ("jpg", "jpeg"):
        img = img.convert("RGB")
    img.save(path, format=file_format, **kwargs)


def resize_images(images, size, interpolation="bilinear"):
    """Images (..., height, width, channels) resized to ``size``: Keras's methods ("bilinear",
    "nearest", "bicubic", "lanczos3", "lanczos5", pixel centres aligned, no antialiasing) by
    the image layers' resampling (pyggml.layers.preprocessing._image_ops); "area" by Pillow's
    box filter, channel by channel in float32."""
    from pyggml.layers.preprocessing import _image_ops
    a = np.asarray(images, dtype=np.float32)
    th, tw = _size("size", size)
    if a.ndim < 3:
        raise ValueError(f"resize_images takes (..., height, width, channels), got shape {a.shape}")
    _interpolation(interpolation)
    h, w, c = a.shape[-3:]
    flat = a.reshape(-1, h, w, c)
    if interpolation == "area":
        out = _resize_with_pillow(flat, th, tw)
    else:
        out = _image_ops.resize(flat, th, tw, method=interpolation)
    return out.reshape(a.shape[:-3] + (th, tw, c))


def _resize_with_pillow(flat, th, tw):
    Image = _pil()
    n, h, w, c = flat.shape
    out = np.empty((n, th, tw, c), dtype=np.float32)
    for i in range(n):
        for ch in range(c):
            img = Image.fromarray(np.ascontiguousarray(flat[i, :, :, ch]), mode="F")
            out[i, :, :, ch] = np.asarray(img.resize((tw, th), Image.BOX), dtype=np.float32)
    return out
