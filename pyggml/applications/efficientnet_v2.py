"""``keras.applications.efficientnet_v2``: EfficientNetV2B0 ... B3, S, M and L (Tan and
Le, "EfficientNetV2: Smaller Models and Faster Training", 2021): early stages of fused
MBConv blocks (one full convolution in place of the expansion and the depthwise
convolution), later stages of MBConv blocks with squeeze-and-excitation, swish
throughout; B1 ... B3 scale B0's width and depth, S, M and L have their own stages.

Keras's layer names: ``stem_conv``, ``stem_bn``, ``stem_activation``; for each block
(``block1a_``, ``block2b_``, ...) ``expand_conv``, ``expand_bn``,
``expand_activation``, ``dwconv2``, ``bn``, ``activation``, ``se_squeeze``,
``se_reshape``, ``se_reduce``, ``se_expand``, ``se_excite``, ``project_conv``,
``project_bn``, ``project_activation`` (fused blocks without expansion), ``drop``,
``add``; then ``top_conv``, ``top_bn``, ``top_activation``, ``avg_pool``,
``top_dropout``, ``predictions`` (``avg_pool`` or ``max_pool`` without the top).  The
default model names are Keras's (``efficientnetv2-b0`` ... ``efficientnetv2-l``).

As Keras's, the models take pixels in [0, 255]: with ``include_preprocessing`` the B
models start with ``Rescaling(1/255)`` and a ``Normalization`` layer with ImageNet's
mean and variance (for 3-channel inputs), S, M and L with ``Rescaling(1/128, -1)``.
``preprocess_input`` returns its input unchanged."""

import math

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, check_flag,
                                       classifier_or_pooling, finish, image_input, refuse_imagenet)
from pyggml.initializers import Constant, VarianceScaling
from pyggml.layers import (Activation, BatchNormalization, Conv2D, DepthwiseConv2D, Dropout, GlobalAveragePooling2D,
                           Normalization, Rescaling, Reshape, add, multiply)

__all__ = ["EfficientNetV2B0", "EfficientNetV2B1", "EfficientNetV2B2", "EfficientNetV2B3", "EfficientNetV2S",
           "EfficientNetV2M", "EfficientNetV2L", "preprocess_input", "decode_predictions"]

# stages: (kernel, repeats, filters in, filters out, expansion, squeeze-excite ratio, strides, fused)
_B = ((3, 1, 32, 16, 1, 0, 1, True), (3, 2, 16, 32, 4, 0, 2, True), (3, 2, 32, 48, 4, 0, 2, True),
      (3, 3, 48, 96, 4, 0.25, 2, False), (3, 5, 96, 112, 6, 0.25, 1, False), (3, 8, 112, 192, 6, 0.25, 2, False))
_STAGES = {
    "s": ((3, 2, 24, 24, 1, 0, 1, True), (3, 4, 24, 48, 4, 0, 2, True), (3, 4, 48, 64, 4, 0, 2, True),
          (3, 6, 64, 128, 4, 0.25, 2, False), (3, 9, 128, 160, 6, 0.25, 1, False),
          (3, 15, 160, 256, 6, 0.25, 2, False)),
    "m": ((3, 3, 24, 24, 1, 0, 1, True), (3, 5, 24, 48, 4, 0, 2, True), (3, 5, 48, 80, 4, 0, 2, True),
          (3, 7, 80, 160, 4, 0.25, 2, False), (3, 14, 160, 176, 6, 0.25, 1, False),
          (3, 18, 176, 304, 6, 0.25, 2, False), (3, 5, 304, 512, 6, 0.25, 1, False)),
    "l": ((3, 4, 32, 32, 1, 0, 1, True), (3, 7, 32, 64, 4, 0, 2, True), (3, 7, 64, 96, 4, 0, 2, True),
          (3, 10, 96, 192, 4, 0.25, 2, False), (3, 19, 192, 224, 6, 0.25, 1, False),
          (3, 25, 224, 384, 6, 0.25, 2, False), (3, 7, 384, 640, 6, 0.25, 1, False)),
    "b0": _B, "b1": _B, "b2": _B, "b3": _B}
_MOMENTUM = 0.9


def _conv_init():
    return VarianceScaling(scale=2.0, mode="fan_out", distribution="truncated_normal")


def _bn(x, name):
    return BatchNormalization(momentum=_MOMENTUM, name=name)(x)


def _conv(x, filters, kernel, name, strides=1, **kwargs):
    return Conv2D(filters, kernel, strides=strides, padding="same", use_bias=False, kernel_initializer=_conv_init(),
                  name=name, **kwargs)(x)


def _squeeze_excite(x, filters, filters_in, se_ratio, activation, name):
    se = GlobalAveragePooling2D(name=f"{name}se_squeeze")(x)
    se = Reshape((1, 1, filters), name=f"{name}se_reshape")(se)
    se = Conv2D(max(1, int(filters_in * se_ratio)), 1, padding="same", activation=activation,
                kernel_initializer=_conv_init(), name=f"{name}se_reduce")(se)
    se = Conv2D(filters, 1, padding="same", activation="sigmoid", kernel_initializer=_conv_init(),
                name=f"{name}se_expand")(se)
    return multiply([x, se], name=f"{name}se_excite")


def _block(inputs, fused, filters_in, filters_out, expand_ratio, kernel_size, strides, se_ratio, activation,
           drop_rate, name):
    """An MBConv block (expansion, depthwise convolution, squeeze-excite, projection) or a
    fused one (a full convolution that expands, squeeze-excite, projection); the identity
    shortcut with per-sample dropout where the shape allows it."""
    filters = filters_in * expand_ratio
    x = inputs
    if expand_ratio != 1:
        x = _conv(x, filters, kernel_size if fused else 1, f"{name}expand_conv", strides if fused else 1)
        x = Activation(activation, name=f"{name}expand_activation")(_bn(x, f"{name}expand_bn"))
    if not fused:
        x = DepthwiseConv2D(kernel_size, strides=strides, padding="same", use_bias=False,
                            depthwise_initializer=_conv_init(), name=f"{name}dwconv2")(x)
        x = Activation(activation, name=f"{name}activation")(_bn(x, f"{name}bn"))
    if 0 < se_ratio <= 1:
        x = _squeeze_excite(x, filters, filters_in, se_ratio, activation, name)
    # a fused block without expansion does all its work in the projection (kernel_size, strided)
    whole = fused and expand_ratio == 1
    x = _conv(x, filters_out, kernel_size if whole else 1, f"{name}project_conv", strides if whole else 1)
    x = _bn(x, f"{name}project_bn")
    if whole:
        x = Activation(activation, name=f"{name}project_activation")(x)
    if strides == 1 and filters_in == filters_out:
        if drop_rate:
            x = Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=f"{name}drop")(x)
        x = add([x, inputs], name=f"{name}add")
    return x


def build_efficientnet_v2(variant, width_coefficient, depth_coefficient, default_size, include_top, weights,
                          input_tensor, input_shape, pooling, classes, classifier_activation, include_preprocessing,
                          name, dropout_rate=0.2, drop_connect_rate=0.2, depth_divisor=8, min_depth=8,
                          activation="swish"):
    """EfficientNetV2 of ``variant``'s stages, widths scaled by ``width_coefficient`` (rounded to
    ``depth_divisor``), repeats by ``depth_coefficient`` (rounded up)."""
    check_flag("include_preprocessing", include_preprocessing)
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape, pooling,
                                                        classes, classifier_activation, default_size, 32)
    refuse_imagenet(weights)

    def round_filters(filters):
        filters *= width_coefficient
        return int(max(min_depth or depth_divisor, int(filters + depth_divisor / 2) // depth_divisor * depth_divisor))

    stages = _STAGES[variant]
    img_input = image_input(input_tensor, input_shape)
    x = img_input
    if include_preprocessing:
        if variant.startswith("b") and input_shape[-1] == 3:
            x = Rescaling(scale=1.0 / 255)(x)
            x = Normalization(mean=[0.485, 0.456, 0.406], variance=[0.229 ** 2, 0.224 ** 2, 0.225 ** 2], axis=-1)(x)
        else:
            x = Rescaling(scale=1.0 / 128.0, offset=-1)(x)
    x = _conv(x, round_filters(stages[0][2]), 3, "stem_conv", strides=2)
    x = Activation(activation, name="stem_activation")(_bn(x, "stem_bn"))
    repeats = [int(math.ceil(depth_coefficient * stage[1])) for stage in stages]
    # the drop rates follow Keras: the unscaled repeats count the blocks
    total = float(sum(stage[1] for stage in stages))
    b = 0
    for i, ((kernel, _, f_in, f_out, expand, se, strides, fused), n) in enumerate(zip(stages, repeats)):
        f_in, f_out = round_filters(f_in), round_filters(f_out)
        for j in range(n):
            if j > 0:                          # only a stage's first block strides and changes the width
                strides, f_in = 1, f_out
            x = _block(x, fused, f_in, f_out, expand, kernel, strides, se, activation, drop_connect_rate * b / total,
                       f"block{i + 1}{chr(j + 97)}_")
            b += 1
    x = _conv(x, round_filters(1280), 1, "top_conv")
    x = Activation(activation, name="top_activation")(_bn(x, "top_bn"))
    dropout = Dropout(dropout_rate, name="top_dropout") if dropout_rate > 0 else None
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, dropout=dropout,
                              kernel_initializer=VarianceScaling(scale=1.0 / 3.0, mode="fan_out",
                                                                 distribution="uniform"),
                              bias_initializer=Constant(0.0))
    return finish(input_tensor, img_input, x, name, weights)


def _constructor(variant, width, depth, size, params):
    def constructor(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                    classes=1000, classifier_activation="softmax", include_preprocessing=True,
                    name=f"efficientnetv2-{variant}"):
        return build_efficientnet_v2(variant, width, depth, size, include_top, weights, input_tensor, input_shape,
                                     pooling, classes, classifier_activation, include_preprocessing, name)
    title = f"EfficientNetV2{variant.upper()}"
    constructor.__name__ = constructor.__qualname__ = title
    stages = "B0's stages" if variant.startswith("b") else "its own stages"
    constructor.__doc__ = (f"{title}: {stages} with width x{width}, depth x{depth}, {size}x{size} inputs\n"
                           f"    ({params} parameters with the top).")
    add_arguments_doc((constructor,), arguments_doc(size, 32, top="global average pooling, dropout, then a Dense "
                                                                  "layer of ``classes`` units", extra="""
        include_preprocessing: whether the model rescales (and for the B models
            normalizes) its inputs itself, taking pixels in [0, 255]."""))
    return constructor


EfficientNetV2B0 = _constructor("b0", 1.0, 1.0, 224, "7.2M")
EfficientNetV2B1 = _constructor("b1", 1.0, 1.1, 240, "8.2M")
EfficientNetV2B2 = _constructor("b2", 1.1, 1.2, 260, "10.2M")
EfficientNetV2B3 = _constructor("b3", 1.2, 1.4, 300, "14.5M")
EfficientNetV2S = _constructor("s", 1.0, 1.0, 384, "21.6M")
EfficientNetV2M = _constructor("m", 1.0, 1.0, 480, "54.4M")
EfficientNetV2L = _constructor("l", 1.0, 1.0, 480, "119.0M")


def preprocess_input(x, data_format=None):
    """Returns ``x`` as it is: EfficientNetV2 models rescale their inputs themselves (their
    first layers, with ``include_preprocessing``), so images go in with pixels in
    [0, 255].  Kept so that code written for the other families runs unchanged."""
    return x


decode_predictions = imagenet_utils.decode_predictions
