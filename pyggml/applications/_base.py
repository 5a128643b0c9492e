"""What every application constructor shares: the checks of Keras's common arguments,
the image input, the classifier or pooling on top, and the finished model with its
weights file loaded."""

import os
import warnings

import numpy as np

from pyggml import activations
from pyggml._validation import is_int
from pyggml.applications.imagenet_utils import validate_activation
from pyggml.backend import image_data_format, is_keras_tensor
from pyggml.layers import Dense, GlobalAveragePooling2D, GlobalMaxPooling2D, Input, InputLayer
from pyggml.models import Model

__all__ = ["check_arguments", "obtain_input_shape", "image_input", "classifier_or_pooling", "finish",
           "NO_IMAGENET", "add_arguments_doc", "arguments_doc", "refuse_imagenet", "check_image_shape", "check_flag"]

NO_IMAGENET = ("pretrained ImageNet weights are not available in pyggml (it ships none and downloads none): pass "
               "weights=None to start from random weights, or the path of a pyggml weights file "
               "(made by model.save_weights) to load")


def _check_weights(weights):
    if weights is None or (isinstance(weights, str) and weights == "imagenet"):
        return weights
    if isinstance(weights, (str, os.PathLike)):
        if os.path.isfile(weights):
            return os.fspath(weights)
        raise ValueError(f"weights must be None (random initialization), 'imagenet' or the path of a weights file; "
                         f"no file at {os.fspath(weights)!r}")
    raise ValueError(f"weights must be None (random initialization), 'imagenet' or the path of a weights file, "
                     f"got {weights!r}")


def check_flag(name, value):
    """A constructor's True/False argument (``include_preprocessing``, ``minimalistic``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_image_shape(shape, what):
    """An image shape (rows, cols, channels): a tuple of 3 positive ints, rows and cols may be None."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__"):
        raise ValueError(f"{what} must be a tuple of three integers (rows, cols, channels), got {shape!r}")
    shape = tuple(shape)
    if len(shape) != 3:
        raise ValueError(f"{what} must be a tuple of three integers (rows, cols, channels), got {shape!r}")
    for i, d in enumerate(shape):
        if (d is None and i < 2) or (is_int(d) and d >= 1):
            continue
        raise ValueError(f"{what} must hold positive integers (rows and cols may be None), got {shape!r}")
    return tuple(None if d is None else int(d) for d in shape)


def obtain_input_shape(input_shape, default_size, min_size, require_flatten, weights=None):
    """The model's input shape (rows, cols, channels), checked as Keras does: the
    default (``default_size`` square, 3 channels) when none is given and the top
    is included; ``(None, None, 3)`` without the top; with ImageNet weights and the
    top, only the default; no side below ``min_size``."""
    if input_shape is not None:
        input_shape = check_image_shape(input_shape, "input_shape")
    if weights != "imagenet" and input_shape is not None:
        if input_shape[-1] not in (1, 3):
            warnings.warn(f"these models usually take 1 or 3 input channels; input_shape {input_shape} has "
                          f"{input_shape[-1]}", UserWarning, stacklevel=4)
        default_shape = (default_size, default_size, input_shape[-1])
    else:
        default_shape = (default_size, default_size, 3)
    if weights == "imagenet" and require_flatten:
        if input_shape is not None and input_shape != default_shape:
            raise ValueError(f"with include_top=True and weights='imagenet', input_shape must be {default_shape}, "
                             f"got {input_shape}")
        return default_shape
    if input_shape is not None:
        if input_shape[-1] != 3 and weights == "imagenet":
            raise ValueError(f"with weights='imagenet' the input must have 3 channels, got input_shape={input_shape}")
        if any(d is not None and d < min_size for d in input_shape[:2]):
            raise ValueError(f"the input must be at least {min_size}x{min_size}, got input_shape={input_shape}")
    else:
        input_shape = default_shape if require_flatten else (None, None, 3)
    if require_flatten and None in input_shape:
        raise ValueError(f"with include_top=True the input shape must be fixed, got input_shape={input_shape}")
    return input_shape


def check_arguments(include_top, weights, input_tensor, input_shape, pooling, classes, classifier_activation,
                    default_size, min_size):
    """Checks Keras's common arguments before anything is built; returns (input shape, weights,
    include_top).
    ``weights="imagenet"`` passes (``refuse_imagenet`` refuses it once every check is made)."""
    if image_data_format() != "channels_last":
        raise ValueError(f"pyggml's application models are channels_last (its convolutions take channels_last "
                         f"only), but image_data_format() is {image_data_format()!r}: call "
                         f"pyggml.backend.set_image_data_format('channels_last')")
    if not isinstance(include_top, (bool, np.bool_)):
        raise TypeError(f"include_top must be True or False, got {include_top!r}")
    include_top = bool(include_top)
    weights = _check_weights(weights)
    if not is_int(classes) or classes < 1:
        raise ValueError(f"classes must be a positive integer, got {classes!r}")
    if weights == "imagenet" and include_top and classes != 1000:
        raise ValueError(f"with weights='imagenet' and include_top=True, classes must be 1000, got {classes}")
    if not (pooling is None or (isinstance(pooling, str) and pooling in ("avg", "max"))):
        raise ValueError(f"pooling must be None, 'avg' or 'max', got {pooling!r}")
    if input_tensor is not None:
        if not is_keras_tensor(input_tensor):
            raise TypeError(f"input_tensor must be a symbolic tensor (pg.Input(...) or a layer's output on one), "
                            f"got {type(input_tensor).__name__}")
        tensor_shape = tuple(input_tensor.shape[1:])
        if len(tensor_shape) != 3 or tensor_shape[-1] is None:
            raise ValueError(f"input_tensor must be a batch of images (batch, rows, cols, channels), got shape "
                             f"{tuple(input_tensor.shape)}")
        if input_shape is not None:
            given = check_image_shape(input_shape, "input_shape")
            if any(a is not None and b is not None and a != b for a, b in zip(given, tensor_shape)):
                raise ValueError(f"input_shape {given} disagrees with the shape of input_tensor "
                                 f"{tuple(input_tensor.shape)}")
    input_shape = obtain_input_shape(input_shape, default_size, min_size, include_top, weights)
    if input_tensor is not None:
        tensor_shape = tuple(input_tensor.shape[1:])
        if any(d is not None and d < min_size for d in tensor_shape[:2]):
            raise ValueError(f"the input must be at least {min_size}x{min_size}, got input_tensor of shape "
                             f"{tuple(input_tensor.shape)}")
        if weights == "imagenet" and tensor_shape[-1] != 3:
            raise ValueError(f"with weights='imagenet' the input must have 3 channels, got input_tensor of shape "
                             f"{tuple(input_tensor.shape)}")
    if include_top:
        activations.get(classifier_activation)          # an unknown name fails here, before any layer is made
        validate_activation(classifier_activation, weights)
    return input_shape, weights, include_top


def refuse_imagenet(weights):
    """After the family's own checks of its arguments (those Keras makes with ImageNet weights)."""
    if weights == "imagenet":
        raise ValueError(NO_IMAGENET)


def image_input(input_tensor, input_shape):
    """The node the network starts from: ``input_tensor``, or a new Input of ``input_shape``."""
    return Input(shape=input_shape) if input_tensor is None else input_tensor


def classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, top_pool_name="avg_pool",
                          pool_names=("avg_pool", "max_pool"), dropout=None, **dense_kwargs):
    """The classifier (global average pooling named ``top_pool_name``, the optional
    ``dropout`` layer, Dense "predictions") or, without it, the optional global pooling
    (named ``pool_names``).  A name None: numbered as Keras names unnamed layers."""
    if include_top:
        x = GlobalAveragePooling2D(name=top_pool_name)(x)
        if dropout is not None:
            x = dropout(x)
        return Dense(classes, activation=classifier_activation, name="predictions", **dense_kwargs)(x)
    if pooling == "avg":
        return GlobalAveragePooling2D(name=pool_names[0])(x)
    if pooling == "max":
        return GlobalMaxPooling2D(name=pool_names[1])(x)
    return x


def _source_inputs(node):
    """The Input nodes ``node`` was computed from (itself when it is one)."""
    found, seen, stack = [], set(), [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n.layer, InputLayer):
            found.append(n)
        else:
            stack.extend(reversed(n.inputs))
    return found


def finish(input_tensor, img_input, x, name, weights):
    """The functional model from the image input (or the Inputs ``input_tensor`` came
    from) to ``x``, with the weights file ``weights`` loaded when one is given."""
    inputs = img_input if input_tensor is None else _source_inputs(input_tensor)
    if isinstance(inputs, list) and len(inputs) == 1:
        inputs = inputs[0]
    model = Model(inputs, x, name=name)
    if weights is not None:
        model.load_weights(weights)
    return model


def add_arguments_doc(functions, text):
    """Appends the arguments' description to each constructor's docstring (none under python -OO)."""
    for f in functions:
        if f.__doc__:
            f.__doc__ += text


_ARGUMENTS_DOC = """

    Args:{extra}
        include_top: whether the classifier ends the model
            ({top}).
        weights: None (random initialization) or the path of a pyggml weights file
            (``model.save_weights``) to load.  "imagenet" is Keras's default, but
            pyggml has no pretrained weights: it raises a ValueError.
        input_tensor: a symbolic tensor (``pg.Input`` or a layer's output) to build the
            model on, instead of a new Input.
        input_shape: the images' shape (rows, cols, channels), no side below {min_size}.
            Default: ({size}, {size}, 3) with the top, (None, None, 3) without.
        pooling: without the top: None (the last convolutional block's 4D output),
            "avg" or "max" (a global pooling: 2D output).
        classes: the classifier's number of classes.
        classifier_activation: the classifier's activation (a name, a callable, or
            None for logits).
        name: the model's name.

    Returns:
        A functional ``pyggml.Model``.
    """


def arguments_doc(size, min_size, top="global average pooling, then a Dense layer of ``classes`` units", extra=""):
    """The Args section the constructors share; ``extra``: the family's own arguments, first."""
    return _ARGUMENTS_DOC.format(size=size, min_size=min_size, top=top, extra=extra)
