"""``keras.applications.imagenet_utils``: the ImageNet input preprocessing the
application models expect, and the decoding of their 1000-class predictions.

``preprocess_input(x, data_format=None, mode="caffe")``:

- ``"caffe"``: RGB to BGR, then each channel minus ImageNet's mean pixel
  (103.939, 116.779, 123.68 in BGR order), no scaling (ResNet, VGG);
- ``"tf"``: ``x / 127.5 - 1``, pixels in [-1, 1] (ResNetV2, MobileNetV2, Xception);
- ``"torch"``: ``x / 255``, then each channel minus (0.485, 0.456, 0.406) and
  divided by (0.229, 0.224, 0.225) (DenseNet).

A numpy array (or a list) comes back as a new numpy array: floating inputs keep
their dtype, others become float32.  Unlike Keras, the input array is never
written over.  A model's symbolic tensor (``pg.Input`` or a layer's output) or
a pyggml tensor goes through ``pyggml.ops``, so the preprocessing can be a
part of a functional model.

``decode_predictions(preds, top=5)`` reads ImageNet's class index (a JSON file
Keras publishes) through ``pyggml.utils.get_file``: the first call downloads
it into ``~/.keras/models`` (``$KERAS_HOME``), which needs network access
once; later calls read the cached copy.
"""

import json
import os

import numpy as np

from pyggml import activations, ops
from pyggml._validation import is_int
from pyggml.backend import image_data_format, is_keras_tensor
from pyggml.utils.file_utils import get_file

__all__ = ["preprocess_input", "decode_predictions", "CLASS_INDEX_PATH", "CLASS_INDEX_HASH"]

CLASS_INDEX_PATH = "https://storage.googleapis.com/download.tensorflow.org/data/imagenet_class_index.json"
CLASS_INDEX_HASH = "c2c37ea517e94d9795004a39431a14cb"       # md5 of that file (Keras's)
CLASS_INDEX = None                                          # {"0": [wordnet id, name], ...} once read

_MODES = ("caffe", "tf", "torch")
_CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)
_TORCH_MEAN = (0.485, 0.456, 0.406)
_TORCH_STD = (0.229, 0.224, 0.225)


def _check_data_format(data_format):
    if data_format is None:
        return image_data_format()
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"preprocess_input: data_format must be 'channels_last', 'channels_first' or None, "
                         f"got {data_format!r}")
    return data_format


def _channel_axis(shape, data_format):
    """The color channels' axis of images of ``shape`` (the last one, or the one after the batch's
    with channels_first); refuses shapes without 3 channels there."""
    ndim = len(shape)
    if data_format == "channels_last":
        axis = ndim - 1
    elif ndim in (3, 4):
        axis = 0 if ndim == 3 else 1
    else:
        raise ValueError(f"preprocess_input: channels_first takes an image (channels, rows, cols) or a batch of "
                         f"them (4 axes), got shape {tuple(shape)}")
    if ndim == 0 or (shape[axis] is not None and shape[axis] != 3):
        raise ValueError(f"preprocess_input: expected 3 color channels on axis {axis} ({data_format}), got shape "
                         f"{tuple(shape)}")
    return axis


def _stat_shape(ndim, axis):
    """A shape that broadcasts one value per channel along ``axis``."""
    shape = [1] * ndim
    shape[axis] = 3
    return tuple(shape)


def _preprocess_numpy(x, data_format, mode):
    if x.dtype == object or x.dtype.kind not in "biuf":
        raise TypeError(f"preprocess_input: expected numbers (pixel values), got an array of dtype {x.dtype}")
    x = np.array(x, dtype=x.dtype if x.dtype.kind == "f" else np.float32)       # a copy: the input stays
    if mode == "tf":
        x /= 127.5
        x -= 1.0
        return x
    axis = _channel_axis(x.shape, data_format)
    stat = _stat_shape(x.ndim, axis)
    if mode == "torch":
        x /= 255.0
        x -= np.asarray(_TORCH_MEAN, dtype=x.dtype).reshape(stat)
        x /= np.asarray(_TORCH_STD, dtype=x.dtype).reshape(stat)
        return x
    x = np.flip(x, axis=axis).copy()                                            # RGB -> BGR
    x -= np.asarray(_CAFFE_MEAN_BGR, dtype=x.dtype).reshape(stat)
    return x


def _preprocess_tensor(x, data_format, mode):
    if mode == "tf":
        return x / 127.5 - 1.0
    shape = tuple(x.shape)
    axis = _channel_axis(shape, data_format)
    stat = _stat_shape(len(shape), axis)
    if mode == "torch":
        mean = np.asarray(_TORCH_MEAN, np.float32).reshape(stat)
        std = np.asarray(_TORCH_STD, np.float32).reshape(stat)
        return (x / 255.0 - mean) / std
    mean = np.asarray(_CAFFE_MEAN_BGR, np.float32).reshape(stat)
    return ops.flip(x, axis=axis) - mean


def preprocess_input(x, data_format=None, mode="caffe"):
    """A batch of images (or one image) with pixel values in [0, 255], preprocessed
    for an ImageNet model in ``mode`` ("caffe", "tf" or "torch", see the module's
    notes).  ``data_format``: "channels_last" or "channels_first" (default: the
    backend's ``image_data_format()``).

    Returns a numpy array for a numpy array or a list (a new one: ``x`` is not
    modified), a symbolic tensor for a model's symbolic tensor, a pyggml tensor
    for a pyggml tensor.

    Raises:
        ValueError: an unknown ``mode`` or ``data_format``, or images without 3 color
            channels (modes "caffe" and "torch").
    """
    if not isinstance(mode, str) or mode not in _MODES:
        raise ValueError(f"preprocess_input: mode must be one of 'caffe', 'tf' or 'torch', got {mode!r}")
    data_format = _check_data_format(data_format)
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    if isinstance(x, (np.ndarray, np.generic)):
        return _preprocess_numpy(np.asarray(x), data_format, mode)
    if is_keras_tensor(x) or hasattr(x, "shape"):
        return _preprocess_tensor(x, data_format, mode)
    raise TypeError(f"preprocess_input: expected a numpy array, a list of pixel values or a tensor, got "
                    f"{type(x).__name__}")


def _class_index():
    """ImageNet's class index, read once (downloaded into the cache the first time)."""
    global CLASS_INDEX
    if CLASS_INDEX is None:
        path = get_file("imagenet_class_index.json", CLASS_INDEX_PATH, cache_subdir="models",
                        file_hash=CLASS_INDEX_HASH)
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
        if not isinstance(index, dict) or any(str(i) not in index for i in range(1000)):
            raise ValueError(f"decode_predictions: the class index file {os.fspath(path)!r} does not map each of "
                             f"'0' ... '999' to [wordnet id, class name]")
        CLASS_INDEX = index
    return CLASS_INDEX


_MODE_DOCS = {
    "caffe": "RGB to BGR, then each channel minus ImageNet's mean pixel, no scaling",
    "tf": "``x / 127.5 - 1``, pixels in [-1, 1]",
    "torch": "``x / 255``, then each channel minus ImageNet's mean (0.485, 0.456, 0.406) and divided "
             "by its standard deviation (0.229, 0.224, 0.225)",
}


def family_preprocess_input(mode, family):
    """A family module's ``preprocess_input``: ``preprocess_input`` in ``mode``."""
    def preprocess_input_(x, data_format=None):
        return preprocess_input(x, data_format=data_format, mode=mode)
    preprocess_input_.__name__ = preprocess_input_.__qualname__ = "preprocess_input"
    preprocess_input_.__doc__ = (f"{family}'s preprocessing of images with pixels in [0, 255]: {_MODE_DOCS[mode]} "
                                 f"(``imagenet_utils``'s {mode!r} mode).  Returns a new float array (or a tensor "
                                 f"for a tensor).")
    return preprocess_input_


def decode_predictions(preds, top=5):
    """The ``top`` most likely ImageNet classes of each prediction in ``preds``, a
    ``(samples, 1000)`` array (an ImageNet classifier's output): for each sample a
    list of ``(wordnet_id, class_name, score)`` tuples, most likely first.

    The class names come from ImageNet's class index file, downloaded through
    ``pyggml.utils.get_file`` (Keras's URL and hash) into the cache on first use:
    that needs network access once.

    Raises:
        ValueError: ``preds`` is not a 2D array of 1000 scores per sample, or ``top``
            is not a positive integer.
    """
    if is_keras_tensor(preds):
        raise TypeError("decode_predictions: expected computed predictions (an array), got a symbolic tensor of a "
                        "model under construction")
    try:
        p = np.asarray(ops.convert_to_numpy(preds) if hasattr(preds, "shape") and
                       not isinstance(preds, np.ndarray) else preds)
    except (TypeError, ValueError):
        raise TypeError(f"decode_predictions: expected an array of shape (samples, 1000), got "
                        f"{type(preds).__name__}") from None
    if p.ndim != 2 or p.shape[1] != 1000:
        raise ValueError(f"decode_predictions: expects a batch of ImageNet predictions, an array of shape "
                         f"(samples, 1000); got an array of shape {p.shape}")
    if p.dtype == object or p.dtype.kind not in "biuf":
        raise TypeError(f"decode_predictions: expected scores (numbers), got an array of dtype {p.dtype}")
    if not is_int(top) or top < 1:
        raise ValueError(f"decode_predictions: top must be a positive integer, got {top!r}")
    top = min(int(top), 1000)
    index = _class_index()
    results = []
    for row in p:
        best = np.argsort(row, kind="stable")[::-1][:top]
        results.append([tuple(index[str(int(i))]) + (row[i],) for i in best])
    return results


def validate_activation(classifier_activation, weights):
    """Pretrained classifiers end in softmax: with ``weights="imagenet"`` only softmax or
    None (the logits) make sense as ``classifier_activation``."""
    if weights != "imagenet":
        return
    act = activations.get(classifier_activation)
    if act is not activations.get("softmax") and act is not activations.get(None):
        raise ValueError(f"with weights='imagenet' and include_top=True, classifier_activation must be 'softmax' or "
                         f"None, got {classifier_activation!r}")


def correct_pad(shape, kernel_size):
    """The zero padding ((top, bottom), (left, right)) before a strided 'valid' convolution
    of ``kernel_size`` on images of ``shape`` (batch, rows, cols, channels) that reproduces
    TensorFlow's 'same' padding (one row/column less on the top/left of an even size).
    ``shape`` may be the images themselves, as Keras 3 takes them (their ``.shape``)."""
    if hasattr(shape, "shape") and not isinstance(shape, (tuple, list)):
        shape = tuple(shape.shape)
    if is_int(kernel_size):
        kernel_size = (kernel_size, kernel_size)
    adjust = tuple(1 if n is None else 1 - n % 2 for n in (shape[1], shape[2]))
    half = (kernel_size[0] // 2, kernel_size[1] // 2)
    return ((half[0] - adjust[0], half[0]), (half[1] - adjust[1], half[1]))
