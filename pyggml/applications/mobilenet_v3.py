"""``keras.applications.mobilenet_v3``: MobileNetV3Small and MobileNetV3Large (Howard
et al., "Searching for MobileNetV3", 2019): inverted residual blocks (1x1 expansion,
depthwise convolution, optional squeeze-and-excitation with a hard sigmoid gate, linear
1x1 projection) with ReLU or hard swish, widths scaled by ``alpha``; ``minimalistic``
models use 3x3 kernels, ReLU only and no squeeze-and-excitation.

Keras's layer names: ``conv``, ``conv_bn``, then ``expanded_conv_depthwise`` ...
``expanded_conv_project_bn`` (block 0, no expansion) and ``expanded_conv_{i}_expand``,
``..._expand_bn``, ``..._depthwise_pad``, ``..._depthwise``, ``..._depthwise_bn``,
``..._squeeze_excite_avg_pool``, ``..._squeeze_excite_conv``,
``..._squeeze_excite_relu``, ``..._squeeze_excite_conv_1``,
``..._squeeze_excite_mul``, ``..._project``, ``..._project_bn``, ``..._add``; then
``conv_1``, ``conv_1_bn``; the top: ``conv_2``, ``logits``, ``predictions``; without it
``avg_pool`` or ``max_pool``.  The activations, the rescaling, the dropout and the
flattening are unnamed layers, as in Keras.

As in Keras, the default input is ``(None, None, 3)`` even with the top (the classifier
follows a global pooling), and the models take pixels in [0, 255]: with
``include_preprocessing`` a ``Rescaling`` layer maps them to [-1, 1].
``preprocess_input`` returns its input unchanged."""

import warnings

import numpy as np

from pyggml import activations
from pyggml._validation import is_number
from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, check_flag, finish,
                                       image_input, refuse_imagenet)
from pyggml.applications.mobilenet_v2 import make_divisible
from pyggml.layers import (Activation, Add, BatchNormalization, Conv2D, DepthwiseConv2D, Dropout, Flatten,
                           GlobalAveragePooling2D, GlobalMaxPooling2D, Multiply, ReLU, Rescaling, ZeroPadding2D)

__all__ = ["MobileNetV3Small", "MobileNetV3Large", "preprocess_input", "decode_predictions"]

# (expansion, filters, kernel ("k": the model's), stride, squeeze-excite, activation ("a": the model's)) per block
_SMALL = ((1, 16, 3, 2, True, "relu"), (72 / 16, 24, 3, 2, False, "relu"), (88 / 24, 24, 3, 1, False, "relu"),
          (4, 40, "k", 2, True, "a"), (6, 40, "k", 1, True, "a"), (6, 40, "k", 1, True, "a"),
          (3, 48, "k", 1, True, "a"), (3, 48, "k", 1, True, "a"), (6, 96, "k", 2, True, "a"),
          (6, 96, "k", 1, True, "a"), (6, 96, "k", 1, True, "a"))
_LARGE = ((1, 16, 3, 1, False, "relu"), (4, 24, 3, 2, False, "relu"), (3, 24, 3, 1, False, "relu"),
          (3, 40, "k", 2, True, "relu"), (3, 40, "k", 1, True, "relu"), (3, 40, "k", 1, True, "relu"),
          (6, 80, 3, 2, False, "a"), (2.5, 80, 3, 1, False, "a"), (2.3, 80, 3, 1, False, "a"),
          (2.3, 80, 3, 1, False, "a"), (6, 112, 3, 1, True, "a"), (6, 112, 3, 1, True, "a"),
          (6, 160, "k", 2, True, "a"), (6, 160, "k", 1, True, "a"), (6, 160, "k", 1, True, "a"))
_BN = {"epsilon": 1e-3, "momentum": 0.999}


def _activate(x, kind):
    """ReLU or hard swish, an unnamed layer as in Keras."""
    return ReLU()(x) if kind == "relu" else Activation("hard_swish")(x)


def _hard_sigmoid(x):
    """Keras's gate: ReLU6(x + 3) / 6, the arithmetic on symbolic tensors."""
    return ReLU(6.0)(x + 3.0) * (1.0 / 6.0)


def _squeeze_excite(inputs, filters, se_ratio, prefix):
    x = GlobalAveragePooling2D(keepdims=True, name=f"{prefix}squeeze_excite_avg_pool")(inputs)
    x = Conv2D(make_divisible(filters * se_ratio, 8), 1, padding="same", name=f"{prefix}squeeze_excite_conv")(x)
    x = ReLU(name=f"{prefix}squeeze_excite_relu")(x)
    x = Conv2D(filters, 1, padding="same", name=f"{prefix}squeeze_excite_conv_1")(x)
    return Multiply(name=f"{prefix}squeeze_excite_mul")([inputs, _hard_sigmoid(x)])


def _inverted_res_block(x, expansion, filters, kernel_size, stride, se_ratio, activation, block_id):
    shortcut = x
    in_filters = x.shape[-1]
    expanded = make_divisible(in_filters * expansion, 8)
    prefix = f"expanded_conv_{block_id}_" if block_id else "expanded_conv_"
    if block_id:
        x = Conv2D(expanded, 1, padding="same", use_bias=False, name=f"{prefix}expand")(x)
        x = _activate(BatchNormalization(name=f"{prefix}expand_bn", **_BN)(x), activation)
    if stride == 2:
        x = ZeroPadding2D(padding=imagenet_utils.correct_pad(x.shape, kernel_size), name=f"{prefix}depthwise_pad")(x)
    x = DepthwiseConv2D(kernel_size, strides=stride, padding="same" if stride == 1 else "valid", use_bias=False,
                        name=f"{prefix}depthwise")(x)
    x = _activate(BatchNormalization(name=f"{prefix}depthwise_bn", **_BN)(x), activation)
    if se_ratio:
        x = _squeeze_excite(x, expanded, se_ratio, prefix)
    x = Conv2D(filters, 1, padding="same", use_bias=False, name=f"{prefix}project")(x)
    x = BatchNormalization(name=f"{prefix}project_bn", **_BN)(x)
    if stride == 1 and in_filters == filters:
        x = Add(name=f"{prefix}add")([shortcut, x])
    return x


def _check(include_top, weights, input_tensor, input_shape, pooling, classes, classifier_activation, alpha,
           minimalistic, dropout_rate, include_preprocessing):
    """Keras's checks: no fixed input size is required even with the top."""
    if not is_number(alpha) or not alpha > 0:
        raise ValueError(f"MobileNetV3: alpha (the width multiplier) must be a positive number, got {alpha!r}")
    if not is_number(dropout_rate) or not 0 <= dropout_rate < 1:
        raise ValueError(f"MobileNetV3: dropout_rate must be in [0, 1), got {dropout_rate!r}")
    check_flag("minimalistic", minimalistic)
    check_flag("include_preprocessing", include_preprocessing)
    if include_top is True and weights == "imagenet" and classes != 1000:
        raise ValueError(f"with weights='imagenet' and include_top=True, classes must be 1000, got {classes}")
    # the shape checks of a model without a flattening top: (None, None, 3) by default
    input_shape, weights, _ = check_arguments(False, weights, input_tensor, input_shape, pooling, classes,
                                              classifier_activation, 224, 32)
    if include_top:
        activations.get(classifier_activation)
        imagenet_utils.validate_activation(classifier_activation, weights)
    if weights == "imagenet":
        if (not minimalistic and alpha not in (0.75, 1.0)) or (minimalistic and alpha != 1.0):
            raise ValueError("MobileNetV3: with weights='imagenet' alpha must be 0.75 or 1.0 (1.0 when "
                             f"minimalistic), got {alpha!r}")
        rows, cols = (input_tensor.shape[1:3] if input_tensor is not None else input_shape[:2])
        if rows != cols or rows != 224:
            warnings.warn("MobileNetV3: the input is not 224x224: the weights for 224x224 inputs would be used",
                          UserWarning, stacklevel=3)
    refuse_imagenet(weights)
    return input_shape, weights


def build_mobilenet_v3(blocks, last_point_ch, input_shape, alpha, minimalistic, include_top, weights,
                       input_tensor, classes, pooling, dropout_rate, classifier_activation, include_preprocessing,
                       name):
    """MobileNetV3 of ``blocks`` (see ``_SMALL``, ``_LARGE``), ``last_point_ch`` channels before
    the classifier."""
    if not isinstance(include_top, (bool, np.bool_)):
        raise TypeError(f"include_top must be True or False, got {include_top!r}")
    input_shape, weights = _check(include_top, weights, input_tensor, input_shape, pooling, classes,
                                  classifier_activation, alpha, minimalistic, dropout_rate, include_preprocessing)
    kernel, activation, se_ratio = (3, "relu", None) if minimalistic else (5, "hard_swish", 0.25)
    img_input = image_input(input_tensor, input_shape)
    x = img_input
    if include_preprocessing:
        x = Rescaling(scale=1.0 / 127.5, offset=-1.0)(x)
    x = Conv2D(16, 3, strides=(2, 2), padding="same", use_bias=False, name="conv")(x)
    x = _activate(BatchNormalization(name="conv_bn", **_BN)(x), activation)
    for block_id, (expansion, filters, k, stride, se, act) in enumerate(blocks):
        x = _inverted_res_block(x, expansion, make_divisible(filters * alpha, 8), kernel if k == "k" else k, stride,
                                se_ratio if se else None, activation if act == "a" else "relu", block_id)
    last_conv_ch = make_divisible(x.shape[-1] * 6, 8)
    if alpha > 1.0:                                     # the last layer widens with alpha above 1 only
        last_point_ch = make_divisible(last_point_ch * alpha, 8)
    x = Conv2D(last_conv_ch, 1, padding="same", use_bias=False, name="conv_1")(x)
    x = _activate(BatchNormalization(name="conv_1_bn", **_BN)(x), activation)
    if include_top:
        x = GlobalAveragePooling2D(keepdims=True)(x)
        x = _activate(Conv2D(last_point_ch, 1, padding="same", use_bias=True, name="conv_2")(x), activation)
        if dropout_rate > 0:
            x = Dropout(dropout_rate)(x)
        x = Conv2D(classes, 1, padding="same", name="logits")(x)
        x = Flatten()(x)
        x = Activation(classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = GlobalAveragePooling2D(name="avg_pool")(x)
    elif pooling == "max":
        x = GlobalMaxPooling2D(name="max_pool")(x)
    return finish(input_tensor, img_input, x, name, weights)


def MobileNetV3Small(input_shape=None, alpha=1.0, minimalistic=False, include_top=True, weights="imagenet",
                     input_tensor=None, classes=1000, pooling=None, dropout_rate=0.2,
                     classifier_activation="softmax", include_preprocessing=True, name="MobileNetV3Small"):
    """MobileNetV3Small: 11 inverted residual blocks up to 96 channels, 576 channels
    before the pooling and 1024 after it (2.6M parameters with the top at ``alpha=1``)."""
    return build_mobilenet_v3(_SMALL, 1024, input_shape, alpha, minimalistic, include_top, weights, input_tensor,
                              classes, pooling, dropout_rate, classifier_activation, include_preprocessing, name)


def MobileNetV3Large(input_shape=None, alpha=1.0, minimalistic=False, include_top=True, weights="imagenet",
                     input_tensor=None, classes=1000, pooling=None, dropout_rate=0.2,
                     classifier_activation="softmax", include_preprocessing=True, name="MobileNetV3Large"):
    """MobileNetV3Large: 15 inverted residual blocks up to 160 channels, 960 channels
    before the pooling and 1280 after it (5.5M parameters with the top at ``alpha=1``)."""
    return build_mobilenet_v3(_LARGE, 1280, input_shape, alpha, minimalistic, include_top, weights, input_tensor,
                              classes, pooling, dropout_rate, classifier_activation, include_preprocessing, name)


add_arguments_doc((MobileNetV3Small, MobileNetV3Large), arguments_doc(
    224, 32, top="global average pooling, a 1x1 convolution, dropout, a 1x1 convolution to ``classes`` channels, "
                 "flattened", extra="""
        alpha: the width multiplier of the blocks (with ImageNet weights Keras has 0.75
            and 1.0, 1.0 only when minimalistic).
        minimalistic: 3x3 kernels, ReLU and no squeeze-and-excitation throughout.
        dropout_rate: the dropout rate before the classifier's last convolution (none at 0).
        include_preprocessing: whether a Rescaling layer maps pixels in [0, 255] to
            [-1, 1] first.""").replace(
    "Default: (224, 224, 3) with the top, (None, None, 3) without.", "Default: (None, None, 3)."))


def preprocess_input(x, data_format=None):
    """Returns ``x`` as it is: MobileNetV3 models rescale their inputs themselves (their
    first layer, with ``include_preprocessing``), so images go in with pixels in
    [0, 255].  Kept so that code written for the other families runs unchanged."""
    return x


decode_predictions = imagenet_utils.decode_predictions
