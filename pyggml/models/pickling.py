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

__all__ = ["reduce_model", "restore_model", "restore_unbuilt"]


def reduce_model(model):
    """``model.__reduce__``: (restore_model, (the saved file's bytes, {name: class}))."""
    model.check_alive()
    classes = {}
    for layer in layer_tree([model]):
        classes.setdefault(get_registered_name(type(layer)), type(layer))
    if gguf_io.awaits_first_data(model):
        # a Sequential waiting for its first data (no weights yet): its config, as Keras pickles it
        # (one holding layers built on their own, with weights, goes the saved file's way, which
        # needs its input shape)
        # (a compile() given before: its arguments, applied again as they wait for the first data)
        return restore_unbuilt, (type(model), model.get_config(), classes, model.__dict__.get("_pending_compile"))
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


def restore_unbuilt(cls, config, classes, compile_kwargs=None):
    """The unbuilt Sequential of ``reduce_model``'s config (its layers made again, unbuilt),
    given the compile() it was given."""
    if not isinstance(cls, type) or not isinstance(config, dict) or not isinstance(classes, dict) or \
            not isinstance(compile_kwargs, (dict, type(None))):
        raise TypeError("restore_unbuilt takes a model class, its config, a dict {name: class} and compile's "
                        "arguments (a dict, or None)")
    model = cls.from_config(config, custom_objects=classes)
    if compile_kwargs is not None:
        model.compile(**compile_kwargs)
    return model
