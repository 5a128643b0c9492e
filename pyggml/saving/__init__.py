"""Saving and loading models as GGUF files."""

from pyggml.saving.gguf_io import load_model, save_model

__all__ = ["load_model", "save_model"]
