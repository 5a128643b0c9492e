"""A model made anew from its own config (``Model.clone``, ``clone_model``, a Trainer's
snapshot): its layers' classes are found as the model's own, so a custom layer need not be
registered to be cloned, as Keras's ``clone_model`` takes ``layer.__class__``."""

from pyggml.layers.weight_rules import layer_tree
from pyggml.saving.object_registration import custom_object_scope, get_registered_name

__all__ = ["from_own_config"]


def from_own_config(model):
    """``type(model).from_config(model.get_config())`` with the classes of the model's layers
    findable by their registered names."""
    classes = {}
    for layer in layer_tree([model]):
        classes.setdefault(get_registered_name(type(layer)), type(layer))
    with custom_object_scope(classes):
        return type(model).from_config(model.get_config())
