"""Saving and loading models as GGUF files, and registering your own classes."""

from pyggml.saving.gguf_io import load_model, restore, save_model, save_weights
from pyggml.saving.object_registration import (CustomObjectScope, custom_object_scope, get_registered_name,
                                               get_registered_object, register_keras_serializable,
                                               register_serializable)

__all__ = ["load_model", "save_model", "save_weights", "restore", "register_serializable", "register_keras_serializable",
           "get_registered_name", "get_registered_object", "custom_object_scope", "CustomObjectScope"]
