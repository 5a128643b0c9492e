"""``keras.applications.efficientnet``: EfficientNetB0 ... EfficientNetB7 (Tan and Le,
"EfficientNet: Rethinking Model Scaling for Convolutional Neural Networks", 2019):
MBConv blocks (expansion, depthwise convolution, squeeze-and-excitation, linear
projection) with swish, B1 ... B7 scaling B0's width, depth and input size, with
Keras's layer names (``stem_conv``, ``block1a_dwconv``, ``block2a_expand_conv``,
``block6d_se_excite``, ..., ``top_conv``, ``top_activation``, ``avg_pool``,
``predictions``).

As Keras's, the models take pixels in [0, 255] and preprocess them themselves: a
``Rescaling(1/255)`` layer, then a ``Normalization`` layer (its mean and variance are
weights, zeros and ones until loaded or adapted).  ``preprocess_input`` is kept for
compatibility and returns its input as it is."""

import math

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, classifier_or_pooling,
                                       finish, image_input, refuse_imagenet)
from pyggml.initializers import VarianceScaling
from pyggml.layers import (Activation, BatchNormalization, Conv2D, DepthwiseConv2D, Dropout, GlobalAveragePooling2D,
                           Normalization, Rescaling, Reshape, ZeroPadding2D, add, multiply)

__all__ = ["EfficientNetB0", "EfficientNetB1", "EfficientNetB2", "EfficientNetB3", "EfficientNetB4",
           "EfficientNetB5", "EfficientNetB6", "EfficientNetB7", "preprocess_input", "decode_predictions"]

# B0's stages: (kernel size, repeats, filters in, filters out, expansion, strides); squeeze ratio 0.25 each
_STAGES = ((3, 1, 32, 16, 1, 1), (3, 2, 16, 24, 6, 2), (5, 2, 24, 40, 6, 2), (3, 3, 40, 80, 6, 2),
           (5, 3, 80, 112, 6, 1), (5, 4, 112, 192, 6, 2), (3, 1, 192, 320, 6, 1))
_SE_RATIO = 0.25


def _conv_init():
    return VarianceScaling(scale=2.0, mode="fan_out", distribution="truncated_normal")


def _dense_init():
    return VarianceScaling(scale=1.0 / 3.0, mode="fan_out", distribution="uniform")


def _mbconv(inputs, activation, drop_rate, name, filters_in, filters_out, kernel_size, strides, expand_ratio):
    """One MBConv block; the identity shortcut (with drop-connect) where the shape allows it."""
    filters = filters_in * expand_ratio
    x = inputs
    if expand_ratio != 1:
        x = Conv2D(filters, 1, padding="same", use_bias=False, kernel_initializer=_conv_init(),
                   name=f"{name}expand_conv")(x)
        x = BatchNormalization(name=f"{name}expand_bn")(x)
        x = Activation(activation, name=f"{name}expand_activation")(x)
    if strides == 2:
        x = ZeroPadding2D(padding=imagenet_utils.correct_pad(x.shape, kernel_size), name=f"{name}dwconv_pad")(x)
    x = DepthwiseConv2D(kernel_size, strides=strides, padding="valid" if strides == 2 else "same", use_bias=False,
                        depthwise_initializer=_conv_init(), name=f"{name}dwconv")(x)
    x = Activation(activation, name=f"{name}activation")(BatchNormalization(name=f"{name}bn")(x))
    filters_se = max(1, int(filters_in * _SE_RATIO))
    se = GlobalAveragePooling2D(name=f"{name}se_squeeze")(x)
    se = Reshape((1, 1, filters), name=f"{name}se_reshape")(se)
    se = Conv2D(filters_se, 1, padding="same", activation=activation, kernel_initializer=_conv_init(),
                name=f"{name}se_reduce")(se)
    se = Conv2D(filters, 1, padding="same", activation="sigmoid", kernel_initializer=_conv_init(),
                name=f"{name}se_expand")(se)
    x = multiply([x, se], name=f"{name}se_excite")
    x = Conv2D(filters_out, 1, padding="same", use_bias=False, kernel_initializer=_conv_init(),
               name=f"{name}project_conv")(x)
    x = BatchNormalization(name=f"{name}project_bn")(x)
    if strides == 1 and filters_in == filters_out:
        if drop_rate > 0:
            x = Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=f"{name}drop")(x)
        x = add([x, inputs], name=f"{name}add")
    return x


def build_efficientnet(width_coefficient, depth_coefficient, default_size, dropout_rate, include_top, weights,
                       input_tensor, input_shape, pooling, classes, classifier_activation, name,
                       drop_connect_rate=0.2, depth_divisor=8, activation="swish"):
    """EfficientNet with B0's stages scaled: filters by ``width_coefficient`` (rounded to
    ``depth_divisor``), repeats by ``depth_coefficient`` (rounded up)."""
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape,
                                                        pooling, classes, classifier_activation,
                                                        default_size=default_size, min_size=32)
    refuse_imagenet(weights)

    def round_filters(filters):
        filters *= width_coefficient
        rounded = max(depth_divisor, int(filters + depth_divisor / 2) // depth_divisor * depth_divisor)
        return int(rounded + depth_divisor if rounded < 0.9 * filters else rounded)

    def round_repeats(repeats):
        return int(math.ceil(depth_coefficient * repeats))

    img_input = image_input(input_tensor, input_shape)
    x = Rescaling(1.0 / 255.0)(img_input)
    x = Normalization(axis=-1)(x)
    x = ZeroPadding2D(padding=imagenet_utils.correct_pad(x.shape, 3), name="stem_conv_pad")(x)
    x = Conv2D(round_filters(32), 3, strides=2, padding="valid", use_bias=False, kernel_initializer=_conv_init(),
               name="stem_conv")(x)
    x = Activation(activation, name="stem_activation")(BatchNormalization(name="stem_bn")(x))
    total = float(sum(round_repeats(stage[1]) for stage in _STAGES))
    b = 0
    for i, (kernel_size, repeats, filters_in, filters_out, expand_ratio, strides) in enumerate(_STAGES):
        filters_in, filters_out = round_filters(filters_in), round_filters(filters_out)
        for j in range(round_repeats(repeats)):
            if j > 0:                          # only a stage's first block strides and changes the width
                strides, filters_in = 1, filters_out
            x = _mbconv(x, activation, drop_connect_rate * b / total, f"block{i + 1}{chr(j + 97)}_", filters_in,
                        filters_out, kernel_size, strides, expand_ratio)
            b += 1
    x = Conv2D(round_filters(1280), 1, padding="same", use_bias=False, kernel_initializer=_conv_init(),
               name="top_conv")(x)
    x = Activation(activation, name="top_activation")(BatchNormalization(name="top_bn")(x))
    dropout = Dropout(dropout_rate, name="top_dropout") if dropout_rate > 0 else None
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, dropout=dropout,
                              kernel_initializer=_dense_init())
    return finish(input_tensor, img_input, x, name, weights)


def _constructor(variant, width, depth, size, dropout, params):
    def constructor(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                    classes=1000, classifier_activation="softmax", name=f"efficientnet{variant}"):
        return build_efficientnet(width, depth, size, dropout, include_top, weights, input_tensor, input_shape,
                                  pooling, classes, classifier_activation, name)
    constructor.__name__ = constructor.__qualname__ = f"EfficientNet{variant.upper()}"
    constructor.__doc__ = (f"EfficientNet{variant.upper()}: B0 with width x{width}, depth x{depth}, "
                           f"{size}x{size} inputs\n    and a dropout of {dropout} before the classifier ({params} "
                           f"parameters with the top).")
    add_arguments_doc((constructor,), arguments_doc(size, 32, top="global average pooling, dropout, then a Dense "
                                                                  "layer of ``classes`` units"))
    return constructor


EfficientNetB0 = _constructor("b0", 1.0, 1.0, 224, 0.2, "5.3M")
EfficientNetB1 = _constructor("b1", 1.0, 1.1, 240, 0.2, "7.9M")
EfficientNetB2 = _constructor("b2", 1.1, 1.2, 260, 0.3, "9.2M")
EfficientNetB3 = _constructor("b3", 1.2, 1.4, 300, 0.3, "12.3M")
EfficientNetB4 = _constructor("b4", 1.4, 1.8, 380, 0.4, "19.5M")
EfficientNetB5 = _constructor("b5", 1.6, 2.2, 456, 0.4, "30.6M")
EfficientNetB6 = _constructor("b6", 1.8, 2.6, 528, 0.5, "43.3M")
EfficientNetB7 = _constructor("b7", 2.0, 3.1, 600, 0.5, "66.7M")


def preprocess_input(x, data_format=None):
    """Returns ``x`` as it is: EfficientNet models rescale and normalize their inputs
    themselves (their first layers), so images go in with pixels in [0, 255].  Kept so
    that code written for the other families runs unchanged."""
    return x


decode_predictions = imagenet_utils.decode_predictions
