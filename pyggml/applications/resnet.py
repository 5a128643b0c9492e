"""``keras.applications.resnet``: ResNet50, ResNet101 and ResNet152 (He et al., "Deep
Residual Learning for Image Recognition", 2015), bottleneck residual blocks with
batch normalization after each convolution, with Keras's layer names
(``conv1_conv``, ``conv2_block1_out``, ..., ``conv5_block3_out``, ``avg_pool``,
``predictions``).

Their inputs are preprocessed with ``preprocess_input`` ("caffe": RGB to BGR, minus
ImageNet's mean pixel).  The residual blocks are shared with ``resnet_v2``."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, classifier_or_pooling, finish,
                                      image_input, refuse_imagenet)
from pyggml.layers import Activation, Add, BatchNormalization, Conv2D, MaxPooling2D, ZeroPadding2D

__all__ = ["ResNet50", "ResNet101", "ResNet152", "preprocess_input", "decode_predictions"]

_EPS = 1.001e-5


def _bn(x, name):
    return BatchNormalization(epsilon=_EPS, name=name)(x)


def residual_block_v1(x, filters, kernel_size=3, stride=1, conv_shortcut=True, name=None):
    """A bottleneck block (1x1, kxk, 1x1 convolutions, each batch-normalized) whose sum with
    the shortcut goes through a ReLU: ResNet's original ("post-activation") form."""
    if conv_shortcut:
        shortcut = Conv2D(4 * filters, 1, strides=stride, name=f"{name}_0_conv")(x)
        shortcut = _bn(shortcut, f"{name}_0_bn")
    else:
        shortcut = x
    x = Conv2D(filters, 1, strides=stride, name=f"{name}_1_conv")(x)
    x = Activation("relu", name=f"{name}_1_relu")(_bn(x, f"{name}_1_bn"))
    x = Conv2D(filters, kernel_size, padding="same", name=f"{name}_2_conv")(x)
    x = Activation("relu", name=f"{name}_2_relu")(_bn(x, f"{name}_2_bn"))
    x = Conv2D(4 * filters, 1, name=f"{name}_3_conv")(x)
    x = _bn(x, f"{name}_3_bn")
    x = Add(name=f"{name}_add")([shortcut, x])
    return Activation("relu", name=f"{name}_out")(x)


def stack_residual_blocks_v1(x, filters, blocks, stride1=2, name=None):
    """``blocks`` v1 blocks; the first one strides by ``stride1`` and projects its shortcut."""
    x = residual_block_v1(x, filters, stride=stride1, name=f"{name}_block1")
    for i in range(2, blocks + 1):
        x = residual_block_v1(x, filters, conv_shortcut=False, name=f"{name}_block{i}")
    return x


def residual_block_v2(x, filters, kernel_size=3, stride=1, conv_shortcut=False, name=None):
    """A bottleneck block in the "pre-activation" form of ResNetV2 (He et al., 2016):
    batch normalization and ReLU before the convolutions, a plain sum at the end."""
    preact = BatchNormalization(epsilon=_EPS, name=f"{name}_preact_bn")(x)
    preact = Activation("relu", name=f"{name}_preact_relu")(preact)
    if conv_shortcut:
        shortcut = Conv2D(4 * filters, 1, strides=stride, name=f"{name}_0_conv")(preact)
    else:
        shortcut = MaxPooling2D(1, strides=stride)(x) if stride > 1 else x
    x = Conv2D(filters, 1, strides=1, use_bias=False, name=f"{name}_1_conv")(preact)
    x = Activation("relu", name=f"{name}_1_relu")(_bn(x, f"{name}_1_bn"))
    x = ZeroPadding2D(padding=((1, 1), (1, 1)), name=f"{name}_2_pad")(x)
    x = Conv2D(filters, kernel_size, strides=stride, use_bias=False, name=f"{name}_2_conv")(x)
    x = Activation("relu", name=f"{name}_2_relu")(_bn(x, f"{name}_2_bn"))
    x = Conv2D(4 * filters, 1, name=f"{name}_3_conv")(x)
    return Add(name=f"{name}_out")([shortcut, x])


def stack_residual_blocks_v2(x, filters, blocks, stride1=2, name=None):
    """``blocks`` v2 blocks; the first projects its shortcut, the last strides by ``stride1``."""
    x = residual_block_v2(x, filters, conv_shortcut=True, name=f"{name}_block1")
    for i in range(2, blocks):
        x = residual_block_v2(x, filters, name=f"{name}_block{i}")
    return residual_block_v2(x, filters, stride=stride1, name=f"{name}_block{blocks}")


def build_resnet(stack_fn, preact, use_bias, include_top=True, weights="imagenet", input_tensor=None,
                 input_shape=None, pooling=None, classes=1000, classifier_activation="softmax", name="resnet"):
    """The ResNet frame around ``stack_fn`` (the residual stages): the 7x7 stem and max
    pooling below, the classifier or pooling on top; ``preact`` for the V2 form."""
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape,
                                                        pooling, classes, classifier_activation,
                                                        default_size=224, min_size=32)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    x = ZeroPadding2D(padding=((3, 3), (3, 3)), name="conv1_pad")(img_input)
    x = Conv2D(64, 7, strides=2, use_bias=use_bias, name="conv1_conv")(x)
    if not preact:
        x = Activation("relu", name="conv1_relu")(_bn(x, "conv1_bn"))
    x = ZeroPadding2D(padding=((1, 1), (1, 1)), name="pool1_pad")(x)
    x = MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    x = stack_fn(x)
    if preact:
        x = Activation("relu", name="post_relu")(_bn(x, "post_bn"))
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation)
    return finish(input_tensor, img_input, x, name, weights)


def _v1_stages(blocks):
    def stack_fn(x):
        x = stack_residual_blocks_v1(x, 64, blocks[0], stride1=1, name="conv2")
        x = stack_residual_blocks_v1(x, 128, blocks[1], name="conv3")
        x = stack_residual_blocks_v1(x, 256, blocks[2], name="conv4")
        return stack_residual_blocks_v1(x, 512, blocks[3], name="conv5")
    return stack_fn


def ResNet50(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
             classifier_activation="softmax", name="resnet50"):
    """ResNet50: stages of 3, 4, 6 and 3 bottleneck blocks (25.6M parameters with the top)."""
    return build_resnet(_v1_stages((3, 4, 6, 3)), False, True, include_top, weights, input_tensor, input_shape,
                        pooling, classes, classifier_activation, name)


def ResNet101(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
              classifier_activation="softmax", name="resnet101"):
    """ResNet101: stages of 3, 4, 23 and 3 bottleneck blocks (44.7M parameters with the top)."""
    return build_resnet(_v1_stages((3, 4, 23, 3)), False, True, include_top, weights, input_tensor, input_shape,
                        pooling, classes, classifier_activation, name)


def ResNet152(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
              classifier_activation="softmax", name="resnet152"):
    """ResNet152: stages of 3, 8, 36 and 3 bottleneck blocks (60.4M parameters with the top)."""
    return build_resnet(_v1_stages((3, 8, 36, 3)), False, True, include_top, weights, input_tensor, input_shape,
                        pooling, classes, classifier_activation, name)


add_arguments_doc((ResNet50, ResNet101, ResNet152), arguments_doc(224, 32))


preprocess_input = imagenet_utils.family_preprocess_input("caffe", "ResNet")
decode_predictions = imagenet_utils.decode_predictions
