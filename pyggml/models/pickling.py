"""A model pickled (``pickle.dumps(model)``), as Keras pickles one: through its saved file.

The model is saved to a GGUF file in a temporary folder (its architecture, compile settings,
weights and optimizer state, as ``model.save`` writes them) and the file's bytes are what is
pickled, with the classes of its layers (by reference, as pickle keeps classes), so a class of
the user's need not be registered.  Unpickling loads that file again: the same predictions, the
model compiled as it was.  The model's native objects (its device side) are never pickled.
"""

import os
import tempfile

from pyggml.layers.weight_rules import layer_tree
from pyggml.saving import gguf_io
from pyggml.saving.object_registration import get_registered_name

__all__ = ["reduce_model", "restore_model"]


def reduce_model(model):
    """``model.__reduce__``: (restore_model, (the saved file's bytes, {name: class}))."""
    model.check_alive()
    classes = {}
    for layer in layer_tree([model]):
        classes.setdefault(get_registered_name(type(layer)), type(layer))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.gguf")
        model.save(path)
        with open(path, "rb") as f:
            data = f.read()
    return restore_model, (data, classes)


def restore_model(data, classes):
    """The model of ``reduce_model``'s bytes (on the best device, as load_model picks it)."""
    if not isinstance(data, bytes) or not isinstance(classes, dict):
        raise TypeError("restore_model takes the bytes of a saved model and a dict {name: class}")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.gguf")
        with open(path, "wb") as f:
            f.write(data)
        return gguf_io.load_model(path, custom_objects=classes)
