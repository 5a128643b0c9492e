"""Sequential and functional models."""

from pyggml.models.model import Model
from pyggml.models.sequential import Sequential

__all__ = ["Model", "Sequential"]
