"""Sequential and functional models."""

from pyggml.models.model import Model
from pyggml.models.sequential import Sequential
from pyggml.saving import load_model  # Keras's keras.models.load_model

__all__ = ["Model", "Sequential", "load_model"]
