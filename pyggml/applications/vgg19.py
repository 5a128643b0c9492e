"""``keras.applications.vgg19``: VGG19, VGG16 with a fourth 3x3 convolution in each of
blocks 3, 4 and 5 (``block3_conv4``, ``block4_conv4``, ``block5_conv4``).

Its inputs are preprocessed with ``preprocess_input`` ("caffe", as VGG16's)."""

from pyggml.applications._base import add_arguments_doc, arguments_doc
from pyggml.applications.vgg16 import TOP_DOC, build_vgg, decode_predictions, preprocess_input

__all__ = ["VGG19", "preprocess_input", "decode_predictions"]


def VGG19(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
          classifier_activation="softmax", name="vgg19"):
    """VGG19: 16 convolutions in blocks of 2, 2, 4, 4 and 4, then 3 Dense layers (143.7M
    parameters with the top, 20.0M without)."""
    return build_vgg((2, 2, 4, 4, 4), include_top, weights, input_tensor, input_shape, pooling, classes,
                     classifier_activation, name)


add_arguments_doc((VGG19,), arguments_doc(224, 32, top=TOP_DOC))
