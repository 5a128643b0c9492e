"""Sequential and functional models (and subclassed ones: pyggml.models.subclassing)."""

from pyggml.models import custom_steps, functional, loose, subclassing  # noqa: F401 (loose: optimizers' apply_gradients)
from pyggml.models.cloning import clone_model, model_from_json, to_json
from pyggml.models.model import Model
from pyggml.models.sequential import Sequential
from pyggml.saving import load_model  # Keras's keras.models.load_model

subclassing.install(Model)
custom_steps.install(Model)
functional.install_logits(Model)
Model.to_json = to_json


def save_model(model, filepath, overwrite=True, **kwargs):
    """Keras's ``keras.models.save_model(model, path)``: ``model.save(path)``."""
    import os
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError(f"{filepath!r} exists (overwrite=False)")
    return model.save(filepath, **kwargs)

__all__ = ["Model", "Sequential", "load_model", "clone_model", "model_from_json", "save_model"]
