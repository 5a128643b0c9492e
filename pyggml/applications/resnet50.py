"""``keras.applications.resnet50``: ResNet50 and its preprocessing, the same functions as
``pyggml.applications.resnet``'s."""

from pyggml.applications.resnet import ResNet50, decode_predictions, preprocess_input

__all__ = ["ResNet50", "preprocess_input", "decode_predictions"]
