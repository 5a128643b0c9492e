"""``keras.applications.mobilenet``: MobileNet (Howard et al., "MobileNets: Efficient
Convolutional Neural Networks for Mobile Vision Applications", 2017): a 3x3 stem
convolution, then 13 depthwise separable blocks (a 3x3 depthwise convolution and a 1x1
pointwise convolution, each with batch normalization and ReLU6), their widths scaled by
``alpha`` and the depthwise convolutions' channels by ``depth_multiplier``.

Keras's layer names: ``conv1``, ``conv1_bn``, ``conv1_relu``, then for each block
``conv_pad_{i}`` (strided blocks), ``conv_dw_{i}``, ``conv_dw_{i}_bn``,
``conv_dw_{i}_relu``, ``conv_pw_{i}``, ``conv_pw_{i}_bn``, ``conv_pw_{i}_relu``
(``i`` = 1 ... 13); the top: an unnamed global average pooling (keeping the spatial
axes), ``dropout``, the 1x1 convolution ``conv_preds``, ``reshape_2`` and
``predictions`` (an Activation layer).

Its inputs are preprocessed with ``preprocess_input`` ("tf": pixels to [-1, 1])."""

import warnings

from pyggml._validation import is_int, is_number
from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, check_image_shape, finish,
                                       image_input, refuse_imagenet)
from pyggml.layers import (Activation, BatchNormalization, Conv2D, DepthwiseConv2D, Dropout, GlobalAveragePooling2D,
                           GlobalMaxPooling2D, ReLU, Reshape, ZeroPadding2D)

__all__ = ["MobileNet", "preprocess_input", "decode_predictions"]

_IMAGENET_ALPHAS = (0.25, 0.50, 0.75, 1.0)
_IMAGENET_SIZES = (128, 160, 192, 224)

# (pointwise filters, stride) of blocks 1 ... 13
_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1), (512, 1),
           (512, 1), (1024, 2), (1024, 1))


def _separable_block(x, filters, alpha, depth_multiplier, stride, block_id):
    """Depthwise 3x3 (padded by one row and column below and right when strided), then
    pointwise 1x1 to ``int(filters * alpha)`` channels; each with batch norm and ReLU6."""
    if stride != 1:
        x = ZeroPadding2D(((0, 1), (0, 1)), name=f"conv_pad_{block_id}")(x)
    x = DepthwiseConv2D((3, 3), padding="same" if stride == 1 else "valid", depth_multiplier=depth_multiplier,
                        strides=stride, use_bias=False, name=f"conv_dw_{block_id}")(x)
    x = BatchNormalization(name=f"conv_dw_{block_id}_bn")(x)
    x = ReLU(6.0, name=f"conv_dw_{block_id}_relu")(x)
    x = Conv2D(int(filters * alpha), (1, 1), padding="same", use_bias=False, name=f"conv_pw_{block_id}")(x)
    x = BatchNormalization(name=f"conv_pw_{block_id}_bn")(x)
    return ReLU(6.0, name=f"conv_pw_{block_id}_relu")(x)


def _default_size(input_shape):
    """Keras's: the input's side when it is square and one of the ImageNet sizes, else 224."""
    if input_shape is None:
        return 224
    try:
        rows, cols = check_image_shape(input_shape, "input_shape")[:2]
    except ValueError:
        return 224                                      # check_arguments says what is wrong with it
    return rows if rows == cols and rows in _IMAGENET_SIZES else 224


def MobileNet(input_shape=None, alpha=1.0, depth_multiplier=1, dropout=1e-3, include_top=True, weights="imagenet",
              input_tensor=None, pooling=None, classes=1000, classifier_activation="softmax", name=None):
    """MobileNet: a strided 3x3 convolution and 13 depthwise separable blocks up to 1024
    channels (4.3M parameters with the top at ``alpha=1``).  As in Keras,
    ``input_shape`` is its first argument.  The default name is Keras's
    ``mobilenet_{alpha:.2f}_{rows}`` with "_" for "." (``mobilenet_1_00_224``): pyggml's
    layer and model names hold no "."."""
    if not is_number(alpha) or not alpha > 0:
        raise ValueError(f"MobileNet: alpha (the width multiplier) must be a positive number, got {alpha!r}")
    if not is_int(depth_multiplier) or depth_multiplier < 1:
        raise ValueError(f"MobileNet: depth_multiplier must be a positive integer, got {depth_multiplier!r}")
    if not is_number(dropout) or not 0 <= dropout < 1:
        raise ValueError(f"MobileNet: dropout must be a rate in [0, 1), got {dropout!r}")
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape, pooling,
                                                        classes, classifier_activation, _default_size(input_shape),
                                                        32)
    rows, cols = input_shape[:2]
    if weights == "imagenet":
        if depth_multiplier != 1:
            raise ValueError(f"MobileNet: with weights='imagenet' depth_multiplier must be 1, got {depth_multiplier}")
        if alpha not in _IMAGENET_ALPHAS:
            raise ValueError(f"MobileNet: with weights='imagenet' alpha must be one of {_IMAGENET_ALPHAS}, "
                             f"got {alpha!r}")
        if rows != cols or rows not in _IMAGENET_SIZES:
            rows = 224
            warnings.warn(f"MobileNet: the input is not square or its side is not one of {_IMAGENET_SIZES}: the "
                          f"weights for 224x224 inputs would be used", UserWarning, stacklevel=2)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    x = Conv2D(int(32 * alpha), (3, 3), padding="same", use_bias=False, strides=(2, 2), name="conv1")(img_input)
    x = ReLU(6.0, name="conv1_relu")(BatchNormalization(name="conv1_bn")(x))
    for block_id, (filters, stride) in enumerate(_BLOCKS, start=1):
        x = _separable_block(x, filters, alpha, depth_multiplier, stride, block_id)
    if include_top:
        x = GlobalAveragePooling2D(keepdims=True)(x)
        x = Dropout(dropout, name="dropout")(x)
        x = Conv2D(classes, (1, 1), padding="same", name="conv_preds")(x)
        x = Reshape((classes,), name="reshape_2")(x)
        x = Activation(classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = GlobalAveragePooling2D()(x)
    elif pooling == "max":
        x = GlobalMaxPooling2D()(x)
    if name is None:                        # Keras's "mobilenet_1.00_224": pyggml's names hold no '.'
        name = f"mobilenet_{alpha:0.2f}_{rows}".replace(".", "_")
    return finish(input_tensor, img_input, x, name, weights)


add_arguments_doc((MobileNet,), arguments_doc(224, 32, top="global average pooling, dropout, a 1x1 convolution to "
                                                           "``classes`` channels, flattened", extra="""
        alpha: the width multiplier: below 1 fewer filters in each layer, above 1 more
            (with ImageNet weights Keras has 0.25, 0.5, 0.75 and 1.0).
        depth_multiplier: the depthwise convolutions' channels per input channel (the
            paper's resolution multiplier; 1 with ImageNet weights).
        dropout: the dropout rate before the classifier."""))


preprocess_input = imagenet_utils.family_preprocess_input("tf", "MobileNet")
decode_predictions = imagenet_utils.decode_predictions
