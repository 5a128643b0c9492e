"""``pg.preprocessing.sequence.pad_sequences``: ``pg.utils.pad_sequences``."""

from pyggml.utils.sequence_utils import pad_sequences

__all__ = ["pad_sequences"]
