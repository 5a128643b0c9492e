"""``keras.applications.inception_v3``: InceptionV3 (Szegedy et al., "Rethinking the
Inception Architecture for Computer Vision", 2016): a stem of plain convolutions, then
eleven Inception modules that run parallel branches of factorized convolutions (5x5 as
two 3x3, 7x7 as 1x7 and 7x1, 3x3 as 1x3 and 3x1) and a pooling branch side by side and
concatenate them: three 35x35 modules, a reduction, four 17x17 modules, a reduction,
two 8x8 modules.  Each convolution is unbiased, followed by batch normalization
without a scale (epsilon 1e-3) and a ReLU.

Keras's layer names: the concatenations are named ``mixed0`` ... ``mixed10`` (and
``mixed9_0``, ``mixed9_1`` for the 1x3/3x1 pairs of the last two modules), the
classifier ``avg_pool`` and ``predictions``; the other layers are unnamed, numbered
in the order Keras makes them (``conv2d``, ``conv2d_1``, ..., ``conv2d_93``,
``batch_normalization_*``, ``activation_*``, ``max_pooling2d_*``,
``average_pooling2d_*``, ``concatenate``, ``concatenate_1``).

Its inputs (299x299 by default) are preprocessed with ``preprocess_input`` ("tf":
pixels to [-1, 1])."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, classifier_or_pooling,
                                       finish, image_input, refuse_imagenet)
from pyggml.layers import Activation, AveragePooling2D, BatchNormalization, Concatenate, Conv2D, MaxPooling2D

__all__ = ["InceptionV3", "preprocess_input", "decode_predictions"]

_EPS = 1e-3


def conv2d_bn(x, filters, kernel, strides=(1, 1), padding="same"):
    """An unbiased convolution of ``kernel`` (rows, cols), batch normalization without a
    scale, ReLU; all three unnamed, as in Keras."""
    x = Conv2D(filters, kernel, strides=strides, padding=padding, use_bias=False)(x)
    x = BatchNormalization(scale=False, epsilon=_EPS)(x)
    return Activation("relu")(x)


def _chain(x, steps):
    """``conv2d_bn`` applied in turn for each (filters, kernel) of ``steps``."""
    for filters, kernel in steps:
        x = conv2d_bn(x, filters, kernel)
    return x


def _pool_branch(x, filters):
    """3x3 average pooling (stride 1, the padding left out of the averages), then a 1x1 convolution."""
    return conv2d_bn(AveragePooling2D((3, 3), strides=(1, 1), padding="same")(x), filters, (1, 1))


def _module_35(x, pool_filters, name):
    """A 35x35 module: 1x1 (64) | 1x1, 5x5 (64) | 1x1, 3x3, 3x3 (96) | pooling, 1x1 (``pool_filters``)."""
    branches = [conv2d_bn(x, 64, (1, 1)),
                _chain(x, [(48, (1, 1)), (64, (5, 5))]),
                _chain(x, [(64, (1, 1)), (96, (3, 3)), (96, (3, 3))]),
                _pool_branch(x, pool_filters)]
    return Concatenate(axis=-1, name=name)(branches)


def _reduction_35_to_17(x):
    """mixed3: strided 3x3 (384) | 1x1, 3x3, strided 3x3 (96) | strided 3x3 max pooling."""
    branch3x3 = conv2d_bn(x, 384, (3, 3), strides=(2, 2), padding="valid")
    branch3x3dbl = _chain(x, [(64, (1, 1)), (96, (3, 3))])
    branch3x3dbl = conv2d_bn(branch3x3dbl, 96, (3, 3), strides=(2, 2), padding="valid")
    pooled = MaxPooling2D((3, 3), strides=(2, 2))(x)
    return Concatenate(axis=-1, name="mixed3")([branch3x3, branch3x3dbl, pooled])


def _module_17(x, width, name):
    """A 17x17 module (7x7 factorized into 1x7 and 7x1 convolutions of ``width`` channels):
    1x1 (192) | 1x1, 1x7, 7x1 (192) | 1x1, 7x1, 1x7, 7x1, 1x7 (192) | pooling, 1x1 (192)."""
    branches = [conv2d_bn(x, 192, (1, 1)),
                _chain(x, [(width, (1, 1)), (width, (1, 7)), (192, (7, 1))]),
                _chain(x, [(width, (1, 1)), (width, (7, 1)), (width, (1, 7)), (width, (7, 1)), (192, (1, 7))]),
                _pool_branch(x, 192)]
    return Concatenate(axis=-1, name=name)(branches)


def _reduction_17_to_8(x):
    """mixed8: 1x1, strided 3x3 (320) | 1x1, 1x7, 7x1, strided 3x3 (192) | strided 3x3 max pooling."""
    branch3x3 = conv2d_bn(conv2d_bn(x, 192, (1, 1)), 320, (3, 3), strides=(2, 2), padding="valid")
    branch7x7x3 = _chain(x, [(192, (1, 1)), (192, (1, 7)), (192, (7, 1))])
    branch7x7x3 = conv2d_bn(branch7x7x3, 192, (3, 3), strides=(2, 2), padding="valid")
    pooled = MaxPooling2D((3, 3), strides=(2, 2))(x)
    return Concatenate(axis=-1, name="mixed8")([branch3x3, branch7x7x3, pooled])


def _split_1x3_3x1(x):
    """The 1x3 and the 3x1 convolution (384 each) of ``x``, side by side."""
    return [conv2d_bn(x, 384, (1, 3)), conv2d_bn(x, 384, (3, 1))]


def _module_8(x, index):
    """An 8x8 module (mixed9, mixed10): 1x1 (320) | 1x1 (384), then 1x3 and 3x1 side by side
    (``mixed9_<index>``) | 1x1 (448), 3x3 (384), then 1x3 and 3x1 side by side | pooling, 1x1 (192)."""
    branch1x1 = conv2d_bn(x, 320, (1, 1))
    branch3x3 = Concatenate(axis=-1, name=f"mixed9_{index}")(_split_1x3_3x1(conv2d_bn(x, 384, (1, 1))))
    branch3x3dbl = _chain(x, [(448, (1, 1)), (384, (3, 3))])
    branch3x3dbl = Concatenate(axis=-1)(_split_1x3_3x1(branch3x3dbl))
    branch_pool = _pool_branch(x, 192)
    return Concatenate(axis=-1, name=f"mixed{9 + index}")([branch1x1, branch3x3, branch3x3dbl, branch_pool])


def InceptionV3(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="inception_v3"):
    """InceptionV3: 94 convolutions in a stem and eleven Inception modules (23.9M
    parameters with the top).  Inputs of at least 75x75."""
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape,
                                                        pooling, classes, classifier_activation,
                                                        default_size=299, min_size=75)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    # stem: 299x299x3 -> 35x35x192
    x = conv2d_bn(img_input, 32, (3, 3), strides=(2, 2), padding="valid")
    x = conv2d_bn(x, 32, (3, 3), padding="valid")
    x = conv2d_bn(x, 64, (3, 3))
    x = MaxPooling2D((3, 3), strides=(2, 2))(x)
    x = conv2d_bn(x, 80, (1, 1), padding="valid")
    x = conv2d_bn(x, 192, (3, 3), padding="valid")
    x = MaxPooling2D((3, 3), strides=(2, 2))(x)
    # 35x35: 256, 288, 288 channels
    for i, pool_filters in enumerate((32, 64, 64)):
        x = _module_35(x, pool_filters, f"mixed{i}")
    x = _reduction_35_to_17(x)                                  # 17x17x768
    for i, width in enumerate((128, 160, 160, 192), start=4):
        x = _module_17(x, width, f"mixed{i}")
    x = _reduction_17_to_8(x)                                   # 8x8x1280
    for index in (0, 1):                                        # 8x8x2048
        x = _module_8(x, index)
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, pool_names=(None, None))
    return finish(input_tensor, img_input, x, name, weights)


add_arguments_doc((InceptionV3,), arguments_doc(299, 75))


preprocess_input = imagenet_utils.family_preprocess_input("tf", "InceptionV3")
decode_predictions = imagenet_utils.decode_predictions
