"""Sequential and functional models (and subclassed ones: pyggml.models.subclassing)."""

from pyggml.models import subclassing
from pyggml.models.model import Model
from pyggml.models.sequential import Sequential
from pyggml.saving import load_model  # Keras's keras.models.load_model

subclassing.install(Model)

__all__ = ["Model", "Sequential", "load_model"]
