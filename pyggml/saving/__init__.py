"""Saving and loading models as GGUF files, registering your own classes, and
Keras's serialization functions (``serialize_keras_object``, ``deserialize_keras_object``)."""

from pyggml.saving.gguf_io import load_model, restore, save_model, save_weights
from pyggml.saving.object_registration import (CustomObjectScope, custom_object_scope, get_custom_objects,
                                               get_registered_name, register_keras_serializable,
                                               register_serializable)
from pyggml.saving.serialization_lib import deserialize_keras_object, get_registered_object, serialize_keras_object

__all__ = ["load_model", "save_model", "save_weights", "load_weights", "restore", "register_serializable", "register_keras_serializable",
           "get_registered_name", "get_registered_object", "custom_object_scope", "CustomObjectScope",
           "get_custom_objects", "serialize_keras_object", "deserialize_keras_object"]


def load_weights(model, filepath, skip_mismatch=False, **kwargs):
    """Keras's ``keras.saving.load_weights(model, filepath)``: ``model.load_weights``."""
    return model.load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)
