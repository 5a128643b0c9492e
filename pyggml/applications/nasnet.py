"""``keras.applications.nasnet``: NASNetMobile and NASNetLarge (Zoph et al., "Learning
Transferable Architectures for Scalable Image Recognition", 2018): the NASNet-A cells
found by architecture search.  Each cell takes the two previous cells' outputs (``x``
and ``p``, the latter adjusted to ``x``'s size and width), and sums pairs of
operations (separable convolutions applied twice, poolings, identities) into branches
it concatenates: a strided 3x3 stem, two reduction cells, then three stacks of
``num_blocks`` normal cells separated by reduction cells, a ReLU and the top.

Keras's layer names: ``stem_conv1``, ``stem_bn1``; a reduction cell ``reduce_{n}`` (or
``stem_1``, ``stem_2``): ``reduction_conv_1_{id}``, ``reduction_bn_1_{id}``,
``reduction_pad_1_{id}``, ``reduction_add_1_{id}``, ``reduction_add_2_{id}``,
``reduction_add3_{id}``, ``reduction_add4_{id}``, ``reduction_concat_{id}``; a normal
cell ``{n}``: ``normal_conv_1_{n}``, ``normal_bn_1_{n}``, ``normal_add_{1..5}_{n}``,
``normal_concat_{n}``; the separable blocks ``separable_conv_{1,2}_{op}_{id}`` and
``separable_conv_{1,2}_bn_{op}_{id}``; the adjustments ``adjust_conv_1_{id}``,
``adjust_conv_2_{id}``, ``adjust_conv_projection_{id}``, ``adjust_bn_{id}``; the
activations and a few sums and concatenations are unnamed, as in Keras.  The model is
named ``NASNet``, as in Keras.

Its inputs (224x224 for NASNetMobile, 331x331 for NASNetLarge, at least 32x32) are
preprocessed with ``preprocess_input`` ("tf": pixels to [-1, 1])."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, classifier_or_pooling,
                                       finish, image_input, refuse_imagenet)
from pyggml.layers import (Activation, AveragePooling2D, BatchNormalization, Conv2D, Cropping2D, MaxPooling2D,
                           SeparableConv2D, ZeroPadding2D, add, concatenate)

__all__ = ["NASNetMobile", "NASNetLarge", "preprocess_input", "decode_predictions"]


def _bn(x, name):
    return BatchNormalization(momentum=0.9997, epsilon=1e-3, name=name)(x)


def _conv1x1(x, filters, name):
    return Conv2D(filters, (1, 1), padding="same", use_bias=False, kernel_initializer="he_normal", name=name)(x)


def _separable_block(x, filters, kernel_size=(3, 3), strides=(1, 1), block_id=None):
    """Twice ReLU, separable convolution, batch normalization (the first one strided)."""
    x = Activation("relu")(x)
    if strides == (2, 2):
        x = ZeroPadding2D(padding=imagenet_utils.correct_pad(x.shape, kernel_size),
                          name=f"separable_conv_1_pad_{block_id}")(x)
    x = SeparableConv2D(filters, kernel_size, strides=strides, padding="valid" if strides == (2, 2) else "same",
                        use_bias=False, name=f"separable_conv_1_{block_id}")(x)
    x = _bn(x, f"separable_conv_1_bn_{block_id}")
    x = Activation("relu")(x)
    x = SeparableConv2D(filters, kernel_size, padding="same", use_bias=False, name=f"separable_conv_2_{block_id}")(x)
    return _bn(x, f"separable_conv_2_bn_{block_id}")


def _adjust(p, ip, filters, block_id):
    """The previous cell's output ``p`` brought to ``ip``'s size (a factorized reduction: two
    offset strided 1x1 paths) or to ``filters`` channels (a 1x1 projection)."""
    if p is None:
        return ip
    if p.shape[-2] != ip.shape[-2]:
        p = Activation("relu", name=f"adjust_relu_1_{block_id}")(p)
        p1 = AveragePooling2D((1, 1), strides=(2, 2), padding="valid", name=f"adjust_avg_pool_1_{block_id}")(p)
        p1 = _conv1x1(p1, filters // 2, f"adjust_conv_1_{block_id}")
        p2 = Cropping2D(cropping=((1, 0), (1, 0)))(ZeroPadding2D(padding=((0, 1), (0, 1)))(p))
        p2 = AveragePooling2D((1, 1), strides=(2, 2), padding="valid", name=f"adjust_avg_pool_2_{block_id}")(p2)
        p2 = _conv1x1(p2, filters // 2, f"adjust_conv_2_{block_id}")
        return _bn(concatenate([p1, p2], axis=-1), f"adjust_bn_{block_id}")
    if p.shape[-1] != filters:
        p = _conv1x1(Activation("relu")(p), filters, f"adjust_conv_projection_{block_id}")
        return _bn(p, f"adjust_bn_{block_id}")
    return p


def _normal_cell(ip, p, filters, block_id):
    p = _adjust(p, ip, filters, block_id)
    h = _bn(Conv2D(filters, (1, 1), padding="same", use_bias=False, kernel_initializer="he_normal",
                   name=f"normal_conv_1_{block_id}")(Activation("relu")(ip)), f"normal_bn_1_{block_id}")
    x1 = add([_separable_block(h, filters, (5, 5), block_id=f"normal_left1_{block_id}"),
              _separable_block(p, filters, block_id=f"normal_right1_{block_id}")], name=f"normal_add_1_{block_id}")
    x2 = add([_separable_block(p, filters, (5, 5), block_id=f"normal_left2_{block_id}"),
              _separable_block(p, filters, (3, 3), block_id=f"normal_right2_{block_id}")],
             name=f"normal_add_2_{block_id}")
    x3 = AveragePooling2D((3, 3), strides=(1, 1), padding="same", name=f"normal_left3_{block_id}")(h)
    x3 = add([x3, p], name=f"normal_add_3_{block_id}")
    x4 = add([AveragePooling2D((3, 3), strides=(1, 1), padding="same", name=f"normal_left4_{block_id}")(p),
              AveragePooling2D((3, 3), strides=(1, 1), padding="same", name=f"normal_right4_{block_id}")(p)],
             name=f"normal_add_4_{block_id}")
    x5 = add([_separable_block(h, filters, block_id=f"normal_left5_{block_id}"), h], name=f"normal_add_5_{block_id}")
    return concatenate([p, x1, x2, x3, x4, x5], axis=-1, name=f"normal_concat_{block_id}"), ip


def _reduction_cell(ip, p, filters, block_id):
    p = _adjust(p, ip, filters, block_id)
    h = _bn(Conv2D(filters, (1, 1), padding="same", use_bias=False, kernel_initializer="he_normal",
                   name=f"reduction_conv_1_{block_id}")(Activation("relu")(ip)), f"reduction_bn_1_{block_id}")
    h3 = ZeroPadding2D(padding=imagenet_utils.correct_pad(h.shape, 3), name=f"reduction_pad_1_{block_id}")(h)
    s2 = (2, 2)
    x1 = add([_separable_block(h, filters, (5, 5), strides=s2, block_id=f"reduction_left1_{block_id}"),
              _separable_block(p, filters, (7, 7), strides=s2, block_id=f"reduction_right1_{block_id}")],
             name=f"reduction_add_1_{block_id}")
    x2 = add([MaxPooling2D((3, 3), strides=s2, padding="valid", name=f"reduction_left2_{block_id}")(h3),
              _separable_block(p, filters, (7, 7), strides=s2, block_id=f"reduction_right2_{block_id}")],
             name=f"reduction_add_2_{block_id}")
    x3 = add([AveragePooling2D((3, 3), strides=s2, padding="valid", name=f"reduction_left3_{block_id}")(h3),
              _separable_block(p, filters, (5, 5), strides=s2, block_id=f"reduction_right3_{block_id}")],
             name=f"reduction_add3_{block_id}")
    x4 = add([x2, AveragePooling2D((3, 3), strides=(1, 1), padding="same", name=f"reduction_left4_{block_id}")(x1)])
    x5 = add([_separable_block(x1, filters, (3, 3), block_id=f"reduction_left4_{block_id}"),
              MaxPooling2D((3, 3), strides=s2, padding="valid", name=f"reduction_right5_{block_id}")(h3)],
             name=f"reduction_add4_{block_id}")
    return concatenate([x2, x3, x4, x5], axis=-1, name=f"reduction_concat_{block_id}"), ip


def build_nasnet(input_shape, penultimate_filters, num_blocks, stem_block_filters, skip_reduction,
                 filter_multiplier, include_top, weights, input_tensor, pooling, classes, default_size,
                 classifier_activation, name="NASNet"):
    """NASNet-A with ``penultimate_filters`` channels per cell branch (/24) in the last stack,
    ``num_blocks`` normal cells per stack; ``skip_reduction``: the cell after a reduction takes
    the cell before it as its ``p``, not the reduction's input."""
    if isinstance(input_shape, tuple) and None in input_shape and weights == "imagenet":
        raise ValueError(f"NASNet: with weights='imagenet' the input shape must be static (no None), got "
                         f"input_shape={input_shape}")
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape, pooling,
                                                        classes, classifier_activation, default_size, 32)
    if penultimate_filters % (24 * filter_multiplier ** 2):
        raise ValueError(f"NASNet: penultimate_filters must be a multiple of 24 * filter_multiplier ** 2, got "
                         f"{penultimate_filters}")
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    filters = penultimate_filters // 24
    x = Conv2D(stem_block_filters, (3, 3), strides=(2, 2), padding="valid", use_bias=False,
               kernel_initializer="he_normal", name="stem_conv1")(img_input)
    x = _bn(x, "stem_bn1")
    x, p = _reduction_cell(x, None, filters // filter_multiplier ** 2, "stem_1")
    x, p = _reduction_cell(x, p, filters // filter_multiplier, "stem_2")
    for stack in range(3):
        width = filters * filter_multiplier ** stack
        if stack:
            x, p0 = _reduction_cell(x, p, width, f"reduce_{stack * num_blocks}")
            p = p if skip_reduction else p0
        for i in range(num_blocks):
            x, p = _normal_cell(x, p, width, str(stack * num_blocks + i + (1 if stack else 0)))
    x = Activation("relu")(x)
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, top_pool_name=None,
                              pool_names=(None, None))
    return finish(input_tensor, img_input, x, name, weights)


def NASNetMobile(input_shape=None, include_top=True, weights="imagenet", input_tensor=None, pooling=None,
                 classes=1000, classifier_activation="softmax", name="NASNet"):
    """NASNetMobile (NASNet-A 4 @ 1056): three stacks of 4 normal cells, 224x224 inputs
    (5.3M parameters with the top).  As in Keras, without the top and without
    ``input_shape`` the input is 224x224 too."""
    if not include_top and input_shape is None:
        input_shape = (224, 224, 3)
    return build_nasnet(input_shape, 1056, 4, 32, False, 2, include_top, weights, input_tensor, pooling, classes,
                        224, classifier_activation, name)


def NASNetLarge(input_shape=None, include_top=True, weights="imagenet", input_tensor=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="NASNet"):
    """NASNetLarge (NASNet-A 6 @ 4032): three stacks of 6 normal cells, 331x331 inputs
    (88.9M parameters with the top)."""
    return build_nasnet(input_shape, 4032, 6, 96, True, 2, include_top, weights, input_tensor, pooling, classes,
                        331, classifier_activation, name)


add_arguments_doc((NASNetMobile,), arguments_doc(224, 32).replace("(None, None, 3) without", "(224, 224, 3) "
                                                                   "without too"))
add_arguments_doc((NASNetLarge,), arguments_doc(331, 32))


preprocess_input = imagenet_utils.family_preprocess_input("tf", "NASNet")
decode_predictions = imagenet_utils.decode_predictions
