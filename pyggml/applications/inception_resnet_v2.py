"""``keras.applications.inception_resnet_v2``: InceptionResNetV2 (Szegedy et al.,
"Inception-v4, Inception-ResNet and the Impact of Residual Connections on Learning",
2017): InceptionV3's stem, then Inception modules whose concatenated branches are
projected back (a biased 1x1 convolution) and added, scaled, to the module's input:
10 35x35 blocks (scale 0.17), a reduction, 20 17x17 blocks (0.1), a reduction, 10 8x8
blocks (0.2, the last one 1.0 and without its ReLU), a final 1x1 convolution to 1536
channels.  Each other convolution is unbiased, followed by batch normalization
without a scale and a ReLU.

Keras's layer names: ``mixed_5b``, ``block35_{1..10}_mixed``, ``block35_{i}_conv``,
``block35_{i}_ac``, ``mixed_6a``, ``block17_{1..20}_...``, ``mixed_7a``,
``block8_{1..10}_...`` (``block8_10`` has no ``_ac``), ``conv_7b``, ``conv_7b_bn``,
``conv_7b_ac``, ``avg_pool``, ``predictions``; the other layers are unnamed
(``conv2d_*``, ``batch_normalization_*``, ``activation_*``, ``max_pooling2d_*``,
``average_pooling2d``, ``custom_scale_layer_*``, the scaled sums).

Its inputs (299x299 by default, at least 75x75) are preprocessed with
``preprocess_input`` ("tf": pixels to [-1, 1])."""

from pyggml import ops
from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, classifier_or_pooling,
                                       finish, image_input, refuse_imagenet)
from pyggml.layers import Activation, AveragePooling2D, BatchNormalization, Concatenate, Conv2D, Layer, MaxPooling2D
from pyggml.saving.object_registration import register_serializable

__all__ = ["InceptionResNetV2", "CustomScaleLayer", "preprocess_input", "decode_predictions"]


@register_serializable(package="pyggml_applications")
class CustomScaleLayer(Layer):
    """Keras's name for the residual sum of Inception-ResNet: called on
    ``[shortcut, residual]``, returns ``shortcut + residual * scale``."""

    def __init__(self, scale, **kwargs):
        super().__init__(**kwargs)
        self.scale = float(scale)

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def call(self, inputs):
        shortcut, residual = inputs
        return ops.add(shortcut, ops.multiply(residual, self.scale))

    def get_config(self):
        config = super().get_config()
        config["scale"] = self.scale
        return config


def conv2d_bn(x, filters, kernel_size, strides=1, padding="same", activation="relu", use_bias=False, name=None):
    """A convolution, then (when unbiased) batch normalization without a scale, then the
    activation; named ``name``, ``name_bn``, ``name_ac`` when ``name`` is given, else unnamed."""
    x = Conv2D(filters, kernel_size, strides=strides, padding=padding, use_bias=use_bias, name=name)(x)
    if not use_bias:
        x = BatchNormalization(scale=False, name=None if name is None else f"{name}_bn")(x)
    if activation is not None:
        x = Activation(activation, name=None if name is None else f"{name}_ac")(x)
    return x


def _chain(x, steps, **kwargs):
    """``conv2d_bn`` applied in turn for each (filters, kernel) of ``steps``; ``kwargs`` for the last one."""
    for i, (filters, kernel) in enumerate(steps):
        x = conv2d_bn(x, filters, kernel, **(kwargs if i == len(steps) - 1 else {}))
    return x


_BRANCHES = {"block35": ([(32, 1)], [(32, 1), (32, 3)], [(32, 1), (48, 3), (64, 3)]),
             "block17": ([(192, 1)], [(128, 1), (160, (1, 7)), (192, (7, 1))]),
             "block8": ([(192, 1)], [(192, 1), (224, (1, 3)), (256, (3, 1))])}


def inception_resnet_block(x, scale, block_type, block_idx, activation="relu"):
    """One Inception-ResNet block of ``block_type`` ("block35", "block17" or "block8"):
    ``x + scale * conv1x1(concat(branches))``, then ``activation``."""
    if block_type not in _BRANCHES:
        raise ValueError(f"unknown Inception-ResNet block type {block_type!r}: expected 'block35', 'block17' or "
                         f"'block8'")
    name = f"{block_type}_{block_idx}"
    mixed = Concatenate(axis=-1, name=f"{name}_mixed")([_chain(x, steps) for steps in _BRANCHES[block_type]])
    up = conv2d_bn(mixed, x.shape[-1], 1, activation=None, use_bias=True, name=f"{name}_conv")
    x = CustomScaleLayer(scale)([x, up])
    if activation is not None:
        x = Activation(activation, name=f"{name}_ac")(x)
    return x


def InceptionResNetV2(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None,
                      classes=1000, classifier_activation="softmax", name="inception_resnet_v2"):
    """InceptionResNetV2: a stem of plain convolutions, 40 Inception-ResNet blocks at three
    resolutions with two reductions, and a 1x1 convolution to 1536 channels (55.9M
    parameters with the top)."""
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape, pooling,
                                                        classes, classifier_activation, 299, 75)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    # stem: 35x35x192 at the default size
    x = conv2d_bn(img_input, 32, 3, strides=2, padding="valid")
    x = conv2d_bn(x, 32, 3, padding="valid")
    x = conv2d_bn(x, 64, 3)
    x = MaxPooling2D(3, strides=2)(x)
    x = conv2d_bn(x, 80, 1, padding="valid")
    x = conv2d_bn(x, 192, 3, padding="valid")
    x = MaxPooling2D(3, strides=2)(x)
    # mixed_5b (Inception-A): 35x35x320
    branches = [conv2d_bn(x, 96, 1), _chain(x, [(48, 1), (64, 5)]), _chain(x, [(64, 1), (96, 3), (96, 3)]),
                conv2d_bn(AveragePooling2D(3, strides=1, padding="same")(x), 64, 1)]
    x = Concatenate(axis=-1, name="mixed_5b")(branches)
    for block_idx in range(1, 11):
        x = inception_resnet_block(x, 0.17, "block35", block_idx)
    # mixed_6a (reduction A): 17x17x1088
    valid = {"strides": 2, "padding": "valid"}
    branches = [conv2d_bn(x, 384, 3, **valid), _chain(x, [(256, 1), (256, 3), (384, 3)], **valid),
                MaxPooling2D(3, strides=2, padding="valid")(x)]
    x = Concatenate(axis=-1, name="mixed_6a")(branches)
    for block_idx in range(1, 21):
        x = inception_resnet_block(x, 0.1, "block17", block_idx)
    # mixed_7a (reduction B): 8x8x2080
    branches = [_chain(x, [(256, 1), (384, 3)], **valid), _chain(x, [(256, 1), (288, 3)], **valid),
                _chain(x, [(256, 1), (288, 3), (320, 3)], **valid), MaxPooling2D(3, strides=2, padding="valid")(x)]
    x = Concatenate(axis=-1, name="mixed_7a")(branches)
    for block_idx in range(1, 10):
        x = inception_resnet_block(x, 0.2, "block8", block_idx)
    x = inception_resnet_block(x, 1.0, "block8", 10, activation=None)
    x = conv2d_bn(x, 1536, 1, name="conv_7b")
    x = classifier_or_pooling(x, include_top, pooling, classes, classifier_activation, pool_names=(None, None))
    return finish(input_tensor, img_input, x, name, weights)


add_arguments_doc((InceptionResNetV2,), arguments_doc(299, 75))


preprocess_input = imagenet_utils.family_preprocess_input("tf", "InceptionResNetV2")
decode_predictions = imagenet_utils.decode_predictions
