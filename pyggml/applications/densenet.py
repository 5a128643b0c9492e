"""``keras.applications.densenet``: DenseNet121, DenseNet169 and DenseNet201 (Huang et
al., "Densely Connected Convolutional Networks", 2017): dense blocks, each layer
adding 32 channels to the concatenation of all before it, and transition layers that
halve the channels and the resolution, with Keras's layer names (``conv1_conv``,
``pool1``, ``conv2_block1_concat``, ..., ``pool4_pool``, ``conv5_block16_concat``,
``bn``, ``relu``, ``avg_pool``, ``predictions``).

Their inputs are preprocessed with ``preprocess_input`` ("torch": pixels to [0, 1],
then ImageNet's per-channel mean and standard deviation)."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, classifier_or_pooling,
                                       finish, image_input, refuse_imagenet)
from pyggml.layers import (Activation, AveragePooling2D, BatchNormalization, Concatenate, Conv2D, MaxPooling2D,
                           ZeroPadding2D)

__all__ = ["DenseNet121", "DenseNet169", "DenseNet201", "preprocess_input", "decode_predictions"]

_EPS = 1.001e-5
_GROWTH_RATE = 32


def _bn_relu(x, name):
    return Activation("relu", name=f"{name}_relu")(BatchNormalization(epsilon=_EPS, name=f"{name}_bn")(x))


def dense_block(x, blocks, name):
    """``blocks`` layers, each concatenating 32 new channels (1x1 then 3x3 convolution) to ``x``."""
    for i in range(1, blocks + 1):
        prefix = f"{name}_block{i}"
        y = _bn_relu(x, f"{prefix}_0")
        y = Conv2D(4 * _GROWTH_RATE, 1, use_bias=False, name=f"{prefix}_1_conv")(y)
        y = _bn_relu(y, f"{prefix}_1")
        y = Conv2D(_GROWTH_RATE, 3, padding="same", use_bias=False, name=f"{prefix}_2_conv")(y)
        x = Concatenate(axis=-1, name=f"{prefix}_concat")([x, y])
    return x


def transition_block(x, reduction, name):
    """Batch normalization, ReLU, a 1x1 convolution to ``reduction`` of the channels, 2x2 average pooling."""
    x = _bn_relu(x, name)
    x = Conv2D(int(x.shape[-1] * reduction), 1, use_bias=False, name=f"{name}_conv")(x)
    return AveragePooling2D(2, strides=2, name=f"{name}_pool")(x)


def build_densenet(blocks, include_top, weights, input_tensor, input_shape, pooling, classes, classifier_activation,
                   name):
    """DenseNet with dense blocks of ``blocks[i]`` layers in stages conv2 ... conv5."""
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape,
                                                        pooling, classes, classifier_activation,
                                                        default_size=224, min_size=32)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    # unnamed in Keras: named here as Keras numbers them (pyggml's own numbering says "zero_padding2_d")
    x = ZeroPadding2D(padding=((3, 3), (3, 3)), name="zero_padding2d")(img_input)
    x = Conv2D(64, 7, strides=2, use_bias=False, name="conv1_conv")(x)
    x = _bn_relu(x, "conv1")
    x = ZeroPadding2D(padding=((1, 1), (1, 1)), name="zero_padding2d_1")(x)
    x = MaxPooling2D(3, strides=2, name="pool1")(x)
    for stage, n in enumerate(blocks, start=2):
        x = dense_block(x, n, name=f"conv{stage}")
        if stage < 5:
            x = transition_block(x, 0.5, name=f"pool{stage}")
    x = Activation("relu", name="relu")(BatchNormalization(epsilon=_EPS, name="bn")(x))
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation)
    return finish(input_tensor, img_input, x, name, weights)


def DenseNet121(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="densenet121"):
    """DenseNet121: dense blocks of 6, 12, 24 and 16 layers (8.1M parameters with the top)."""
    return build_densenet((6, 12, 24, 16), include_top, weights, input_tensor, input_shape, pooling, classes,
                          classifier_activation, name)


def DenseNet169(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="densenet169"):
    """DenseNet169: dense blocks of 6, 12, 32 and 32 layers (14.3M parameters with the top)."""
    return build_densenet((6, 12, 32, 32), include_top, weights, input_tensor, input_shape, pooling, classes,
                          classifier_activation, name)


def DenseNet201(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                classes=1000, classifier_activation="softmax", name="densenet201"):
    """DenseNet201: dense blocks of 6, 12, 48 and 32 layers (20.2M parameters with the top)."""
    return build_densenet((6, 12, 48, 32), include_top, weights, input_tensor, input_shape, pooling, classes,
                          classifier_activation, name)


add_arguments_doc((DenseNet121, DenseNet169, DenseNet201), arguments_doc(224, 32))


preprocess_input = imagenet_utils.family_preprocess_input("torch", "DenseNet")
decode_predictions = imagenet_utils.decode_predictions
