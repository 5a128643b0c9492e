"""``keras.applications.xception``: Xception (Chollet, "Xception: Deep Learning with
Depthwise Separable Convolutions", 2017): an entry flow of strided separable
convolution blocks with 1x1 convolution shortcuts, eight middle-flow blocks of three
separable convolutions with identity shortcuts, and an exit flow, with Keras's layer
names (``block1_conv1``, ``block2_sepconv1``, ..., ``block13_pool``,
``block14_sepconv2_act``, ``avg_pool``, ``predictions``).

Its inputs (299x299 by default) are preprocessed with ``preprocess_input`` ("tf":
pixels to [-1, 1])."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, classifier_or_pooling,
                                       finish, image_input, refuse_imagenet)
from pyggml.layers import Activation, BatchNormalization, Conv2D, MaxPooling2D, SeparableConv2D, add

__all__ = ["Xception", "preprocess_input", "decode_predictions"]


def _sepconv_bn(x, filters, name):
    x = SeparableConv2D(filters, (3, 3), padding="same", use_bias=False, name=name)(x)
    return BatchNormalization(name=f"{name}_bn")(x)


def _shortcut(x, filters):
    """The strided 1x1 convolution shortcut of a downsampling block (unnamed in Keras too)."""
    return BatchNormalization()(Conv2D(filters, (1, 1), strides=(2, 2), padding="same", use_bias=False)(x))


def _downsampling_block(x, block, filters, first_relu=True):
    """Two separable convolutions and a strided max pooling, plus the 1x1 convolution shortcut."""
    residual = _shortcut(x, filters[1])
    if first_relu:
        x = Activation("relu", name=f"block{block}_sepconv1_act")(x)
    x = _sepconv_bn(x, filters[0], f"block{block}_sepconv1")
    x = Activation("relu", name=f"block{block}_sepconv2_act")(x)
    x = _sepconv_bn(x, filters[1], f"block{block}_sepconv2")
    x = MaxPooling2D((3, 3), strides=(2, 2), padding="same", name=f"block{block}_pool")(x)
    return add([x, residual])


def Xception(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
             classifier_activation="softmax", name="xception"):
    """Xception: 36 convolutions, most of them depthwise separable, in 14 blocks (22.9M
    parameters with the top).  Inputs of at least 71x71."""
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape,
                                                        pooling, classes, classifier_activation,
                                                        default_size=299, min_size=71)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    x = Conv2D(32, (3, 3), strides=(2, 2), use_bias=False, name="block1_conv1")(img_input)
    x = Activation("relu", name="block1_conv1_act")(BatchNormalization(name="block1_conv1_bn")(x))
    x = Conv2D(64, (3, 3), use_bias=False, name="block1_conv2")(x)
    x = Activation("relu", name="block1_conv2_act")(BatchNormalization(name="block1_conv2_bn")(x))
    # entry flow: block 2 follows block 1's ReLU, so it starts with no ReLU of its own
    x = _downsampling_block(x, 2, (128, 128), first_relu=False)
    x = _downsampling_block(x, 3, (256, 256))
    x = _downsampling_block(x, 4, (728, 728))
    for block in range(5, 13):                                  # middle flow
        residual = x
        for k in (1, 2, 3):
            x = Activation("relu", name=f"block{block}_sepconv{k}_act")(x)
            x = _sepconv_bn(x, 728, f"block{block}_sepconv{k}")
        x = add([x, residual])
    x = _downsampling_block(x, 13, (728, 1024))                 # exit flow
    x = _sepconv_bn(x, 1536, "block14_sepconv1")
    x = Activation("relu", name="block14_sepconv1_act")(x)
    x = _sepconv_bn(x, 2048, "block14_sepconv2")
    x = Activation("relu", name="block14_sepconv2_act")(x)
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, pool_names=(None, None))
    return finish(input_tensor, img_input, x, name, weights)


add_arguments_doc((Xception,), arguments_doc(299, 71))


preprocess_input = imagenet_utils.family_preprocess_input("tf", "Xception")
decode_predictions = imagenet_utils.decode_predictions
