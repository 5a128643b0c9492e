"""``keras.applications.vgg16``: VGG16 (Simonyan and Zisserman, "Very Deep Convolutional
Networks for Large-Scale Image Recognition", 2014): five blocks of 3x3 convolutions
and 2x2 max pooling, then two fully connected layers of 4096 units, with Keras's
layer names (``block1_conv1``, ..., ``block5_pool``, ``flatten``, ``fc1``, ``fc2``,
``predictions``).

Its inputs are preprocessed with ``preprocess_input`` ("caffe": RGB to BGR, minus
ImageNet's mean pixel).  ``build_vgg`` is shared with ``vgg19``."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import (add_arguments_doc, arguments_doc, check_arguments, classifier_or_pooling, finish,
                                      image_input, refuse_imagenet)
from pyggml.layers import Conv2D, Dense, Flatten, MaxPooling2D

__all__ = ["VGG16", "preprocess_input", "decode_predictions"]

TOP_DOC = "flattened features, two Dense layers of 4096 units, then a Dense layer of ``classes`` units"


def build_vgg(convs_per_block, include_top, weights, input_tensor, input_shape, pooling, classes,
              classifier_activation, name):
    """VGG with ``convs_per_block[i]`` 3x3 convolutions in block i + 1 (64, 128, 256, 512, 512 filters)."""
    input_shape, weights, include_top = check_arguments(include_top, weights, input_tensor, input_shape,
                                                        pooling, classes, classifier_activation,
                                                        default_size=224, min_size=32)
    refuse_imagenet(weights)
    img_input = image_input(input_tensor, input_shape)
    x = img_input
    for b, (n, filters) in enumerate(zip(convs_per_block, (64, 128, 256, 512, 512)), start=1):
        for c in range(1, n + 1):
            x = Conv2D(filters, (3, 3), activation="relu", padding="same", name=f"block{b}_conv{c}")(x)
        x = MaxPooling2D((2, 2), strides=(2, 2), name=f"block{b}_pool")(x)
    if include_top:
        x = Flatten(name="flatten")(x)
        x = Dense(4096, activation="relu", name="fc1")(x)
        x = Dense(4096, activation="relu", name="fc2")(x)
        x = Dense(classes, activation=classifier_activation, name="predictions")(x)
    else:
        x = classifier_or_pooling(x, False, pooling, classes, classifier_activation, pool_names=(None, None))
    return finish(input_tensor, img_input, x, name, weights)


def VGG16(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
          classifier_activation="softmax", name="vgg16"):
    """VGG16: 13 convolutions in blocks of 2, 2, 3, 3 and 3, then 3 Dense layers (138.4M
    parameters with the top, 14.7M without)."""
    return build_vgg((2, 2, 3, 3, 3), include_top, weights, input_tensor, input_shape, pooling, classes,
                     classifier_activation, name)


add_arguments_doc((VGG16,), arguments_doc(224, 32, top=TOP_DOC))


preprocess_input = imagenet_utils.family_preprocess_input("caffe", "VGG")
decode_predictions = imagenet_utils.decode_predictions
