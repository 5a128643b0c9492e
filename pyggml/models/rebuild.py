"""A model made anew from its own config (``Model.clone``, ``clone_model``, a Trainer's
snapshot): its layers' classes are found as the model's own, so a custom layer need not be
registered to be cloned, as Keras's ``clone_model`` takes ``layer.__class__``."""

from pyggml.layers.weight_rules import layer_tree
from pyggml.saving.object_registration import custom_object_scope, get_registered_name

__all__ = ["from_own_config", "copy_model"]


def from_own_config(model):
    """``type(model).from_config(model.get_config())`` with the classes of the model's layers
    findable by their registered names."""
    classes = {}
    for layer in layer_tree([model]):
        classes.setdefault(get_registered_name(type(layer)), type(layer))
    with custom_object_scope(classes):
        return type(model).from_config(model.get_config())


def copy_model(model):
    """``model.clone()``, ``copy.copy`` and ``copy.deepcopy``: the same architecture, compile
    settings (if compiled, on the same device) and weights, no optimizer state.  A Sequential
    still waiting for its first data (no weights yet) is copied unbuilt, with a copy of the
    compile it was given."""
    import copy
    model.check_alive()
    twin = from_own_config(model)
    if model._compiled:
        twin.compile_from_config(model.get_compile_config(), backend=model.backend_name)
    awaits = getattr(model, "_awaits_data", None)
    if awaits is not None and awaits() and not any(l.__dict__.get("_variables") for l in layer_tree([model])):
        pending = model.__dict__.get("_pending_compile")
        if pending is not None:
            twin.compile(**copy.deepcopy(pending))
        return twin
    twin.set_weights(model.get_weights())
    return twin
