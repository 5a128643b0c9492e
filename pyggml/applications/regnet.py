"""``keras.applications.regnet`` (tf.keras 2.9+; Keras 3 dropped it): RegNetX002 ...
RegNetX320 and RegNetY002 ... RegNetY320 (Radosavovic et al., "Designing Network Design
Spaces", 2020): a strided 3x3 stem to 32 channels, then four stages of residual
bottleneck blocks whose 3x3 convolutions are grouped (``group_width`` channels per
group); the first block of a stage strides and projects its shortcut.  Y blocks add
squeeze-and-excitation after the grouped convolution.  The number in the name is the
model's cost in hundreds of millions of FLOPs (RegNetY064: 6.4 GFLOPs).

Keras's layer names, with the model's name as prefix (``regnetx002`` ...):
``{name}_prestem_rescaling``, ``{name}_stem_conv``, ``{name}_stem_bn``,
``{name}_stem_relu``, then for block ``j`` of stage ``i``
``{name}_Stage_{i}_XBlock_{j}_`` (``YBlock`` for Y models) followed by ``skip_1x1``,
``skip_bn``, ``conv_1x1_1``, ``conv_1x1_1_bn``, ``conv_1x1_1_relu``, ``conv_3x3``,
``conv_3x3_bn``, ``conv_3x3_relu``, ``squeeze_and_excite_gap``,
``squeeze_and_excite_squeeze``, ``squeeze_and_excite_excite``, ``conv_1x1_2``,
``conv_1x1_2_bn``, ``exit_relu``; the top ``{name}_head_gap`` and
``{name}head_dense`` (no "_", as in Keras).  The residual sums and the excitation
products are arithmetic on symbolic tensors, as in Keras.

As Keras's, the models take pixels in [0, 255]: with ``include_preprocessing`` a
``Rescaling(1/255)`` layer starts them.  ``preprocess_input`` returns its input
unchanged.  As in Keras, the model's name is the constructors' first argument."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, check_flag, finish,
                                       image_input, refuse_imagenet)
from pyggml.layers import (BatchNormalization, Conv2D, Dense, GlobalAveragePooling2D, GlobalMaxPooling2D, ReLU,
                           Rescaling)

# (depths, widths, group width) of each model; all take 224x224 inputs by default
_CONFIGS = {
    "x002": ((1, 1, 4, 7), (24, 56, 152, 368), 8), "x004": ((1, 2, 7, 12), (32, 64, 160, 384), 16),
    "x006": ((1, 3, 5, 7), (48, 96, 240, 528), 24), "x008": ((1, 3, 7, 5), (64, 128, 288, 672), 16),
    "x016": ((2, 4, 10, 2), (72, 168, 408, 912), 24), "x032": ((2, 6, 15, 2), (96, 192, 432, 1008), 48),
    "x040": ((2, 5, 14, 2), (80, 240, 560, 1360), 40), "x064": ((2, 4, 10, 1), (168, 392, 784, 1624), 56),
    "x080": ((2, 5, 15, 1), (80, 240, 720, 1920), 120), "x120": ((2, 5, 11, 1), (224, 448, 896, 2240), 112),
    "x160": ((2, 6, 13, 1), (256, 512, 896, 2048), 128), "x320": ((2, 7, 13, 1), (336, 672, 1344, 2520), 168),
    "y002": ((1, 1, 4, 7), (24, 56, 152, 368), 8), "y004": ((1, 3, 6, 6), (48, 104, 208, 440), 8),
    "y006": ((1, 3, 7, 4), (48, 112, 256, 608), 16), "y008": ((1, 3, 8, 2), (64, 128, 320, 768), 16),
    "y016": ((2, 6, 17, 2), (48, 120, 336, 888), 24), "y032": ((2, 5, 13, 1), (72, 216, 576, 1512), 24),
    "y040": ((2, 6, 12, 2), (128, 192, 512, 1088), 64), "y064": ((2, 7, 14, 2), (144, 288, 576, 1296), 72),
    "y080": ((2, 4, 10, 1), (168, 448, 896, 2016), 56), "y120": ((2, 5, 11, 1), (224, 448, 896, 2240), 112),
    "y160": ((2, 4, 11, 1), (224, 448, 1232, 3024), 112), "y320": ((2, 5, 12, 1), (232, 696, 1392, 3712), 232)}
__all__ = ["RegNetX002", "RegNetX004", "RegNetX006", "RegNetX008", "RegNetX016", "RegNetX032", "RegNetX040",
           "RegNetX064", "RegNetX080", "RegNetX120", "RegNetX160", "RegNetX320", "RegNetY002", "RegNetY004",
           "RegNetY006", "RegNetY008", "RegNetY016", "RegNetY032", "RegNetY040", "RegNetY064", "RegNetY080",
           "RegNetY120", "RegNetY160", "RegNetY320", "preprocess_input", "decode_predictions"]


def _bn(x, name):
    return BatchNormalization(momentum=0.9, epsilon=1e-5, name=name)(x)


def _conv(x, filters, kernel, name, **kwargs):
    return Conv2D(filters, kernel, use_bias=False, kernel_initializer="he_normal", name=name, **kwargs)(x)


def _block(inputs, block_type, filters_in, filters_out, group_width, stride, name, se_ratio=0.25):
    """An X block (1x1, grouped 3x3, 1x1, residual sum, ReLU) or a Y block (X with
    squeeze-and-excitation of ``int(filters_in * se_ratio)`` channels after the 3x3)."""
    if filters_in != filters_out and stride == 1:
        raise ValueError(f"RegNet: a block of stride 1 keeps its width, got {filters_in} channels in and "
                         f"{filters_out} out")
    if stride != 1:
        skip = _bn(_conv(inputs, filters_out, (1, 1), f"{name}_skip_1x1", strides=stride), f"{name}_skip_bn")
    else:
        skip = inputs
    x = _bn(_conv(inputs, filters_out, (1, 1), f"{name}_conv_1x1_1"), f"{name}_conv_1x1_1_bn")
    x = ReLU(name=f"{name}_conv_1x1_1_relu")(x)
    # fewer channels than a group: one group (tf.keras reads groups=0 as 1)
    x = _conv(x, filters_out, (3, 3), f"{name}_conv_3x3", strides=stride, groups=filters_out // group_width or 1,
              padding="same")
    x = ReLU(name=f"{name}_conv_3x3_relu")(_bn(x, f"{name}_conv_3x3_bn"))
    if block_type == "Y":
        se = GlobalAveragePooling2D(keepdims=True, name=f"{name}_squeeze_and_excite_gap")(x)
        se = Conv2D(int(filters_in * se_ratio), (1, 1), activation="relu", kernel_initializer="he_normal",
                    name=f"{name}_squeeze_and_excite_squeeze")(se)
        se = Conv2D(filters_out, (1, 1), activation="sigmoid", kernel_initializer="he_normal",
                    name=f"{name}_squeeze_and_excite_excite")(se)
        x = se * x
    x = _bn(_conv(x, filters_out, (1, 1), f"{name}_conv_1x1_2"), f"{name}_conv_1x1_2_bn")
    return ReLU(name=f"{name}_exit_relu")(x + skip)


def build_regnet(depths, widths, group_width, block_type, default_size, model_name, include_preprocessing,
                 include_top, weights, input_tensor, input_shape, pooling, classes, classifier_activation):
    """RegNet of ``block_type`` ("X" or "Y") with ``depths`` blocks of ``widths`` channels per stage."""
    if block_type not in ("X", "Y"):
        raise ValueError(f"RegNet: block_type must be 'X' or 'Y', got {block_type!r}")
    check_flag("include_preprocessing", include_preprocessing)
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape, pooling,
                                                        classes, classifier_activation, default_size, 32)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    x = img_input
    if include_preprocessing:
        x = Rescaling(scale=1.0 / 255.0, name=f"{model_name}_prestem_rescaling")(x)
    x = _conv(x, 32, (3, 3), f"{model_name}_stem_conv", strides=2, padding="same")
    x = ReLU(name=f"{model_name}_stem_relu")(_bn(x, f"{model_name}_stem_bn"))
    filters_in = 32
    for i, (depth, width) in enumerate(zip(depths, widths)):
        for j in range(depth):
            x = _block(x, block_type, filters_in if j == 0 else width, width, group_width, 2 if j == 0 else 1,
                       f"{model_name}_Stage_{i}_{block_type}Block_{j}")
        filters_in = width
    if include_top:
        x = GlobalAveragePooling2D(name=f"{model_name}_head_gap")(x)
        x = Dense(classes, activation=classifier_activation, name=f"{model_name}head_dense")(x)
    elif pooling == "avg":
        x = GlobalAveragePooling2D()(x)
    elif pooling == "max":
        x = GlobalMaxPooling2D()(x)
    return finish(input_tensor, img_input, x, model_name, weights)


def _constructor(variant):
    depths, widths, group_width = _CONFIGS[variant]
    block_type = variant[0].upper()

    def constructor(model_name=f"regnet{variant}", include_top=True, include_preprocessing=True,
                    weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
                    classifier_activation="softmax"):
        return build_regnet(depths, widths, group_width, block_type, 224, model_name, include_preprocessing,
                            include_top, weights, input_tensor, input_shape, pooling, classes,
                            classifier_activation)
    title = f"RegNet{variant.upper()}"
    constructor.__name__ = constructor.__qualname__ = title
    constructor.__doc__ = (f"{title}: {block_type} blocks, stages of {', '.join(map(str, depths))} blocks with "
                           f"{', '.join(map(str, widths))}\n    channels, {group_width} channels per group "
                           f"(about {int(variant[1:]) / 10:g} GFLOPs at 224x224).")
    add_arguments_doc((constructor,), arguments_doc(224, 32, extra="""
        model_name: the model's name, and its layers' prefix (Keras's first argument).
        include_preprocessing: whether a Rescaling layer maps pixels in [0, 255] to
            [0, 1] first.""").replace("        name: the model's name.\n", ""))
    return constructor


RegNetX002 = _constructor("x002")
RegNetX004 = _constructor("x004")
RegNetX006 = _constructor("x006")
RegNetX008 = _constructor("x008")
RegNetX016 = _constructor("x016")
RegNetX032 = _constructor("x032")
RegNetX040 = _constructor("x040")
RegNetX064 = _constructor("x064")
RegNetX080 = _constructor("x080")
RegNetX120 = _constructor("x120")
RegNetX160 = _constructor("x160")
RegNetX320 = _constructor("x320")
RegNetY002 = _constructor("y002")
RegNetY004 = _constructor("y004")
RegNetY006 = _constructor("y006")
RegNetY008 = _constructor("y008")
RegNetY016 = _constructor("y016")
RegNetY032 = _constructor("y032")
RegNetY040 = _constructor("y040")
RegNetY064 = _constructor("y064")
RegNetY080 = _constructor("y080")
RegNetY120 = _constructor("y120")
RegNetY160 = _constructor("y160")
RegNetY320 = _constructor("y320")


def preprocess_input(x, data_format=None):
    """Returns ``x`` as it is: RegNet models rescale their inputs themselves (their first
    layer, with ``include_preprocessing``), so images go in with pixels in [0, 255].
    Kept so that code written for the other families runs unchanged."""
    return x


decode_predictions = imagenet_utils.decode_predictions
