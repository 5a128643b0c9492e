"""Sequential and functional models (and subclassed ones: pyggml.models.subclassing)."""

from pyggml.models import custom_steps, loose, subclassing  # noqa: F401 (loose: optimizers' apply_gradients)
from pyggml.models.cloning import clone_model
from pyggml.models.model import Model
from pyggml.models.sequential import Sequential
from pyggml.saving import load_model  # Keras's keras.models.load_model

subclassing.install(Model)
custom_steps.install(Model)

__all__ = ["Model", "Sequential", "load_model", "clone_model"]
