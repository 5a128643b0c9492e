"""``pg.preprocessing``: Keras's older home of the data utilities, kept for the
scripts that use it (``keras.preprocessing.sequence.pad_sequences``).  The same
functions live in ``pg.utils``; the preprocessing *layers* are in ``pg.layers``."""

from pyggml.preprocessing import sequence

__all__ = ["sequence"]
