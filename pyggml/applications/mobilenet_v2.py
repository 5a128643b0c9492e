"""``keras.applications.mobilenet_v2``: MobileNetV2 (Sandler et al., "MobileNetV2:
Inverted Residuals and Linear Bottlenecks", 2018): inverted residual blocks (a 1x1
expansion, a 3x3 depthwise convolution, a linear 1x1 projection) with ReLU6, its
width scaled by ``alpha``, with Keras's layer names (``Conv1``, ``bn_Conv1``,
``expanded_conv_depthwise``, ``block_1_expand``, ..., ``block_16_project_BN``,
``Conv_1``, ``out_relu``, ``predictions``).

Its inputs are preprocessed with ``preprocess_input`` ("tf": pixels to [-1, 1])."""

import warnings

from pyggml._validation import is_number
from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, check_image_shape,
                                       classifier_or_pooling, finish, image_input, refuse_imagenet)
from pyggml.layers import Add, BatchNormalization, Conv2D, DepthwiseConv2D, ReLU, ZeroPadding2D

__all__ = ["MobileNetV2", "preprocess_input", "decode_predictions"]

_IMAGENET_ALPHAS = (0.35, 0.5, 0.75, 1.0, 1.3, 1.4)
_IMAGENET_SIZES = (96, 128, 160, 192, 224)

# (filters, stride, expansion) of blocks 0 ... 16
_BLOCKS = ((16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (32, 1, 6), (64, 2, 6), (64, 1, 6),
           (64, 1, 6), (64, 1, 6), (96, 1, 6), (96, 1, 6), (96, 1, 6), (160, 2, 6), (160, 1, 6), (160, 1, 6),
           (320, 1, 6))


def make_divisible(v, divisor, min_value=None):
    """``v`` rounded to the nearest multiple of ``divisor`` (at least ``min_value``), never
    more than 10% below ``v``."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * v else rounded


def _bn(x, name):
    return BatchNormalization(epsilon=1e-3, momentum=0.999, name=name)(x)


def _inverted_res_block(inputs, expansion, stride, alpha, filters, block_id):
    in_channels = inputs.shape[-1]
    pointwise_filters = make_divisible(int(filters * alpha), 8)
    x = inputs
    prefix = f"block_{block_id}_"
    if block_id:
        x = Conv2D(expansion * in_channels, kernel_size=1, padding="same", use_bias=False, name=f"{prefix}expand")(x)
        x = ReLU(6.0, name=f"{prefix}expand_relu")(_bn(x, f"{prefix}expand_BN"))
    else:
        prefix = "expanded_conv_"
    if stride == 2:
        x = ZeroPadding2D(padding=imagenet_utils.correct_pad(x.shape, 3), name=f"{prefix}pad")(x)
    x = DepthwiseConv2D(kernel_size=3, strides=stride, use_bias=False, padding="same" if stride == 1 else "valid",
                        name=f"{prefix}depthwise")(x)
    x = ReLU(6.0, name=f"{prefix}depthwise_relu")(_bn(x, f"{prefix}depthwise_BN"))
    x = Conv2D(pointwise_filters, kernel_size=1, padding="same", use_bias=False, name=f"{prefix}project")(x)
    x = _bn(x, f"{prefix}project_BN")
    if in_channels == pointwise_filters and stride == 1:
        return Add(name=f"{prefix}add")([inputs, x])
    return x


def _default_size(input_shape, input_tensor):
    """The side Keras's names and ImageNet weights go by: the input's when it is square and one
    of the sizes ImageNet weights were made for, else 224."""
    if input_shape is not None:
        try:
            rows, cols = check_image_shape(input_shape, "input_shape")[:2]
        except ValueError:
            return 224                                  # check_arguments says what is wrong with it
    elif input_tensor is not None and hasattr(input_tensor, "shape") and len(input_tensor.shape) == 4:
        rows, cols = input_tensor.shape[1:3]
    else:
        return 224
    return rows if rows == cols and rows in _IMAGENET_SIZES else 224


def MobileNetV2(input_shape=None, alpha=1.0, include_top=True, weights="imagenet", input_tensor=None, pooling=None,
                classes=1000, classifier_activation="softmax", name=None):
    """MobileNetV2: a 3x3 stem convolution, 17 inverted residual blocks and a 1x1
    convolution to 1280 channels (3.5M parameters with the top at ``alpha=1``).
    As in Keras, ``input_shape`` is its first argument.
    The default name is Keras's ``mobilenetv2_{alpha:.2f}_{rows}`` with "_" for "."
    (``mobilenetv2_1_00_224``): pyggml's layer and model names hold no "."."""
    if not is_number(alpha) or not alpha > 0:
        raise ValueError(f"MobileNetV2: alpha (the width multiplier) must be a positive number, got {alpha!r}")
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape,
                                                        pooling, classes, classifier_activation,
                                                        _default_size(input_shape, input_tensor), 32)
    rows, cols = input_shape[:2]
    if weights == "imagenet":
        if alpha not in _IMAGENET_ALPHAS:
            raise ValueError(f"MobileNetV2: with weights='imagenet' alpha must be one of {_IMAGENET_ALPHAS}, "
                             f"got {alpha!r}")
        if rows != cols or rows not in _IMAGENET_SIZES:
            rows = 224
            warnings.warn(f"MobileNetV2: the input is not square or its side is not one of {_IMAGENET_SIZES}: "
                          f"the weights for 224x224 inputs would be used", UserWarning, stacklevel=2)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    x = Conv2D(make_divisible(32 * alpha, 8), kernel_size=3, strides=(2, 2), padding="same", use_bias=False,
               name="Conv1")(img_input)
    x = ReLU(6.0, name="Conv1_relu")(_bn(x, "bn_Conv1"))
    for block_id, (filters, stride, expansion) in enumerate(_BLOCKS):
        x = _inverted_res_block(x, filters=filters, alpha=alpha, stride=stride, expansion=expansion,
                                block_id=block_id)
    # the last convolution widens with alpha above 1 only (the paper's choice)
    last_filters = make_divisible(1280 * alpha, 8) if alpha > 1.0 else 1280
    x = Conv2D(last_filters, kernel_size=1, use_bias=False, name="Conv_1")(x)
    x = ReLU(6.0, name="out_relu")(_bn(x, "Conv_1_bn"))
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, top_pool_name=None,
                              pool_names=(None, None))
    if name is None:                        # Keras's "mobilenetv2_1.00_224": pyggml's names hold no '.'
        name = f"mobilenetv2_{alpha:0.2f}_{rows}".replace(".", "_")
    return finish(input_tensor, img_input, x, name, weights)


add_arguments_doc((MobileNetV2,), arguments_doc(224, 32, extra="""
        alpha: the width multiplier: below 1 fewer filters in each layer, above 1 more
            (with ImageNet weights Keras has 0.35, 0.5, 0.75, 1.0, 1.3 and 1.4)."""))


preprocess_input = imagenet_utils.family_preprocess_input("tf", "MobileNetV2")
decode_predictions = imagenet_utils.decode_predictions
