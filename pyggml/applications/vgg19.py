"""``keras.applications.vgg19``: VGG19, VGG16 with a fourth 3x3 convolution in each of
blocks 3, 4 and 5 (``block3_conv4``, ``block4_conv4``, ``block5_conv4``).

Its inputs are preprocessed with ``preprocess_input`` ("caffe", as VGG16's)."""

from pyggml.applications import imagenet_utils
from pyggml.applications._base import add_arguments_doc, arguments_doc
from pyggml.applications.vgg16 import TOP_DOC, build_vgg

__all__ = ["VGG19", "preprocess_input", "decode_predictions"]


def VGG19(include_top=True, weights="imagenet", input_tensor=None, input_shape=None, pooling=None, classes=1000,
          classifier_activation="softmax", name="vgg19"):
    """VGG19: 16 convolutions in blocks of 2, 2, 4, 4 and 4, then 3 Dense layers (143.7M
    parameters with the top, 20.0M without)."""
    return build_vgg((2, 2, 4, 4, 4), include_top, weights, input_tensor, input_shape, pooling, classes,
                     classifier_activation, name)


add_arguments_doc((VGG19,), arguments_doc(224, 32, top=TOP_DOC))


def preprocess_input(x, data_format=None):
    """VGG's preprocessing of images with pixels in [0, 255]: RGB to BGR, then each channel
    minus ImageNet's mean pixel, no scaling (``imagenet_utils``'s "caffe" mode).  Returns a
    new float array (or a tensor for a tensor)."""
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")


def decode_predictions(preds, top=5):
    return imagenet_utils.decode_predictions(preds, top=top)


decode_predictions.__doc__ = imagenet_utils.decode_predictions.__doc__
